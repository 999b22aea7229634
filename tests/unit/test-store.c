// SPDX-License-Identifier: MIT
/*
 * Sample-file store: round trips through growth, --separate paths, append
 * versus rotation, session.json, and corrupt or truncated files.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/collect/store.h"
#include "tmpdir.h"
#include "lib/array.h"

static const struct store_event ev1[] = {
	{ .name = "CPU_CLK_UNHALTED", .count = 100000, .unit_mask = 0 },
	{ .name = "task-clock", .count = 1000000, .unit_mask = 3 },
};

static uint64_t cnt_of(uint64_t off)
{
	return (off % 7) + 1;
}

static uint64_t off_of(uint64_t i)
{
	return 0xffffffff81000000ULL + i * 13;
}

struct check {
	uint64_t n, sum, bad;
};

static int check_cb(uint64_t off, uint64_t count, void *arg)
{
	struct check *c = arg;
	uint64_t i = (off - 0xffffffff81000000ULL) / 13;

	if ((off - 0xffffffff81000000ULL) % 13 || count != 2 * cnt_of(off) ||
	    i >= 100000)
		c->bad++;
	c->n++;
	c->sum += count;
	return 0;
}

static void test_round_trip(void **state)
{
	char *d = tmpdir_new(), err[256], path[1024];
	struct store *st;
	struct sfile *sf;
	struct store_key k = { .image = "/usr/bin/foo", .tgid = -1, .tid = -1,
			       .cpu = -1 };
	const uint8_t bid[20] = { 1, 2, 3, 4, 5 };
	struct sfile_reader *r;
	const struct sfile_info *inf;
	struct check c = { 0 };
	uint64_t total = 0;
	const uint64_t N = 100000;	/* 64 slots -> 2^18: 12 resizes */

	assert_non_null(d);
	k.build_id = bid;
	k.build_id_len = sizeof(bid);
	st = store_open(d, "guest1", ev1, 2, OPVM_SEP_NONE, 0);
	assert_non_null(st);
	sf = store_get(st, &k);
	assert_non_null(sf);
	assert_ptr_equal(store_get(st, &k), sf);	/* cached */
	for (int pass = 0; pass < 2; pass++)
		for (uint64_t i = 0; i < N; i++) {
			uint64_t o = off_of(i);

			assert_int_equal(sfile_add(sf, o, cnt_of(o)), 0);
			total += cnt_of(o);
		}
	assert_int_equal(sfile_add(sf, 5, 0), 0);	/* no-op */
	assert_int_equal(store_sync(st), 0);
	store_close(st);

	snprintf(path, sizeof(path),
		 "%s/guests/guest1/samples/current/{root}/^usr^bin^foo/{dep}/{root}/^usr^bin^foo/CPU_CLK_UNHALTED.100000.0.all.all.all",
		 d);
	r = sfile_reader_open(path, err, sizeof(err));
	if (!r)
		fail_msg("%s: %s", path, err);
	inf = sfile_reader_info(r);
	assert_string_equal(inf->event, "CPU_CLK_UNHALTED");
	assert_int_equal(inf->count, 100000);
	assert_string_equal(inf->guest, "guest1");
	assert_int_equal(inf->build_id_len, 20);
	assert_memory_equal(inf->build_id, bid, 20);
	assert_int_equal(inf->nr_entries, N);
	assert_int_equal(inf->total, total);
	assert_int_equal(sfile_reader_foreach(r, check_cb, &c), 0);
	assert_int_equal(c.n, N);
	assert_int_equal(c.sum, total);
	assert_int_equal(c.bad, 0);
	sfile_reader_close(r);
	tmpdir_free(d);
}

/* A file made before its image's build-id was known (the guest read it
 * late) gets it in its header at the next store_get() that carries it,
 * unmapped or not; one it has is never replaced. */
static void test_late_build_id(void **state)
{
	char *d = tmpdir_new(), err[256], path[1024];
	struct store_key k = { .image = "/usr/bin/late", .tgid = -1, .tid = -1,
			       .cpu = -1 };
	const uint8_t bid[20] = { 9, 8, 7 }, other[20] = { 1, 1, 1 };
	struct store_stats ss;
	struct sfile_reader *r;
	struct store *st;
	struct sfile *sf;

	assert_non_null(d);
	st = store_open(d, "guest1", ev1, 2, OPVM_SEP_NONE, 0);
	assert_non_null(st);
	sf = store_get(st, &k);
	assert_non_null(sf);
	assert_int_equal(sfile_add(sf, 0x10, 3), 0);
	k.build_id = bid;
	k.build_id_len = sizeof(bid);
	assert_ptr_equal(store_get(st, &k), sf);
	k.build_id = other;		/* another one later: the first stays */
	assert_ptr_equal(store_get(st, &k), sf);
	assert_int_equal(sfile_add(sf, 0x20, 1), 0);
	store_get_stats(st, &ss);
	assert_int_equal(ss.build_ids_late, 1);
	assert_int_equal(store_sync(st), 0);
	store_close(st);
	snprintf(path, sizeof(path),
		 "%s/guests/guest1/samples/current/{root}/^usr^bin^late/{dep}/{root}/^usr^bin^late/CPU_CLK_UNHALTED.100000.0.all.all.all",
		 d);
	r = sfile_reader_open(path, err, sizeof(err));
	if (!r)
		fail_msg("%s: %s", path, err);
	assert_int_equal(sfile_reader_info(r)->build_id_len, 20);
	assert_memory_equal(sfile_reader_info(r)->build_id, bid, 20);
	assert_int_equal(sfile_reader_info(r)->total, 4);
	sfile_reader_close(r);
	tmpdir_free(d);
}

/* Offsets that collide in the hash's top bits still round trip. */
static void test_colliding_offsets(void **state)
{
	char *d = tmpdir_new(), err[256];
	struct store *st = store_open(d, "g", ev1, 1, 0, 0);
	struct store_key k = { .image = "x", .tgid = -1, .tid = -1, .cpu = -1 };
	struct sfile *sf;
	struct sfile_reader *r;
	char path[1024];

	assert_non_null(st);
	sf = store_get(st, &k);
	assert_non_null(sf);
	for (uint64_t i = 0; i < 5000; i++)
		assert_int_equal(sfile_add(sf, i << 40, i + 1), 0);
	assert_int_equal(sfile_add(sf, 0, 1), 0);
	assert_int_equal(sfile_add(sf, UINT64_MAX, 1), 0);
	store_close(st);
	snprintf(path, sizeof(path), "%s/samples/current/{root}/x/{dep}/{root}/x/CPU_CLK_UNHALTED.100000.0.all.all.all",
		 d);
	/* through store_dir's layout */
	snprintf(path, sizeof(path), "%s/guests/g/samples/current/{root}/x/{dep}/{root}/x/CPU_CLK_UNHALTED.100000.0.all.all.all", d);
	r = sfile_reader_open(path, err, sizeof(err));
	if (!r)
		fail_msg("%s", err);
	assert_int_equal(sfile_reader_info(r)->nr_entries, 5001);
	assert_int_equal(sfile_reader_info(r)->total, 5000ULL * 5001 / 2 + 2);
	sfile_reader_close(r);
	tmpdir_free(d);
}

struct seen {
	int n;
	char rel[8][512];
	const char *base;
	int64_t tgid[8], tid[8], cpu[8];
	int kernel[8];
	char app[8][128], image[8][128];
};

static int seen_cb(const struct store_entry *e, void *arg)
{
	struct seen *s = arg;

	if (s->n >= 8)
		return -1;
	snprintf(s->rel[s->n], sizeof(s->rel[0]), "%s", e->path + strlen(s->base));
	s->tgid[s->n] = e->tgid;
	s->tid[s->n] = e->tid;
	s->cpu[s->n] = e->cpu;
	s->kernel[s->n] = e->kernel;
	snprintf(s->app[s->n], 128, "%s", e->app);
	snprintf(s->image[s->n], 128, "%s", e->image);
	s->n++;
	return 0;
}

