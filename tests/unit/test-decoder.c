// SPDX-License-Identifier: MIT
/*
 * Channel decoder under a hostile guest: framing over arbitrary splits,
 * truncated, oversized and misaligned records, foreign versions, records
 * out of order, nasty paths, seq gaps, LOST, and a 100 MB random flood
 * after which the decoder still decodes and its memory stayed bounded.
 */
#include <endian.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <cmocka.h>

#include "host/collect/decoder.h"
#include "host/collect/gstate.h"
#include "lib/channel.h"

/* ---- stream builder ------------------------------------------------------ */

struct stream {
	uint8_t *p;
	size_t len, cap;
	uint32_t seq;
};

static void st_put(struct stream *s, const void *data, size_t len)
{
	if (s->len + len > s->cap) {
		s->cap = (s->len + len) * 2 + 256;
		s->p = realloc(s->p, s->cap);
		assert_non_null(s->p);
	}
	memcpy(s->p + s->len, data, len);
	s->len += len;
}

static void st_free(struct stream *s)
{
	free(s->p);
	memset(s, 0, sizeof(*s));
}

static void hdr_set(struct opvm_rec_hdr *h, unsigned type, size_t len, uint32_t seq)
{
	h->magic = htole16(OPVM_PROTO_MAGIC);
	h->type = htole16(type);
	h->len = htole32((uint32_t)len);
	h->seq = htole32(seq);
	h->reserved = 0;
}

static void rec_hello_v(struct stream *s, uint32_t version)
{
	struct opvm_rec_hello r;

	memset(&r, 0, sizeof(r));
	s->seq = 0;
	hdr_set(&r.hdr, OPVM_REC_HELLO, sizeof(r), s->seq++);
	r.version = htole32(version);
	r.nr_cpus = htole32(2);
	r.slot_pa = htole64(0x1234000);
	r.slot_size = htole32(sizeof(struct opvm_slot));
	r.anchor_addr = htole64(0xffffffff81234560ull);
	r.text_addr = htole64(0xffffffff81000000ull);
	strcpy(r.anchor_name, "printk");
	strcpy(r.release, "6.1.0-56-amd64");
	st_put(s, &r, sizeof(r));
}

static void rec_hello(struct stream *s)
{
	rec_hello_v(s, OPVM_PROTO_VERSION);
}

static void rec_proc(struct stream *s, unsigned type, uint32_t tgid, uint32_t ppid,
		     uint64_t cr3, uint64_t exe, const char *comm)
{
	struct opvm_rec_proc r;

	memset(&r, 0, sizeof(r));
	hdr_set(&r.hdr, type, sizeof(r), s->seq++);
	r.tgid = htole32(tgid);
	r.ppid = htole32(ppid);
	r.cr3 = htole64(cr3);
	r.exe_cookie = htole64(exe);
	memcpy(r.comm, comm, strnlen(comm, sizeof(r.comm)));
	st_put(s, &r, sizeof(r));
}

static void rec_exit(struct stream *s, unsigned type, uint32_t tid, uint32_t tgid)
{
	struct opvm_rec_exit r;

	memset(&r, 0, sizeof(r));
	hdr_set(&r.hdr, type, sizeof(r), s->seq++);
	r.tid = htole32(tid);
	r.tgid = htole32(tgid);
	st_put(s, &r, sizeof(r));
}

static void rec_thread(struct stream *s, uint32_t tid, uint32_t tgid, const char *comm)
{
	struct opvm_rec_thread r;

	memset(&r, 0, sizeof(r));
	hdr_set(&r.hdr, OPVM_REC_THREAD, sizeof(r), s->seq++);
	r.tid = htole32(tid);
	r.tgid = htole32(tgid);
	memcpy(r.comm, comm, strnlen(comm, sizeof(r.comm)));
	st_put(s, &r, sizeof(r));
}

/* A cookie record with explicit fields, so tests can lie in any of them. */
static void rec_cookie_raw(struct stream *s, uint64_t id, const void *path,
			   size_t path_len, uint16_t wire_path_len,
			   uint8_t bid_len, size_t extra_len)
{
	struct opvm_rec_cookie r;
	size_t len = sizeof(r) + path_len + extra_len;
	static const uint8_t zero[8];

	len = (len + 7) & ~(size_t)7;
	memset(&r, 0, sizeof(r));
	hdr_set(&r.hdr, OPVM_REC_COOKIE, len, s->seq++);
	r.cookie = htole64(id);
	for (int i = 0; i < OPVM_BUILD_ID_MAX; i++)
		r.build_id[i] = (uint8_t)(0xa0 + i);
	r.build_id_len = bid_len;
	r.path_len = htole16(wire_path_len);
	st_put(s, &r, sizeof(r));
	st_put(s, path, path_len);
	for (size_t pad = len - sizeof(r) - path_len; pad; ) {
		size_t n = pad > 8 ? 8 : pad;

		st_put(s, zero, n);
		pad -= n;
	}
}

static void rec_cgroup_raw(struct stream *s, uint32_t tgid, const char *path,
			   size_t path_len, uint16_t wire_path_len)
{
	struct opvm_rec_cgroup r;
	size_t len = (sizeof(r) + path_len + 7) & ~(size_t)7;
	static const uint8_t zero[8];

	memset(&r, 0, sizeof(r));
	hdr_set(&r.hdr, OPVM_REC_CGROUP, len, s->seq++);
	r.tgid = htole32(tgid);
	r.path_len = htole16(wire_path_len);
	r.id = htole64(77);
	st_put(s, &r, sizeof(r));
	st_put(s, path, path_len);
	st_put(s, zero, len - sizeof(r) - path_len);
}

static void rec_cgroup(struct stream *s, uint32_t tgid, const char *path)
{
	rec_cgroup_raw(s, tgid, path, strlen(path), (uint16_t)strlen(path));
}

static void rec_cookie(struct stream *s, uint64_t id, const char *path)
{
	size_t n = strlen(path);

	rec_cookie_raw(s, id, path, n, (uint16_t)n, 20, 0);
}

static void rec_mmap(struct stream *s, uint32_t tgid, uint64_t start, uint64_t end,
		     uint64_t pgoff, uint64_t cookie)
{
	struct opvm_rec_mmap r;

	memset(&r, 0, sizeof(r));
	hdr_set(&r.hdr, OPVM_REC_MMAP, sizeof(r), s->seq++);
	r.tgid = htole32(tgid);
	r.prot = htole32(5);
	r.start = htole64(start);
	r.end = htole64(end);
	r.pgoff = htole64(pgoff);
	r.cookie = htole64(cookie);
	st_put(s, &r, sizeof(r));
}

