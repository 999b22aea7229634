// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the one channel path: the framer and record table
 * (lib/channel.c), the decoder on top of them (host/collect/decoder.c), the guest
 * state it feeds (host/gstate.c) and channel-dump's table-driven printer
 * (host/cmd-channel-dump.c), through which the records the decoder accepts
 * are printed, as text and (input's first byte & 2) as JSON.  KSYMS records
 * also go through fetch_ksyms_text() (host/collect/fetch.c), whose lines must
 * stay within the buffer, printable and one symbol each; every record also
 * goes (CGROUP paths also through lib/cgroup.c's pod and container
 * parser), when the input's first byte & 4 (the part file's creation and
 * removal cost four times the rest), to a fetch (fetch.h) that has just
 * asked for one binary (request 1,
 * a 64 KiB cap), so FILE_DATA/FILE_END with any ids, offsets and sizes
 * meet the transfer's checks; its part file must be gone at the end.
 *
 * Input: 2 bytes of split seed, then the channel stream.  The stream is fed
 * in chunks whose sizes the seed chooses, and again in one piece into a
 * second decoder: the two must agree on every statistic (decoding may not
 * depend on how reads split the stream).  A bare framer fed the same chunks
 * must frame exactly the records the decoder saw.  Seeds:
 * tests/fuzz/corpus/decoder, written by tests/fuzz/gen-decoder-seeds.py.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host/cli/commands.h"
#include "host/collect/decoder.h"
#include "host/collect/fetch.h"
#include "host/collect/gstate.h"
#include "lib/cgroup.h"
#include "lib/channel.h"

static FILE *devnull;

/* The first PRINT_MAX records the decoder hands out are printed as text,
 * and as JSON when the input's first byte says so: printing every record
 * cost three times the rest of the target, and the fuzzer puts any record
 * first soon enough. */
#define PRINT_MAX	8
static bool print_json;

/* KSYMS as kallsyms text: within outlen, printable, ok lines exactly. */
static void check_ksyms(const struct opvm_rec_hdr *rec, size_t len)
{
	static char out[64 * 1024];
	uint64_t ok, bad, capped, lines = 0;
	size_t outlen = 1 + (len * 7) % sizeof(out);	/* sometimes short */
	size_t n = fetch_ksyms_text(rec, len, out, outlen, &ok, &bad, &capped, NULL);

	if (n > outlen)
		abort();
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)out[i];

		if (c == '\n')
			lines++;
		else if ((c < ' ' && c != '\t') || c >= 0x7f)
			abort();
	}
	if (lines != ok || (n && out[n - 1] != '\n'))
		abort();
}

/* A CGROUP's path through the reports' pod/container parser (lib/cgroup.h),
 * raw as the guest sent it, and its findings well formed. */
static void check_cgroup(const struct opvm_rec_hdr *rec, size_t len)
{
	const struct opvm_rec_cgroup *r = (const void *)rec;
	size_t n = le16toh(r->path_len);
	struct cgroup_ids ids;

	if (!chan_rec_check(rec, len))
		return;		/* the decoder counts it bad */
	if (cgroup_ids_parse((const char *)(r + 1), n, &ids) == 0 && !ids.pod[0] &&
	    !ids.container[0])
		abort();
	if ((ids.pod[0] && strlen(ids.pod) != CGROUP_POD_LEN) ||
	    (ids.container[0] && strlen(ids.container) != CGROUP_CONTAINER_LEN))
		abort();
}

static struct fetch *fz_fetch;
static int fz_sink = -1;		/* /dev/null: where requests go */
#define FZ_DIR	"/tmp/fuzz-decoder-fetch"

static int fz_verify(const char *path, const uint8_t *bid, size_t len)
{
	(void)path; (void)bid; (void)len;
	return -ENOEXEC;	/* ELF checks are fuzz-elf's */
}

static void fz_fetch_new(void)
{
	static const uint8_t bid[20] = { 1, 2, 3 };

	if (fz_sink < 0)
		fz_sink = open("/dev/null", O_WRONLY | O_CLOEXEC);
	mkdir(FZ_DIR, 0700);
	fz_fetch = fetch_new(&(struct fetch_config){ .guest_dir = FZ_DIR,
		.cache_dir = FZ_DIR "/cache", .max_file = 65536, .no_ksyms = 1,
		.verify = fz_verify });
	if (!fz_fetch)
		return;
	/* the relay runs (its HELLO came): requests may go */
	{
		struct opvm_rec_hello h = { 0 };

		h.hdr.magic = htole16(OPVM_PROTO_MAGIC);
		h.hdr.type = htole16(OPVM_REC_HELLO);
		h.hdr.len = htole32(sizeof(h));
		fetch_record(fz_fetch, &h.hdr, sizeof(h));
	}
	fetch_want(fz_fetch, "/bin/x", bid, sizeof(bid));
	fetch_poll(fz_fetch, fz_sink, 1);
	if (fetch_get_stats(fz_fetch)->requests != 1)
		abort();
}