struct sep_case {
	const char *spec;
	const char *user_rel;	/* libc sample of /bin/sh, tgid 10 tid 11 cpu 2 */
	const char *kern_rel;	/* vmlinux sample of /bin/sh */
};

static void test_separate_paths(void **state)
{
	static const struct sep_case cases[] = {
		{ "none",
		  "/{root}/^lib^libc.so.6/{dep}/{root}/^lib^libc.so.6/CPU_CLK_UNHALTED.100000.0.all.all.all",
		  "/{root}/vmlinux/{dep}/{kern}/vmlinux/CPU_CLK_UNHALTED.100000.0.all.all.all" },
		{ "lib",
		  "/{root}/^bin^sh/{dep}/{root}/^lib^libc.so.6/CPU_CLK_UNHALTED.100000.0.all.all.all",
		  "/{root}/vmlinux/{dep}/{kern}/vmlinux/CPU_CLK_UNHALTED.100000.0.all.all.all" },
		{ "kernel",
		  "/{root}/^bin^sh/{dep}/{root}/^lib^libc.so.6/CPU_CLK_UNHALTED.100000.0.all.all.all",
		  "/{root}/^bin^sh/{dep}/{kern}/vmlinux/CPU_CLK_UNHALTED.100000.0.all.all.all" },
		{ "thread",
		  "/{root}/^lib^libc.so.6/{dep}/{root}/^lib^libc.so.6/CPU_CLK_UNHALTED.100000.0.10.11.all",
		  "/{root}/vmlinux/{dep}/{kern}/vmlinux/CPU_CLK_UNHALTED.100000.0.10.11.all" },
		{ "cpu",
		  "/{root}/^lib^libc.so.6/{dep}/{root}/^lib^libc.so.6/CPU_CLK_UNHALTED.100000.0.all.all.2",
		  "/{root}/vmlinux/{dep}/{kern}/vmlinux/CPU_CLK_UNHALTED.100000.0.all.all.2" },
		{ "thread,cpu,lib",
		  "/{root}/^bin^sh/{dep}/{root}/^lib^libc.so.6/CPU_CLK_UNHALTED.100000.0.10.11.2",
		  "/{root}/vmlinux/{dep}/{kern}/vmlinux/CPU_CLK_UNHALTED.100000.0.10.11.2" },
		{ "all",
		  "/{root}/^bin^sh/{dep}/{root}/^lib^libc.so.6/CPU_CLK_UNHALTED.100000.0.10.11.2",
		  "/{root}/^bin^sh/{dep}/{kern}/vmlinux/CPU_CLK_UNHALTED.100000.0.10.11.2" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *d = tmpdir_new(), base[1024], full[2048];
		unsigned sep;
		struct store *st;
		struct store_key u = { .app = "/bin/sh", .image = "/lib/libc.so.6",
				       .tgid = 10, .tid = 11, .cpu = 2 };
		struct store_key kk = u;
		struct seen s = { 0 };
		struct stat sb;
		size_t skipped = 99;
		int ui = -1;

		kk.image = "vmlinux";
		kk.kernel = 1;
		assert_int_equal(store_parse_separate(cases[i].spec, &sep), 0);
		st = store_open(d, "vm", ev1, 1, sep, 0);
		assert_non_null(st);
		assert_int_equal(store_separate(st), sep);
		assert_int_equal(sfile_add(store_get(st, &u), 0x1000, 1), 0);
		assert_int_equal(sfile_add(store_get(st, &kk), 0x2000, 1), 0);
		assert_int_equal(store_write_meta(st, "{}"), 0);
		snprintf(base, sizeof(base), "%s", store_dir(st));
		store_close(st);

		snprintf(full, sizeof(full), "%s%s", base, cases[i].user_rel);
		if (stat(full, &sb))
			fail_msg("%s: missing %s", cases[i].spec, full);
		snprintf(full, sizeof(full), "%s%s", base, cases[i].kern_rel);
		if (stat(full, &sb))
			fail_msg("%s: missing %s", cases[i].spec, full);

		s.base = base;
		assert_int_equal(store_walk(d, "current", seen_cb, &s, &skipped), 0);
		assert_int_equal(skipped, 0);
		assert_int_equal(s.n, 2);
		for (int j = 0; j < 2; j++)
			if (!strcmp(s.rel[j], cases[i].user_rel))
				ui = j;
		assert_true(ui >= 0);
		assert_string_equal(s.image[ui], "/lib/libc.so.6");
		assert_string_equal(s.app[ui], (sep & OPVM_SEP_LIB) ? "/bin/sh" : "/lib/libc.so.6");
		assert_int_equal(s.kernel[ui], 0);
		assert_int_equal(s.kernel[1 - ui], 1);
		assert_string_equal(s.image[1 - ui], "vmlinux");
		assert_int_equal(s.tgid[ui], (sep & OPVM_SEP_THREAD) ? 10 : -1);
		assert_int_equal(s.tid[ui], (sep & OPVM_SEP_THREAD) ? 11 : -1);
		assert_int_equal(s.cpu[ui], (sep & OPVM_SEP_CPU) ? 2 : -1);
		tmpdir_free(d);
	}
}

struct cg_seen {
	int n, none;
	char cg[4][128];
};

static int cg_cb(const struct store_entry *e, void *arg)
{
	struct cg_seen *s = arg;

	if (!e->cgroup) {
		s->none++;
		return 0;
	}
	if (s->n < 4)
		snprintf(s->cg[s->n++], 128, "%s", e->cgroup);
	return 0;
}

/* A process's cgroup keeps its samples apart whatever the separation,
 * under {cg}<mangled path> (store layout 2); files of no cgroup stay
 * under {root}, as every layout-1 tree's. */
static void test_cgroup_paths(void **state)
{
	char *d = tmpdir_new(), full[2048];
	struct store *st = store_open(d, "vm", ev1, 1, OPVM_SEP_NONE, 0);
	struct store_key a = { .image = "/bin/cpuloop", .tgid = -1, .tid = -1, .cpu = -1,
			       .cgroup = "/opvm-a" };
	struct store_key b = a, none = a, evil = a;
	struct cg_seen s = { 0 };
	struct sfile *fa, *fb;
	struct stat sb;
	size_t skipped = 99;

	assert_non_null(st);
	b.cgroup = "/opvm-b";
	none.cgroup = NULL;
	evil.cgroup = "/../../x/{root}";
	fa = store_get(st, &a);
	fb = store_get(st, &b);
	assert_non_null(fa);
	assert_non_null(fb);
	assert_ptr_not_equal(fa, fb);
	assert_ptr_equal(store_get(st, &(struct store_key){ .image = "/bin/cpuloop", .tgid = -1,
							   .tid = -1, .cpu = -1,
							   .cgroup = "/opvm-a" }), fa);
	assert_int_equal(sfile_add(fa, 0x10, 3), 0);
	assert_int_equal(sfile_add(fb, 0x10, 5), 0);
	assert_int_equal(sfile_add(store_get(st, &none), 0x10, 7), 0);
	assert_int_equal(sfile_add(store_get(st, &evil), 0x10, 1), 0);
	snprintf(full, sizeof(full), "%s/{cg}^opvm-a/^bin^cpuloop/{dep}/{root}/^bin^cpuloop/"
		 "CPU_CLK_UNHALTED.100000.0.all.all.all", store_dir(st));
	if (stat(full, &sb))
		fail_msg("missing %s", full);
	store_close(st);
	assert_int_equal(store_walk(d, "current", cg_cb, &s, &skipped), 0);
	assert_int_equal(skipped, 0);
	assert_int_equal(s.none, 1);
	assert_int_equal(s.n, 3);
	for (int i = 0; i < 3; i++)
		assert_true(!strcmp(s.cg[i], "/opvm-a") || !strcmp(s.cg[i], "/opvm-b") ||
			    !strcmp(s.cg[i], "/../../x/{root}"));
	tmpdir_free(d);
}

static int count_cb(const struct store_entry *e, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

static int stop_cb(const struct store_entry *e, void *arg)
{
	return 42;
}

/* The walk files only well-formed entries; junk is counted, temporary
 * files and session.json are not, and a nonzero callback stops it. */
static void test_walk_junk(void **state)
{
	char *d = tmpdir_new(), p[1400];
	struct store_key k = { .image = "/bin/x", .tgid = -1, .tid = -1, .cpu = -1 };
	struct store *st = store_open(d, "g", ev1, 1, 0, 0);
	const char *junk_files[] = {
		"{root}/stray",				/* file where a dir goes */
		"{root}/^bin^x/{dep}/{root}/^bin^x/NOTASAMPLE",
		"{root}/^bin^x/{dep}/{root}/^bin^x/EV.1.0.all.all",	/* 5 fields */
		"{root}/^bin^x/{dep}/{root}/^bin^x/EV.x.0.all.all.all",
		"{root}/^bin^x/{dep}/{root}/^bin^x/EV.1.0.-3.all.all",
		"{root}/^bin^x/{dep}/{root}/^bin^x/EV.1.0.all.all.all.all",
	};
	const char *junk_dirs[] = { "{root}/%zz", "{root}/^bin^x/{other}", "extra" };
	const char *quiet[] = { "{root}/^bin^x/{dep}/{root}/^bin^x/.tmp.1.tmp" };
	size_t skipped = 0;
	int n = 0;

	assert_non_null(st);
	assert_int_equal(sfile_add(store_get(st, &k), 1, 1), 0);
	assert_int_equal(store_write_meta(st, "{}"), 0);
	for (size_t i = 0; i < 6; i++) {
		snprintf(p, sizeof(p), "%s/%s", store_dir(st), junk_files[i]);
		FILE *f = fopen(p, "w");

		assert_non_null(f);
		fclose(f);
	}
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", store_dir(st), junk_dirs[i]);
		assert_int_equal(mkdir(p, 0755), 0);
	}
	snprintf(p, sizeof(p), "%s/%s", store_dir(st), quiet[0]);
	fclose(fopen(p, "w"));
	store_close(st);
	assert_int_equal(store_walk(d, "current", count_cb, &n, &skipped), 0);
	assert_int_equal(n, 1);
	assert_int_equal(skipped, 9);
	assert_int_equal(store_walk(d, "current", stop_cb, NULL, NULL), 42);
	assert_int_equal(store_walk(d, "previous", count_cb, &n, NULL), 0);
	assert_int_equal(store_walk(d, "..", count_cb, &n, NULL), -EINVAL);
	assert_int_equal(store_walk(d, "a/b", count_cb, &n, NULL), -EINVAL);
	snprintf(p, sizeof(p), "%s/none", d);
	assert_int_equal(store_walk(p, "current", count_cb, &n, NULL), -ENOENT);
	tmpdir_free(d);
}

static void test_parse_separate(void **state)
{
	unsigned m;

	assert_int_equal(store_parse_separate("none", &m), 0);
	assert_int_equal(m, 0);
	assert_int_equal(store_parse_separate("lib", &m), 0);
	assert_int_equal(m, OPVM_SEP_LIB);
	assert_int_equal(store_parse_separate("kernel", &m), 0);
	assert_int_equal(m, OPVM_SEP_KERNEL | OPVM_SEP_LIB);
	assert_int_equal(store_parse_separate("thread,cpu", &m), 0);
	assert_int_equal(m, OPVM_SEP_THREAD | OPVM_SEP_CPU);
	assert_int_equal(store_parse_separate("all", &m), 0);
	assert_int_equal(m, OPVM_SEP_ALL);
	assert_int_equal(store_parse_separate("", &m), -EINVAL);
	assert_int_equal(store_parse_separate("lib,", &m), -EINVAL);
	assert_int_equal(store_parse_separate(",lib", &m), -EINVAL);
	assert_int_equal(store_parse_separate("libx", &m), -EINVAL);
	assert_int_equal(store_parse_separate("thread,bogus", &m), -EINVAL);
}

struct one {
	uint64_t off, count;
};

static int one_cb(uint64_t o, uint64_t c, void *a)
{
	struct one *q = a;

	if (o == q->off)
		q->count = c;
	return 0;
}

static uint64_t read_one(const char *path, uint64_t off)
{
	char err[256];
	struct sfile_reader *r = sfile_reader_open(path, err, sizeof(err));
	struct one q = { off, 0 };

	if (!r)
		fail_msg("%s: %s", path, err);
	assert_int_equal(sfile_reader_foreach(r, one_cb, &q), 0);
	sfile_reader_close(r);
	return q.count;
}

static void test_add_many(void **state)
{
	char *d = tmpdir_new(), err[256], path[1200];
	struct store *st = store_open(d, "g", ev1, 1, 0, 0);
	struct store_key k = { .image = "m", .tgid = -1, .tid = -1, .cpu = -1 };
	uint64_t offs[1000];
	struct sfile_reader *r;

	assert_non_null(st);
	for (int i = 0; i < 1000; i++)
		offs[i] = (uint64_t)(i % 300) * 32;
	for (int rep = 0; rep < 3; rep++) {
		int e = 0;

		assert_int_equal(sfile_add_many(store_get(st, &k), offs, 1000, &e), 0);
		assert_int_equal(e, 0);
	}
	snprintf(path, sizeof(path), "%s/{root}/m/{dep}/{root}/m/CPU_CLK_UNHALTED.100000.0.all.all.all",
		 store_dir(st));
	store_close(st);
	r = sfile_reader_open(path, err, sizeof(err));
	if (!r)
		fail_msg("%s", err);
	assert_int_equal(sfile_reader_info(r)->nr_entries, 300);
	assert_int_equal(sfile_reader_info(r)->total, 3000);
	sfile_reader_close(r);
	assert_int_equal(read_one(path, 0), 12);	/* i = 0, 300, 600, 900; 3 reps */
	tmpdir_free(d);
}

static void *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	buf = malloc((size_t)n);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* sfile_add_many() leaves the file byte for byte as one sfile_add() per
 * offset does: new offsets in the middle of runs (table growth included),
 * repeats, a count at the saturation limit. */
static void test_add_many_same_bytes(void **state)
{
	char *d1 = tmpdir_new(), *d2 = tmpdir_new(), path[2][1200];
	struct store *st1 = store_open(d1, "g", ev1, 1, 0, 0);
	struct store *st2 = store_open(d2, "g", ev1, 1, 0, 0);
	struct store_key k = { .image = "m", .tgid = -1, .tid = -1, .cpu = -1 };
	enum { N = 20000 };
	uint64_t *offs = malloc(N * sizeof(*offs)), x = 12345;
	struct sfile *a, *b;
	void *ba, *bb;
	size_t la, lb;

	assert_non_null(st1);
	assert_non_null(st2);
	assert_non_null(offs);
	a = store_get(st1, &k);
	b = store_get(st2, &k);
	assert_non_null(a);
	assert_non_null(b);
	for (int i = 0; i < N; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		/* skewed: low offsets repeat, high ones are mostly new */
		offs[i] = ((x >> 33) % (1 + (uint64_t)i / 4)) * 16;
	}
	assert_int_equal(sfile_add(a, 0x40, UINT64_MAX - 3), 0);
	assert_int_equal(sfile_add(b, 0x40, UINT64_MAX - 3), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(sfile_add(a, offs[i], 1), 0);
	for (int i = 0; i < N;) {
		int n = 1 + i % 700, e = 0;

		n = n > N - i ? N - i : n;
		assert_int_equal(sfile_add_many(b, offs + i, (size_t)n, &e), 0);
		assert_int_equal(e, 0);
		i += n;
	}
	for (int s = 0; s < 2; s++)
		snprintf(path[s], sizeof(path[s]),
			 "%s/{root}/m/{dep}/{root}/m/CPU_CLK_UNHALTED.100000.0.all.all.all",
			 store_dir(s ? st2 : st1));
	store_close(st1);
	store_close(st2);
	ba = slurp(path[0], &la);
	bb = slurp(path[1], &lb);
	assert_int_equal(la, lb);
	assert_memory_equal(ba, bb, la);
	free(ba);
	free(bb);
	free(offs);
	tmpdir_free(d1);
	tmpdir_free(d2);
}

static void test_append_and_rotate(void **state)
{
	char *d = tmpdir_new(), cur[1024], prev[1024], f[1200];
	struct store_key k = { .image = "/bin/x", .tgid = -1, .tid = -1, .cpu = -1 };
	const char *rel = "/{root}/^bin^x/{dep}/{root}/^bin^x/CPU_CLK_UNHALTED.100000.0.all.all.all";
	struct store *st;
	struct stat sb;

	/* run 1 */
	st = store_open(d, "g", ev1, 1, 0, 0);
	assert_non_null(st);
	snprintf(cur, sizeof(cur), "%s", store_dir(st));
	snprintf(prev, sizeof(prev), "%.*s/previous", (int)(strlen(cur) - 8), cur);
	assert_int_equal(sfile_add(store_get(st, &k), 0x10, 5), 0);
	store_close(st);
	/* run 2, append: counts add up, growth continues from the old file */
	st = store_open(d, "g", ev1, 1, 0, STORE_APPEND);
	assert_non_null(st);
	assert_int_equal(sfile_add(store_get(st, &k), 0x10, 2), 0);
	for (uint64_t i = 0; i < 1000; i++)
		assert_int_equal(sfile_add(store_get(st, &k), 0x100 + i, 1), 0);
	store_close(st);
	snprintf(f, sizeof(f), "%s%s", cur, rel);
	assert_int_equal(read_one(f, 0x10), 7);
	assert_int_equal(read_one(f, 0x100 + 999), 1);
	assert_int_not_equal(stat(prev, &sb), 0);
	/* run 3, no append: current -> previous, fresh current */
	st = store_open(d, "g", ev1, 1, 0, 0);
	assert_non_null(st);
	assert_int_equal(sfile_add(store_get(st, &k), 0x10, 1), 0);
	store_close(st);
	assert_int_equal(read_one(f, 0x10), 1);
	snprintf(f, sizeof(f), "%s%s", prev, rel);
	assert_int_equal(read_one(f, 0x10), 7);
	/* run 4: the old previous is removed, run 3's data moves there */
	st = store_open(d, "g", ev1, 1, 0, 0);
	assert_non_null(st);
	store_close(st);
	assert_int_equal(read_one(f, 0x10), 1);
	snprintf(f, sizeof(f), "%s%s", cur, rel);
	assert_int_not_equal(stat(f, &sb), 0);
	tmpdir_free(d);
}

/* Appending to a file whose header disagrees with the event is refused,
 * not mixed; so is a foreign event index. */
static void test_append_mismatch(void **state)
{
	char *d = tmpdir_new(), p[1200];
	struct store_key k = { .image = "a", .tgid = -1, .tid = -1, .cpu = -1 };
	struct store *st;
	uint64_t bogus = 5;
	int fd;

	st = store_open(d, "g", ev1, 1, 0, 0);
	assert_non_null(st);
	assert_int_equal(sfile_add(store_get(st, &k), 1, 1), 0);
	snprintf(p, sizeof(p), "%s/{root}/a/{dep}/{root}/a/CPU_CLK_UNHALTED.100000.0.all.all.all",
		 store_dir(st));
	store_close(st);
	fd = open(p, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, &bogus, 8, 48), 8);	/* header count */
	close(fd);
	st = store_open(d, "g", ev1, 1, 0, STORE_APPEND);
	assert_non_null(st);
	assert_null(store_get(st, &k));
	assert_int_equal(errno, EBADMSG);
	k.event = 1;
	assert_null(store_get(st, &k));
	assert_int_equal(errno, EINVAL);
	store_close(st);
	tmpdir_free(d);
}

/* A reader opening a file that a live writer keeps growing always gets a
 * consistent table, and never sees a count go down. */
static void test_read_while_writing(void **state)
{
	char *d = tmpdir_new(), path[1200], err[256];
	struct store_key k = { .image = "live", .tgid = -1, .tid = -1, .cpu = -1 };
	struct store *st = store_open(d, "g", ev1, 1, 0, 0);
	uint64_t last_total = 0, last_n = 0;
	int fails = 0, opens = 0, status;
	pid_t pid;

	assert_non_null(st);
	assert_int_equal(sfile_add(store_get(st, &k), 0, 1), 0);
	assert_int_equal(store_sync(st), 0);
	snprintf(path, sizeof(path), "%s/{root}/live/{dep}/{root}/live/CPU_CLK_UNHALTED.100000.0.all.all.all",
		 store_dir(st));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sfile *sf = store_get(st, &k);

		for (uint64_t i = 1; i < 1000000; i++) {
			if (sfile_add(sf, i * 8, 1))
				_exit(1);
			if (i % 1000 == 0)
				store_sync(st);
		}
		store_sync(st);
		_exit(0);
	}
	for (;;) {
		int done = waitpid(pid, &status, WNOHANG) == pid;
		struct sfile_reader *r = sfile_reader_open(path, err, sizeof(err));

		opens++;
		if (!r) {
			print_message("live read failed: %s\n", err);
			fails++;
		} else {
			const struct sfile_info *inf = sfile_reader_info(r);

			assert_true(inf->total >= last_total);
			assert_true(inf->nr_entries >= last_n);
			assert_int_equal(inf->total, inf->nr_entries);
			last_total = inf->total;
			last_n = inf->nr_entries;
			sfile_reader_close(r);
		}
		if (done)
			break;
	}
	print_message("%d live opens, last saw %llu entries\n", opens,
		      (unsigned long long)last_n);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(fails, 0);
	assert_int_equal(last_n, 1000000);
	store_close(st);
	tmpdir_free(d);
}

