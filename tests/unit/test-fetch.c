// SPDX-License-Identifier: MIT
/*
 * What the guest sends for reports (host/collect/fetch.c): KSYMS records
 * become kallsyms text lines (hostile names made single printable tokens,
 * lying lengths and non-text entries refused and counted, the output
 * bounded), a transfer lands in <guest>/kallsyms (0600) only at KSYMS_END
 * or at the end of the session, a HELLO abandons an open transfer, and the
 * file reads back through symbols/ksyms like a System.map.
 */
#include <endian.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/collect/fetch.h"
#include "lib/hex.h"
#include "lib/channel.h"
#include "symbols/elfimage.h"
#include "symbols/ksyms.h"
#include "symbols/symres.h"
#include "vmm/introspect/memsyms.h"
#include "vmm/sampler.h"

struct krec {
	_Alignas(8) uint8_t buf[OPVM_REC_MAX];
	size_t used;		/* bytes of entries */
	uint32_t nr;
};

static void krec_init(struct krec *k)
{
	memset(k, 0, sizeof(*k));
}

static void krec_add(struct krec *k, uint64_t addr, char type, const char *name, int nlen)
{
	uint8_t *p = k->buf + sizeof(struct opvm_rec_ksyms) + k->used;
	uint64_t le = htole64(addr);
	size_t n = strlen(name);

	memcpy(p, &le, 8);
	p[8] = (uint8_t)type;
	p[9] = (uint8_t)(nlen >= 0 ? nlen : (int)n);
	memcpy(p + 10, name, n);
	k->used += 10 + n;
	k->nr++;
}

/* Finishes the record; returns its length. */
static size_t krec_done(struct krec *k, const char *module)
{
	struct opvm_rec_ksyms *r = (void *)k->buf;
	size_t len = (sizeof(*r) + k->used + 7) & ~(size_t)7;

	r->hdr.magic = htole16(OPVM_PROTO_MAGIC);
	r->hdr.type = htole16(OPVM_REC_KSYMS);
	r->hdr.len = htole32((uint32_t)len);
	r->nr = htole32(k->nr);
	r->bytes = htole16((uint16_t)k->used);
	memcpy(r->module, module, strnlen(module, sizeof(r->module)));	/* zeroed */
	return len;
}

static void test_text(void **state)
{
	struct krec k;
	char out[4096];
	uint64_t ok, bad, capped;
	size_t len, n;

	krec_init(&k);
	krec_add(&k, 0xffffffff81000000, 'T', "_text", -1);
	krec_add(&k, 0xffffffff81001000, 't', "a b\t\x1b[x]", -1);
	krec_add(&k, 0, 'T', "hidden", -1);		/* kptr_restrict */
	krec_add(&k, 0xffffffff81002000, 'D', "data", -1);	/* not text */
	krec_add(&k, 0xffffffff81003000, 'W', "weak", -1);
	len = krec_done(&k, "mod ]x");
	assert_true(chan_rec_check(k.buf, len));
	n = fetch_ksyms_text(k.buf, len, out, sizeof(out), &ok, &bad, &capped, NULL);
	out[n] = '\0';
	assert_int_equal(ok, 3);
	assert_int_equal(bad, 2);
	assert_int_equal(capped, 0);
	assert_string_equal(out,
		"ffffffff81000000 T _text\t[mod??x]\n"
		"ffffffff81001000 t a?b???x?\t[mod??x]\n"
		"ffffffff81003000 W weak\t[mod??x]\n");

	/* a short buffer: whole lines only, the rest counted */
	n = fetch_ksyms_text(k.buf, len, out, 40, &ok, &bad, &capped, NULL);
	assert_int_equal(ok, 1);
	assert_int_equal(capped, 2);
	assert_true(n <= 40);

	/* a name length that runs past the entries ends the record */
	krec_init(&k);
	krec_add(&k, 0xffffffff81000000, 'T', "_text", -1);
	krec_add(&k, 0xffffffff81000010, 'T', "x", 100);
	len = krec_done(&k, "");
	n = fetch_ksyms_text(k.buf, len, out, sizeof(out), &ok, &bad, &capped, NULL);
	assert_int_equal(ok, 1);
	assert_int_equal(bad, 1);
	out[n] = '\0';
	assert_string_equal(out, "ffffffff81000000 T _text\n");
}

/* Where the ORC tables are: vmlinux's table symbols pass with their data
 * type and are reported; other data symbols, and the names in a module's
 * record, are refused. */
static void test_orc_tables(void **state)
{
	struct krec k;
	char out[4096];
	uint64_t ok, bad, capped, t[OPVM_KSYMS_TABLES] = { 0 };
	size_t len, n;

	krec_init(&k);
	krec_add(&k, 0xffffffff82c5f474, 'R', "__start_orc_unwind_ip", -1);
	krec_add(&k, 0xffffffff82dd71b8, 'R', "__stop_orc_unwind_ip", -1);
	krec_add(&k, 0xffffffff82dd71b8, 'R', "__start_orc_unwind", -1);
	krec_add(&k, 0xffffffff83000000, 'D', "__start_orc_unwind_ipx", -1);
	krec_add(&k, 0xffffffff83000000, 'A', "__stop_orc_unwind", -1);	/* no such type */
	len = krec_done(&k, "");
	n = fetch_ksyms_text(k.buf, len, out, sizeof(out), &ok, &bad, &capped, t);
	out[n] = '\0';
	assert_int_equal(ok, 3);
	assert_int_equal(bad, 2);
	assert_true(t[OPVM_KSYMS_ORC_IP_START] == 0xffffffff82c5f474ull);
	assert_true(t[OPVM_KSYMS_ORC_IP_STOP] == 0xffffffff82dd71b8ull);
	assert_true(t[OPVM_KSYMS_ORC_START] == 0xffffffff82dd71b8ull);
	assert_true(t[OPVM_KSYMS_ORC_STOP] == 0);
	assert_non_null(strstr(out, "ffffffff82c5f474 R __start_orc_unwind_ip\n"));

	memset(t, 0, sizeof(t));
	krec_init(&k);
	krec_add(&k, 0xffffffffc0001000, 'r', "__start_orc_unwind_ip", -1);
	len = krec_done(&k, "somemod");
	fetch_ksyms_text(k.buf, len, out, sizeof(out), &ok, &bad, &capped, t);
	assert_int_equal(ok, 0);
	assert_int_equal(bad, 1);
	assert_true(t[OPVM_KSYMS_ORC_IP_START] == 0);
}

/* The guest's packer (opvm_proto.h, used by the relay and opvm.ko's own
 * walk) against the host's decoder: what one writes the other reads, a
 * full record refuses the next entry, a name over 127 bytes is refused. */
static void test_guest_packer(void **state)
{
	union { struct opvm_rec_ksyms k; uint8_t b[OPVM_REC_MAX]; } r;
	char longname[200], out[OPVM_REC_MAX * 4];
	unsigned long used = sizeof(r.k);
	uint64_t ok, bad, capped, nr = 2;
	size_t len, n;

	(void)state;
	memset(&r, 0, sizeof(r));
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(opvm_ksyms_add(&r.k, &used, 0xffffffff81000000, 'T', "_text", 5), 0);
	assert_int_equal(opvm_ksyms_add(&r.k, &used, 0xffffffff81000040, 'T', "f", 1), 0);
	assert_int_equal(opvm_ksyms_add(&r.k, &used, 1, 'T', longname, strlen(longname)), -1);
	assert_int_equal(opvm_ksyms_add(&r.k, &used, 1, 'T', "", 0), -1);
	while (!opvm_ksyms_add(&r.k, &used, 0xffffffffc0000000 + nr, 't', "fill_symbol", 11))
		nr++;
	assert_int_equal(r.k.nr, nr);
	assert_true(used <= OPVM_REC_MAX && used + 10 + 11 > OPVM_REC_MAX);
	assert_int_equal(r.k.bytes, used - sizeof(r.k));
	len = (used + 7) & ~7UL;
	r.k.hdr.magic = OPVM_PROTO_MAGIC;
	r.k.hdr.type = OPVM_REC_KSYMS;
	r.k.hdr.len = (uint32_t)len;
	assert_true(chan_rec_check(r.b, len));
	n = fetch_ksyms_text(r.b, len, out, sizeof(out), &ok, &bad, &capped, NULL);
	assert_int_equal(ok, nr);
	assert_int_equal(bad + capped, 0);
	out[n] = '\0';
	{
		const char *want = "ffffffff81000000 T _text\nffffffff81000040 T f\n"
				   "ffffffffc0000002 t fill_symbol\n";
		assert_memory_equal(out, want, strlen(want));
	}
}

static void put_end(const char *dir, struct fetch *f, uint64_t nr)
{
	struct opvm_rec_ksyms_end e = { 0 };

	(void)dir;
	e.hdr.magic = htole16(OPVM_PROTO_MAGIC);
	e.hdr.type = htole16(OPVM_REC_KSYMS_END);
	e.hdr.len = htole32(sizeof(e));
	e.nr_syms = htole64(nr);
	fetch_record(f, &e.hdr, sizeof(e));
}

static void put_hello(struct fetch *f)
{
	struct opvm_rec_hello h = { 0 };

	h.hdr.magic = htole16(OPVM_PROTO_MAGIC);
	h.hdr.type = htole16(OPVM_REC_HELLO);
	h.hdr.len = htole32(sizeof(h));
	fetch_record(f, &h.hdr, sizeof(h));
}

static void put_module(struct fetch *f, const char *name, uint64_t base, uint64_t size,
		       unsigned type)
{
	struct opvm_rec_module m = { 0 };

	m.hdr.magic = htole16(OPVM_PROTO_MAGIC);
	m.hdr.type = htole16((uint16_t)type);
	m.hdr.len = htole32(sizeof(m));
	m.base = htole64(base);
	m.size = htole64(size);
	strncpy(m.name, name, sizeof(m.name));
	fetch_record(f, &m.hdr, sizeof(m));
}

