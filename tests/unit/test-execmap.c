// SPDX-License-Identifier: MIT
/*
 * Unit tests for the interval index of executable mappings
 * (host/collect/execmap.c): one process per address, ambiguous overlaps,
 * forked children, a rebuild after a change, and a guest that lies
 * (a mapping over the whole user half, many processes on one range, more
 * mappings than the cap).  Checked against a plain scan of the model.
 */
#include <errno.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "host/collect/execmap.h"
#include "host/collect/gstate.h"

#define S(x) x, sizeof(x) - 1

static struct gstate *model(void)
{
	struct gstate *gs = gstate_new(NULL);

	assert_non_null(gs);
	assert_int_equal(gstate_cookie(gs, 1, S("/bin/a"), NULL, 0), 0);
	assert_int_equal(gstate_cookie(gs, 2, S("/lib/libc.so.6"), NULL, 0), 0);
	assert_int_equal(gstate_cookie(gs, 3, S("/bin/b"), NULL, 0), 0);
	/* a: its exe and libc; b: its exe and libc elsewhere (ASLR) */
	assert_int_equal(gstate_proc(gs, 10, 1, 0x10000, S("a"), 1), 0);
	assert_int_equal(gstate_mmap(gs, 10, 0x555500000000, 0x555500010000, 0, 1), 0);
	assert_int_equal(gstate_mmap(gs, 10, 0x7f0000000000, 0x7f0000100000, 0x26000, 2), 0);
	assert_int_equal(gstate_proc(gs, 20, 1, 0x20000, S("b"), 3), 0);
	assert_int_equal(gstate_mmap(gs, 20, 0x560000000000, 0x560000004000, 0, 3), 0);
	assert_int_equal(gstate_mmap(gs, 20, 0x7f1000000000, 0x7f1000100000, 0x26000, 2), 0);
	return gs;
}

/* What a scan of every mapping says: 0, 1 (*tgid set) or 2. */
struct scan {
	uint64_t ip;
	const struct gstate *gs;
	unsigned n;
	uint32_t tgid;
	/* whether all map one file at one bias (the first one's) */
	const struct gstate_cookie *c;
	uint64_t bias;
	bool agree;
};

static int scan_proc(const struct gstate_process *p, void *arg)
{
	struct scan *sc = arg;
	const struct gstate_process *from = p;

	if (!p->nr_maps && p->cr3 && p->ppid && p->ppid != p->tgid)
		from = gstate_proc_by_tgid(sc->gs, p->ppid);
	for (size_t i = 0; from && i < from->nr_maps; i++) {
		const struct gstate_mapping *m = &from->maps[i];

		if (sc->ip >= m->start && sc->ip < m->end) {
			if (!sc->n++) {
				sc->c = m->cookie;
				sc->bias = m->start - m->pgoff;
				sc->agree = m->cookie != NULL;
			} else if (m->cookie != sc->c || m->start - m->pgoff != sc->bias) {
				sc->agree = false;
			}
			sc->tgid = p->tgid;
		}
	}
	return 0;
}

static void check_against_scan(struct execmap *x, const struct gstate *gs, uint64_t ip)
{
	struct scan sc = { .ip = ip, .gs = gs };
	const struct gstate_process *p = NULL;
	const struct gstate_mapping *m = NULL;
	enum execmap_answer a = execmap_lookup(x, ip, &p, &m);

	gstate_for_each_proc(gs, scan_proc, &sc);
	assert_int_equal(a, sc.n > 2 ? 2 : sc.n);
	if (a == EXECMAP_ONE) {
		assert_int_equal(p->tgid, sc.tgid);
		assert_true(ip >= m->start && ip < m->end);
	}
	if (a == EXECMAP_MANY) {
		/* the binary only when every mapping there agrees */
		assert_null(p);
		assert_int_equal(m != NULL, sc.agree);
		if (m) {
			assert_ptr_equal(m->cookie, sc.c);
			assert_int_equal(m->start - m->pgoff, sc.bias);
		}
	}
}

static enum execmap_answer who(struct execmap *x, uint64_t ip, uint32_t *tgid,
			       const char **path)
{
	const struct gstate_process *p = NULL;
	const struct gstate_mapping *m = NULL;
	enum execmap_answer a = execmap_lookup(x, ip, &p, &m);

	*tgid = a == EXECMAP_ONE ? p->tgid : 0;
	*path = (a == EXECMAP_ONE || a == EXECMAP_MANY) && m && m->cookie ? m->cookie->path :
		NULL;
	return a;
}