static void test_write_meta(void **state)
{
	char *d = tmpdir_new(), p[1200], buf[64] = { 0 };
	struct store *st = store_open(d, "g", ev1, 1, 0, 0);
	FILE *f;

	assert_non_null(st);
	assert_int_equal(store_write_meta(st, "{\"a\":1}"), 0);
	assert_int_equal(store_write_meta(st, "{\"a\":2}"), 0);
	snprintf(p, sizeof(p), "%s/session.json", store_dir(st));
	f = fopen(p, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, "{\"a\":2}");
	store_close(st);
	tmpdir_free(d);
}

/* Total samples and files of every sample file under d's guest g. */
struct tree_sum {
	uint64_t files, total, overflow, ovf_entries;
};

static int sum_cb(const struct store_entry *e, void *arg)
{
	struct tree_sum *t = arg;
	struct sfile_reader *r = sfile_reader_open(e->path, NULL, 0);

	assert_non_null(r);
	t->files++;
	t->total += sfile_reader_info(r)->total;
	if (!strcmp(e->image, "{overflow}") && !strcmp(e->app, "{overflow}")) {
		t->overflow += sfile_reader_info(r)->total;
		t->ovf_entries += sfile_reader_info(r)->nr_entries;
	}
	sfile_reader_close(r);
	return 0;
}