static void test_transfer(void **state)
{
	char dir[] = "/tmp/test-fetch.XXXXXX", path[256], part[256], err[128];
	struct fetch *f;
	struct ksyms *ks;
	struct stat sb;
	struct krec k;
	size_t len;
	uint64_t a;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/kallsyms", dir);
	snprintf(part, sizeof(part), "%s/kallsyms.part", dir);
	f = fetch_new(&(struct fetch_config){ .guest_dir = dir });
	assert_non_null(f);

	krec_init(&k);
	krec_add(&k, 0xffffffff81000000, 'T', "_text", -1);
	krec_add(&k, 0xffffffff81000100, 'T', "printk", -1);
	len = krec_done(&k, "");
	fetch_record(f, (void *)k.buf, len);
	assert_int_equal(stat(path, &sb), -1);		/* not before the end */
	assert_int_equal(stat(part, &sb), 0);
	put_hello(f);					/* a new stream: dropped */
	assert_int_equal(stat(part, &sb), -1);

	fetch_record(f, (void *)k.buf, len);
	put_module(f, "virtio-console", 0xffffffffc0200000, 0x4000, OPVM_REC_MODULE);
	put_module(f, "gone", 0xffffffffc0300000, 0x1000, OPVM_REC_MODULE);
	put_module(f, "gone", 0, 0, OPVM_REC_MODULE_FREE);
	krec_init(&k);
	krec_add(&k, 0xffffffffc0200000, 't', "port_fops_write", -1);
	krec_add(&k, 0xffffffffc0200100, 't', "port_fops_read", -1);
	krec_add(&k, 0xffffffffc0204000, 't', "past_the_end", -1);
	len = krec_done(&k, "virtio_console");
	fetch_record(f, (void *)k.buf, len);
	put_end(dir, f, 5);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_int_equal(fetch_get_stats(f)->ksyms_syms, 5);
	assert_int_equal(fetch_get_stats(f)->ksyms_done, 1);
	assert_int_equal(fetch_get_stats(f)->ksyms_end_mismatch, 0);
	put_end(dir, f, 7);	/* an END with nothing open, a wrong count */
	assert_int_equal(fetch_get_stats(f)->ksyms_end_mismatch, 1);

	ks = ksyms_open(path, err, sizeof(err));
	assert_non_null(ks);
	assert_int_equal(ksyms_addr(ks, "printk", &a), 0);
	assert_int_equal(a, 0xffffffff81000100);
	assert_int_equal(ksyms_nr(ks), 2);	/* module symbols are the .ko's */
	ksyms_free(ks);
	/* a module's: rebased on its MODULE record's base, '-' and '_' alike */
	snprintf(part, sizeof(part), "%s/kallsyms.modules", dir);
	assert_int_equal(stat(part, &sb), 0);
	ks = ksyms_open_module(path, "virtio_console", 0xffffffffc0200000, 0x4000,
			       err, sizeof(err));
	assert_non_null(ks);
	assert_int_equal(ksyms_nr(ks), 2);			/* not past_the_end */
	assert_int_equal(ksyms_lookup(ks, 0x120), 1);
	assert_string_equal(ksyms_sym(ks, 1)->name, "port_fops_read");
	ksyms_free(ks);
	{
		char line[128];
		FILE *mf = fopen(part, "r");

		assert_non_null(mf);
		assert_non_null(fgets(line, sizeof(line), mf));
		assert_string_equal(line, "ffffffffc0200000 4000 virtio-console\n");
		assert_null(fgets(line, sizeof(line), mf));	/* "gone" went */
		fclose(mf);
	}
	unlink(part);
	snprintf(part, sizeof(part), "%s/kallsyms.part", dir);

	/* a session that ends mid-transfer keeps what came */
	unlink(path);
	fetch_record(f, (void *)k.buf, len);
	fetch_free(f);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(stat(part, &sb), -1);
	unlink(path);
	snprintf(part, sizeof(part), "%s/kallsyms.modules", dir);
	unlink(part);
	assert_int_equal(rmdir(dir), 0);
}


/* ---- binaries ------------------------------------------------------------ */

struct bin {
	char dir[64], cache[128];
	int sv[2];			/* [0] the host's channel end */
	struct fetch *f;
	uint8_t bid[32];
	size_t bid_len;
	uint8_t *elf;			/* this test's own executable */
	size_t elf_len;
};

static void bin_setup(struct bin *b, uint64_t max_file, uint64_t max_session)
{
	struct elfimage *img;
	const uint8_t *id;
	FILE *fp;

	memset(b, 0, sizeof(*b));
	snprintf(b->dir, sizeof(b->dir), "/tmp/test-fetch.XXXXXX");
	assert_non_null(mkdtemp(b->dir));
	snprintf(b->cache, sizeof(b->cache), "%s/cache/guest", b->dir);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, b->sv), 0);
	b->f = fetch_new(&(struct fetch_config){ .guest_dir = b->dir, .cache_dir = b->cache,
		.max_file = max_file, .max_session = max_session, .no_debug_files = 1,
		.verify = symres_check_build_id });
	assert_non_null(b->f);
	put_hello(b->f);		/* the relay runs: requests may go */
	img = elfimage_open("/proc/self/exe", NULL, 0);
	assert_non_null(img);
	id = elfimage_build_id(img, &b->bid_len);
	assert_non_null(id);
	memcpy(b->bid, id, b->bid_len);
	elfimage_close(img);
	fp = fopen("/proc/self/exe", "rb");
	assert_non_null(fp);
	b->elf = malloc(64 << 20);
	b->elf_len = fread(b->elf, 1, 64 << 20, fp);
	fclose(fp);
}

static void bin_teardown(struct bin *b)
{
	char cmd[128];

	fetch_free(b->f);
	close(b->sv[0]);
	close(b->sv[1]);
	free(b->elf);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", b->dir);
	assert_int_equal(system(cmd), 0);
}

/* Reads the request the host wrote; returns its req_id. */
static uint32_t bin_request(struct bin *b, uint64_t *offset)
{
	struct opvm_req_fetch r;
	char buf[OPVM_REC_MAX];
	ssize_t n = read(b->sv[1], buf, sizeof(buf));

	assert_true(n >= (ssize_t)sizeof(r));
	memcpy(&r, buf, sizeof(r));
	assert_int_equal(le16toh(r.hdr.type), OPVM_REQ_FETCH);
	assert_int_equal(le32toh(r.hdr.len), n);
	assert_int_equal(r.build_id_len, b->bid_len);
	assert_memory_equal(r.build_id + 1, b->bid + 1, b->bid_len - 1);	/* [0]: see hostile */
	assert_int_equal(le16toh(r.path_len), strlen("/usr/bin/x"));
	assert_memory_equal(buf + sizeof(r), "/usr/bin/x", le16toh(r.path_len));
	if (offset)
		*offset = le64toh(r.offset);
	return le32toh(r.req_id);
}

static void bin_data(struct bin *b, uint32_t id, uint64_t off, const void *p, size_t n)
{
	_Alignas(8) uint8_t buf[OPVM_REC_MAX];
	struct opvm_rec_file_data *d = (void *)buf;
	size_t len = (sizeof(*d) + n + 7) & ~(size_t)7;

	memset(buf, 0, sizeof(buf));
	d->hdr.magic = htole16(OPVM_PROTO_MAGIC);
	d->hdr.type = htole16(OPVM_REC_FILE_DATA);
	d->hdr.len = htole32((uint32_t)len);
	d->req_id = htole32(id);
	d->bytes = htole32((uint32_t)n);
	d->offset = htole64(off);
	memcpy(buf + sizeof(*d), p, n);
	assert_true(chan_rec_check(buf, len));
	fetch_record(b->f, &d->hdr, len);
}

static void bin_end(struct bin *b, uint32_t id, int32_t status, uint64_t size)
{
	struct opvm_rec_file_end e = { 0 };

	e.hdr.magic = htole16(OPVM_PROTO_MAGIC);
	e.hdr.type = htole16(OPVM_REC_FILE_END);
	e.hdr.len = htole32(sizeof(e));
	e.req_id = htole32(id);
	e.status = (int32_t)htole32((uint32_t)status);
	e.size = htole64(size);
	fetch_record(b->f, &e.hdr, sizeof(e));
}

/* Streams p[0..n) for request id in FILE_CHUNK pieces. */
static void bin_stream(struct bin *b, uint32_t id, uint64_t from, const uint8_t *p, size_t n)
{
	const size_t chunk = OPVM_REC_MAX - sizeof(struct opvm_rec_file_data);

	for (size_t off = from; off < n; off += chunk)
		bin_data(b, id, off, p + off, n - off < chunk ? n - off : chunk);
}

static int cache_files(const struct bin *b)
{
	char cmd[256], out[32] = "";
	FILE *p;

	snprintf(cmd, sizeof(cmd), "find %s -type f 2>/dev/null | wc -l", b->cache);
	p = popen(cmd, "r");
	assert_non_null(fgets(out, sizeof(out), p));
	pclose(p);
	return atoi(out);
}

/* set: sets the cache files' mtime to that epoch second; 0: counts those
 * changed in the last minute.  Returns the count of files. */
static int cache_mtimes(const struct bin *b, long set)
{
	char cmd[512], out[32] = "";
	FILE *p;

	if (set)
		snprintf(cmd, sizeof(cmd), "find %s -type f -exec touch -d @%ld {} + -print | wc -l",
			 b->cache, set);
	else
		snprintf(cmd, sizeof(cmd), "find %s -type f -newermt '-60 seconds' | wc -l", b->cache);
	p = popen(cmd, "r");
	assert_non_null(fgets(out, sizeof(out), p));
	pclose(p);
	return atoi(out);
}

/* Reads a perf map's or jitdump's request: its req_id, the offset asked
 * from, its path into path[len] (NUL-terminated). */
static uint32_t pm_read(struct bin *b, char *path, size_t len, uint64_t *offset)
{
	struct opvm_req_fetch r;
	char buf[OPVM_REC_MAX];
	ssize_t n = read(b->sv[1], buf, sizeof(buf));
	size_t pl;

	assert_true(n >= (ssize_t)sizeof(r));
	memcpy(&r, buf, sizeof(r));
	assert_int_equal(le16toh(r.hdr.type), OPVM_REQ_FETCH);
	assert_int_equal(r.flags, OPVM_FETCH_F_PERFMAP);
	pl = le16toh(r.path_len);
	assert_true(pl < len && sizeof(r) + pl <= (size_t)n);
	memcpy(path, buf + sizeof(r), pl);
	path[pl] = '\0';
	*offset = le64toh(r.offset);
	return le32toh(r.req_id);
}

/* Polls at now until a request that is not a jitdump's comes, each
 * jitdump asked for on the way answered absent: the perf map tests see
 * the maps alone.  1 and pm_request()'s checks, or 0 when none came. */