static void rec_munmap(struct stream *s, uint32_t tgid, uint64_t start, uint64_t end)
{
	struct opvm_rec_munmap r;

	memset(&r, 0, sizeof(r));
	hdr_set(&r.hdr, OPVM_REC_MUNMAP, sizeof(r), s->seq++);
	r.tgid = htole32(tgid);
	r.start = htole64(start);
	r.end = htole64(end);
	st_put(s, &r, sizeof(r));
}

static void rec_module(struct stream *s, unsigned type, const char *name,
		       uint64_t base, uint64_t size)
{
	struct opvm_rec_module r;

	memset(&r, 0, sizeof(r));
	hdr_set(&r.hdr, type, sizeof(r), s->seq++);
	r.base = htole64(base);
	r.size = htole64(size);
	memcpy(r.name, name, strnlen(name, sizeof(r.name)));
	st_put(s, &r, sizeof(r));
}

static void rec_sync(struct stream *s, uint64_t procs, uint64_t mods)
{
	struct opvm_rec_sync r;

	memset(&r, 0, sizeof(r));
	hdr_set(&r.hdr, OPVM_REC_SYNC, sizeof(r), s->seq++);
	r.nr_procs = htole64(procs);
	r.nr_modules = htole64(mods);
	st_put(s, &r, sizeof(r));
}

static void rec_lost(struct stream *s, uint64_t count)
{
	struct opvm_rec_lost r;

	memset(&r, 0, sizeof(r));
	hdr_set(&r.hdr, OPVM_REC_LOST, sizeof(r), s->seq++);
	r.count = htole64(count);
	st_put(s, &r, sizeof(r));
}

/* A bare header with arbitrary type and len, followed by body_len zeros. */
static void rec_bare(struct stream *s, unsigned type, uint32_t len, size_t body_len)
{
	struct opvm_rec_hdr h;
	uint8_t z = 0;

	hdr_set(&h, type, len, s->seq++);
	st_put(s, &h, sizeof(h));
	while (body_len--)
		st_put(s, &z, 1);
}

/* A well-formed session touching every record type. */
static void build_session(struct stream *s)
{
	rec_hello(s);
	rec_proc(s, OPVM_REC_PROC, 1, 0, 0x1000, 1, "init");
	rec_cookie(s, 1, "/sbin/init");
	rec_cookie(s, 2, "/lib/x86_64-linux-gnu/libc.so.6");
	rec_mmap(s, 1, 0x400000, 0x401000, 0, 1);
	rec_mmap(s, 1, 0x7f0000000000ull, 0x7f0000010000ull, 0x1000, 2);
	rec_proc(s, OPVM_REC_PROC, 42, 1, 0x2a000, 1, "sh");
	rec_thread(s, 43, 42, "sh-worker");
	rec_module(s, OPVM_REC_MODULE, "virtio_console", 0xffffffffc0000000ull, 0x4000);
	rec_module(s, OPVM_REC_MODULE, "opvm", 0xffffffffc0010000ull, 0x2000);
	rec_sync(s, 2, 2);
	rec_proc(s, OPVM_REC_EXEC, 42, 1, 0x2b000, 2, "busybox");
	rec_mmap(s, 42, 0x500000, 0x510000, 0, 2);
	rec_munmap(s, 42, 0x500000, 0x508000);
	rec_lost(s, 3);
	rec_exit(s, OPVM_REC_THREAD_EXIT, 43, 42);
	rec_module(s, OPVM_REC_MODULE_FREE, "opvm", 0xffffffffc0010000ull, 0x2000);
	rec_exit(s, OPVM_REC_PROC_EXIT, 42, 42);
}

/* ---- record log through the callback -------------------------------------- */

#define LOG_MAX 64
struct rec_log {
	unsigned n;
	uint32_t ent[LOG_MAX];	/* type << 16 | (seq & 0xffff) */
	size_t lens[LOG_MAX];
};

static void log_fn(const struct opvm_rec_hdr *rec, size_t len, void *arg)
{
	struct rec_log *l = arg;

	/* the buffer handed out must be 8-aligned for the casts printers do */
	assert_int_equal((uintptr_t)rec % 8, 0);
	assert_int_equal(le32toh(rec->len), len);
	if (l->n < LOG_MAX) {
		l->ent[l->n] = (uint32_t)le16toh(rec->type) << 16 |
			       (le32toh(rec->seq) & 0xffff);
		l->lens[l->n] = len;
	}
	l->n++;
}

struct ctx {
	struct gstate *gs;
	struct decoder *d;
	struct rec_log log;
};

static void ctx_init(struct ctx *c, const struct gstate_limits *lim)
{
	memset(c, 0, sizeof(*c));
	c->gs = gstate_new(lim);
	assert_non_null(c->gs);
	c->d = decoder_new(c->gs);
	assert_non_null(c->d);
	decoder_set_record_fn(c->d, log_fn, &c->log);
}

static void ctx_fini(struct ctx *c)
{
	decoder_free(c->d);
	gstate_free(c->gs);
}

static void feed(struct decoder *d, const void *p, size_t len)
{
	assert_int_equal(decoder_feed(d, p, len), 0);
}

static void feed_stream(struct decoder *d, const struct stream *s)
{
	feed(d, s->p, s->len);
}

/* ---- tests ---------------------------------------------------------------- */

static void test_struct_sizes(void **state)
{
	assert_int_equal(sizeof(struct opvm_rec_hello), 192);
	assert_int_equal(sizeof(struct opvm_rec_proc), 56);
	assert_int_equal(sizeof(struct opvm_rec_cookie), 64);
	assert_int_equal(chan_type_min_len(OPVM_REC_MMAP), 56);
	assert_int_equal(chan_type_min_len(99), 0);
	assert_string_equal(chan_type_name(OPVM_REC_PROC_EXIT), "PROC_EXIT");
	assert_string_equal(chan_type_name(0), "UNKNOWN");
	assert_string_equal(chan_type_name(OPVM_REC_TYPE_MAX), "UNKNOWN");
	assert_int_equal(chan_strnlen("abc\0def", 7), 3);
	assert_int_equal(chan_strnlen("abcdefgh", 4), 4);
}