static void test_one_each(void **state)
{
	struct gstate *gs = model();
	struct execmap *x = execmap_new(0);
	struct execmap_stats st;
	const char *path;
	uint32_t tgid;

	assert_int_equal(execmap_lookup(x, 0x555500000000, NULL, NULL), EXECMAP_OFF);
	assert_int_equal(execmap_build(x, gs), 0);
	assert_int_equal(who(x, 0x555500000000, &tgid, &path), EXECMAP_ONE);
	assert_int_equal(tgid, 10);
	assert_string_equal(path, "/bin/a");
	assert_int_equal(who(x, 0x55550000ffff, &tgid, &path), EXECMAP_ONE);
	assert_int_equal(who(x, 0x555500010000, &tgid, &path), EXECMAP_NONE);	/* end excluded */
	assert_int_equal(who(x, 0x7f1000000042, &tgid, &path), EXECMAP_ONE);
	assert_int_equal(tgid, 20);
	assert_string_equal(path, "/lib/libc.so.6");
	assert_int_equal(who(x, 0, &tgid, &path), EXECMAP_NONE);
	assert_int_equal(who(x, UINT64_MAX, &tgid, &path), EXECMAP_NONE);
	execmap_get_stats(x, &st);
	assert_int_equal(st.mappings, 4);
	assert_int_equal(st.builds, 1);
	execmap_free(x);
	gstate_free(gs);

	/* a guest with no mapping yet: built, and nobody's */
	gs = gstate_new(NULL);
	x = execmap_new(0);
	assert_int_equal(execmap_build(x, gs), 0);
	assert_int_equal(who(x, 0x555500000000, &tgid, &path), EXECMAP_NONE);
	execmap_free(x);
	gstate_free(gs);
}

/* Two processes on one range (a non-PIE executable run twice, a forked
 * child): ambiguous where they overlap, one process on either side. */
static void test_overlap(void **state)
{
	struct gstate *gs = model();
	struct execmap *x = execmap_new(0);
	const char *path;
	uint32_t tgid;

	/* c maps b's executable half over b's */
	assert_int_equal(gstate_proc(gs, 30, 1, 0x30000, S("c"), 3), 0);
	assert_int_equal(gstate_mmap(gs, 30, 0x560000002000, 0x560000008000, 0x2000, 3), 0);
	assert_int_equal(execmap_build(x, gs), 0);
	assert_int_equal(who(x, 0x560000001fff, &tgid, &path), EXECMAP_ONE);
	assert_int_equal(tgid, 20);
	/* the same file at the same offset: the binary is known */
	assert_int_equal(who(x, 0x560000002000, &tgid, &path), EXECMAP_MANY);
	assert_string_equal(path, "/bin/b");
	assert_int_equal(who(x, 0x560000003fff, &tgid, &path), EXECMAP_MANY);
	/* d maps /bin/b there at another offset, e another file: unknown */
	assert_int_equal(gstate_proc(gs, 40, 1, 0x40000, S("d"), 3), 0);
	assert_int_equal(gstate_mmap(gs, 40, 0x560000003000, 0x560000003800, 0, 3), 0);
	assert_int_equal(gstate_proc(gs, 50, 1, 0x50000, S("e"), 1), 0);
	assert_int_equal(gstate_mmap(gs, 50, 0x560000003800, 0x560000004000, 0x2000, 1), 0);
	assert_int_equal(execmap_build(x, gs), 0);
	assert_int_equal(who(x, 0x560000002fff, &tgid, &path), EXECMAP_MANY);
	assert_string_equal(path, "/bin/b");
	assert_int_equal(who(x, 0x560000003000, &tgid, &path), EXECMAP_MANY);
	assert_null(path);
	assert_int_equal(who(x, 0x560000003800, &tgid, &path), EXECMAP_MANY);
	assert_null(path);
	for (uint64_t ip = 0x55ffffffff00; ip < 0x560000009000; ip += 0x80)
		check_against_scan(x, gs, ip);
	assert_int_equal(gstate_proc_exit(gs, 40), 0);
	assert_int_equal(gstate_proc_exit(gs, 50), 0);
	assert_int_equal(execmap_build(x, gs), 0);
	assert_int_equal(who(x, 0x560000004000, &tgid, &path), EXECMAP_ONE);
	assert_int_equal(tgid, 30);
	assert_int_equal(who(x, 0x560000008000, &tgid, &path), EXECMAP_NONE);
	/* b exits: the range is c's alone after a rebuild */
	assert_int_equal(gstate_proc_exit(gs, 20), 0);
	assert_int_equal(execmap_build(x, gs), 0);
	assert_int_equal(who(x, 0x560000002000, &tgid, &path), EXECMAP_ONE);
	assert_int_equal(tgid, 30);
	assert_int_equal(who(x, 0x560000001fff, &tgid, &path), EXECMAP_NONE);
	execmap_free(x);
	gstate_free(gs);
}