static struct tree_sum tree_sum(const char *d)
{
	struct tree_sum t = { 0 };

	assert_int_equal(store_walk(d, "current", sum_cb, &t, NULL), 0);
	return t;
}

/* A file at its size limit sends new offsets to the overflow bucket: the
 * total still adds up, and the bucket keeps one entry. */
static void test_enospc(void **state)
{
	char *d = tmpdir_new();
	struct store_key k = { .image = "a", .tgid = -1, .tid = -1, .cpu = -1 };
	struct store *st = store_open(d, "g", ev1, 1, 0, 0);
	struct store_stats ss;
	struct tree_sum t;
	struct sfile *sf;
	uint64_t i;

	assert_non_null(st);
	store_set_file_limit(st, 64 * 1024);
	sf = store_get(st, &k);
	assert_non_null(sf);
	for (i = 0; i < 100000; i++)
		assert_int_equal(sfile_add(sf, i, 1), 0);
	/* existing offsets still count in the file itself */
	assert_int_equal(sfile_add(sf, 0, 1), 0);
	store_get_stats(st, &ss);
	assert_true(ss.overflow_samples > 90000);
	assert_true(ss.overflow_samples < 99000);
	assert_int_equal(ss.files, 2);
	store_close(st);
	t = tree_sum(d);
	assert_int_equal(t.files, 2);
	assert_int_equal(t.total, 100001);
	assert_int_equal(t.overflow, ss.overflow_samples);
	assert_int_equal(t.ovf_entries, 1);
	tmpdir_free(d);
}