static void test_decode_only(void **state)
{
	struct stream s = { 0 };
	struct rec_log log = { 0 };
	struct decoder *d = decoder_new(NULL);
	const struct decoder_stats *st;

	assert_non_null(d);
	decoder_set_record_fn(d, log_fn, &log);
	build_session(&s);
	feed_stream(d, &s);
	st = decoder_get_stats(d);
	assert_int_equal(st->records, 18);
	assert_int_equal(log.n, 18);
	assert_int_equal(st->bytes, s.len);
	assert_int_equal(st->bad_records + st->skipped_bytes + st->resyncs +
			 st->seq_gaps + st->unknown_types + st->version_mismatch +
			 st->refused + st->before_hello, 0);
	assert_int_equal(st->hellos, 1);
	assert_int_equal(st->syncs, 1);
	assert_int_equal(st->lost_records, 1);
	assert_int_equal(st->guest_lost, 3);
	assert_int_equal(log.ent[0], OPVM_REC_HELLO << 16 | 0);
	assert_int_equal(log.ent[17], OPVM_REC_PROC_EXIT << 16 | 17);
	assert_int_equal(decoder_buffered(d), 0);
	decoder_free(d);
	decoder_free(NULL);
	st_free(&s);
}

static void test_applies_to_gstate(void **state)
{
	struct stream s = { 0 };
	struct ctx c;
	const struct gstate_process *p;
	const struct gstate_cookie *ck;
	const struct chan_hello *h;

	ctx_init(&c, NULL);
	build_session(&s);
	feed_stream(c.d, &s);
	assert_int_equal(decoder_get_stats(c.d)->refused, 0);
	h = gstate_get_hello(c.gs);
	assert_non_null(h);
	assert_int_equal(h->nr_cpus, 2);
	assert_int_equal(h->slot_pa, 0x1234000);
	assert_string_equal(h->release, "6.1.0-56-amd64");
	assert_string_equal(h->anchor_name, "printk");
	p = gstate_proc_by_tgid(c.gs, 1);
	assert_non_null(p);
	assert_string_equal(p->comm, "init");
	assert_int_equal(p->nr_maps, 2);
	assert_null(gstate_proc_by_tgid(c.gs, 42));	/* exited */
	ck = gstate_cookie_find(c.gs, 2);
	assert_non_null(ck);
	assert_string_equal(ck->path, "/lib/x86_64-linux-gnu/libc.so.6");
	assert_int_equal(ck->build_id_len, 20);
	assert_int_equal(ck->build_id[0], 0xa0);
	assert_int_equal(gstate_nr_modules(c.gs), 1);
	assert_non_null(gstate_module_find(c.gs, 0xffffffffc0000100ull));
	assert_int_equal(gstate_get_stats(c.gs)->guest_lost, 3);
	ctx_fini(&c);
	st_free(&s);
}

/* CGROUP (a type older hosts skip): applied to its process, interned,
 * lengths checked, hostile bytes sanitised. */
static void test_cgroup(void **state)
{
	static const char k8s[] = "/kubepods.slice/kubepods-pod1.slice/cri-containerd-1.scope";
	struct stream s = { 0 };
	const struct gstate_process *a, *b;
	struct ctx c;
	char big[OPVM_CGROUP_PATH_MAX + 8];

	ctx_init(&c, NULL);
	rec_hello(&s);
	rec_proc(&s, OPVM_REC_PROC, 10, 1, 0x1000, 0, "a");
	rec_proc(&s, OPVM_REC_PROC, 11, 1, 0x2000, 0, "b");
	rec_cgroup(&s, 10, k8s);
	rec_cgroup(&s, 11, k8s);
	rec_cgroup(&s, 12, "/x");				/* no such process */
	rec_cgroup_raw(&s, 11, "/x", 2, 3000);			/* length past its max */
	rec_cgroup_raw(&s, 11, "/x", 2, 9);			/* tail past the record */
	rec_cgroup(&s, 11, "relative");				/* not a path */
	feed_stream(c.d, &s);
	a = gstate_proc_by_tgid(c.gs, 10);
	b = gstate_proc_by_tgid(c.gs, 11);
	assert_non_null(a);
	assert_non_null(b);
	assert_string_equal(a->cgroup, k8s);
	assert_ptr_equal(a->cgroup, b->cgroup);		/* interned */
	assert_int_equal(gstate_nr_cgroups(c.gs), 1);
	assert_int_equal(decoder_get_stats(c.d)->bad_records, 2);
	assert_int_equal(decoder_get_stats(c.d)->refused, 2);
	/* control bytes become '?'; the longest path fits */
	st_free(&s);
	s.seq = 7;
	rec_cgroup(&s, 11, "/a\x01\x1b[2J");
	memset(big, 'x', sizeof(big));
	big[0] = '/';
	rec_cgroup_raw(&s, 10, big, OPVM_CGROUP_PATH_MAX, OPVM_CGROUP_PATH_MAX);
	feed_stream(c.d, &s);
	b = gstate_proc_by_tgid(c.gs, 11);
	a = gstate_proc_by_tgid(c.gs, 10);
	assert_string_equal(b->cgroup, "/a??[2J");
	assert_int_equal(strlen(a->cgroup), OPVM_CGROUP_PATH_MAX);
	/* a new HELLO forgets them */
	st_free(&s);
	rec_hello(&s);
	feed_stream(c.d, &s);
	assert_int_equal(gstate_nr_cgroups(c.gs), 0);
	ctx_fini(&c);
	st_free(&s);
}

/* Everything a decoder run produced that must not depend on read sizes. */
struct outcome {
	struct decoder_stats st;
	struct rec_log log;
	size_t procs, threads, cookies, modules, maps;
};

static void outcome_take(struct ctx *c, struct outcome *o)
{
	memset(o, 0, sizeof(*o));
	o->st = *decoder_get_stats(c->d);
	o->st.buffered_peak = 0;	/* depends on chunking by design */
	o->log = c->log;
	o->procs = gstate_nr_processes(c->gs);
	o->threads = gstate_nr_threads(c->gs);
	o->cookies = gstate_nr_cookies(c->gs);
	o->modules = gstate_nr_modules(c->gs);
	o->maps = gstate_nr_mappings(c->gs);
}

static void outcome_equal(const struct outcome *a, const struct outcome *b)
{
	assert_memory_equal(&a->st, &b->st, sizeof(a->st));
	assert_int_equal(a->log.n, b->log.n);
	assert_memory_equal(a->log.ent, b->log.ent, sizeof(a->log.ent));
	assert_int_equal(a->procs, b->procs);
	assert_int_equal(a->threads, b->threads);
	assert_int_equal(a->cookies, b->cookies);
	assert_int_equal(a->modules, b->modules);
	assert_int_equal(a->maps, b->maps);
}