static int pm_poll(struct bin *b, uint64_t now)
{
	char path[64];
	uint64_t off;

	for (;;) {
		char buf[OPVM_REC_MAX];
		ssize_t n;
		uint32_t id;

		fetch_poll(b->f, b->sv[0], now);
		n = recv(b->sv[1], buf, sizeof(buf), MSG_PEEK);
		if (n < 0)
			return 0;
		if (n < (ssize_t)sizeof(struct opvm_req_fetch) + 9 ||
		    memcmp(buf + sizeof(struct opvm_req_fetch), "/tmp/jit-", 9))
			return 1;
		id = pm_read(b, path, sizeof(path), &off);
		bin_end(b, id, -ENOENT, 0);
	}
}

/* Reads a perf map's request: its req_id, the offset asked from; path
 * must be want's. */
static uint32_t pm_request(struct bin *b, const char *want, uint64_t *offset)
{
	struct opvm_req_fetch r;
	char buf[OPVM_REC_MAX];
	ssize_t n = read(b->sv[1], buf, sizeof(buf));

	assert_true(n >= (ssize_t)sizeof(r));
	memcpy(&r, buf, sizeof(r));
	assert_int_equal(le16toh(r.hdr.type), OPVM_REQ_FETCH);
	assert_int_equal(r.flags, OPVM_FETCH_F_PERFMAP);
	/* relays that predate the flag answer -ENOEXEC: no ELF of that id */
	assert_int_equal(r.build_id_len, 1);
	assert_int_equal(r.build_id[0], 0);
	assert_int_equal(le64toh(r.max_bytes), FETCH_PERFMAP_MAX);
	assert_int_equal(le16toh(r.path_len), strlen(want));
	assert_memory_equal(buf + sizeof(r), want, strlen(want));
	*offset = le64toh(r.offset);
	return le32toh(r.req_id);
}

/* Perf maps (fetch-perfmap.c): asked for by the host's path from the
 * tgid, stored under the host's name, asked again from where they stopped
 * on their clock (they grow); out-of-order bytes, a link planted at the
 * file's name, a map at its cap, a process gone: refused or given up and
 * counted, the rest of the fetches going on. */
static void test_perfmap(void **state)
{
	static const char l1[] = "7f0000001000 40 jit_a\n", l2[] = "7f0000001040 40 jit_b\n";
	char path[256], text[128] = "";
	uint64_t off;
	uint32_t id;
	json_t *j, *pm;
	struct bin b;
	FILE *fp;

	(void)state;
	bin_setup(&b, 0, 0);
	fetch_perfmap_want(b.f, 77);
	fetch_perfmap_want(b.f, 77);			/* once */
	fetch_perfmap_want(b.f, -5);			/* not a pid */
	assert_true(pm_poll(&b, 1000));
	id = pm_request(&b, "/tmp/perf-77.map", &off);
	assert_int_equal(off, 0);
	bin_data(&b, id, 0, l1, strlen(l1));
	bin_end(&b, id, 0, strlen(l1));
	assert_false(pm_poll(&b, 1500));			/* not due yet */
	assert_true(pm_poll(&b, 1000 + FETCH_PERFMAP_EVERY_MS + 1));
	id = pm_request(&b, "/tmp/perf-77.map", &off);
	assert_int_equal(off, strlen(l1));		/* the tail only */
	bin_data(&b, id, 0, l2, strlen(l2));		/* a lying offset */
	assert_true(pm_poll(&b, 1000 + 2 * FETCH_PERFMAP_EVERY_MS + 2));
	id = pm_request(&b, "/tmp/perf-77.map", &off);	/* asked again */
	assert_int_equal(off, strlen(l1));
	bin_data(&b, id, off, l2, strlen(l2));
	bin_end(&b, id, 0, off + strlen(l2));
	snprintf(path, sizeof(path), "%s/perfmaps/77.map", b.dir);
	fp = fopen(path, "r");
	assert_non_null(fp);
	assert_int_equal(fread(text, 1, sizeof(text) - 1, fp), strlen(l1) + strlen(l2));
	fclose(fp);
	assert_memory_equal(text, "7f0000001000 40 jit_a\n7f0000001040 40 jit_b\n", 44);

	/* a link at the next map's name is never written through */
	snprintf(path, sizeof(path), "%s/perfmaps/78.map", b.dir);
	assert_int_equal(symlink("/etc/passwd-opvm-test", path), 0);
	fetch_perfmap_want(b.f, 78);
	assert_true(pm_poll(&b, 20000));
	id = pm_request(&b, "/tmp/perf-78.map", &off);
	bin_data(&b, id, 0, l1, strlen(l1));
	assert_int_equal(access("/etc/passwd-opvm-test", F_OK), -1);
	/* its map at the cap, 77's process gone: neither asked again */
	assert_true(pm_poll(&b, 30000));
	id = pm_request(&b, "/tmp/perf-77.map", &off);
	bin_end(&b, id, -ESRCH, off);
	assert_true(pm_poll(&b, 40000));
	id = pm_request(&b, "/tmp/perf-78.map", &off);
	bin_end(&b, id, -EFBIG, off);
	assert_false(pm_poll(&b, 90000));
	/* and binaries still come */
	fetch_want(b.f, "/usr/bin/x", b.bid, b.bid_len);
	fetch_poll(b.f, b.sv[0], 90001);
	id = bin_request(&b, &off);
	bin_stream(&b, id, 0, b.elf, b.elf_len);
	bin_end(&b, id, 0, b.elf_len);
	assert_int_equal(fetch_get_stats(b.f)->files, 1);

	j = fetch_to_json(b.f);
	pm = json_object_get(j, "perfmaps");
	assert_non_null(pm);
	assert_int_equal(json_integer_value(json_object_get(pm, "bad_order")), 1);
	assert_int_equal(json_integer_value(json_object_get(pm, "io_errors")), 1);
	assert_int_equal(json_integer_value(json_object_get(pm, "capped")), 1);
	assert_int_equal(json_integer_value(json_object_get(pm, "gone")), 1);
	assert_int_equal(json_integer_value(json_object_get(pm, "bytes")), 44);
	assert_int_equal(json_array_size(json_object_get(pm, "maps")), 4);	/* and dumps */
	json_decref(j);
	bin_teardown(&b);
}

/* A process's jitdump: asked for beside its map by the host's path from
 * the tgid, stored as <tgid>.dump, its tail asked for as it grows. */
static void test_jitdump(void **state)
{
	static const uint8_t d1[] = { 'D', 'T', 'i', 'J', 1, 0, 0, 0 }, d2[] = { 9, 9 };
	char path[256];
	uint8_t got[16];
	uint64_t off;
	uint32_t id;
	json_t *j, *maps;
	struct bin b;
	FILE *fp;

	(void)state;
	bin_setup(&b, 0, 0);
	fetch_perfmap_want(b.f, 90);
	fetch_poll(b.f, b.sv[0], 1000);
	id = pm_request(&b, "/tmp/perf-90.map", &off);
	bin_end(&b, id, -ENOENT, 0);			/* a runtime with a dump only */
	fetch_poll(b.f, b.sv[0], 1000);
	id = pm_request(&b, "/tmp/jit-90.dump", &off);
	assert_int_equal(off, 0);
	bin_data(&b, id, 0, d1, sizeof(d1));
	bin_end(&b, id, 0, sizeof(d1));
	fetch_poll(b.f, b.sv[0], 1000 + FETCH_PERFMAP_EVERY_MS + 1);
	id = pm_request(&b, "/tmp/perf-90.map", &off);	/* asked again, absent */
	bin_end(&b, id, -ENOENT, 0);
	fetch_poll(b.f, b.sv[0], 1000 + FETCH_PERFMAP_EVERY_MS + 1);
	id = pm_request(&b, "/tmp/jit-90.dump", &off);
	assert_int_equal(off, sizeof(d1));		/* its tail */
	bin_data(&b, id, off, d2, sizeof(d2));
	bin_end(&b, id, 0, off + sizeof(d2));
	snprintf(path, sizeof(path), "%s/perfmaps/90.dump", b.dir);
	fp = fopen(path, "rb");
	assert_non_null(fp);
	assert_int_equal(fread(got, 1, sizeof(got), fp), sizeof(d1) + sizeof(d2));
	fclose(fp);
	assert_memory_equal(got, d1, sizeof(d1));
	assert_memory_equal(got + sizeof(d1), d2, sizeof(d2));
	snprintf(path, sizeof(path), "%s/perfmaps/90.map", b.dir);
	assert_int_equal(access(path, F_OK), -1);	/* nothing came */
	j = fetch_to_json(b.f);
	maps = json_object_get(json_object_get(j, "perfmaps"), "maps");
	assert_string_equal(json_string_value(json_object_get(json_array_get(maps, 1), "kind")),
			    "jitdump");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(maps, 1), "bytes")),
			 sizeof(d1) + sizeof(d2));
	json_decref(j);
	bin_teardown(&b);
}

static void test_binary_ok_and_resume(void **state)
{
	const struct fetch_stats *st;
	struct bin b;
	uint64_t off;
	uint32_t id;

	bin_setup(&b, 0, 0);
	st = fetch_get_stats(b.f);
	fetch_want(b.f, "/usr/bin/x", b.bid, b.bid_len);
	fetch_want(b.f, "/usr/bin/x", b.bid, b.bid_len);	/* once */
	assert_int_equal(st->images, 1);
	fetch_poll(b.f, b.sv[0], 1000);
	id = bin_request(&b, &off);
	assert_int_equal(off, 0);
	fetch_poll(b.f, b.sv[0], 1001);				/* one at a time */
	assert_int_equal(st->requests, 1);
	bin_stream(&b, id, 0, b.elf, 65536);
	put_hello(b.f);					/* reboot mid-way: resumed */
	fetch_poll(b.f, b.sv[0], 1002);
	assert_int_not_equal(bin_request(&b, &off), id);
	assert_int_equal(off, 65536);
	id++;
	bin_stream(&b, id - 1, 65536, b.elf, b.elf_len);	/* old id: stray */
	assert_true(st->stray > 0);
	bin_stream(&b, id, 65536, b.elf, b.elf_len);
	bin_end(&b, id, 0, b.elf_len);
	assert_int_equal(st->files, 1);
	assert_int_equal(st->bytes, b.elf_len);
	assert_int_equal(cache_files(&b), 1);

	/* a second session of the guest: found, nothing asked */
	fetch_free(b.f);
	b.f = fetch_new(&(struct fetch_config){ .guest_dir = b.dir, .cache_dir = b.cache,
		.no_debug_files = 1,
		.verify = symres_check_build_id });
	put_hello(b.f);
	assert_int_equal(cache_mtimes(&b, 1000), 1);	/* made old */
	fetch_want(b.f, "/usr/bin/x", b.bid, b.bid_len);
	fetch_poll(b.f, b.sv[0], 5000);
	assert_int_equal(fetch_get_stats(b.f)->cached, 1);
	assert_int_equal(fetch_get_stats(b.f)->requests, 0);
	assert_int_equal(cache_mtimes(&b, 0), 1);	/* a hit is a use */

	/* a third with a cache cap below the file: pruned at its start,
	 * so it is asked for again */
	fetch_free(b.f);
	b.f = fetch_new(&(struct fetch_config){ .guest_dir = b.dir, .cache_dir = b.cache,
		.no_debug_files = 1,
		.max_cache = 4096, .verify = symres_check_build_id });
	put_hello(b.f);
	assert_int_equal(fetch_get_stats(b.f)->pruned, 1);
	assert_int_equal(fetch_get_stats(b.f)->pruned_bytes, b.elf_len);
	assert_int_equal(cache_files(&b), 0);
	fetch_want(b.f, "/usr/bin/x", b.bid, b.bid_len);
	fetch_poll(b.f, b.sv[0], 6000);
	assert_int_equal(fetch_get_stats(b.f)->requests, 1);
	bin_teardown(&b);
}