/* A full disk is -ENOSPC from sfile_add(), never a SIGBUS, and the file
 * keeps everything added before.  Needs a small tmpfs (root). */
static void test_disk_full(void **state)
{
	char *d = tmpdir_new(), err[256], path[1200];
	struct store_key k = { .image = "a", .tgid = -1, .tid = -1, .cpu = -1 };
	struct store *st;
	struct sfile *sf;
	struct sfile_reader *r;
	uint64_t i, total = 0;
	int ret = 0;

	assert_non_null(d);
	if (mount("tmpfs", d, "tmpfs", 0, "size=256k,mode=0700")) {
		print_message("SKIP: cannot mount a small tmpfs (%s); disk-full case not run\n",
			      strerror(errno));
		tmpdir_free(d);
		skip();
	}
	st = store_open(d, "g", ev1, 1, 0, 0);
	sf = st ? store_get(st, &k) : NULL;
	/* Past the file's room, samples go to the overflow bucket (if the
	 * disk still had a block for it) or fail with -ENOSPC. */
	for (i = 0; sf && i < 200000 && ret != -ENOSPC; i++) {
		ret = sfile_add(sf, i * 8, 2);
		if (!ret)
			total += 2;
	}
	snprintf(path, sizeof(path), "%s/guests/g/samples/current/{root}/a/{dep}/{root}/a/CPU_CLK_UNHALTED.100000.0.all.all.all", d);
	store_close(st);
	r = sfile_reader_open(path, err, sizeof(err));
	uint64_t got = r ? sfile_reader_info(r)->total : 0;
	struct tree_sum t = tree_sum(d);

	sfile_reader_close(r);
	umount2(d, MNT_DETACH);
	assert_non_null(sf);
	assert_true(ret == -ENOSPC || t.overflow > 0);
	if (!r)
		fail_msg("%s", err);
	assert_true(got > 1000);
	assert_int_equal(t.total, total);
	assert_int_equal(got + t.overflow, total);
	tmpdir_free(d);
}

/* The rename flood the caps are for: every key a new image, as a guest
 * that renames one cookie per sample makes them.  Past max_files the
 * keys share the overflow bucket; the totals add up and the tree holds
 * max_files + 1 files. */
static void test_cap_files(void **state)
{
	char *d = tmpdir_new(), img[64];
	struct store_limits lim = { .max_files = 10 };
	struct store *st = store_open(d, "g", ev1, 2, OPVM_SEP_LIB, 0);
	struct store_stats ss;
	struct sfile *ovf = NULL;
	struct tree_sum t;

	assert_non_null(st);
	store_set_limits(st, &lim);
	for (int i = 0; i < 500; i++) {
		struct store_key k = { .app = "/bin/app", .image = img,
				       .tgid = -1, .tid = -1, .cpu = -1 };
		struct sfile *sf;

		snprintf(img, sizeof(img), "/renamed/%d", i);
		sf = store_get(st, &k);
		assert_non_null(sf);
		if (i >= 10) {
			if (!ovf)
				ovf = sf;
			assert_ptr_equal(sf, ovf);	/* one bucket */
		}
		assert_int_equal(sfile_add(sf, 0x1000 + (uint64_t)i * 64, 3), 0);
	}
	/* a second event has a bucket of its own */
	struct store_key k2 = { .image = "/x", .event = 1, .tgid = -1, .tid = -1, .cpu = -1 };
	struct sfile *o2 = store_get(st, &k2);

	assert_non_null(o2);
	assert_ptr_not_equal(o2, ovf);
	assert_int_equal(sfile_add(o2, 5, 1), 0);
	store_get_stats(st, &ss);
	assert_int_equal(ss.files, 12);
	assert_int_equal(ss.overflow_keys, 491);
	assert_int_equal(ss.overflow_samples, 490 * 3 + 1);
	/* {root}/app/{dep}/{root}/image: the first key makes 5, each other
	 * image 1; the buckets share 4 ({overflow}/{dep}/{root}/{overflow}) */
	assert_int_equal(ss.dirs, 5 + 9 + 4);
	store_close(st);
	t = tree_sum(d);
	assert_int_equal(t.files, 12);
	assert_int_equal(t.total, 500 * 3 + 1);
	assert_int_equal(t.overflow, 490 * 3 + 1);
	assert_int_equal(t.ovf_entries, 2);	/* offset 0, per event */
	tmpdir_free(d);
}

/* Directories and disk are capped too: a key that would need one more
 * directory, or a file that would grow past the disk cap, overflows. */
static void test_cap_dirs_disk(void **state)
{
	char *d = tmpdir_new(), app[64];
	struct store_limits lim = { .max_dirs = 9, .max_disk = 64 * 1024 };
	struct store *st = store_open(d, "g", ev1, 1, OPVM_SEP_LIB, 0);
	struct store_stats ss;
	struct tree_sum t;
	uint64_t added = 0;

	assert_non_null(st);
	store_set_limits(st, &lim);
	for (int i = 0; i < 50; i++) {
		struct store_key k = { .app = app, .image = "/lib/libc.so.6",
				       .tgid = -1, .tid = -1, .cpu = -1 };
		struct sfile *sf;

		snprintf(app, sizeof(app), "/bin/app%d", i);
		sf = store_get(st, &k);
		assert_non_null(sf);
		assert_int_equal(sfile_add(sf, 7, 1), 0);
		added++;
	}
	store_get_stats(st, &ss);
	assert_int_equal(ss.dirs, 5 + 4 + 4);	/* two apps, then the bucket */
	assert_int_equal(ss.files, 3);
	/* one file grows until the disk cap stops it */
	struct store_key k = { .app = "/bin/app0", .image = "/lib/libc.so.6",
			       .tgid = -1, .tid = -1, .cpu = -1 };
	struct sfile *sf = store_get(st, &k);

	for (uint64_t i = 0; i < 20000; i++, added++)
		assert_int_equal(sfile_add(sf, 0x400000 + i * 16, 1), 0);
	store_get_stats(st, &ss);
	assert_true(ss.disk_bytes <= 64 * 1024 + 4 * 4096);
	assert_true(ss.overflow_samples > 10000);
	store_close(st);
	t = tree_sum(d);
	assert_int_equal(t.total, added);
	assert_int_equal(t.overflow, ss.overflow_samples);
	assert_int_equal(t.files, 3);
	{
		char cmd[1200];
		FILE *f;
		unsigned long kb = 0;

		snprintf(cmd, sizeof(cmd), "du -sk '%s/guests/g/samples/current'", d);
		f = popen(cmd, "r");
		assert_non_null(f);
		assert_int_equal(fscanf(f, "%lu", &kb), 1);
		pclose(f);
		print_message("du: %lu KiB for a 64 KiB cap (store counted %llu)\n", kb,
			      (unsigned long long)ss.disk_bytes);
		assert_true(kb <= 64 + 4 * 4 + 8);
	}
	tmpdir_free(d);
}