/* The stream under test: valid records with garbage, a bad record and an
 * unknown type in between, so resync is exercised at every split too. */
static void build_mixed(struct stream *s)
{
	static const char junk[] = "OVxx\x4f garbage \x4f\x56";

	build_session(s);
	st_put(s, junk, sizeof(junk) - 1);
	rec_bare(s, 99, 24, 8);					/* unknown type */
	rec_cookie_raw(s, 7, "/x", 2, 9999, 0, 0);		/* path_len lies */
	rec_proc(s, OPVM_REC_PROC, 77, 1, 0x77000, 0, "after");
}

static void test_split_every_boundary(void **state)
{
	struct stream s = { 0 };
	struct outcome whole, part;
	struct ctx c;

	build_mixed(&s);
	ctx_init(&c, NULL);
	feed_stream(c.d, &s);
	outcome_take(&c, &whole);
	ctx_fini(&c);
	assert_int_equal(whole.st.records, 19);
	assert_int_equal(whole.st.unknown_types, 1);
	assert_int_equal(whole.st.bad_records, 1);
	assert_int_equal(whole.st.resyncs, 1);
	assert_int_equal(whole.st.skipped_bytes, 16);

	for (size_t k = 0; k <= s.len; k++) {
		ctx_init(&c, NULL);
		feed(c.d, s.p, k);
		feed(c.d, s.p + k, s.len - k);
		outcome_take(&c, &part);
		outcome_equal(&whole, &part);
		ctx_fini(&c);
	}
	/* one byte at a time, and empty feeds in between */
	ctx_init(&c, NULL);
	for (size_t k = 0; k < s.len; k++) {
		feed(c.d, s.p + k, 1);
		feed(c.d, s.p + k, 0);
	}
	outcome_take(&c, &part);
	outcome_equal(&whole, &part);
	assert_true(decoder_get_stats(c.d)->buffered_peak <= OPVM_REC_MAX);
	ctx_fini(&c);
	/* random chunk sizes */
	srand(1);
	for (int round = 0; round < 50; round++) {
		ctx_init(&c, NULL);
		for (size_t k = 0; k < s.len; ) {
			size_t n = (size_t)rand() % 97;

			if (n > s.len - k)
				n = s.len - k;
			feed(c.d, s.p + k, n);
			k += n;
		}
		outcome_take(&c, &part);
		outcome_equal(&whole, &part);
		ctx_fini(&c);
	}
	st_free(&s);
}

static void test_truncated(void **state)
{
	struct stream s = { 0 };
	struct ctx c;
	const struct decoder_stats *st;
	struct opvm_rec_proc half;
	size_t cut;

	ctx_init(&c, NULL);
	rec_hello(&s);
	/* a PROC of which only 24 bytes made it; the next PROC's bytes fill
	 * the hole (the decoder cannot know), the rest of it is garbage */
	cut = s.len;
	rec_proc(&s, OPVM_REC_PROC, 5, 1, 0x5000, 0, "cut");
	memcpy(&half, s.p + cut, sizeof(half));
	s.len = cut + 24;
	rec_proc(&s, OPVM_REC_PROC, 6, 1, 0x6000, 0, "whole");
	rec_proc(&s, OPVM_REC_PROC, 7, 1, 0x7000, 0, "next");
	feed_stream(c.d, &s);
	st = decoder_get_stats(c.d);
	assert_int_equal(st->records, 3);	/* HELLO, the chimera, next */
	assert_int_equal(st->resyncs, 1);
	assert_int_equal(st->skipped_bytes, 24);
	assert_int_equal(st->seq_gaps, 1);	/* "whole" never arrived */
	assert_non_null(gstate_proc_by_tgid(c.gs, 7));

	/* stream ends inside a record: held, then dropped on reset */
	s.len = 0;
	rec_proc(&s, OPVM_REC_PROC, 8, 1, 0x8000, 0, "tail");
	feed(c.d, s.p, 30);
	assert_int_equal(decoder_buffered(c.d), 30);
	assert_int_equal(st->records, 3);
	decoder_reset(c.d);
	assert_int_equal(decoder_buffered(c.d), 0);
	assert_int_equal(st->skipped_bytes, 24 + 30);
	/* and the channel is usable again */
	feed_stream(c.d, &s);
	assert_int_equal(st->records, 4);
	assert_non_null(gstate_proc_by_tgid(c.gs, 8));
	/* a lone header with nothing after it waits */
	s.len = 0;
	rec_proc(&s, OPVM_REC_PROC, 9, 1, 0x9000, 0, "hdr");
	feed(c.d, s.p, 16);
	assert_int_equal(decoder_buffered(c.d), 16);
	ctx_fini(&c);
	st_free(&s);
}

/* Bad framing in various ways; each is followed by a good PROC that must
 * decode, with the bad bytes skipped and one resync counted. */
static void check_bad_header(uint16_t type, uint32_t len, size_t body)
{
	struct stream s = { 0 };
	struct ctx c;
	const struct decoder_stats *st;
	size_t bad_len;

	ctx_init(&c, NULL);
	rec_hello(&s);
	bad_len = s.len;
	rec_bare(&s, type, len, body);
	bad_len = s.len - bad_len;
	rec_proc(&s, OPVM_REC_PROC, 10, 1, 0xa000, 0, "good");
	feed_stream(c.d, &s);
	st = decoder_get_stats(c.d);
	assert_int_equal(st->records, 2);
	assert_int_equal(st->resyncs, 1);
	assert_int_equal(st->skipped_bytes, bad_len);
	assert_int_equal(st->seq_gaps, 1);
	assert_true(st->buffered_peak <= OPVM_REC_MAX);
	assert_non_null(gstate_proc_by_tgid(c.gs, 10));
	ctx_fini(&c);
	st_free(&s);
}

static void test_oversized_len(void **state)
{
	check_bad_header(OPVM_REC_PROC, OPVM_REC_MAX + 8, 200);
	check_bad_header(OPVM_REC_COOKIE, 0xfffffff8u, 48);
	check_bad_header(99, 0x80000000u, 0);
	check_bad_header(OPVM_REC_PROC, 0, 40);
	check_bad_header(OPVM_REC_PROC, 8, 40);
}

static void test_len_not_multiple_of_8(void **state)
{
	check_bad_header(OPVM_REC_PROC, 57, 41);
	check_bad_header(OPVM_REC_SYNC, 33, 17);
	check_bad_header(OPVM_REC_LOST, 20, 4);
}