/* Symbols read from guest memory, kept beside the binaries: due only for a
 * wanted image the cache has nothing of, written private under
 * xx/REST.memsyms once verified (a file whose build-id is another's is
 * refused and leaves nothing), found by the next session, pruned with the
 * binaries; a binary in the cache makes them not due. */
static void test_memsyms_cache(void **state)
{
	const struct fetch_stats *st;
	char hex[65], path[512];
	uint8_t other[32];
	struct stat sb;
	struct bin b;

	bin_setup(&b, 0, 0);
	st = fetch_get_stats(b.f);
	assert_int_equal(fetch_memsyms_due(b.f, b.bid, b.bid_len), 0);	/* not wanted */
	fetch_want(b.f, "/usr/lib/x.so", b.bid, b.bid_len);
	assert_int_equal(fetch_memsyms_due(b.f, b.bid, b.bid_len), 1);
	memcpy(other, b.bid, b.bid_len);
	other[0] ^= 0xff;
	fetch_want(b.f, "/usr/lib/y.so", other, b.bid_len);
	assert_int_equal(fetch_memsyms_put(b.f, other, b.bid_len, b.elf, b.elf_len), -ENOEXEC);
	assert_int_equal(st->memsyms_failed, 1);
	assert_int_equal(cache_files(&b), 0);
	/* an older opvm's (e_flags not MEMSYMS_VERSION): kept, but due again */
	assert_int_equal(fetch_memsyms_put(b.f, b.bid, b.bid_len, b.elf, b.elf_len), 0);
	assert_int_equal(st->memsyms_files, 1);
	assert_int_equal(st->memsyms_bytes, b.elf_len);
	hex_encode(b.bid, b.bid_len, hex);
	snprintf(path, sizeof(path), "%s/%.2s/%s.memsyms", b.cache, hex, hex + 2);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_int_equal(cache_files(&b), 1);
	assert_int_equal(fetch_memsyms_due(b.f, b.bid, b.bid_len), 1);
	assert_int_equal(st->memsyms_cached, 0);
	/* this one's replaces it */
	((Elf64_Ehdr *)b.elf)->e_flags = MEMSYMS_VERSION;
	assert_int_equal(fetch_memsyms_put(b.f, b.bid, b.bid_len, b.elf, b.elf_len), 0);
	assert_int_equal(cache_files(&b), 1);
	assert_int_equal(fetch_memsyms_due(b.f, b.bid, b.bid_len), 0);
	assert_int_equal(st->memsyms_cached, 1);

	/* the next session finds it; one whose cap is below it prunes it */
	fetch_free(b.f);
	b.f = fetch_new(&(struct fetch_config){ .guest_dir = b.dir, .cache_dir = b.cache,
		.verify = symres_check_build_id });
	assert_int_equal(fetch_get_stats(b.f)->cache_bytes, b.elf_len);
	fetch_want(b.f, "/usr/lib/x.so", b.bid, b.bid_len);
	assert_int_equal(fetch_memsyms_due(b.f, b.bid, b.bid_len), 0);
	fetch_free(b.f);
	b.f = fetch_new(&(struct fetch_config){ .guest_dir = b.dir, .cache_dir = b.cache,
		.max_cache = 4096, .verify = symres_check_build_id });
	assert_int_equal(fetch_get_stats(b.f)->pruned, 1);
	assert_int_equal(cache_files(&b), 0);
	bin_teardown(&b);
}

/* An image named by its memory symbols before the guest sent its binary
 * has no file to unwind with; once the binary is in the cache, a recheck
 * gives it one (the unwinder's host_file(): host/cli/session.c). */
static void test_memsyms_then_binary(void **state)
{
	char hex[65], path[512];
	struct symres *res;
	struct simage *si;
	struct bin b;
	FILE *fp;

	(void)state;
	bin_setup(&b, 0, 0);
	hex_encode(b.bid, b.bid_len, hex);
	snprintf(path, sizeof(path), "%s/cache", b.dir);
	assert_true(!mkdir(path, 0700) || errno == EEXIST);
	assert_true(!mkdir(b.cache, 0700) || errno == EEXIST);
	snprintf(path, sizeof(path), "%s/%.2s", b.cache, hex);
	assert_true(!mkdir(path, 0700) || errno == EEXIST);
	snprintf(path, sizeof(path), "%s/%.2s/%s.memsyms", b.cache, hex, hex + 2);
	assert_non_null(fp = fopen(path, "wb"));
	assert_int_equal(fwrite(b.elf, 1, b.elf_len, fp), b.elf_len);
	fclose(fp);
	snprintf(path, sizeof(path), "%s/cache", b.dir);
	res = symres_new(&(struct symres_config){ .fetch_cache = path, .no_host_kernel = 1,
						  .no_debuginfod = 1 });
	assert_non_null(res);
	si = symres_image(res, "guest", "/usr/lib/x.so", 0, b.bid, b.bid_len, NULL);
	assert_int_equal(simage_state(si), SIMAGE_OK);
	assert_null(simage_file(si));
	assert_int_equal(symres_image_recheck(res, si, "guest", "/usr/lib/x.so"), 1);
	assert_null(simage_file(si));		/* no binary yet */
	snprintf(path, sizeof(path), "%s/%.2s/%s", b.cache, hex, hex + 2);
	assert_non_null(fp = fopen(path, "wb"));
	assert_int_equal(fwrite(b.elf, 1, b.elf_len, fp), b.elf_len);
	fclose(fp);
	assert_int_equal(symres_image_recheck(res, si, "guest", "/usr/lib/x.so"), 1);
	assert_non_null(simage_file(si));
	assert_string_equal(simage_file(si), path);
	symres_free(res);
	bin_teardown(&b);
}

/* A file of size bytes at dir/name with the given mtime. */
static void put_file(const char *dir, const char *name, size_t size, time_t mtime)
{
	char path[512];
	struct timespec ts[2] = { { mtime, 0 }, { mtime, 0 } };
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	assert_int_equal(futimens(fd, ts), 0);
	close(fd);
}