/* A child with an address space but no mappings described is a copy of
 * its parent: the parent's addresses are then both's, ambiguous.  One
 * without an address space (a zombie, a kernel thread) is nobody's. */
static void test_fork_child(void **state)
{
	struct gstate *gs = model();
	struct execmap *x = execmap_new(0);
	const char *path;
	uint32_t tgid;

	assert_int_equal(gstate_proc(gs, 11, 10, 0x11000, S("a"), 1), 0);
	assert_int_equal(gstate_proc(gs, 12, 20, 0, S("zombie"), 0), 0);
	assert_int_equal(execmap_build(x, gs), 0);
	/* both map /bin/a there at the same offset: the binary is known */
	assert_int_equal(who(x, 0x555500000100, &tgid, &path), EXECMAP_MANY);
	assert_string_equal(path, "/bin/a");
	assert_int_equal(tgid, 0);
	assert_int_equal(who(x, 0x560000000100, &tgid, &path), EXECMAP_ONE);
	assert_int_equal(tgid, 20);
	/* the child's own mappings arrive: it execs something else */
	assert_int_equal(gstate_mmap(gs, 11, 0x561100000000, 0x561100001000, 0, 3), 0);
	assert_int_equal(execmap_build(x, gs), 0);
	assert_int_equal(who(x, 0x555500000100, &tgid, &path), EXECMAP_ONE);
	assert_int_equal(tgid, 10);
	assert_int_equal(who(x, 0x561100000100, &tgid, &path), EXECMAP_ONE);
	assert_int_equal(tgid, 11);
	execmap_free(x);
	gstate_free(gs);
}

/* A guest that lies: a mapping over the whole user half, a hundred
 * processes on one range, nested and touching ranges.  Every answer agrees
 * with a scan, none names a process where two map the address. */
static void test_lying_guest(void **state)
{
	struct gstate *gs = model();
	struct execmap *x = execmap_new(0);
	struct execmap_stats st;
	const char *path;
	uint32_t tgid;

	assert_int_equal(gstate_proc(gs, 66, 1, 0x66000, S("liar"), 1), 0);
	assert_int_equal(gstate_mmap(gs, 66, 0x1000, 0x800000000000, 0, 1), 0);
	for (uint32_t i = 0; i < 100; i++) {
		assert_int_equal(gstate_proc(gs, 1000 + i, 1, 0x100000 + i * 0x1000ull, S("dup"), 1),
				 0);
		assert_int_equal(gstate_mmap(gs, 1000 + i, 0x900000000000 + i * 0x1000ull,
					     0x900000100000, 0, 1), 0);
	}
	assert_int_equal(execmap_build(x, gs), 0);
	assert_int_equal(who(x, 0x555500000000, &tgid, &path), EXECMAP_MANY);
	assert_int_equal(who(x, 0x1000, &tgid, &path), EXECMAP_ONE);
	assert_int_equal(tgid, 66);
	assert_int_equal(who(x, 0x900000000010, &tgid, &path), EXECMAP_ONE);
	assert_int_equal(tgid, 1000);
	assert_int_equal(who(x, 0x900000001000, &tgid, &path), EXECMAP_MANY);
	assert_int_equal(who(x, 0x9000000fffff, &tgid, &path), EXECMAP_MANY);
	assert_int_equal(who(x, 0x900000100000, &tgid, &path), EXECMAP_NONE);
	for (uint64_t ip = 0; ip < 0x900000200000; ip += 0x3fff1234567)
		check_against_scan(x, gs, ip);
	for (uint64_t ip = 0x8ffffffff000; ip < 0x900000101000; ip += 0x7ff)
		check_against_scan(x, gs, ip);
	execmap_get_stats(x, &st);
	assert_int_equal(st.mappings, 105);
	/* 1 + 1 + 1 segments at most per mapping end: bounded by 2n */
	assert_true(st.segments <= 2 * st.mappings);
	execmap_free(x);
	gstate_free(gs);
}