static void test_len_below_type_size(void **state)
{
	check_bad_header(OPVM_REC_PROC, 48, 32);
	check_bad_header(OPVM_REC_HELLO, 16, 0);
	check_bad_header(OPVM_REC_COOKIE, 56, 40);
	check_bad_header(OPVM_REC_MODULE, 80, 64);
}

static void test_max_len_record(void **state)
{
	struct stream s = { 0 };
	struct ctx c;
	char path[OPVM_PATH_MAX];
	const struct gstate_cookie *ck;

	memset(path, 'a', sizeof(path));
	path[0] = '/';
	ctx_init(&c, NULL);
	rec_hello(&s);
	rec_cookie(&s, 5, "/short");
	/* path of OPVM_PATH_MAX with the record stretched to OPVM_REC_MAX */
	rec_cookie_raw(&s, 6, path, sizeof(path), sizeof(path), 20,
		       OPVM_REC_MAX - sizeof(struct opvm_rec_cookie) - sizeof(path));
	assert_int_equal(s.len, 192 + 72 + OPVM_REC_MAX);
	rec_bare(&s, 99, OPVM_REC_MAX, OPVM_REC_MAX - 16);
	rec_proc(&s, OPVM_REC_PROC, 11, 1, 0xb000, 0, "x");
	feed_stream(c.d, &s);
	assert_int_equal(decoder_get_stats(c.d)->records, 4);
	assert_int_equal(decoder_get_stats(c.d)->unknown_types, 1);
	assert_int_equal(decoder_get_stats(c.d)->buffered_peak, OPVM_REC_MAX);
	ck = gstate_cookie_find(c.gs, 6);
	assert_non_null(ck);
	assert_int_equal(strlen(ck->path), OPVM_PATH_MAX);
	ctx_fini(&c);
	st_free(&s);
}

static void test_wrong_version(void **state)
{
	struct stream s = { 0 };
	struct ctx c;
	const struct decoder_stats *st;

	ctx_init(&c, NULL);
	rec_hello(&s);
	rec_proc(&s, OPVM_REC_PROC, 20, 1, 0x14000, 0, "v1");
	rec_hello_v(&s, 2);
	rec_proc(&s, OPVM_REC_PROC, 21, 1, 0x15000, 0, "v2");
	/* v2 may shape its records differently: a short "PROC" is stepped
	 * over, not a framing error */
	rec_bare(&s, OPVM_REC_PROC, 24, 8);
	rec_bare(&s, 200, 16, 0);
	rec_hello_v(&s, 0xffffffffu);
	rec_proc(&s, OPVM_REC_PROC, 22, 1, 0x16000, 0, "vmax");
	rec_hello(&s);
	rec_proc(&s, OPVM_REC_PROC, 23, 1, 0x17000, 0, "back");
	feed_stream(c.d, &s);
	st = decoder_get_stats(c.d);
	assert_int_equal(st->version_mismatch, 2);
	assert_int_equal(st->ignored, 4);
	assert_int_equal(st->hellos, 2);
	assert_int_equal(st->records, 4);
	assert_int_equal(st->resyncs, 0);
	assert_int_equal(st->seq_gaps, 0);
	assert_null(gstate_proc_by_tgid(c.gs, 21));
	assert_null(gstate_proc_by_tgid(c.gs, 22));
	/* the second v1 HELLO reset the model: 20 is gone, 23 is there */
	assert_null(gstate_proc_by_tgid(c.gs, 20));
	assert_non_null(gstate_proc_by_tgid(c.gs, 23));
	/* the callback saw only what version 1 describes */
	assert_int_equal(c.log.n, 4);
	ctx_fini(&c);
	st_free(&s);
}

static void test_bad_hello(void **state)
{
	struct stream s = { 0 };
	struct ctx c;
	struct opvm_rec_hello *h;
	size_t at;

	ctx_init(&c, NULL);
	/* a version-1 HELLO must be whole and describe sane slots */
	rec_bare(&s, OPVM_REC_HELLO, 24, 8);	/* version 0 */
	at = s.len;
	rec_hello(&s);
	h = (struct opvm_rec_hello *)(s.p + at);
	h->slot_size = htole32(4096);
	at = s.len;
	rec_hello(&s);
	h = (struct opvm_rec_hello *)(s.p + at);
	h->nr_cpus = 0;
	at = s.len;
	rec_hello(&s);
	h = (struct opvm_rec_hello *)(s.p + at);
	h->slot_pa = htole64(UINT64_MAX - 15);
	at = s.len;
	rec_hello(&s);
	h = (struct opvm_rec_hello *)(s.p + at);
	/* unterminated, hostile strings: copied bounded and neutralised */
	memset(h->release, '/', sizeof(h->release));
	memcpy(h->release, "../../etc\x1b", 10);
	memset(h->anchor_name, 'A', sizeof(h->anchor_name));
	feed_stream(c.d, &s);
	assert_int_equal(decoder_get_stats(c.d)->version_mismatch, 1);
	assert_int_equal(decoder_get_stats(c.d)->bad_records, 3);
	assert_int_equal(decoder_get_stats(c.d)->hellos, 1);
	assert_non_null(gstate_get_hello(c.gs));
	assert_int_equal(strlen(gstate_get_hello(c.gs)->release), OPVM_RELEASE_LEN);
	assert_null(strchr(gstate_get_hello(c.gs)->release, '/'));
	assert_null(strchr(gstate_get_hello(c.gs)->release, '\x1b'));
	assert_int_equal(strlen(gstate_get_hello(c.gs)->anchor_name), OPVM_SYMNAME_LEN);
	ctx_fini(&c);
	st_free(&s);
}

/* A HELLO with the switch-ring tail (216 bytes). */
static void rec_hello_switch(struct stream *s, uint64_t pa, uint32_t stride,
			     uint32_t entries)
{
	struct {
		struct opvm_rec_hello h;
		struct opvm_hello_switch sw;
	} r;
	size_t at = s->len;

	rec_hello(s);
	memcpy(&r.h, s->p + at, sizeof(r.h));
	s->len = at;
	hdr_set(&r.h.hdr, OPVM_REC_HELLO, sizeof(r), 0);
	memset(&r.sw, 0, sizeof(r.sw));
	r.sw.switch_pa = htole64(pa);
	r.sw.switch_stride = htole32(stride);
	r.sw.switch_entries = htole32(entries);
	r.sw.tsc_khz = htole32(2100000);
	st_put(s, &r, sizeof(r));
}