/* Lines of /proc/self/maps naming a file under dir. */
static int maps_under(const char *dir)
{
	char line[2048], real[1024];
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0;

	assert_non_null(realpath(dir, real));
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, real))
			n++;
	fclose(f);
	return n;
}

/* Many files, few mappings: cold files are unmapped, a sample to one maps
 * it again, nothing is lost. */
static void test_lru_mapped(void **state)
{
	char *d = tmpdir_new(), img[64];
	struct store_limits lim = { .max_mapped = 8 };
	struct store *st = store_open(d, "g", ev1, 1, 0, 0);
	struct sfile *sf[100];
	struct store_stats ss;
	struct tree_sum t;
	int peak = 0;

	assert_non_null(st);
	store_set_limits(st, &lim);
	for (int i = 0; i < 100; i++) {
		struct store_key k = { .image = img, .tgid = -1, .tid = -1, .cpu = -1 };

		snprintf(img, sizeof(img), "/img/%d", i);
		sf[i] = store_get(st, &k);
		assert_non_null(sf[i]);
	}
	for (int round = 0; round < 5; round++) {
		for (int i = 0; i < 100; i++) {
			/* file 0 is hot: it must stay mapped (second chance) */
			assert_int_equal(sfile_add(sf[0], 1, 1), 0);
			for (uint64_t o = 0; o < 200; o++)
				assert_int_equal(sfile_add(sf[i], o * 8, 1), 0);
			int m = maps_under(d);

			if (m > peak)
				peak = m;
		}
		assert_int_equal(store_sync(st), 0);
	}
	store_get_stats(st, &ss);
	print_message("100 files, max_mapped 8: peak %d mapped, %llu unmaps, %llu remaps\n",
		      peak, (unsigned long long)ss.unmaps, (unsigned long long)ss.remaps);
	assert_true(peak <= 8);
	assert_true(ss.mapped <= 8);
	assert_true(ss.mapped_peak <= 8);
	assert_true(ss.unmaps >= 400);
	assert_true(ss.remaps >= 400);
	assert_int_equal(ss.files, 100);
	assert_int_equal(ss.overflow_samples, 0);
	assert_true(store_mapped_total() >= ss.mapped);
	/* a reader sees every published count of an unmapped file */
	store_close(st);
	assert_int_equal(maps_under(d), 0);
	t = tree_sum(d);
	assert_int_equal(t.files, 100);
	assert_int_equal(t.total, 5 * 100 * 201);
	tmpdir_free(d);
}

static mode_t mode_of(const char *d, const char *rel)
{
	char p[1200];
	struct stat sb;

	snprintf(p, sizeof(p), "%s/%s", d, rel);
	assert_int_equal(lstat(p, &sb), 0);
	return sb.st_mode & 07777;
}

/* The tree is private whatever the umask; STORE_PUBLIC defers to it. */
static void test_modes(void **state)
{
	static const char *const dirs[] = {
		"guests", "guests/g", "guests/g/samples", "guests/g/samples/current",
		"guests/g/samples/current/{root}",
		"guests/g/samples/current/{root}/^bin^ls/{dep}/{root}/^bin^ls",
	};
	const char *file = "guests/g/samples/current/{root}/^bin^ls/{dep}/{root}/^bin^ls/"
			   "CPU_CLK_UNHALTED.100000.0.all.all.all";
	struct store_key k = { .image = "/bin/ls", .tgid = -1, .tid = -1, .cpu = -1 };
	mode_t old = umask(0);

	for (int pub = 0; pub < 2; pub++) {
		char *d = tmpdir_new();
		struct store *st;

		umask(pub ? 022 : 0);
		st = store_open(d, "g", ev1, 1, 0, pub ? STORE_PUBLIC : 0);
		assert_non_null(st);
		assert_non_null(store_get(st, &k));
		assert_int_equal(store_write_meta(st, "{}"), 0);
		store_close(st);
		for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
			assert_int_equal(mode_of(d, dirs[i]), pub ? 0755 : 0700);
		assert_int_equal(mode_of(d, file), pub ? 0644 : 0600);
		assert_int_equal(mode_of(d, "guests/g/samples/current/session.json"),
				 pub ? 0644 : 0600);
		tmpdir_free(d);
	}
	umask(old);
}

static void test_bad_events(void **state)
{
	char *d = tmpdir_new();
	struct store_event bad = { .name = "A.B", .count = 1 };
	struct store_event bad2 = { .name = "../x", .count = 1 };
	struct store_event empty = { .name = "", .count = 1 };

	assert_null(store_open(d, "g", &bad, 1, 0, 0));
	assert_int_equal(errno, EINVAL);
	assert_null(store_open(d, "g", &bad2, 1, 0, 0));
	assert_null(store_open(d, "g", &empty, 1, 0, 0));
	assert_null(store_open(d, "g", ev1, 0, 0, 0));
	struct store_event two[2] = { ev1[0], ev1[0] };

	assert_null(store_open(d, "g", two, 2, 0, 0));
	assert_int_equal(errno, EINVAL);
	two[1].count = 1000;
	struct store *st = store_open(d, "g", two, 2, 0, 0);

	assert_non_null(st);
	store_close(st);
	tmpdir_free(d);
}

/* A second writer for the same guest tree is refused; another guest is
 * fine; the lock goes with store_close(). */
static void test_one_writer(void **state)
{
	char *d = tmpdir_new();
	struct store *a = store_open(d, "g", ev1, 1, 0, 0);
	struct store *b;

	assert_non_null(a);
	assert_null(store_open(d, "g", ev1, 1, 0, STORE_APPEND));
	assert_int_equal(errno, EBUSY);
	assert_null(store_open(d, "g", ev1, 1, 0, 0));
	assert_int_equal(errno, EBUSY);
	b = store_open(d, "h", ev1, 1, 0, 0);
	assert_non_null(b);
	store_close(b);
	store_close(a);
	b = store_open(d, "g", ev1, 1, 0, STORE_APPEND);
	assert_non_null(b);
	store_close(b);
	tmpdir_free(d);
}

/* ---- corrupt files ------------------------------------------------------ */

static char *make_file(const char *d, uint64_t n, size_t *len)
{
	struct store_key k = { .image = "img", .tgid = -1, .tid = -1, .cpu = -1 };
	struct store *st = store_open(d, "g", ev1, 1, 0, 0);
	char *p;

	assert_non_null(st);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(sfile_add(store_get(st, &k), i * 4, 1), 0);
	assert_int_equal(asprintf(&p, "%s/{root}/img/{dep}/{root}/img/CPU_CLK_UNHALTED.100000.0.all.all.all",
				  store_dir(st)) > 0, 1);
	store_close(st);
	struct stat sb;

	assert_int_equal(stat(p, &sb), 0);
	*len = (size_t)sb.st_size;
	return p;
}

static int expect_bad(const char *path, const char *what)
{
	char err[256] = "";
	struct sfile_reader *r = sfile_reader_open(path, err, sizeof(err));

	if (r) {
		sfile_reader_close(r);
		fail_msg("%s: accepted", what);
	}
	assert_true(strlen(err) > 0);
	assert_null(strchr(err, '\n'));
	return errno;
}

static void copy_trunc(const char *src, const char *dst, size_t len)
{
	char buf[65536];
	int in = open(src, O_RDONLY), out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ssize_t n = read(in, buf, sizeof(buf));

	assert_true(n > 0);
	assert_true(len <= (size_t)n);
	assert_int_equal(write(out, buf, len), (ssize_t)len);
	close(in);
	close(out);
}

static void patch(const char *src, const char *dst, size_t off, const void *v, size_t n)
{
	struct stat sb;

	assert_int_equal(stat(src, &sb), 0);
	copy_trunc(src, dst, (size_t)sb.st_size);
	int fd = open(dst, O_WRONLY);

	assert_int_equal(pwrite(fd, v, n, (off_t)off), (ssize_t)n);
	close(fd);
}