/* More mappings than the cap: the index answers nothing rather than from a
 * part of them, and answers again once the guest is back under it. */
static void test_over_cap(void **state)
{
	struct gstate *gs = model();
	struct execmap *x = execmap_new(8);
	struct execmap_stats st;
	const char *path;
	uint32_t tgid;

	assert_int_equal(execmap_build(x, gs), 0);
	for (uint32_t i = 0; i < 5; i++)
		assert_int_equal(gstate_mmap(gs, 10, 0x600000000000 + i * 0x2000ull,
					     0x600000001000 + i * 0x2000ull, 0, 1), 0);
	assert_int_equal(execmap_build(x, gs), -E2BIG);
	assert_int_equal(who(x, 0x555500000000, &tgid, &path), EXECMAP_OFF);
	execmap_get_stats(x, &st);
	assert_int_equal(st.over_cap, 1);
	assert_int_equal(gstate_proc_exit(gs, 20), 0);
	assert_int_equal(execmap_build(x, gs), 0);
	assert_int_equal(who(x, 0x555500000000, &tgid, &path), EXECMAP_ONE);
	assert_int_equal(tgid, 10);
	execmap_free(x);
	execmap_free(NULL);
	gstate_free(gs);

	/* the default cap, against a guest that sends more than it: 33
	 * processes of 4000 mappings each (the model takes 4096 a process) */
	gs = model();
	x = execmap_new(0);
	for (uint32_t t = 100; t < 133; t++) {
		assert_int_equal(gstate_proc(gs, t, 1, (uint64_t)t << 16, S("many"), 1), 0);
		for (uint64_t i = 0; i < 4000; i++)
			assert_int_equal(gstate_mmap(gs, t, 0x100000000 * t + i * 0x2000,
						     0x100000000 * t + i * 0x2000 + 0x1000, 0, 1), 0);
	}
	assert_int_equal(execmap_build(x, gs), -E2BIG);
	assert_int_equal(who(x, 0x555500000000, &tgid, &path), EXECMAP_OFF);
	execmap_free(x);
	gstate_free(gs);
}

/* Random models checked against the scan. */
static void test_random(void **state)
{
	unsigned seed = 12345;

	for (int round = 0; round < 20; round++) {
		struct gstate *gs = gstate_new(NULL);
		struct execmap *x = execmap_new(0);

		assert_int_equal(gstate_cookie(gs, 1, S("/bin/r"), NULL, 0), 0);
		assert_int_equal(gstate_cookie(gs, 2, S("/bin/s"), NULL, 0), 0);
		assert_int_equal(gstate_cookie(gs, 3, S("/bin/t"), NULL, 0), 0);
		for (uint32_t t = 1; t <= 30; t++) {
			assert_int_equal(gstate_proc(gs, t + 1, 1, t * 0x1000ull, S("r"), 1), 0);
			for (int k = 0; k < 6; k++) {
				uint64_t lo = (uint64_t)(rand_r(&seed) % 4096) * 0x1000;
				uint64_t len = (uint64_t)(rand_r(&seed) % 64 + 1) * 0x1000;

				uint64_t c = 1 + (uint64_t)(rand_r(&seed) % 3);

				/* the same file at a bias shared by some */
				gstate_mmap(gs, t + 1, lo, lo + len,
					    rand_r(&seed) % 2 ? lo : 0x1000, c);
			}
		}
		assert_int_equal(execmap_build(x, gs), 0);
		for (uint64_t ip = 0; ip < 4200 * 0x1000ull; ip += 0x800 + (uint64_t)round)
			check_against_scan(x, gs, ip);
		execmap_free(x);
		gstate_free(gs);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_each),
		cmocka_unit_test(test_overlap),
		cmocka_unit_test(test_fork_child),
		cmocka_unit_test(test_lying_guest),
		cmocka_unit_test(test_over_cap),
		cmocka_unit_test(test_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