static void print_both(const struct opvm_rec_hdr *rec, size_t len, void *arg)
{
	const struct chan_rec_type *t = chan_rec_type(le16toh(rec->type));

	/* what decoder.h promises the callback */
	if (len < sizeof(*rec) || len > OPVM_REC_MAX || len % OPVM_REC_ALIGN ||
	    (t && len < t->size))
		abort();
	if (le16toh(rec->type) == OPVM_REC_KSYMS)
		check_ksyms(rec, len);
	if (le16toh(rec->type) == OPVM_REC_CGROUP)
		check_cgroup(rec, len);
	if (fz_fetch)
		fetch_record(fz_fetch, rec, len);
	if ((*(uint64_t *)arg)++ >= PRINT_MAX)
		return;
	channel_dump_record(devnull, false, rec, len);
	if (print_json)
		channel_dump_record(devnull, true, rec, len);
}

static void count_frame(const uint8_t *rec, const struct chan_hdr *h, void *arg)
{
	(*(uint64_t *)arg)++;
}

static int touch_proc(const struct gstate_process *p, void *arg)
{
	size_t *sum = arg;

	/* read every byte a consumer could read: ASan checks the pointers */
	*sum += strlen(p->comm) + (p->exe && p->exe->path ? strlen(p->exe->path) : 0);
	for (size_t i = 0; i < p->nr_maps; i++) {
		if (p->maps[i].start >= p->maps[i].end)
			abort();
		if (i && p->maps[i - 1].end > p->maps[i].start)
			abort();	/* sorted, non-overlapping */
		if (p->maps[i].cookie && p->maps[i].cookie->path)
			*sum += strlen(p->maps[i].cookie->path);
	}
	return 0;
}

static int touch_module(const struct gstate_module *m, void *arg)
{
	*(size_t *)arg += strlen(m->name);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gstate *gs1 = NULL, *gs2 = NULL;
	struct decoder *d1 = NULL, *d2 = NULL;
	struct decoder_stats s1, s2;
	static struct chan_framer fr;
	uint64_t printed = 0, framed = 0;
	uint32_t rnd;
	size_t off = 0, sum = 0;

	if (size < 2)
		return 0;
	rnd = (uint32_t)data[0] | (uint32_t)data[1] << 8 | 1;
	print_json = data[0] & 2;
	data += 2;
	size -= 2;

	gs1 = gstate_new(NULL);
	gs2 = gstate_new(NULL);
	d1 = gs1 ? decoder_new(gs1) : NULL;
	d2 = gs2 ? decoder_new(gs2) : NULL;
	if (!devnull)
		devnull = fopen("/dev/null", "we");
	if (!d1 || !d2 || !devnull)
		goto out;
	decoder_set_record_fn(d1, print_both, &printed);
	chan_framer_init(&fr);
	if (data[-2] & 4)	/* half the inputs: the files cost 4x */
		fz_fetch_new();

	while (off < size) {
		size_t n;

		/* xorshift32: mostly small chunks, sometimes large ones */
		rnd ^= rnd << 13;
		rnd ^= rnd >> 17;
		rnd ^= rnd << 5;
		n = (rnd & 0x100) ? rnd % (OPVM_REC_MAX + 64) : rnd % 24;
		if (n > size - off)
			n = size - off;
		if (decoder_feed(d1, data + off, n))
			abort();
		chan_framer_feed(&fr, data + off, n, count_frame, &framed);
		if (decoder_buffered(d1) > OPVM_REC_MAX)
			abort();
		off += n;
	}
	if (decoder_feed(d2, data, size))
		abort();

	s1 = *decoder_get_stats(d1);
	s2 = *decoder_get_stats(d2);
	s1.buffered_peak = s2.buffered_peak = 0;
	if (memcmp(&s1, &s2, sizeof(s1)))
		abort();	/* decoding depended on the read sizes */
	/* the decoder's framing is the bare framer's: with no foreign HELLO
	 * in the stream both frame the same records */
	if (!s1.version_mismatch &&
	    framed != s1.records + s1.bad_records + s1.unknown_types)
		abort();
	/* every record counted as decoded, and every unknown one, handed out */
	if (printed != s1.records + s1.unknown_types || fr.st.bytes != size)
		abort();
	if (s1.bytes != size || s2.skipped_bytes > size ||
	    decoder_buffered(d1) != decoder_buffered(d2))
		abort();
	if (gstate_nr_processes(gs1) != gstate_nr_processes(gs2) ||
	    gstate_nr_mappings(gs1) != gstate_nr_mappings(gs2) ||
	    gstate_nr_cookies(gs1) != gstate_nr_cookies(gs2) ||
	    gstate_nr_modules(gs1) != gstate_nr_modules(gs2) ||
	    gstate_nr_threads(gs1) != gstate_nr_threads(gs2))
		abort();

	gstate_for_each_proc(gs1, touch_proc, &sum);
	gstate_for_each_module(gs1, touch_module, &sum);
	if (gstate_get_hello(gs1))
		sum += strlen(gstate_get_hello(gs1)->release);
	decoder_reset(d1);
	if (decoder_buffered(d1))
		abort();
out:
	if (fz_fetch) {
		const struct fetch_stats *fs = fetch_get_stats(fz_fetch);

		if (fs->files || fs->data_bytes > 65536)
			abort();	/* nothing passes fz_verify, the cap holds */
		fetch_free(fz_fetch);
		fz_fetch = NULL;
		if (rmdir(FZ_DIR "/cache") && errno != ENOENT)
			abort();	/* a part file was left behind */
	}
	decoder_free(d1);
	decoder_free(d2);
	gstate_free(gs1);
	gstate_free(gs2);
	return (int)(sum & 0);
}