static bool exists(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

/* The cache's cap: least recently used build-id files go first, until
 * it fits; part files, other names and symlinks are neither counted nor
 * removed; a missing cache is empty. */
static void test_cache_prune(void **state)
{
	char dir[] = "/tmp/opvm-test-prune-XXXXXX", sub[256], cmd[512];
	struct fetch_prune p;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(sub, sizeof(sub), "%s/nope", dir);
	assert_int_equal(fetch_cache_prune(sub, 1, &p), 0);
	assert_int_equal(p.cache_bytes, 0);
	snprintf(sub, sizeof(sub), "%s/ab", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	put_file(sub, "0000000000000000000000000000000000000001", 1000, 1000);	/* oldest */
	put_file(sub, "0000000000000000000000000000000000000002", 1000, 3000);
	put_file(dir, "cd", 0, 0);					/* not a dir */
	put_file(sub, ".part-1-1", 5000, 10);				/* a transfer */
	put_file(sub, "notes.txt", 5000, 10);
	snprintf(sub, sizeof(sub), "%s/ef", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	put_file(sub, "0000000000000000000000000000000000000003", 1000, 2000);
	snprintf(cmd, sizeof(cmd), "%s/00000000000000000000000000000000000000ff", sub);
	assert_int_equal(symlink("/etc/passwd", cmd), 0);

	/* part files at the top: a dead opvm's go, a live one's stay */
	{
		char dead[64], live[64];
		pid_t child = fork();

		if (!child)
			_exit(0);
		assert_int_equal(waitpid(child, NULL, 0), child);
		snprintf(dead, sizeof(dead), ".part-%d-0", (int)child);
		snprintf(live, sizeof(live), ".part-%d-3", (int)getpid());
		put_file(dir, dead, 7000, 0);
		put_file(dir, live, 7000, 0);
		assert_int_equal(fetch_cache_prune(dir, 3000, &p), 0);	/* fits */
		assert_int_equal(p.stale_parts, 1);
		assert_int_equal(p.bytes, 7000);
		assert_false(exists(dir, dead));
		assert_true(exists(dir, live));
	}
	assert_int_equal(p.files, 0);
	assert_int_equal(p.cache_bytes, 3000);
	assert_int_equal(fetch_cache_prune(dir, 1500, &p), 0);	/* two go, oldest first */
	assert_int_equal(p.files, 2);
	assert_int_equal(p.bytes, 2000);
	assert_int_equal(p.cache_bytes, 1000);
	{
		/* twice through one fd, as a session does (each file): the
		 * second listing sees the cache too */
		int dfd = open(dir, O_RDONLY | O_DIRECTORY);

		assert_true(dfd >= 0);
		assert_int_equal(fetch_cache_prune_at(dfd, 1500, &p), 0);
		assert_int_equal(p.cache_bytes, 1000);
		assert_int_equal(fetch_cache_prune_at(dfd, 1500, &p), 0);
		assert_int_equal(p.cache_bytes, 1000);
		close(dfd);
	}
	snprintf(sub, sizeof(sub), "%s/ab", dir);
	assert_false(exists(sub, "0000000000000000000000000000000000000001"));
	assert_true(exists(sub, "0000000000000000000000000000000000000002"));
	assert_true(exists(sub, ".part-1-1"));
	assert_true(exists(sub, "notes.txt"));
	snprintf(sub, sizeof(sub), "%s/ef", dir);
	assert_false(exists(sub, "0000000000000000000000000000000000000003"));
	assert_true(exists(sub, "00000000000000000000000000000000000000ff"));
	assert_int_equal(access("/etc/passwd", F_OK), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* Each way a guest can lie about a file: refused, counted, nothing cached,
 * no part file left. */
static void test_binary_hostile(void **state)
{
	const struct fetch_stats *st;
	uint8_t junk[4096], other[20];
	struct bin b;
	uint32_t id;

	bin_setup(&b, 8 << 20, 0);
	assert_true(b.elf_len < (8 << 20));
	st = fetch_get_stats(b.f);
	memset(junk, 'A', sizeof(junk));
	/* seven made-up images: asked in turn, each answered with a lie */
	for (int i = 0; i < 7; i++) {
		memcpy(other, b.bid, sizeof(other));
		other[0] ^= (uint8_t)(0x10 + i);
		fetch_want(b.f, "/usr/bin/x", other, b.bid_len);
	}
	/* 1: a non-ELF */
	fetch_poll(b.f, b.sv[0], 1);
	id = bin_request(&b, NULL);
	bin_data(&b, id, 0, junk, sizeof(junk));
	bin_end(&b, id, 0, sizeof(junk));
	assert_int_equal(st->not_elf, 1);
	/* 2: a real ELF, but not the build-id asked for */
	fetch_poll(b.f, b.sv[0], 2);
	id = bin_request(&b, NULL);
	bin_stream(&b, id, 0, b.elf, b.elf_len);
	bin_end(&b, id, 0, b.elf_len);
	assert_int_equal(st->mismatch, 1);
	/* 3: an endless stream: cut at the per-file cap (8 MiB here) */
	fetch_poll(b.f, b.sv[0], 3);
	id = bin_request(&b, NULL);
	for (uint64_t off = 0; off < (32u << 20); off += sizeof(junk))
		bin_data(&b, id, off, junk, sizeof(junk));
	assert_int_equal(st->too_big, 1);
	assert_true(st->stray > 0);			/* the rest of it */
	/* 4: data out of order (a 2 GiB jump) */
	fetch_poll(b.f, b.sv[0], 4);
	id = bin_request(&b, NULL);
	bin_data(&b, id, (uint64_t)2 << 30, junk, sizeof(junk));
	assert_int_equal(st->bad_order, 1);
	/* 5: the guest says no */
	fetch_poll(b.f, b.sv[0], 5);
	id = bin_request(&b, NULL);
	bin_end(&b, id, -ESTALE, 0);
	assert_int_equal(st->guest_refused, 1);
	/* 6: an end claiming 2 GiB after 100 bytes */
	fetch_poll(b.f, b.sv[0], 10);
	id = bin_request(&b, NULL);
	bin_data(&b, id, 0, junk, 100);
	bin_end(&b, id, 0, (uint64_t)2 << 30);
	assert_int_equal(st->bad_order, 2);
	/* 7: silence: given up after FETCH_TIMEOUT_MS */
	fetch_poll(b.f, b.sv[0], 20);
	id = bin_request(&b, NULL);
	fetch_poll(b.f, b.sv[0], 20 + FETCH_TIMEOUT_MS);
	assert_int_equal(st->timeouts, 0);
	fetch_poll(b.f, b.sv[0], 21 + FETCH_TIMEOUT_MS);
	assert_int_equal(st->timeouts, 1);
	assert_int_equal(st->requests, 7);
	assert_int_equal(cache_files(&b), 0);		/* no part file either */
	bin_teardown(&b);

	/* a relay that predates FETCH never answers: asked once, not again */
	bin_setup(&b, 0, 0);
	st = fetch_get_stats(b.f);
	for (int i = 0; i < 3; i++) {
		memcpy(other, b.bid, sizeof(other));
		other[0] ^= (uint8_t)(0x10 + i);
		fetch_want(b.f, "/usr/bin/x", other, b.bid_len);
	}
	fetch_poll(b.f, b.sv[0], 1);
	fetch_poll(b.f, b.sv[0], 2 + FETCH_TIMEOUT_MS);
	fetch_poll(b.f, b.sv[0], 3 + FETCH_TIMEOUT_MS);
	assert_int_equal(st->timeouts, 1);
	assert_int_equal(st->requests, 1);
	assert_int_equal(st->files, 0);
	assert_int_equal(cache_files(&b), 0);		/* no part file either */
	bin_teardown(&b);
}

/* b's fetch again (after planting something in its cache). */
static void bin_reopen(struct bin *b)
{
	fetch_free(b->f);
	b->f = fetch_new(&(struct fetch_config){ .guest_dir = b->dir, .cache_dir = b->cache,
		.no_debug_files = 1, .verify = symres_check_build_id });
	assert_non_null(b->f);
	put_hello(b->f);
}

/* Runs one whole transfer of b's file if the host asks for it; returns
 * whether it asked. */
static int bin_fetch(struct bin *b, uint64_t now)
{
	char buf[OPVM_REC_MAX];
	uint32_t id;

	fetch_poll(b->f, b->sv[0], now);
	if (read(b->sv[1], buf, sizeof(buf)) <= 0)	/* nonblocking: none */
		return 0;
	{
		struct opvm_req_fetch r;

		memcpy(&r, buf, sizeof(r));
		id = le32toh(r.req_id);
	}
	bin_stream(b, id, 0, b->elf, b->elf_len);
	bin_end(b, id, 0, b->elf_len);
	return 1;
}

/* An entry count of dir (0: empty), "." and ".." left out. */
static int entries(const char *dir)
{
	char cmd[512], out[32] = "";
	FILE *p;

	snprintf(cmd, sizeof(cmd), "find %s -mindepth 1 | wc -l", dir);
	p = popen(cmd, "r");
	assert_non_null(fgets(out, sizeof(out), p));
	pclose(p);
	return atoi(out);
}

/* session.json's fetch.binaries.cache_error as fetch_to_json() writes
 * it ("" when none), copied into a static buffer. */
static const char *cache_error(const struct fetch *f)
{
	static char out[2048];
	json_t *j = fetch_to_json(f);
	const char *s = json_string_value(json_object_get(json_object_get(j, "binaries"),
							  "cache_error"));

	assert_non_null(j);
	snprintf(out, sizeof(out), "%s", s ? s : "");
	json_decref(j);
	return out;
}

/*
 * The cache against a local user (issue 25): the guest's directory of
 * another user (mode 777) with links xx -> elsewhere, the guest's
 * directory a link, a link at a cached file's own name.  Refused, said,
 * counted; nothing outside touched (mode, mtime, contents).
 */
static void test_cache_planted(void **state)
{
	const struct fetch_stats *st;
	char path[512], target[512], hex[2 * OPVM_BUILD_ID_MAX + 1];
	struct stat sb;
	struct bin b;
	int fd;

	(void)state;
	bin_setup(&b, 0, 0);
	for (size_t i = 0; i < b.bid_len; i++)
		sprintf(hex + 2 * i, "%02x", b.bid[i]);
	snprintf(target, sizeof(target), "%s/elsewhere", b.dir);
	assert_int_equal(mkdir(target, 0755), 0);
	snprintf(path, sizeof(path), "%s/cache", b.dir);
	assert_int_equal(mkdir(path, 0700), 0);

	/* 1: <cache>/guest a link to elsewhere */
	assert_int_equal(symlink(target, b.cache), 0);
	bin_reopen(&b);
	fetch_want(b.f, "/usr/bin/x", b.bid, b.bid_len);
	assert_int_equal(bin_fetch(&b, 1), 0);
	st = fetch_get_stats(b.f);
	assert_true(st->cache_refused >= 1);
	assert_non_null(strstr(cache_error(b.f), "is a symbolic link"));
	assert_int_equal(entries(target), 0);
	assert_int_equal(stat(target, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0755);
	assert_int_equal(unlink(b.cache), 0);

	/* 1b: the same under a name with a terminal escape and a newline: the
	 * reason is said escaped, for session.json and the summary */
	snprintf(b.cache, sizeof(b.cache), "%s/cache/gu\x1b[2J\nest", b.dir);
	assert_int_equal(symlink(target, b.cache), 0);
	bin_reopen(&b);
	fetch_want(b.f, "/usr/bin/x", b.bid, b.bid_len);
	assert_int_equal(bin_fetch(&b, 1), 0);
	assert_non_null(strstr(cache_error(b.f), "gu\\x1b[2J\\nest"));
	for (const char *c = cache_error(b.f); *c; c++)
		assert_true((unsigned char)*c >= 0x20);
	assert_int_equal(unlink(b.cache), 0);
	snprintf(b.cache, sizeof(b.cache), "%s/cache/guest", b.dir);

	/* 2: <cache>/guest another user's, 0777, its xx a link */
	if (geteuid() == 0) {
		assert_int_equal(mkdir(b.cache, 0777), 0);
		assert_int_equal(chmod(b.cache, 0777), 0);
		snprintf(path, sizeof(path), "%s/%.2s", b.cache, hex);
		assert_int_equal(symlink(target, path), 0);
		assert_int_equal(chown(b.cache, 65534, 65534), 0);
		bin_reopen(&b);
		fetch_want(b.f, "/usr/bin/x", b.bid, b.bid_len);
		assert_int_equal(bin_fetch(&b, 1), 0);
		st = fetch_get_stats(b.f);
		assert_true(st->cache_refused >= 1);
		assert_int_equal(st->files, 0);
		assert_non_null(strstr(cache_error(b.f), "belongs to uid 65534"));
		assert_int_equal(entries(target), 0);
		assert_int_equal(stat(b.cache, &sb), 0);
		assert_int_equal(sb.st_mode & 07777, 0777);	/* not chmod'ed */
		/* ours again, but its xx a link: refused at the commit */
		assert_int_equal(chown(b.cache, 0, 0), 0);
		assert_int_equal(chmod(b.cache, 0700), 0);
		bin_reopen(&b);
		fetch_want(b.f, "/usr/bin/x", b.bid, b.bid_len);
		assert_int_equal(fetch_get_stats(b.f)->cached, 0);
		assert_int_equal(bin_fetch(&b, 1), 1);
		st = fetch_get_stats(b.f);
		assert_int_equal(st->files, 0);
		assert_true(st->cache_refused >= 1);
		assert_non_null(strstr(cache_error(b.f), "is a symbolic link"));
		assert_int_equal(entries(target), 0);
		assert_int_equal(unlink(path), 0);
	} else {
		assert_int_equal(mkdir(b.cache, 0700), 0);
	}

	/* 3: a link at the cached file's own name, to a victim file */
	snprintf(path, sizeof(path), "%s/%.2s", b.cache, hex);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(target, sizeof(target), "%s/victim", b.dir);
	fd = open(target, O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "victim\n", 7), 7);
	close(fd);
	assert_int_equal(utimensat(AT_FDCWD, target, (struct timespec[2]){ { 1000, 0 },
				   { 1000, 0 } }, 0), 0);
	snprintf(path, sizeof(path), "%s/%.2s/%s", b.cache, hex, hex + 2);
	assert_int_equal(symlink(target, path), 0);
	bin_reopen(&b);
	fetch_want(b.f, "/usr/bin/x", b.bid, b.bid_len);
	st = fetch_get_stats(b.f);
	assert_int_equal(st->cached, 0);		/* a link is not cached */
	assert_int_equal(st->cache_links, 1);
	assert_int_equal(stat(target, &sb), 0);
	assert_int_equal(sb.st_mtim.tv_sec, 1000);	/* its target's mtime kept */
	assert_int_equal(bin_fetch(&b, 1), 1);
	assert_int_equal(fetch_get_stats(b.f)->files, 1);
	assert_int_equal(lstat(path, &sb), 0);
	assert_true(S_ISREG(sb.st_mode));		/* the link replaced */
	assert_int_equal((size_t)sb.st_size, b.elf_len);
	assert_int_equal(stat(target, &sb), 0);
	assert_int_equal(sb.st_size, 7);		/* not written through */
	assert_int_equal(sb.st_mtim.tv_sec, 1000);
	bin_teardown(&b);
}

/* Removes the test's directory dir and what it holds. */
static void rm_tree(const char *dir)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/*
 * A lying kallsyms (issue 25): _text and HELLO's anchor moved by 2 MiB
 * (which moves the KASLR slide with them), every other symbol true.  The
 * collector counts and says it (fetch.ksyms.slide_mismatch, the first
 * disagreement); the reports keep opvm.ko's slide: a kernel sample at a
 * true function's run-time address is named after it, not after the name
 * the guest put 2 MiB further, and the disagreement is a warning.
 */
static void test_ksyms_lie(void **state)
{
	const uint64_t text = 0xffffffff81000000ull, lie = 0x200000;
	char dir[] = "/tmp/test-fetch.XXXXXX", gdir[256];
	struct opvm_rec_hello h = { 0 };
	struct symres_kernel k = { .release = "6.1.0-test", .text_addr = text,
				   .anchor_name = "printk", .anchor_addr = text + 0x5000 };
	const struct fetch_stats *st;
	struct symres *res;
	struct simage *si;
	struct fetch *f;
	struct krec kr;
	json_t *j;
	uint64_t a;
	long i;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(gdir, sizeof(gdir), "%s/guests", dir);
	assert_int_equal(mkdir(gdir, 0700), 0);
	snprintf(gdir, sizeof(gdir), "%s/guests/g", dir);
	assert_int_equal(mkdir(gdir, 0700), 0);
	f = fetch_new(&(struct fetch_config){ .guest_dir = gdir });
	assert_non_null(f);
	h.hdr.magic = htole16(OPVM_PROTO_MAGIC);
	h.hdr.type = htole16(OPVM_REC_HELLO);
	h.hdr.len = htole32(sizeof(h));
	h.text_addr = htole64(k.text_addr);
	h.anchor_addr = htole64(k.anchor_addr);
	strcpy(h.anchor_name, "printk");
	fetch_record(f, &h.hdr, sizeof(h));
	krec_init(&kr);
	krec_add(&kr, text + lie, 'T', "_text", -1);
	krec_add(&kr, text + 0x1000, 'T', "true_fn", -1);
	krec_add(&kr, text + 0x5000 + lie, 'T', "printk", -1);
	krec_add(&kr, text + 0x1000 + lie, 'T', "guest_chosen", -1);
	krec_add(&kr, text + 0x400000, 'T', "_etext", -1);
	fetch_record(f, (void *)kr.buf, krec_done(&kr, ""));
	put_end(dir, f, 5);
	st = fetch_get_stats(f);
	assert_int_equal(st->ksyms_syms, 5);
	assert_int_equal(st->ksyms_slide_mismatch, 2);
	j = fetch_to_json(f);
	assert_non_null(j);
	assert_non_null(strstr(json_string_value(json_object_get(json_object_get(j, "ksyms"),
				"slide_conflict")), "_text at ffffffff81200000 in the guest's kallsyms"));
	json_decref(j);
	fetch_free(f);

	res = symres_new(&(struct symres_config){ .session_dir = dir, .no_host_kernel = 1,
						  .no_debuginfod = 1 });
	assert_non_null(res);
	si = symres_image(res, "g", "vmlinux", 1, NULL, 0, &k);
	assert_non_null(si);
	assert_int_equal(simage_state(si), SIMAGE_OK);
	i = simage_lookup(si, text + 0x1010, &a);	/* a sample in true_fn */
	assert_true(i >= 0);
	assert_string_equal(simage_sym(si, (size_t)i)->name, "true_fn");
	assert_non_null(simage_warning(si));
	assert_non_null(strstr(simage_warning(si), "disagrees with opvm.ko's HELLO"));
	symres_free(res);

	/* an honest kallsyms: no warning, no count */
	f = fetch_new(&(struct fetch_config){ .guest_dir = gdir });
	fetch_record(f, &h.hdr, sizeof(h));
	krec_init(&kr);
	krec_add(&kr, text, 'T', "_text", -1);
	krec_add(&kr, text + 0x1000, 'T', "true_fn", -1);
	krec_add(&kr, text + 0x5000, 'T', "printk", -1);
	fetch_record(f, (void *)kr.buf, krec_done(&kr, ""));
	put_end(dir, f, 3);
	assert_int_equal(fetch_get_stats(f)->ksyms_slide_mismatch, 0);
	fetch_free(f);
	res = symres_new(&(struct symres_config){ .session_dir = dir, .no_host_kernel = 1,
						  .no_debuginfod = 1 });
	si = symres_image(res, "g", "vmlinux", 1, NULL, 0, &k);
	assert_non_null(si);
	i = simage_lookup(si, text + 0x1010, &a);
	assert_true(i >= 0);
	assert_string_equal(simage_sym(si, (size_t)i)->name, "true_fn");
	assert_null(simage_warning(si));
	symres_free(res);
	rm_tree(dir);
}

/* A FIFO planted as kallsyms.part or kallsyms.modules.part in the
 * guest's directory: the collector neither blocks on it (alarm: a hang
 * fails the test) nor writes into it; counted as an I/O error. */
/* Counts the lines of path with and without a module ("\t["). */
static void count_lines(const char *path, int *vml, int *mods)
{
	char line[512];
	FILE *in = fopen(path, "r");

	*vml = *mods = 0;
	assert_non_null(in);
	while (fgets(line, sizeof(line), in))
		(*(strstr(line, "\t[") ? mods : vml))++;
	fclose(in);
}

/*
 * The host's word on the kernel's symbols (OPVM_REQ_KSYMS): due after each
 * HELLO, written once, 72 bytes; and transfers of one kind (introspection's
 * vmlinux table, opvm.ko's walk of the modules) each replace their kind of
 * lines in kallsyms and keep the other's, in either order.
 */
static void test_ksyms_word_and_merge(void **state)
{
	char dir[] = "/tmp/test-fetch.XXXXXX", path[256];
	union { struct opvm_req_ksyms r; uint8_t b[128]; } u;
	struct opvm_req_ksyms r;
	struct fetch *f;
	struct krec k;
	int sv[2], vml, mods;
	size_t len;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/kallsyms", dir);
	f = fetch_new(&(struct fetch_config){ .guest_dir = dir });
	assert_non_null(f);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);

	assert_false(fetch_ksyms_word_due(f));
	assert_int_equal(fetch_ksyms_tell(f, sv[0], OPVM_KSYMS_WANT_MODULES), 0);
	put_hello(f);
	assert_true(fetch_ksyms_word_due(f));
	assert_int_equal(fetch_ksyms_tell(f, -1, OPVM_KSYMS_WANT_MODULES), 0);
	assert_true(fetch_ksyms_word_due(f));		/* not connected: still due */
	assert_int_equal(fetch_ksyms_tell(f, sv[0], OPVM_KSYMS_WANT_MODULES), 0);
	assert_false(fetch_ksyms_word_due(f));
	assert_int_equal(fetch_ksyms_tell(f, sv[0], OPVM_KSYMS_WANT_ALL), 0);	/* once */
	assert_int_equal(read(sv[1], u.b, sizeof(u.b)), (ssize_t)sizeof(r));	/* one */
	memcpy(&r, u.b, sizeof(r));
	assert_int_equal(sizeof(r), 72);
	assert_int_equal(le16toh(r.hdr.magic), OPVM_PROTO_MAGIC);
	assert_int_equal(le16toh(r.hdr.type), OPVM_REQ_KSYMS);
	assert_int_equal(le32toh(r.hdr.len), 72);
	assert_int_equal(le32toh(r.want), OPVM_KSYMS_WANT_MODULES);
	assert_int_equal(fetch_get_stats(f)->ksyms_asked_modules, 1);
	assert_int_equal(fetch_get_stats(f)->ksyms_asked_all, 0);

	/* introspection's vmlinux table, then the modules' walk */
	krec_init(&k);
	krec_add(&k, 0xffffffff81000000, 'T', "_text", -1);
	krec_add(&k, 0xffffffff81000100, 'T', "printk", -1);
	len = krec_done(&k, "");
	fetch_record(f, (void *)k.buf, len);
	put_end(dir, f, 2);
	krec_init(&k);
	krec_add(&k, 0xffffffffc0200000, 't', "port_fops_write", -1);
	len = krec_done(&k, "virtio_console");
	fetch_record(f, (void *)k.buf, len);
	put_end(dir, f, 1);
	count_lines(path, &vml, &mods);
	assert_int_equal(vml, 2);
	assert_int_equal(mods, 1);
	assert_int_equal(fetch_get_stats(f)->ksyms_merged, 2);
	assert_int_equal(fetch_get_stats(f)->ksyms_syms, 3);

	/* another modules' walk replaces the modules' lines only */
	krec_init(&k);
	krec_add(&k, 0xffffffffc0300000, 't', "a", -1);
	krec_add(&k, 0xffffffffc0300010, 't', "b", -1);
	len = krec_done(&k, "other");
	fetch_record(f, (void *)k.buf, len);
	put_end(dir, f, 2);
	count_lines(path, &vml, &mods);
	assert_int_equal(vml, 2);
	assert_int_equal(mods, 2);

	/* a vmlinux table after it keeps them; a whole table keeps nothing */
	krec_init(&k);
	krec_add(&k, 0xffffffff81000000, 'T', "_text", -1);
	len = krec_done(&k, "");
	fetch_record(f, (void *)k.buf, len);
	put_end(dir, f, 1);
	count_lines(path, &vml, &mods);
	assert_int_equal(vml, 1);
	assert_int_equal(mods, 2);
	fetch_record(f, (void *)k.buf, len);
	krec_init(&k);
	krec_add(&k, 0xffffffffc0300000, 't', "a", -1);
	len = krec_done(&k, "other");
	fetch_record(f, (void *)k.buf, len);
	put_end(dir, f, 2);
	count_lines(path, &vml, &mods);
	assert_int_equal(vml, 1);
	assert_int_equal(mods, 1);
	assert_int_equal(fetch_get_stats(f)->ksyms_merged, 0);

	/* ORC tables read (by introspection) before the HELLO of the same
	 * kernel stay; another kernel's HELLO drops them */
	{
		struct opvm_rec_hello h = { 0 };
		uint64_t ip0, ip1, orc;

		krec_init(&k);
		krec_add(&k, 0xffffffff81000000, 'T', "_text", -1);
		krec_add(&k, 0xffffffff82000000, 'R', "__start_orc_unwind_ip", -1);
		krec_add(&k, 0xffffffff82100000, 'R', "__stop_orc_unwind_ip", -1);
		krec_add(&k, 0xffffffff82100000, 'R', "__start_orc_unwind", -1);
		len = krec_done(&k, "");
		fetch_record(f, (void *)k.buf, len);
		put_end(dir, f, 4);
		assert_int_equal(fetch_kernel_orc(f, &ip0, &ip1, &orc), 0);
		h.hdr.magic = htole16(OPVM_PROTO_MAGIC);
		h.hdr.type = htole16(OPVM_REC_HELLO);
		h.hdr.len = htole32(sizeof(h));
		h.text_addr = htole64(0xffffffff81000000);
		fetch_record(f, &h.hdr, sizeof(h));
		assert_int_equal(fetch_kernel_orc(f, &ip0, &ip1, &orc), 0);
		assert_int_equal(ip0, 0xffffffff82000000);
		h.text_addr = htole64(0xffffffff91000000);
		fetch_record(f, &h.hdr, sizeof(h));
		assert_int_equal(fetch_kernel_orc(f, &ip0, &ip1, &orc), -ENOENT);
	}

	fetch_free(f);
	close(sv[0]);
	close(sv[1]);
	unlink(path);
	snprintf(path, sizeof(path), "%s/kallsyms.modules", dir);
	unlink(path);
	assert_int_equal(rmdir(dir), 0);
}

/* ---- a transfer held against the stored kallsyms ---------------------------- */

#define RT_TEXT	0xffffffff81000000ull

/* This kernel's vmlinux table, one line changed at index change (-1:
 * none), nr lines of it (at most 8). */
static size_t rt_vmlinux(struct krec *k, int change, int nr)
{
	static const struct { uint64_t off; char type; const char *name; } v[] = {
		{ 0, 'T', "_text" }, { 0x1000, 'T', "true_fn" }, { 0x2000, 't', "exc_int3" },
		{ 0x2100, 't', "after_int3" }, { 0x5000, 'T', "printk" },
		{ 0x1000000, 'R', "__start_orc_unwind_ip" },
		{ 0x1100000, 'R', "__stop_orc_unwind_ip" },
		{ 0x1100000, 'R', "__start_orc_unwind" },
	};

	krec_init(k);
	for (int i = 0; i < nr && i < 8; i++)
		krec_add(k, RT_TEXT + v[i].off, v[i].type, i == change ? "changed" : v[i].name, -1);
	return krec_done(k, "");
}

static size_t rt_module(struct krec *k, const char *mod, const char *sym)
{
	krec_init(k);
	krec_add(k, 0xffffffffc0200000, 't', sym, -1);
	krec_add(k, 0xffffffffc0200100, 't', "port_fops_read", -1);
	return krec_done(k, mod);
}

static void rt_hello(struct fetch *f, uint64_t text)
{
	struct opvm_rec_hello h = { 0 };

	h.hdr.magic = htole16(OPVM_PROTO_MAGIC);
	h.hdr.type = htole16(OPVM_REC_HELLO);
	h.hdr.len = htole32(sizeof(h));
	h.text_addr = htole64(text);
	h.anchor_addr = htole64(text + 0x5000);
	strcpy(h.anchor_name, "printk");
	fetch_record(f, &h.hdr, sizeof(h));
}

/* The whole file at path (NUL-terminated, at most len - 1 bytes). */
static void slurp(const char *path, char *buf, size_t len)
{
	FILE *in = fopen(path, "r");
	size_t n;

	assert_non_null(in);
	n = fread(buf, 1, len - 1, in);
	buf[n] = '\0';
	fclose(in);
}

/*
 * A sampler started again for the same boot (the exporter's store): the
 * session's kallsyms is this HELLO's kernel, so the relay need send the
 * modules' only and the ORC tables come from the file; introspection's
 * vmlinux table and the modules' walk, the same as the file's, write
 * nothing (no kallsyms.part at any time: in the store it would take the
 * file's size again); a table that differs is written, from the file's
 * lines up to the change; one with fewer lines too.
 */
static void test_ksyms_repeat(void **state)
{
	char dir[] = "/tmp/test-fetch.XXXXXX", path[256], part[256], was[4096], now[4096];
	struct krec k;
	struct fetch *f;
	struct stat a, b;
	uint64_t ip0, ip1, orc;
	struct sampler_int3 i3;
	int vml, mods;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/kallsyms", dir);
	snprintf(part, sizeof(part), "%s/kallsyms.part", dir);
	f = fetch_new(&(struct fetch_config){ .guest_dir = dir });
	assert_non_null(f);
	rt_hello(f, RT_TEXT);
	assert_false(fetch_ksyms_stored(f));		/* nothing stored yet */
	fetch_record(f, (void *)k.buf, rt_vmlinux(&k, -1, 8));
	fetch_record(f, (void *)k.buf, rt_module(&k, "virtio_console", "port_fops_write"));
	put_end(dir, f, 10);
	fetch_free(f);
	assert_int_equal(stat(path, &a), 0);
	slurp(path, was, sizeof(was));

	/* the next sampler */
	f = fetch_new(&(struct fetch_config){ .guest_dir = dir });
	assert_non_null(f);
	rt_hello(f, RT_TEXT);
	assert_true(fetch_ksyms_stored(f));
	assert_int_equal(fetch_kernel_orc(f, &ip0, &ip1, &orc), 0);
	assert_true(ip0 == RT_TEXT + 0x1000000 && orc == RT_TEXT + 0x1100000);
	assert_int_equal(fetch_kernel_int3(f, &i3), 0);
	assert_true(i3.nr == 1 && i3.r[0].start == RT_TEXT + 0x2000 &&
		    i3.r[0].end == RT_TEXT + 0x2100);
	fetch_record(f, (void *)k.buf, rt_vmlinux(&k, -1, 8));
	assert_int_equal(stat(part, &b), -1);		/* nothing written */
	put_end(dir, f, 8);
	fetch_record(f, (void *)k.buf, rt_module(&k, "virtio_console", "port_fops_write"));
	assert_int_equal(stat(part, &b), -1);
	put_end(dir, f, 2);
	assert_int_equal(fetch_get_stats(f)->ksyms_unchanged, 2);
	assert_int_equal(stat(path, &b), 0);
	assert_true(a.st_ino == b.st_ino);		/* the same file */
	slurp(path, now, sizeof(now));
	assert_string_equal(now, was);

	/* a module loaded: the modules' walk differs, vmlinux's lines stay */
	fetch_record(f, (void *)k.buf, rt_module(&k, "virtio_console", "port_fops_write"));
	fetch_record(f, (void *)k.buf, rt_module(&k, "loop", "lo_open"));
	assert_int_equal(stat(part, &b), 0);
	put_end(dir, f, 4);
	count_lines(path, &vml, &mods);
	assert_int_equal(vml, 8);
	assert_int_equal(mods, 4);
	assert_int_equal(fetch_get_stats(f)->ksyms_unchanged, 2);

	/* vmlinux's table changed in its middle: the file's lines before the
	 * change, then the transfer's */
	fetch_record(f, (void *)k.buf, rt_vmlinux(&k, 3, 8));
	put_end(dir, f, 8);
	count_lines(path, &vml, &mods);
	assert_int_equal(vml, 8);
	assert_int_equal(mods, 4);
	slurp(path, now, sizeof(now));
	assert_non_null(strstr(now, "ffffffff81000000 T _text\nffffffff81001000 T true_fn\n"
				    "ffffffff81002000 t exc_int3\nffffffff81002100 t changed\n"
				    "ffffffff81005000 T printk\n"));
	assert_null(strstr(now, "after_int3"));
	/* fewer lines than the file: written */
	fetch_record(f, (void *)k.buf, rt_vmlinux(&k, 3, 5));
	assert_int_equal(stat(part, &b), -1);		/* the same so far */
	put_end(dir, f, 5);
	count_lines(path, &vml, &mods);
	assert_int_equal(vml, 5);
	assert_int_equal(mods, 4);
	/* a session that ends during a repeat keeps the whole file */
	fetch_record(f, (void *)k.buf, rt_vmlinux(&k, 3, 2));
	fetch_free(f);
	count_lines(path, &vml, &mods);
	assert_int_equal(vml, 5);

	/* another boot: not the stored kernel, no tables from it */
	f = fetch_new(&(struct fetch_config){ .guest_dir = dir });
	assert_non_null(f);
	rt_hello(f, RT_TEXT + 0x200000);
	assert_false(fetch_ksyms_stored(f));
	assert_int_equal(fetch_kernel_orc(f, &ip0, &ip1, &orc), -ENOENT);
	assert_int_equal(fetch_kernel_int3(f, &i3), -ENOENT);
	fetch_free(f);
	rm_tree(dir);
}

/* The room the exporter's store keeps for a transfer (max_ksyms, attach
 * --fetch-max-ksyms): the part file never holds more, the symbols past it
 * are counted, and a one-kind transfer's merge keeps to it too. */
static void test_ksyms_room(void **state)
{
	char dir[] = "/tmp/test-fetch.XXXXXX", path[256], part[256];
	const uint64_t room = 150;	/* bytes: five of vmlinux's lines */
	struct krec k;
	struct fetch *f;
	struct stat sb;
	int vml, mods;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/kallsyms", dir);
	snprintf(part, sizeof(part), "%s/kallsyms.part", dir);
	f = fetch_new(&(struct fetch_config){ .guest_dir = dir, .max_ksyms = room });
	assert_non_null(f);
	fetch_record(f, (void *)k.buf, rt_vmlinux(&k, -1, 8));
	assert_int_equal(stat(part, &sb), 0);
	assert_true((uint64_t)sb.st_size <= room);
	fetch_record(f, (void *)k.buf, rt_module(&k, "virtio_console", "port_fops_write"));
	assert_int_equal(stat(part, &sb), 0);
	assert_true((uint64_t)sb.st_size <= room);
	put_end(dir, f, 10);
	assert_int_equal(stat(path, &sb), 0);
	assert_true((uint64_t)sb.st_size <= room && sb.st_size > 0);
	/* vmlinux's first five lines (136 bytes) kept, the rest counted */
	assert_int_equal(fetch_get_stats(f)->ksyms_syms, 5);
	assert_int_equal(fetch_get_stats(f)->ksyms_capped, 5);
	/* the modules' walk, merged with vmlinux's lines: within the room */
	fetch_record(f, (void *)k.buf, rt_module(&k, "loop", "lo_open"));
	put_end(dir, f, 2);
	assert_int_equal(stat(path, &sb), 0);
	assert_true((uint64_t)sb.st_size <= room);
	count_lines(path, &vml, &mods);
	assert_int_equal(mods, 2);
	fetch_free(f);
	rm_tree(dir);
}

static void test_fifo_part(void **state)
{
	char dir[] = "/tmp/test-fetch.XXXXXX", path[256], mods[256];
	struct fetch *f;
	struct krec kr;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/kallsyms.part", dir);
	snprintf(mods, sizeof(mods), "%s/kallsyms.modules.part", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(mkfifo(mods, 0600), 0);
	alarm(10);
	f = fetch_new(&(struct fetch_config){ .guest_dir = dir });
	assert_non_null(f);
	put_module(f, "m", 0xffffffffc0000000, 4096, OPVM_REC_MODULE);
	krec_init(&kr);
	krec_add(&kr, 0xffffffff81000000, 'T', "_text", -1);
	fetch_record(f, (void *)kr.buf, krec_done(&kr, ""));
	assert_true(fetch_get_stats(f)->io_errors >= 1);
	put_end(dir, f, 1);
	fetch_free(f);
	alarm(0);
	unlink(path);
	unlink(mods);
	assert_int_equal(rmdir(dir), 0);
}

/* Reads a request: its req_id, flags and path (NUL-terminated). */
static uint32_t any_request(struct bin *b, uint8_t *flags, char *path, size_t plen,
			    uint8_t *bid)
{
	struct opvm_req_fetch r;
	char buf[OPVM_REC_MAX];
	ssize_t n = read(b->sv[1], buf, sizeof(buf));
	size_t l;

	assert_true(n >= (ssize_t)sizeof(r));
	memcpy(&r, buf, sizeof(r));
	assert_int_equal(le16toh(r.hdr.type), OPVM_REQ_FETCH);
	l = le16toh(r.path_len);
	assert_true(l < plen && sizeof(r) + l <= (size_t)n);
	memcpy(path, buf + sizeof(r), l);
	path[l] = '\0';
	*flags = r.flags;
	if (bid)
		memcpy(bid, r.build_id, r.build_id_len);
	return le32toh(r.req_id);
}

/*
 * Debug files: after the binaries, each image's
 * /usr/lib/debug/.build-id/xx/yyyy.debug (the host's path from the
 * build-id), flagged for the relay's pace, checked like a binary, cached as
 * xx/yyyy.debug; a guest without one (-ENOENT) is counted apart; a debug
 * file of another build is refused and leaves no file; a second session
 * asks nothing.
 */
static void test_debug_file(void **state)
{
	char path[OPVM_PATH_MAX + 1], want[256], hex[129], fname[512];
	uint8_t flags, other[OPVM_BUILD_ID_MAX], got[OPVM_BUILD_ID_MAX];
	const struct fetch_stats *st;
	struct stat sb;
	struct bin b;
	uint32_t id;

	bin_setup(&b, 0, 0);
	bin_reopen(&b);
	fetch_free(b.f);
	b.f = fetch_new(&(struct fetch_config){ .guest_dir = b.dir, .cache_dir = b.cache,
		.verify = symres_check_build_id });
	put_hello(b.f);
	assert_non_null(b.f);
	st = fetch_get_stats(b.f);
	memcpy(other, b.bid, b.bid_len);
	other[0] ^= 0xff;
	fetch_want(b.f, "/usr/bin/x", b.bid, b.bid_len);
	fetch_want(b.f, "/usr/bin/y", other, b.bid_len);
	assert_int_equal(st->images, 2);
	/* binaries first */
	for (int i = 0; i < 2; i++) {
		fetch_poll(b.f, b.sv[0], 1000 + i);
		id = any_request(&b, &flags, path, sizeof(path), NULL);
		assert_int_equal(flags, 0);
		assert_true(!strcmp(path, "/usr/bin/x") || !strcmp(path, "/usr/bin/y"));
		bin_end(&b, id, -ENOENT, 0);
	}
	assert_int_equal(st->guest_refused, 2);
	/* x's debug file: taken */
	hex_encode(b.bid, b.bid_len, hex);
	snprintf(want, sizeof(want), "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
	fetch_poll(b.f, b.sv[0], 1010);
	id = any_request(&b, &flags, path, sizeof(path), got);
	assert_int_equal(flags, OPVM_FETCH_F_DEBUG);
	assert_string_equal(path, want);
	assert_memory_equal(got, b.bid, b.bid_len);
	assert_int_equal(fetch_busy(b.f), 0);	/* nothing waits for a debug file */
	bin_stream(&b, id, 0, b.elf, b.elf_len);
	bin_end(&b, id, 0, b.elf_len);
	assert_int_equal(st->debug_files, 1);
	assert_int_equal(st->debug_bytes, b.elf_len);
	snprintf(fname, sizeof(fname), "%s/%.2s/%s.debug", b.cache, hex, hex + 2);
	assert_int_equal(stat(fname, &sb), 0);
	/* y's: the guest sends x's file, another build's: refused */
	fetch_poll(b.f, b.sv[0], 1020);
	id = any_request(&b, &flags, path, sizeof(path), got);
	assert_int_equal(flags, OPVM_FETCH_F_DEBUG);
	assert_memory_equal(got, other, b.bid_len);
	bin_stream(&b, id, 0, b.elf, b.elf_len);
	bin_end(&b, id, 0, b.elf_len);
	assert_int_equal(st->mismatch, 1);
	assert_int_equal(st->debug_refused, 1);
	assert_int_equal(st->debug_files, 1);
	assert_int_equal(cache_files(&b), 1);
	assert_int_equal(st->debug_requests, 2);
	assert_int_equal(st->requests, 4);
	/* a second session: x's debug file cached; y's asked again, absent */
	bin_reopen(&b);
	fetch_free(b.f);
	b.f = fetch_new(&(struct fetch_config){ .guest_dir = b.dir, .cache_dir = b.cache,
		.verify = symres_check_build_id });
	put_hello(b.f);
	st = fetch_get_stats(b.f);
	fetch_want(b.f, "/usr/bin/x", b.bid, b.bid_len);
	assert_int_equal(st->debug_cached, 1);
	fetch_poll(b.f, b.sv[0], 2000);
	id = any_request(&b, &flags, path, sizeof(path), NULL);
	assert_string_equal(path, "/usr/bin/x");
	bin_end(&b, id, -ENOENT, 0);
	fetch_poll(b.f, b.sv[0], 2001);
	assert_int_equal(st->requests, 1);
	fetch_want(b.f, "/usr/bin/y", other, b.bid_len);
	fetch_poll(b.f, b.sv[0], 2002);
	id = any_request(&b, &flags, path, sizeof(path), NULL);
	assert_string_equal(path, "/usr/bin/y");
	bin_end(&b, id, -ENOENT, 0);
	fetch_poll(b.f, b.sv[0], 2003);
	id = any_request(&b, &flags, path, sizeof(path), NULL);
	assert_int_equal(flags, OPVM_FETCH_F_DEBUG);
	bin_end(&b, id, -ENOENT, 0);
	assert_int_equal(st->debug_absent, 1);
	assert_int_equal(st->guest_refused, 2);
	bin_teardown(&b);
}

/* No request before the relay's HELLO: one it never read (a guest still
 * booting) must not make the host think the relay predates FETCH. */
static void test_no_request_before_hello(void **state)
{
	struct bin b;
	char buf[256];

	bin_setup(&b, 0, 0);
	fetch_free(b.f);
	b.f = fetch_new(&(struct fetch_config){ .guest_dir = b.dir, .cache_dir = b.cache,
		.verify = symres_check_build_id });
	fetch_want(b.f, "/usr/bin/x", b.bid, b.bid_len);
	fetch_poll(b.f, b.sv[0], 1000);
	fetch_poll(b.f, b.sv[0], 1000 + 2 * FETCH_TIMEOUT_MS);
	assert_int_equal(fetch_get_stats(b.f)->requests, 0);
	assert_int_equal(fetch_get_stats(b.f)->timeouts, 0);
	assert_true(read(b.sv[1], buf, sizeof(buf)) < 0);
	put_hello(b.f);
	fetch_poll(b.f, b.sv[0], 1000 + 2 * FETCH_TIMEOUT_MS + 1);
	assert_int_equal(fetch_get_stats(b.f)->requests, 1);
	bin_teardown(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_orc_tables),
		cmocka_unit_test(test_guest_packer),
		cmocka_unit_test(test_cache_prune),
		cmocka_unit_test(test_transfer),
		cmocka_unit_test(test_binary_ok_and_resume),
		cmocka_unit_test(test_memsyms_cache),
		cmocka_unit_test(test_memsyms_then_binary),
		cmocka_unit_test(test_binary_hostile),
		cmocka_unit_test(test_debug_file),
		cmocka_unit_test(test_no_request_before_hello),
		cmocka_unit_test(test_cache_planted),
		cmocka_unit_test(test_ksyms_lie),
		cmocka_unit_test(test_ksyms_word_and_merge),
		cmocka_unit_test(test_ksyms_repeat),
		cmocka_unit_test(test_ksyms_room),
		cmocka_unit_test(test_fifo_part),
		cmocka_unit_test(test_perfmap),
		cmocka_unit_test(test_jitdump),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