static void test_truncated(void **state)
{
	char *d = tmpdir_new(), dst[1024];
	size_t len;
	char *src = make_file(d, 10, &len);

	/* every length short of the whole file: each header field boundary,
	 * every byte inside the table (in a memfd: 1000+ files on disk are slow) */
	{
		char buf[65536];
		int in = open(src, O_RDONLY), mfd = memfd_create("trunc", MFD_CLOEXEC);

		assert_true(in >= 0 && mfd >= 0);
		assert_int_equal(read(in, buf, sizeof(buf)), (ssize_t)len);
		close(in);
		assert_int_equal(pwrite(mfd, buf, len, 0), (ssize_t)len);
		snprintf(dst, sizeof(dst), "/proc/self/fd/%d", mfd);
		for (size_t cut = len; cut-- > 0;) {
			char what[64];

			assert_int_equal(ftruncate(mfd, (off_t)cut), 0);
			snprintf(what, sizeof(what), "truncated at %zu", cut);
			expect_bad(dst, what);
		}
		close(mfd);
	}
	snprintf(dst, sizeof(dst), "%s/t", d);
	/* intact copy reads */
	copy_trunc(src, dst, len);
	struct sfile_reader *r = sfile_reader_open(dst, NULL, 0);

	assert_non_null(r);
	assert_int_equal(sfile_reader_info(r)->nr_entries, 10);
	sfile_reader_close(r);
	free(src);
	tmpdir_free(d);
}

static int batch_count(const uint64_t *offs, const uint64_t *counts, size_t n, void *arg)
{
	(void)offs;
	(void)counts;
	*(size_t *)arg += n;
	return 0;
}

static int one_count(uint64_t offset, uint64_t count, void *arg)
{
	(void)offset;
	(void)count;
	++*(size_t *)arg;
	return 0;
}

/* What the header claims, checked late (SFILE_READ_LATE_CHECK): the
 * reopen takes the file, the foreach functions refuse it at their end;
 * a sound file reads the same either way, in one reused reader. */
static void test_late_check(void **state)
{
	char *d = tmpdir_new(), dst[1024];
	size_t len, n;
	char *src = make_file(d, 10, &len);
	struct sfile_reader *r = sfile_reader_new();
	uint64_t u64;

	(void)state;
	assert_non_null(r);
	snprintf(dst, sizeof(dst), "%s/c", d);
	for (int what = 0; what < 2; what++) {
		u64 = what ? 1000 : 11;	/* total, or entries, past the table's */
		patch(src, dst, what ? 176 : 168, &u64, 8);
		expect_bad(dst, what ? "total" : "nr_entries");
		assert_int_equal(sfile_reader_reopen(r, dst, SFILE_READ_LATE_CHECK, NULL, 0), 0);
		n = 0;
		assert_int_equal(sfile_reader_foreach_batch(r, batch_count, &n), -EBADMSG);
		assert_int_equal(n, 10);	/* given, then refused: the caller drops them */
		n = 0;
		assert_int_equal(sfile_reader_foreach(r, one_count, &n), -EBADMSG);
		/* the check flag goes with the file: an eager reopen refuses */
		assert_int_equal(sfile_reader_reopen(r, dst, 0, NULL, 0), -EBADMSG);
		n = 0;
		assert_int_equal(sfile_reader_foreach_batch(r, batch_count, &n), 0);
		assert_int_equal(n, 0);	/* a failed reopen reads as empty */
	}
	/* a header that claims less than the table holds is no lie (a writer
	 * may add between its stores): the header's word until the walk,
	 * the table's own after it */
	u64 = 1;
	patch(src, dst, 176, &u64, 8);
	assert_int_equal(sfile_reader_reopen(r, dst, SFILE_READ_LATE_CHECK, NULL, 0), 0);
	assert_int_equal(sfile_reader_info(r)->total, 1);
	assert_int_equal(sfile_reader_foreach_batch(r, batch_count, &n), 0);
	assert_true(sfile_reader_info(r)->total > 1);
	assert_int_equal(sfile_reader_reopen(r, src, SFILE_READ_LATE_CHECK, NULL, 0), 0);
	n = 0;
	assert_int_equal(sfile_reader_foreach_batch(r, batch_count, &n), 0);
	assert_int_equal(n, 10);
	assert_int_equal(sfile_reader_info(r)->nr_entries, 10);
	n = 0;
	assert_int_equal(sfile_reader_foreach(r, one_count, &n), 0);
	assert_int_equal(n, 10);
	sfile_reader_close(r);
	free(src);
	tmpdir_free(d);
}

static void test_corrupt_fields(void **state)
{
	char *d = tmpdir_new(), dst[1024];
	size_t len;
	char *src = make_file(d, 10, &len);
	uint32_t u32;
	uint64_t u64;

	snprintf(dst, sizeof(dst), "%s/c", d);
	patch(src, dst, 0, "OPVMSMP0", 8);
	expect_bad(dst, "bad magic");
	u32 = 2;
	patch(src, dst, 8, &u32, 4);
	expect_bad(dst, "version");
	u32 = 0xffffffff;
	patch(src, dst, 12, &u32, 4);
	expect_bad(dst, "header size");
	u32 = 1u << 20;
	patch(src, dst, 12, &u32, 4);
	expect_bad(dst, "header size big");
	patch(src, dst, 16, "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX", 32);
	expect_bad(dst, "event not terminated");
	u32 = 33;
	patch(src, dst, 60, &u32, 4);
	expect_bad(dst, "build-id len");
	u64 = 256 | 40;			/* 2^40 slots */
	patch(src, dst, 160, &u64, 8);
	expect_bad(dst, "huge table");
	u64 = 256 | 10;			/* 16 KiB past a small file */
	patch(src, dst, 160, &u64, 8);
	expect_bad(dst, "table past end");
	u64 = 0xfffffffffffff000ULL | 6;	/* offset overflow */
	patch(src, dst, 160, &u64, 8);
	expect_bad(dst, "table offset overflow");
	u64 = 64 | 6;			/* overlaps header */
	patch(src, dst, 160, &u64, 8);
	expect_bad(dst, "table in header");
	u64 = 11;			/* more entries than the table holds */
	patch(src, dst, 168, &u64, 8);
	expect_bad(dst, "nr_entries");
	u64 = 1000;			/* larger total than the table */
	patch(src, dst, 176, &u64, 8);
	expect_bad(dst, "total");
	/* a sparse file claiming a gigantic size */
	copy_trunc(src, dst, len);
	assert_int_equal(truncate(dst, (off_t)(OPVM_SFILE_MAX_SIZE + 4096)), 0);
	expect_bad(dst, "huge file");
	/* a directory, a missing file */
	expect_bad(d, "directory");
	snprintf(dst, sizeof(dst), "%s/none", d);
	assert_int_equal(expect_bad(dst, "missing"), ENOENT);
	free(src);
	tmpdir_free(d);
}

/* store_remove_tree(): a whole tree goes, a link in it is removed, not
 * followed; a symlink at the top is refused; absent is fine. */
/* A window sealed, listed by range, refused when it would replace one or
 * a link stands in for current/, and removed. */