static void test_hello_switch(void **state)
{
	const uint32_t stride = 32 + 4096 * 40;
	struct stream s = { 0 };
	const struct chan_hello *h;
	struct ctx c;

	assert_int_equal(sizeof(struct opvm_rec_hello) + sizeof(struct opvm_hello_switch), 216);
	ctx_init(&c, NULL);
	/* no tail: no rings */
	rec_hello(&s);
	feed_stream(c.d, &s);
	h = gstate_get_hello(c.gs);
	assert_non_null(h);
	assert_true(h->switch_pa == 0 && h->switch_entries == 0);
	st_free(&s);

	rec_hello_switch(&s, 0x2000000, stride, 4096);
	feed_stream(c.d, &s);
	h = gstate_get_hello(c.gs);
	assert_int_equal(h->switch_pa, 0x2000000);
	assert_int_equal(h->switch_stride, stride);
	assert_int_equal(h->switch_entries, 4096);
	assert_int_equal(h->tsc_khz, 2100000);
	assert_int_equal(h->nr_cpus, 2);
	st_free(&s);

	/* out of bounds: HELLO applies without rings, the tail is counted */
	rec_hello_switch(&s, 0x2000000, stride, 3000);		/* not a power of 2 */
	rec_hello_switch(&s, 0x2000000, stride - 8, 4096);	/* too small */
	rec_hello_switch(&s, 0x2000000, stride, 1u << 20);	/* too many */
	rec_hello_switch(&s, UINT64_MAX - 4096, stride, 4096);	/* wraps */
	rec_hello_switch(&s, 0x2000004, stride, 4096);		/* unaligned */
	feed_stream(c.d, &s);
	assert_int_equal(decoder_get_stats(c.d)->switch_refused, 5);
	assert_int_equal(decoder_get_stats(c.d)->hellos, 7);
	h = gstate_get_hello(c.gs);
	assert_true(h->switch_pa == 0 && h->switch_entries == 0 && h->tsc_khz == 0);
	ctx_fini(&c);
	st_free(&s);
}

static void test_out_of_order(void **state)
{
	struct stream s = { 0 };
	struct ctx c;
	const struct decoder_stats *st;
	const struct gstate_process *p;

	ctx_init(&c, NULL);
	/* records before any HELLO: applied and counted */
	rec_proc(&s, OPVM_REC_PROC, 30, 1, 0x1e000, 0, "early");
	rec_mmap(&s, 30, 0x1000, 0x2000, 0, 0);
	/* MMAP of a process never announced, with a cookie never sent */
	rec_mmap(&s, 31, 0x1000, 0x2000, 0, 0x99);
	/* exits of unknown tasks */
	rec_exit(&s, OPVM_REC_PROC_EXIT, 32, 32);
	rec_exit(&s, OPVM_REC_THREAD_EXIT, 33, 34);
	rec_munmap(&s, 35, 0x1000, 0x2000);
	rec_module(&s, OPVM_REC_MODULE_FREE, "never_loaded", 0, 0);
	/* nonsense ranges */
	rec_mmap(&s, 30, 0x5000, 0x4000, 0, 0);
	rec_mmap(&s, 30, 0x5000, 0x6000, UINT64_MAX, 0);
	feed_stream(c.d, &s);
	st = decoder_get_stats(c.d);
	assert_int_equal(st->records, 9);
	assert_int_equal(st->before_hello, 9);
	assert_int_equal(st->bad_records, 0);
	assert_true(st->refused >= 4);	/* gstate decides which; never fatal */
	assert_non_null(gstate_proc_by_tgid(c.gs, 30));
	assert_null(gstate_proc_by_tgid(c.gs, 31));

	/* MMAP before its COOKIE, then the COOKIE: the mapping resolves */
	s.len = 0;
	rec_hello(&s);
	rec_proc(&s, OPVM_REC_PROC, 40, 1, 0x28000, 0, "late");
	rec_mmap(&s, 40, 0x400000, 0x410000, 0, 0x55);
	rec_cookie(&s, 0x55, "/bin/late");
	feed_stream(c.d, &s);
	assert_int_equal(st->records, 13);
	assert_int_equal(st->before_hello, 9);
	assert_null(gstate_proc_by_tgid(c.gs, 30));	/* HELLO reset */
	p = gstate_proc_by_tgid(c.gs, 40);
	assert_non_null(p);
	assert_non_null(gstate_map_find(p, 0x400100));
	ctx_fini(&c);
	st_free(&s);
}

static void assert_printable(const char *s)
{
	for (; *s; s++)
		assert_true((unsigned char)*s >= 0x20 && *s != 0x7f);
}

static void test_hostile_cookie_paths(void **state)
{
	static const char nasty[] = "../../../../etc/shadow\n\x1b[2J\x07\r\x7f\x01/x";
	static const char nul_in[] = "/bin/ok\0/../../root";
	struct stream s = { 0 };
	struct ctx c;
	const struct decoder_stats *st;
	const struct gstate_cookie *ck;
	uint8_t bytes[256];

	for (int i = 0; i < 256; i++)
		bytes[i] = (uint8_t)(255 - i);	/* every byte value, NUL last */
	ctx_init(&c, NULL);
	rec_hello(&s);
	rec_cookie_raw(&s, 1, nasty, sizeof(nasty) - 1, sizeof(nasty) - 1, 20, 0);
	rec_cookie_raw(&s, 2, nul_in, sizeof(nul_in) - 1, sizeof(nul_in) - 1, 0, 0);
	rec_cookie_raw(&s, 3, bytes, sizeof(bytes), sizeof(bytes), 32, 0);
	rec_cookie_raw(&s, 4, "", 0, 0, 0, 0);
	/* lies about lengths: bad records, skipped by their length */
	rec_cookie_raw(&s, 5, "/a", 2, 200, 0, 0);		/* past the record */
	rec_cookie_raw(&s, 6, "/a", 2, OPVM_PATH_MAX + 1, 0, 8000);
	rec_cookie_raw(&s, 7, "/a", 2, 2, OPVM_BUILD_ID_MAX + 1, 0);
	rec_cookie_raw(&s, 0, "/a", 2, 2, 0, 0);		/* cookie 0 */
	rec_proc(&s, OPVM_REC_PROC, 50, 1, 0x32000, 1, "after");
	feed_stream(c.d, &s);
	st = decoder_get_stats(c.d);
	assert_int_equal(st->records, 6);
	assert_int_equal(st->bad_records, 4);
	assert_int_equal(st->resyncs, 0);
	ck = gstate_cookie_find(c.gs, 1);
	assert_non_null(ck);
	assert_non_null(ck->path);
	assert_printable(ck->path);
	assert_non_null(strstr(ck->path, "etc/shadow"));
	ck = gstate_cookie_find(c.gs, 2);
	assert_non_null(ck);
	assert_printable(ck->path);
	assert_null(strstr(ck->path, "root"));	/* stops at the NUL */
	ck = gstate_cookie_find(c.gs, 3);
	assert_non_null(ck);
	assert_printable(ck->path);
	assert_int_equal(ck->build_id_len, 32);
	assert_null(gstate_cookie_find(c.gs, 5));
	assert_null(gstate_cookie_find(c.gs, 6));
	assert_null(gstate_cookie_find(c.gs, 7));
	assert_non_null(gstate_proc_by_tgid(c.gs, 50));
	ctx_fini(&c);
	st_free(&s);
}

