// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the channel decoder (host/collect/decoder.c) and the guest
 * state it feeds (host/collect/gstate.c).
 *
 * Input: 2 bytes of split seed, then the channel stream.  The stream is fed
 * in chunks whose sizes the seed chooses, and again in one piece into a
 * second decoder: the two must agree on every statistic (decoding may not
 * depend on how reads split the stream).  Seeds: tests/fuzz/corpus/decoder,
 * written by tests/fuzz/gen-decoder-seeds.py.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host/collect/decoder.h"
#include "host/collect/gstate.h"

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
	uint32_t rnd;
	size_t off = 0, sum = 0;

	if (size < 2)
		return 0;
	rnd = (uint32_t)data[0] | (uint32_t)data[1] << 8 | 1;
	data += 2;
	size -= 2;

	gs1 = gstate_new(NULL);
	gs2 = gstate_new(NULL);
	d1 = gs1 ? decoder_new(gs1) : NULL;
	d2 = gs2 ? decoder_new(gs2) : NULL;
	if (!d1 || !d2)
		goto out;

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
	decoder_free(d1);
	decoder_free(d2);
	gstate_free(gs1);
	gstate_free(gs2);
	return (int)(sum & 0);
}