static void test_windows(void **state)
{
	char *d = tmpdir_new(), name[STORE_WINDOW_NAME_MAX], names[4][STORE_WINDOW_NAME_MAX];
	char p[1024], q[1024];
	struct store *st;
	int64_t s, e;

	(void)state;
	assert_non_null(d);
	store_window_name(name, 1764645000000LL, 1764645010000LL);
	assert_string_equal(name, "w-1764645000000-1764645010000");
	assert_int_equal(store_window_parse(name, &s, &e), 0);
	assert_true(s == 1764645000000LL && e == 1764645010000LL);
	assert_int_equal(store_window_parse("w-1764645010000-1764645000000", &s, &e), -EINVAL);
	assert_int_equal(store_window_parse("w-176464500000x-1764645010000", &s, &e), -EINVAL);
	assert_int_equal(store_window_parse("current", &s, &e), -EINVAL);
	assert_int_equal(store_window_parse("w-1764645000000-17646450100000", &s, &e), -EINVAL);
	for (int i = 0; i < 3; i++) {
		st = store_open(d, "g", ev1, 2, OPVM_SEP_NONE, 0);
		assert_non_null(st);
		/* sealed while its store holds it: refused */
		store_window_name(name, 1000000 + i * 10, 1000000 + i * 10 + 10);
		assert_int_equal(store_seal_window(d, "g", name), -EBUSY);
		store_close(st);
		assert_int_equal(store_seal_window(d, "g", name), 0);
		assert_int_equal(store_seal_window(d, "g", name), -ENOENT);
	}
	/* [1000010, 1000020) and [1000020, 1000030) overlap [1000015, 1000021) */
	assert_int_equal(store_windows(d, 1000015, 1000021, names, 4), 2);
	assert_string_equal(names[0], "w-0000001000010-0000001000020");
	assert_string_equal(names[1], "w-0000001000020-0000001000030");
	assert_int_equal(store_windows(d, 1000010, 1000020, names, 4), 1);
	assert_int_equal(store_windows(d, 0, INT64_MAX, names, 2), 3);
	assert_int_equal(store_windows(d, 2000000, 3000000, names, 4), 0);
	/* a window of that name already: never replaced */
	st = store_open(d, "g", ev1, 2, OPVM_SEP_NONE, 0);
	store_close(st);
	assert_int_equal(store_seal_window(d, "g", names[0]), -EEXIST);
	/* a link in place of current/ is not sealed */
	snprintf(p, sizeof(p), "%s/guests/g/samples/current", d);
	assert_int_equal(store_remove_tree(p), 0);
	snprintf(q, sizeof(q), "%s/guests", d);
	assert_int_equal(symlink(q, p), 0);
	store_window_name(name, 5000000, 5000010);
	assert_int_equal(store_seal_window(d, "g", name), -ELOOP);
	assert_int_equal(store_remove_window(d, "g", names[0]), 0);
	assert_int_equal(store_windows(d, 0, INT64_MAX, names, 4), 2);
	assert_int_equal(store_remove_window(d, "..", names[0]), -EINVAL);
	tmpdir_free(d);
}

/* Files of a window's path: 0 if it is there (a regular file). */
static int window_file(const char *d, const char *which, const char *leaf)
{
	char p[1024];
	struct stat sb;

	snprintf(p, sizeof(p), "%s/guests/g/samples/%s/{root}/^usr^bin^foo/{dep}/{root}/^usr^bin^foo/%s",
		 d, which, leaf);
	return stat(p, &sb) == 0 && S_ISREG(sb.st_mode) ? 0 : -1;
}

/*
 * store_rotate(): the window's files are sealed under the window's name
 * with their counts, the same store goes on in an empty current/, and
 * the lock stays held throughout (another store is refused after).  A
 * name already taken leaves the old current/ as previous/, and the store
 * goes on.
 */
static void test_rotate(void **state)
{
	char *d = tmpdir_new(), name[STORE_WINDOW_NAME_MAX], names[4][STORE_WINDOW_NAME_MAX];
	const char *leaf = "CPU_CLK_UNHALTED.100000.0.all.all.all";
	struct store_key k = { .image = "/usr/bin/foo", .tgid = -1, .tid = -1, .cpu = -1 };
	struct store_stats ss;
	struct store *st;
	struct sfile *sf;
	int sealed = 1;

	(void)state;
	assert_non_null(d);
	st = store_open(d, "g", ev1, 2, OPVM_SEP_NONE, 0);
	assert_non_null(st);
	sf = store_get(st, &k);
	assert_non_null(sf);
	assert_int_equal(sfile_add(sf, 0x10, 7), 0);
	store_window_name(name, 1000000, 1000010);
	assert_int_equal(store_rotate(st, "current", &sealed), -EINVAL);
	assert_int_equal(store_rotate(st, name, &sealed), 0);
	assert_int_equal(sealed, 0);
	assert_int_equal(window_file(d, name, leaf), 0);
	assert_int_equal(window_file(d, "current", leaf), -1);	/* empty */
	store_get_stats(st, &ss);
	assert_int_equal(ss.files, 0);
	assert_null(store_open(d, "g", ev1, 2, OPVM_SEP_NONE, 0));	/* still locked */
	assert_int_equal(errno, EBUSY);
	/* the next window's samples go to the new current/ alone */
	sf = store_get(st, &k);
	assert_non_null(sf);
	assert_int_equal(sfile_add(sf, 0x10, 5), 0);
	assert_int_equal(store_sync(st), 0);
	assert_int_equal(window_file(d, "current", leaf), 0);
	/* a name taken: not sealed, kept as previous/, the store goes on */
	assert_int_equal(store_rotate(st, name, &sealed), 0);
	assert_int_equal(sealed, -EEXIST);
	assert_int_equal(window_file(d, "previous", leaf), 0);
	store_window_name(name, 1000010, 1000020);
	assert_non_null(store_get(st, &k));
	assert_int_equal(store_rotate(st, name, &sealed), 0);
	assert_int_equal(sealed, 0);
	store_close(st);
	assert_int_equal(store_windows(d, 0, INT64_MAX, names, 4), 2);
	assert_string_equal(names[0], "w-0000001000000-0000001000010");
	assert_string_equal(names[1], "w-0000001000010-0000001000020");
	assert_int_equal(window_file(d, names[0], leaf), 0);
	tmpdir_free(d);
}

static void test_remove_tree(void **state)
{
	char *d = tmpdir_new(), p[1024], q[1024], keep[1024];
	struct stat sb;
	int fd;

	(void)state;
	if (!d) {
		fail();
		return;
	}
	snprintf(keep, sizeof(keep), "%s/keep", d);
	assert_int_equal(mkdir(keep, 0700), 0);
	snprintf(p, sizeof(p), "%s/t/a/b/c", d);
	for (char *s = p + strlen(d) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(p, 0700);
		*s = '/';
	}
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(q, sizeof(q), "%s/t/a/file", d);
	fd = open(q, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	snprintf(q, sizeof(q), "%s/t/a/b/link", d);
	assert_int_equal(symlink(keep, q), 0);
	snprintf(q, sizeof(q), "%s/top-link", d);
	assert_int_equal(symlink(keep, q), 0);
	assert_int_equal(store_remove_tree(q), -ELOOP);
	snprintf(p, sizeof(p), "%s/t", d);
	assert_int_equal(store_remove_tree(p), 0);
	assert_int_equal(stat(p, &sb), -1);
	assert_int_equal(stat(keep, &sb), 0);	/* the link's target stays */
	assert_int_equal(store_remove_tree(p), 0);
	tmpdir_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_late_build_id),
		cmocka_unit_test(test_colliding_offsets),
		cmocka_unit_test(test_add_many),
		cmocka_unit_test(test_add_many_same_bytes),
		cmocka_unit_test(test_separate_paths),
		cmocka_unit_test(test_cgroup_paths),
		cmocka_unit_test(test_walk_junk),
		cmocka_unit_test(test_parse_separate),
		cmocka_unit_test(test_append_and_rotate),
		cmocka_unit_test(test_append_mismatch),
		cmocka_unit_test(test_read_while_writing),
		cmocka_unit_test(test_write_meta),
		cmocka_unit_test(test_enospc),
		cmocka_unit_test(test_disk_full),
		cmocka_unit_test(test_cap_files),
		cmocka_unit_test(test_cap_dirs_disk),
		cmocka_unit_test(test_lru_mapped),
		cmocka_unit_test(test_modes),
		cmocka_unit_test(test_bad_events),
		cmocka_unit_test(test_one_writer),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_corrupt_fields),
		cmocka_unit_test(test_late_check),
		cmocka_unit_test(test_remove_tree),
		cmocka_unit_test(test_windows),
		cmocka_unit_test(test_rotate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