static void test_seq_gaps(void **state)
{
	struct stream s = { 0 };
	struct ctx c;
	const struct decoder_stats *st;

	ctx_init(&c, NULL);
	rec_hello(&s);					/* 0 */
	rec_sync(&s, 0, 0);				/* 1 */
	s.seq = 5;
	rec_sync(&s, 0, 0);				/* 5: 3 missing */
	rec_sync(&s, 0, 0);				/* 6 */
	s.seq = 3;
	rec_sync(&s, 0, 0);				/* 3: backwards */
	rec_sync(&s, 0, 0);				/* 4 */
	s.seq = 100;
	rec_hello(&s);					/* restarts at 0 */
	rec_sync(&s, 0, 0);				/* 1 */
	s.seq = 0xffffffffu;
	rec_sync(&s, 0, 0);				/* 2^32-1: 2^32-3 missing */
	rec_sync(&s, 0, 0);				/* wraps to 0 */
	feed_stream(c.d, &s);
	st = decoder_get_stats(c.d);
	assert_int_equal(st->records, 10);
	assert_int_equal(st->seq_backwards, 2);	/* 3 after 6, and the jump */
	assert_int_equal(st->seq_gaps, 3);
	ctx_fini(&c);
	st_free(&s);
}

static void test_lost(void **state)
{
	struct stream s = { 0 };
	struct ctx c;
	const struct decoder_stats *st;

	ctx_init(&c, NULL);
	rec_hello(&s);
	rec_lost(&s, 5);
	rec_lost(&s, 7);
	rec_lost(&s, UINT64_MAX);
	feed_stream(c.d, &s);
	st = decoder_get_stats(c.d);
	assert_int_equal(st->lost_records, 3);
	assert_true(st->guest_lost == UINT64_MAX);	/* saturates */
	assert_true(gstate_get_stats(c.gs)->guest_lost >= 12);
	ctx_fini(&c);
	st_free(&s);
}

static void test_garbage_prefix(void **state)
{
	static const uint8_t junk[] = { 0x4f, 0x4f, 0x56, 0x00, 'O', 'V', 0x4f };
	struct stream s = { 0 };
	struct ctx c;
	const struct decoder_stats *st;

	ctx_init(&c, NULL);
	st_put(&s, junk, sizeof(junk));
	rec_hello(&s);
	feed_stream(c.d, &s);
	st = decoder_get_stats(c.d);
	assert_int_equal(st->records, 1);
	assert_int_equal(st->resyncs, 1);
	assert_int_equal(st->skipped_bytes, sizeof(junk));
	ctx_fini(&c);
	st_free(&s);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	/* xorshift64*: fast, and the same bytes on every run */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static long peak_rss_kb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static void test_random_flood(void **state)
{
	const size_t total = 100u << 20;
	static uint8_t chunk[65536];
	static const uint8_t zeros[OPVM_REC_MAX + 16];
	struct stream s = { 0 };
	struct ctx c;
	const struct decoder_stats *st;
	long rss0, rss1;
	size_t fed = 0;
	uint64_t before;

	ctx_init(&c, NULL);
	rss0 = peak_rss_kb();
	while (fed < total) {
		size_t n = 1 + rng() % sizeof(chunk);

		if (n > total - fed)
			n = total - fed;
		for (size_t i = 0; i < n; i += 8) {
			uint64_t r = rng();

			memcpy(chunk + i, &r, n - i < 8 ? n - i : 8);
		}
		feed(c.d, chunk, n);
		fed += n;
		assert_true(decoder_buffered(c.d) <= OPVM_REC_MAX);
	}
	rss1 = peak_rss_kb();
	st = decoder_get_stats(c.d);
	assert_int_equal(st->bytes, total);
	assert_true(st->buffered_peak <= OPVM_REC_MAX);
	assert_true(st->skipped_bytes > total / 2);
	print_message("MEASURED decoder flood: %zu MB random, resyncs %llu, "
		      "skipped %llu bytes, records %llu, buffered peak %llu bytes, "
		      "peak RSS %ld -> %ld kB, gstate %zu procs %zu cookies\n",
		      total >> 20, (unsigned long long)st->resyncs,
		      (unsigned long long)st->skipped_bytes,
		      (unsigned long long)st->records,
		      (unsigned long long)st->buffered_peak, rss0, rss1,
		      gstate_nr_processes(c.gs), gstate_nr_cookies(c.gs));
	/* nothing in the loop allocates: the peak may not move by more than
	 * allocator noise */
	assert_true(rss1 - rss0 < 4096);

	/* OPVM_REC_MAX + 16 zero bytes end any false record the garbage
	 * framed; then the channel decodes again */
	feed(c.d, zeros, sizeof(zeros));
	before = st->records;
	rec_hello(&s);
	rec_proc(&s, OPVM_REC_PROC, 60, 1, 0x3c000, 0, "survivor");
	feed_stream(c.d, &s);
	assert_int_equal(st->records, before + 2);
	assert_non_null(gstate_proc_by_tgid(c.gs, 60));
	ctx_fini(&c);
	st_free(&s);
}

/* A flood of well-formed records: the model's limits hold and each record
 * beyond them is counted as refused, never fatal. */
static void test_valid_flood_bounded(void **state)
{
	struct gstate_limits lim = {
		.max_processes = 1000, .max_threads = 1000,
		.max_mappings_per_proc = 16, .max_mappings = 2000,
		.max_cookies = 100, .max_modules = 10,
	};
	struct stream s = { 0 };
	struct ctx c;
	const struct decoder_stats *st;
	char name[32];

	ctx_init(&c, &lim);
	rec_hello(&s);
	feed_stream(c.d, &s);
	for (uint32_t i = 1; i <= 20000; i++) {
		s.len = 0;
		snprintf(name, sizeof(name), "p%u", i);
		rec_proc(&s, OPVM_REC_PROC, i, 1, (uint64_t)i << 12, 0, name);
		rec_thread(&s, i + 1000000, i, name);
		rec_cookie(&s, i, "/usr/lib/x");
		rec_mmap(&s, i % 50 + 1, (uint64_t)i << 16, ((uint64_t)i << 16) + 4096, 0, i);
		rec_module(&s, OPVM_REC_MODULE, name, (uint64_t)i << 20, 4096);
		feed_stream(c.d, &s);
	}
	st = decoder_get_stats(c.d);
	assert_int_equal(st->records, 1 + 5 * 20000);
	assert_int_equal(st->bad_records, 0);
	assert_true(st->refused > 0);
	assert_true(gstate_nr_processes(c.gs) <= lim.max_processes);
	assert_true(gstate_nr_threads(c.gs) <= lim.max_threads);
	assert_true(gstate_nr_cookies(c.gs) <= lim.max_cookies);
	assert_true(gstate_nr_modules(c.gs) <= lim.max_modules);
	assert_true(gstate_nr_mappings(c.gs) <= lim.max_mappings);
	print_message("MEASURED decoder valid flood: 100001 records, refused %llu, "
		      "gstate %zu procs %zu threads %zu cookies %zu modules %zu maps\n",
		      (unsigned long long)st->refused, gstate_nr_processes(c.gs),
		      gstate_nr_threads(c.gs), gstate_nr_cookies(c.gs),
		      gstate_nr_modules(c.gs), gstate_nr_mappings(c.gs));
	ctx_fini(&c);
	st_free(&s);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Figures for the report, not pass/fail: decoding speed of a valid stream
 * (applied to the model) and of garbage. */
static void test_throughput(void **state)
{
	static uint8_t junk[65536];
	struct stream s = { 0 };
	struct ctx c;
	double t0, t1, t2;
	const int reps = 20000;

	ctx_init(&c, NULL);
	build_session(&s);
	/* drop the HELLO after the first copy: a HELLO resets the model */
	feed_stream(c.d, &s);
	t0 = now_s();
	for (int i = 0; i < reps; i++)
		feed(c.d, s.p + 192, s.len - 192);
	t1 = now_s();
	for (size_t i = 0; i < sizeof(junk); i += 8) {
		uint64_t r = rng();

		memcpy(junk + i, &r, 8);
	}
	for (int i = 0; i < 1600; i++)
		feed(c.d, junk, sizeof(junk));
	t2 = now_s();
	print_message("MEASURED decoder throughput: valid %.0f MB/s (%.2f M records/s "
		      "applied to the model), random %.0f MB/s\n",
		      (double)(s.len - 192) * reps / (t1 - t0) / 1e6,
		      17.0 * reps / (t1 - t0) / 1e6,
		      (double)sizeof(junk) * 1600 / (t2 - t1) / 1e6);
	assert_int_equal(decoder_get_stats(c.d)->records, 18 + 17 * reps);
	ctx_fini(&c);
	st_free(&s);
}

/*
 * The first 143 records opvm.ko sent from the test image (HELLO, the
 * initial walk, SYNC, first events), captured with channel-dump --raw-out;
 * stored as a fuzz seed (2-byte split seed first).  Real output decodes
 * without a single complaint, whatever the split.
 */
#define REAL_CAPTURE "tests/fuzz/corpus/decoder/seed-real-guest"

static void test_real_guest_capture(void **state)
{
	static uint8_t data[16384];
	struct outcome whole, part;
	const uint8_t *p = data + 2;
	struct ctx c;
	FILE *f = fopen(REAL_CAPTURE, "rb");
	size_t n;

	if (!f) {
		print_message("SKIP: %s not found (run from the source tree)\n",
			      REAL_CAPTURE);
		skip();
	}
	n = fread(data, 1, sizeof(data), f);
	fclose(f);
	assert_true(n > 2);
	n -= 2;

	ctx_init(&c, NULL);
	feed(c.d, p, n);
	outcome_take(&c, &whole);
	ctx_fini(&c);
	assert_int_equal(whole.st.records, 143);
	assert_int_equal(whole.st.hellos, 1);
	assert_int_equal(whole.st.syncs, 1);
	assert_int_equal(whole.st.bad_records + whole.st.resyncs +
			 whole.st.skipped_bytes + whole.st.seq_gaps +
			 whole.st.seq_backwards + whole.st.unknown_types +
			 whole.st.before_hello, 0);
	/* exits of tasks that were gone before the walk saw them */
	assert_true(whole.st.refused <= whole.st.records / 10);
	/* 54 tasks, mostly kernel threads; init, opvm-relay and forker
	 * with two executable mappings each; 6 files; 7 modules */
	assert_true(whole.procs > 40);
	assert_true(whole.maps >= 6);
	assert_int_equal(whole.cookies, 6);
	assert_int_equal(whole.modules, 7);
	for (size_t k = 0; k <= n; k++) {
		ctx_init(&c, NULL);
		feed(c.d, p, k);
		feed(c.d, p + k, n - k);
		outcome_take(&c, &part);
		outcome_equal(&whole, &part);
		ctx_fini(&c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_struct_sizes),
		cmocka_unit_test(test_decode_only),
		cmocka_unit_test(test_applies_to_gstate),
		cmocka_unit_test(test_cgroup),
		cmocka_unit_test(test_split_every_boundary),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_oversized_len),
		cmocka_unit_test(test_len_not_multiple_of_8),
		cmocka_unit_test(test_len_below_type_size),
		cmocka_unit_test(test_max_len_record),
		cmocka_unit_test(test_wrong_version),
		cmocka_unit_test(test_bad_hello),
		cmocka_unit_test(test_hello_switch),
		cmocka_unit_test(test_out_of_order),
		cmocka_unit_test(test_hostile_cookie_paths),
		cmocka_unit_test(test_seq_gaps),
		cmocka_unit_test(test_lost),
		cmocka_unit_test(test_garbage_prefix),
		cmocka_unit_test(test_random_flood),
		cmocka_unit_test(test_valid_flood_bounded),
		cmocka_unit_test(test_real_guest_capture),
		cmocka_unit_test(test_throughput),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
