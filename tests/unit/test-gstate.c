// SPDX-License-Identifier: MIT
/* Unit tests for the guest-state model (host/collect/gstate.c) and session stats
 * JSON (host/collect/stats.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "host/collect/gstate.h"
#include "lib/array.h"
#include "host/collect/stats.h"

#define S(x) x, sizeof(x) - 1

static struct gstate *mkgs(void)
{
	struct gstate *gs = gstate_new(NULL);
	struct chan_hello h = { .version = 1, .nr_cpus = 2 };

	assert_non_null(gs);
	strcpy(h.release, "6.1.0-test");
	assert_int_equal(gstate_hello(gs, &h), 0);
	return gs;
}

static void test_hello_reset(void **state)
{
	struct gstate *gs = gstate_new(NULL);
	struct chan_hello h = { .version = 1, .nr_cpus = 4, .slot_pa = 0x1000 };
	uint64_t g;

	assert_null(gstate_get_hello(gs));
	memset(h.anchor_name, 'A', sizeof(h.anchor_name));	/* unterminated */
	h.release[0] = '6';
	h.release[1] = '\n';
	assert_int_equal(gstate_hello(gs, &h), 0);
	assert_non_null(gstate_get_hello(gs));
	assert_int_equal(gstate_get_hello(gs)->nr_cpus, 4);
	assert_int_equal(strlen(gstate_get_hello(gs)->anchor_name), 64);
	assert_string_equal(gstate_get_hello(gs)->release, "6?");
	assert_int_equal(gstate_proc(gs, 10, 1, 0x5000, S("init"), 0), 0);
	assert_int_equal(gstate_module(gs, S("ext4"), 0xffffffffc0000000ull, 0x1000), 0);
	assert_int_equal(gstate_cookie(gs, 7, S("/bin/sh"), NULL, 0), 0);
	assert_int_equal(gstate_thread(gs, 11, 10, S("worker")), 0);
	assert_int_equal(gstate_mmap(gs, 10, 0x400000, 0x401000, 0, 7), 0);
	g = gstate_generation(gs);
	/* reboot: everything goes */
	assert_int_equal(gstate_hello(gs, &h), 0);
	assert_true(gstate_generation(gs) > g);
	assert_int_equal(gstate_nr_processes(gs), 0);
	assert_int_equal(gstate_nr_threads(gs), 0);
	assert_int_equal(gstate_nr_cookies(gs), 0);
	assert_int_equal(gstate_nr_modules(gs), 0);
	assert_int_equal(gstate_nr_mappings(gs), 0);
	assert_null(gstate_proc_by_cr3(gs, 0x5000));
	assert_int_equal(gstate_get_stats(gs)->hellos, 2);
	gstate_free(gs);
	gstate_free(NULL);
}

static void test_procs_threads(void **state)
{
	struct gstate *gs = mkgs();
	const struct gstate_process *p;
	uint64_t g = gstate_generation(gs);

	/* cr3 is normalised: PCID, PTI bit and bit 63 cleared */
	assert_int_equal(gstate_proc(gs, 100, 1, 0x8000000012345fffull | 0x1000,
				     S("bash"), 0), 0);
	assert_true(gstate_generation(gs) > g);
	p = gstate_proc_by_cr3(gs, 0x12344000);
	assert_non_null(p);
	assert_int_equal(p->tgid, 100);
	assert_int_equal(p->ppid, 1);
	assert_string_equal(p->comm, "bash");
	assert_null(p->exe);
	assert_ptr_equal(gstate_proc_by_tgid(gs, 100), p);
	assert_null(gstate_proc_by_tgid(gs, 101));
	assert_null(gstate_proc_by_cr3(gs, 0x999000));

	/* threads */
	assert_int_equal(gstate_thread(gs, 101, 100, S("bash-w")), 0);
	assert_int_equal(gstate_thread_tgid(gs, 101), 100);
	assert_string_equal(gstate_thread_comm(gs, 101), "bash-w");
	assert_int_equal(gstate_thread_tgid(gs, 100), 100);	/* main thread */
	assert_string_equal(gstate_thread_comm(gs, 100), "bash");
	assert_int_equal(gstate_thread_tgid(gs, 555), 0);
	assert_null(gstate_thread_comm(gs, 555));
	assert_int_equal(gstate_nr_threads(gs), 1);
	assert_int_equal(gstate_thread_exit(gs, 101), 0);
	assert_int_equal(gstate_nr_threads(gs), 0);
	assert_int_equal(gstate_thread_exit(gs, 101), -ENOENT);

	/* exec: new cr3, image, comm; mappings dropped */
	assert_int_equal(gstate_cookie(gs, 1, S("/usr/bin/python3"), NULL, 0), 0);
	assert_int_equal(gstate_mmap(gs, 100, 0x1000, 0x2000, 0, 1), 0);
	assert_int_equal(gstate_exec(gs, 100, 0x78000, S("python3"), 1), 0);
	p = gstate_proc_by_tgid(gs, 100);
	assert_non_null(p);
	assert_int_equal(p->nr_maps, 0);
	assert_int_equal(gstate_nr_mappings(gs), 0);
	assert_string_equal(p->comm, "python3");
	assert_non_null(p->exe);
	assert_string_equal(p->exe->path, "/usr/bin/python3");
	assert_null(gstate_proc_by_cr3(gs, 0x12344000));
	assert_ptr_equal(gstate_proc_by_cr3(gs, 0x78000), p);
	/* exec of an unknown process creates it */
	assert_int_equal(gstate_exec(gs, 300, 0x9a000, S("new"), 0), 0);
	assert_non_null(gstate_proc_by_cr3(gs, 0x9a000));

	/* exit, with a thread still listed: both go */
	assert_int_equal(gstate_thread(gs, 102, 100, S("t")), 0);
	assert_int_equal(gstate_proc_exit(gs, 100), 0);
	assert_null(gstate_proc_by_tgid(gs, 100));
	assert_null(gstate_proc_by_cr3(gs, 0x78000));
	assert_int_equal(gstate_nr_threads(gs), 0);
	assert_int_equal(gstate_proc_exit(gs, 100), -ENOENT);

	/* invalid values are refused and counted */
	{
		uint64_t r = gstate_get_stats(gs)->refused;

		assert_int_equal(gstate_proc(gs, 0, 1, 0x1000, S("x"), 0), -EINVAL);
		assert_int_equal(gstate_thread(gs, 0, 1, S("x")), -EINVAL);
		assert_int_equal(gstate_proc(gs, 5, 1, 0x1000, NULL, 4, 0), -EINVAL);
		assert_int_equal(gstate_get_stats(gs)->refused, r + 3);
	}
	gstate_free(gs);
}

/* Two processes sharing one address space (vfork): when one goes, the
 * other is still found by cr3; the address space goes with the last. */
static void test_shared_cr3(void **state)
{
	struct gstate *gs = mkgs();

	assert_int_equal(gstate_proc(gs, 10, 1, 0xa000, S("parent"), 0), 0);
	assert_int_equal(gstate_proc(gs, 11, 10, 0xa000, S("child"), 0), 0);
	assert_int_equal(gstate_cr3_refs(gs, 0xa000), 2);
	assert_int_equal(gstate_get_stats(gs)->cr3_shared, 1);
	/* the one announced last names the address space */
	assert_int_equal(gstate_proc_by_cr3(gs, 0xa000)->tgid, 11);
	assert_int_equal(gstate_proc_exit(gs, 11), 0);
	assert_int_equal(gstate_cr3_refs(gs, 0xa000), 1);
	assert_non_null(gstate_proc_by_cr3(gs, 0xa000));
	assert_int_equal(gstate_proc_by_cr3(gs, 0xa000)->tgid, 10);
	assert_int_equal(gstate_proc_exit(gs, 10), 0);
	assert_int_equal(gstate_cr3_refs(gs, 0xa000), 0);
	assert_null(gstate_proc_by_cr3(gs, 0xa000));

	/* three on one cr3; the middle one execs away, then the head exits */
	assert_int_equal(gstate_proc(gs, 20, 1, 0x20000, S("a"), 0), 0);
	assert_int_equal(gstate_proc(gs, 21, 20, 0x20000, S("b"), 0), 0);
	assert_int_equal(gstate_proc(gs, 22, 20, 0x20000, S("c"), 0), 0);
	assert_int_equal(gstate_cr3_refs(gs, 0x20000), 3);
	assert_int_equal(gstate_exec(gs, 21, 0x40000, S("b2"), 0), 0);
	assert_int_equal(gstate_cr3_refs(gs, 0x20000), 2);
	assert_int_equal(gstate_proc_by_cr3(gs, 0x40000)->tgid, 21);
	assert_int_equal(gstate_proc_exit(gs, 22), 0);
	assert_int_equal(gstate_proc_by_cr3(gs, 0x20000)->tgid, 20);
	/* announced again on its own cr3: counted once */
	assert_int_equal(gstate_proc(gs, 20, 1, 0x20000, S("a"), 0), 0);
	assert_int_equal(gstate_cr3_refs(gs, 0x20000), 1);
	gstate_free(gs);
}

/* Once two processes have shared a cr3, exits must stay O(1): the model
 * once set a flag that made every later exit scan the whole process table.
 * gstate_work() counts hash-table slots visited; a scan of a 20000-process
 * table per exit would visit tens of thousands per exit. */
static void test_exit_after_shared_cr3_is_o1(void **state)
{
	enum { N = 20000 };
	struct gstate *gs = mkgs();
	uint64_t before, per_exit;

	for (uint32_t i = 1; i <= N; i++)
		assert_int_equal(gstate_proc(gs, i, 1, (uint64_t)i << 13, S("p"), 0), 0);
	/* two processes on one address space, then one of them exits */
	assert_int_equal(gstate_proc(gs, N + 1, 1, (uint64_t)1 << 13, S("vfork"), 0), 0);
	assert_int_equal(gstate_proc_exit(gs, N + 1), 0);
	before = gstate_work(gs);
	for (uint32_t i = 2; i <= N; i++)
		assert_int_equal(gstate_proc_exit(gs, i), 0);
	per_exit = (gstate_work(gs) - before) / (N - 1);
	print_message("slots visited per exit after a shared cr3: %llu\n",
		      (unsigned long long)per_exit);
	assert_true(per_exit < 32);
	assert_int_equal(gstate_proc_by_cr3(gs, (uint64_t)1 << 13)->tgid, 1);
	assert_int_equal(gstate_nr_processes(gs), 1);
	gstate_free(gs);
}

/* Which COOKIE records rename a cookie the guest already described. */
static void test_cookie_renames(void **state)
{
	struct gstate *gs = mkgs();

	/* unknown id, then a placeholder (a mapping before its cookie) */
	assert_false(gstate_cookie_renames(gs, 9, S("/bin/a"), NULL, 0));
	assert_int_equal(gstate_proc(gs, 1, 0, 0x2000, S("sh"), 9), 0);
	assert_false(gstate_cookie_renames(gs, 9, S("/bin/a"), NULL, 0));
	assert_int_equal(gstate_cookie(gs, 9, S("/bin/a"), (const uint8_t *)"\1\2", 2), 0);
	assert_false(gstate_cookie_renames(gs, 9, S("/bin/a"), (const uint8_t *)"\1\2", 2));
	assert_true(gstate_cookie_renames(gs, 9, S("/bin/b"), (const uint8_t *)"\1\2", 2));
	assert_true(gstate_cookie_renames(gs, 9, S("/bin/a"), (const uint8_t *)"\1\3", 2));
	assert_true(gstate_cookie_renames(gs, 9, S("/bin/a"), NULL, 0));
	/* compared as stored: sanitised */
	assert_int_equal(gstate_cookie(gs, 9, S("/bin/\n"), NULL, 0), 0);
	assert_false(gstate_cookie_renames(gs, 9, S("/bin/\t"), NULL, 0));
	assert_false(gstate_cookie_renames(gs, 9, S("/bin/?"), NULL, 0));
	gstate_free(gs);
}

static void expect_maps(const struct gstate_process *p, const uint64_t (*want)[3], size_t n)
{
	assert_int_equal(p->nr_maps, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(p->maps[i].start, want[i][0]);
		assert_int_equal(p->maps[i].end, want[i][1]);
		assert_int_equal(p->maps[i].pgoff, want[i][2]);
	}
}

static void test_mappings(void **state)
{
	struct gstate *gs = mkgs();
	const struct gstate_process *p;
	const struct gstate_mapping *m;

	assert_int_equal(gstate_proc(gs, 50, 1, 0x5000, S("app"), 0), 0);
	assert_int_equal(gstate_cookie(gs, 1, S("/bin/app"), (const uint8_t *)"\x01\x02", 2), 0);
	assert_int_equal(gstate_cookie(gs, 2, S("/lib/libc.so.6"), NULL, 0), 0);
	assert_int_equal(gstate_mmap(gs, 50, 0x400000, 0x500000, 0x1000, 1), 0);
	assert_int_equal(gstate_mmap(gs, 50, 0x7f0000000000ull, 0x7f0000100000ull, 0, 2), 0);
	assert_int_equal(gstate_mmap(gs, 50, 0x600000, 0x601000, 0, 0), 0);	/* anon */
	p = gstate_proc_by_tgid(gs, 50);
	assert_int_equal(p->nr_maps, 3);
	assert_int_equal(gstate_nr_mappings(gs), 3);

	m = gstate_map_find(p, 0x400000);
	assert_non_null(m);
	assert_string_equal(m->cookie->path, "/bin/app");
	assert_int_equal(m->cookie->build_id_len, 2);
	assert_int_equal(m->pgoff, 0x1000);
	assert_non_null(gstate_map_find(p, 0x4fffff));
	assert_null(gstate_map_find(p, 0x500000));
	assert_null(gstate_map_find(p, 0x3fffff));
	assert_null(gstate_map_find(p, 0));
	assert_null(gstate_map_find(p, UINT64_MAX));
	m = gstate_map_find(p, 0x600800);
	assert_non_null(m);
	assert_null(m->cookie);
	assert_string_equal(gstate_map_find(p, 0x7f0000000010ull)->cookie->path, "/lib/libc.so.6");

	assert_true(gstate_map_overlaps(p, 0x4fffff, 0x500001));
	assert_false(gstate_map_overlaps(p, 0x500000, 0x600000));
	assert_false(gstate_map_overlaps(NULL, 0, 1));
	/* MAP_FIXED over the middle of the exe: split into three */
	assert_int_equal(gstate_mmap(gs, 50, 0x420000, 0x430000, 0x5000, 2), 0);
	p = gstate_proc_by_tgid(gs, 50);
	{
		static const uint64_t want[][3] = {
			{ 0x400000, 0x420000, 0x1000 },
			{ 0x420000, 0x430000, 0x5000 },
			{ 0x430000, 0x500000, 0x1000 + 0x30000 },
			{ 0x600000, 0x601000, 0 },
			{ 0x7f0000000000ull, 0x7f0000100000ull, 0 },
		};
		expect_maps(p, want, 5);
	}
	/* overlapping the tail of one and the head of the next */
	assert_int_equal(gstate_mmap(gs, 50, 0x4f0000, 0x600800, 0, 1), 0);
	p = gstate_proc_by_tgid(gs, 50);
	{
		static const uint64_t want[][3] = {
			{ 0x400000, 0x420000, 0x1000 },
			{ 0x420000, 0x430000, 0x5000 },
			{ 0x430000, 0x4f0000, 0x31000 },
			{ 0x4f0000, 0x600800, 0 },
			{ 0x600800, 0x601000, 0x800 },
			{ 0x7f0000000000ull, 0x7f0000100000ull, 0 },
		};
		expect_maps(p, want, 6);
	}
	assert_int_equal(gstate_nr_mappings(gs), 6);
	/* covering several entirely */
	assert_int_equal(gstate_mmap(gs, 50, 0x400000, 0x700000, 0, 2), 0);
	p = gstate_proc_by_tgid(gs, 50);
	{
		static const uint64_t want[][3] = {
			{ 0x400000, 0x700000, 0 },
			{ 0x7f0000000000ull, 0x7f0000100000ull, 0 },
		};
		expect_maps(p, want, 2);
	}
	/* munmap a hole, then the rest */
	assert_int_equal(gstate_munmap(gs, 50, 0x500000, 0x600000), 0);
	p = gstate_proc_by_tgid(gs, 50);
	{
		static const uint64_t want[][3] = {
			{ 0x400000, 0x500000, 0 },
			{ 0x600000, 0x700000, 0x200000 },
			{ 0x7f0000000000ull, 0x7f0000100000ull, 0 },
		};
		expect_maps(p, want, 3);
	}
	assert_int_equal(gstate_munmap(gs, 50, 0, UINT64_MAX), 0);
	p = gstate_proc_by_tgid(gs, 50);
	assert_int_equal(p->nr_maps, 0);
	assert_int_equal(gstate_nr_mappings(gs), 0);
	assert_int_equal(gstate_munmap(gs, 50, 0x1000, 0x2000), 0);	/* nothing there */

	/* hostile ranges */
	assert_int_equal(gstate_mmap(gs, 50, 0x2000, 0x1000, 0, 1), -EINVAL);
	assert_int_equal(gstate_mmap(gs, 50, 0x1000, 0x1000, 0, 1), -EINVAL);
	assert_int_equal(gstate_mmap(gs, 50, 0x1000, 0x3000, UINT64_MAX - 0x1000, 1), -EINVAL);
	assert_int_equal(gstate_mmap(gs, 999, 0x1000, 0x2000, 0, 1), -ENOENT);
	assert_int_equal(gstate_munmap(gs, 50, 5, 5), -EINVAL);

	/* a mapping naming a cookie not described yet gets a placeholder that
	 * the late COOKIE record fills in */
	assert_int_equal(gstate_mmap(gs, 50, 0x1000, 0x2000, 0, 42), 0);
	m = gstate_map_find(gstate_proc_by_tgid(gs, 50), 0x1000);
	assert_string_equal(m->cookie->path, "{cookie-2a}");
	assert_int_equal(gstate_cookie(gs, 42, S("/late/lib.so"), NULL, 0), 0);
	m = gstate_map_find(gstate_proc_by_tgid(gs, 50), 0x1000);
	assert_string_equal(m->cookie->path, "/late/lib.so");
	assert_ptr_equal(gstate_cookie_find(gs, 42), m->cookie);
	gstate_free(gs);
}

/* A forked child starts with no mappings: the module sends its own. */
static void test_fork_empty(void **state)
{
	struct gstate *gs = mkgs();

	assert_int_equal(gstate_cookie(gs, 1, S("/bin/sh"), NULL, 0), 0);
	assert_int_equal(gstate_proc(gs, 10, 1, 0x10000, S("sh"), 1), 0);
	assert_int_equal(gstate_mmap(gs, 10, 0x1000, 0x9000, 0, 1), 0);
	assert_int_equal(gstate_proc(gs, 11, 10, 0x20000, S("sh"), 1), 0);
	assert_null(gstate_map_find(gstate_proc_by_cr3(gs, 0x20000), 0x2000));
	assert_int_equal(gstate_nr_mappings(gs), 1);
	/* the same process announced again on the same cr3 keeps its maps */
	assert_int_equal(gstate_proc(gs, 10, 1, 0x10000, S("sh"), 1), 0);
	assert_int_equal(gstate_nr_mappings(gs), 1);
	/* a reused tgid on another address space starts afresh */
	assert_int_equal(gstate_proc(gs, 10, 1, 0x30000, S("sh"), 1), 0);
	assert_int_equal(gstate_nr_mappings(gs), 0);
	assert_null(gstate_proc_by_cr3(gs, 0x10000));
	gstate_free(gs);
}

/* A child starts in its parent's cgroup; the same cgroup again is not a
 * change (sync's caches stay); the table of paths is bounded. */
static void test_cgroups(void **state)
{
	struct gstate_limits lim;
	struct gstate *gs;
	uint64_t gen;

	gstate_default_limits(&lim);
	lim.max_cgroups = 2;
	gs = gstate_new(&lim);
	assert_non_null(gs);
	assert_int_equal(gstate_proc(gs, 10, 1, 0x10000, S("sh"), 0), 0);
	assert_null(gstate_proc_by_tgid(gs, 10)->cgroup);
	assert_int_equal(gstate_cgroup(gs, 10, S("/a")), 0);
	assert_int_equal(gstate_proc(gs, 11, 10, 0x20000, S("sh"), 0), 0);
	assert_string_equal(gstate_proc_by_tgid(gs, 11)->cgroup, "/a");
	gen = gstate_generation(gs);
	assert_int_equal(gstate_cgroup(gs, 11, S("/a")), 0);
	assert_int_equal(gstate_generation(gs), gen);
	assert_int_equal(gstate_cgroup(gs, 11, S("/b")), 0);
	assert_true(gstate_generation(gs) != gen);
	assert_int_equal(gstate_cgroup(gs, 11, S("/c")), -ENOSPC);
	assert_string_equal(gstate_proc_by_tgid(gs, 11)->cgroup, "/b");
	assert_int_equal(gstate_cgroup(gs, 12, S("/a")), -ENOENT);
	assert_int_equal(gstate_cgroup(gs, 11, "", 0), -EINVAL);
	/* an exec keeps it */
	assert_int_equal(gstate_exec(gs, 11, 0x30000, S("x"), 0), 0);
	assert_string_equal(gstate_proc_by_tgid(gs, 11)->cgroup, "/b");
	gstate_free(gs);
}

static int count_mod(const struct gstate_module *m, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

static void test_modules(void **state)
{
	struct gstate *gs = mkgs();
	const struct gstate_module *m;

	assert_int_equal(gstate_module(gs, S("b_mod"), 0xffffffffc0200000ull, 0x1000), 0);
	assert_int_equal(gstate_module(gs, S("a_mod"), 0xffffffffc0000000ull, 0x2000), 0);
	assert_int_equal(gstate_module(gs, S("c_mod"), 0xffffffffc0400000ull, 0x3000), 0);
	assert_int_equal(gstate_nr_modules(gs), 3);
	m = gstate_module_find(gs, 0xffffffffc0001fffull);
	assert_non_null(m);
	assert_string_equal(m->name, "a_mod");
	assert_null(gstate_module_find(gs, 0xffffffffc0002000ull));
	assert_string_equal(gstate_module_find(gs, 0xffffffffc0200000ull)->name, "b_mod");
	assert_string_equal(gstate_module_find(gs, 0xffffffffc0402fffull)->name, "c_mod");
	assert_null(gstate_module_find(gs, 0xffffffff81000000ull));
	assert_null(gstate_module_find(gs, 0));
	/* reload at another address replaces the old instance */
	assert_int_equal(gstate_module(gs, S("b_mod"), 0xffffffffc0600000ull, 0x1000), 0);
	assert_int_equal(gstate_nr_modules(gs), 3);
	assert_null(gstate_module_find(gs, 0xffffffffc0200000ull));
	assert_string_equal(gstate_module_find(gs, 0xffffffffc0600010ull)->name, "b_mod");
	/* a new module over an old range evicts it */
	assert_int_equal(gstate_module(gs, S("d_mod"), 0xffffffffc0001000ull, 0x100), 0);
	assert_null(gstate_module_find(gs, 0xffffffffc0000000ull));
	assert_int_equal(gstate_nr_modules(gs), 3);
	assert_non_null(gstate_module_by_name(gs, S("d_mod")));
	assert_null(gstate_module_by_name(gs, S("a_mod")));
	assert_true(gstate_module_overlaps(gs, 0xffffffffc00010ffull, 0xffffffffc0001100ull));
	assert_false(gstate_module_overlaps(gs, 0xffffffffc0001100ull, 0xffffffffc0002000ull));
	{
		uint64_t lo, hi;

		assert_null(gstate_module_range(gs, 0xffffffffc0001100ull, &lo, &hi));
		assert_int_equal(lo, 0xffffffffc0001100ull);
		assert_int_equal(hi, 0xffffffffc0400000ull);
		assert_non_null(gstate_module_range(gs, 0xffffffffc0400010ull, &lo, &hi));
		assert_int_equal(lo, 0xffffffffc0400000ull);
		assert_int_equal(hi, 0xffffffffc0403000ull);
		assert_null(gstate_module_range(gs, 0x1000, &lo, &hi));
		assert_int_equal(lo, 0);
		assert_int_equal(hi, 0xffffffffc0001000ull);
	}
	assert_int_equal(gstate_module_free(gs, S("d_mod")), 0);
	assert_int_equal(gstate_module_free(gs, S("d_mod")), -ENOENT);
	assert_int_equal(gstate_nr_modules(gs), 2);
	/* hostile */
	assert_int_equal(gstate_module(gs, S("x"), UINT64_MAX - 5, 0x100), -EINVAL);
	assert_int_equal(gstate_module(gs, S("x"), 0x1000, 0), -EINVAL);
	assert_int_equal(gstate_module(gs, "\0\0", 2, 0x1000, 1), -EINVAL);
	{
		int n = 0;

		assert_int_equal(gstate_for_each_module(gs, count_mod, &n), 0);
		assert_int_equal(n, 2);
	}
	gstate_free(gs);
}

static void test_hostile_strings(void **state)
{
	struct gstate *gs = mkgs();
	char longpath[10000];
	const struct gstate_process *p;
	const struct gstate_cookie *c;

	/* control bytes, DEL, bad UTF-8 become '?'; good UTF-8 stays */
	assert_int_equal(gstate_cookie(gs, 1, S("/a\nb\x1b[31m\x7f\xff\xc3\xa9"), NULL, 0), 0);
	c = gstate_cookie_find(gs, 1);
	assert_string_equal(c->path, "/a?b?[31m??\xc3\xa9");
	/* embedded NUL ends the string */
	assert_int_equal(gstate_cookie(gs, 2, S("/bin/x\0/../../etc"), NULL, 0), 0);
	assert_string_equal(gstate_cookie_find(gs, 2)->path, "/bin/x");
	/* empty path gets a name */
	assert_int_equal(gstate_cookie(gs, 3, "", 0, NULL, 0), 0);
	assert_string_equal(gstate_cookie_find(gs, 3)->path, "{cookie-3}");
	/* overlong path: bounded copy */
	memset(longpath, 'a', sizeof(longpath));
	assert_int_equal(gstate_cookie(gs, 4, longpath, sizeof(longpath), NULL, 0), 0);
	assert_int_equal(strlen(gstate_cookie_find(gs, 4)->path), 4096);
	/* truncated multibyte character at the end */
	assert_int_equal(gstate_cookie(gs, 5, S("x\xe2\x82"), NULL, 0), 0);
	assert_string_equal(gstate_cookie_find(gs, 5)->path, "x??");
	/* build ids: bounded */
	assert_int_equal(gstate_cookie(gs, 6, S("/x"), (const uint8_t *)longpath, 33), -EINVAL);
	assert_int_equal(gstate_cookie(gs, 0, S("/x"), NULL, 0), -EINVAL);
	/* comm: unterminated 16 bytes, or longer, is cut at 16 */
	assert_int_equal(gstate_proc(gs, 7, 1, 0x1000, longpath, sizeof(longpath), 0), 0);
	p = gstate_proc_by_tgid(gs, 7);
	assert_int_equal(strlen(p->comm), 16);
	assert_int_equal(gstate_thread(gs, 8, 7, "\x01\x02", 2), 0);
	assert_string_equal(gstate_thread_comm(gs, 8), "??");
	/* module names */
	assert_int_equal(gstate_module(gs, longpath, sizeof(longpath), 0x1000, 0x10), 0);
	assert_int_equal(strlen(gstate_module_find(gs, 0x1000)->name), 56);
	gstate_free(gs);
}

static void test_limits(void **state)
{
	struct gstate_limits lim = {
		.max_processes = 4, .max_threads = 3, .max_mappings_per_proc = 3,
		.max_mappings = 5, .max_cookies = 2, .max_modules = 2,
	};
	struct gstate *gs = gstate_new(&lim);
	struct chan_hello h = { .version = 1 };
	uint64_t refused;

	assert_non_null(gs);
	assert_int_equal(gstate_hello(gs, &h), 0);
	for (uint32_t i = 1; i <= 4; i++)
		assert_int_equal(gstate_proc(gs, i, 0, i << 12, S("p"), 0), 0);
	refused = gstate_get_stats(gs)->refused;
	assert_int_equal(gstate_proc(gs, 5, 0, 5 << 12, S("p"), 0), -ENOSPC);
	assert_int_equal(gstate_get_stats(gs)->refused, refused + 1);
	assert_int_equal(gstate_nr_processes(gs), 4);
	/* an existing process may still be re-announced */
	assert_int_equal(gstate_proc(gs, 4, 0, 4 << 12, S("p2"), 0), 0);

	for (uint32_t i = 10; i < 13; i++)
		assert_int_equal(gstate_thread(gs, i, 1, S("t")), 0);
	assert_int_equal(gstate_thread(gs, 13, 1, S("t")), -ENOSPC);

	assert_int_equal(gstate_cookie(gs, 1, S("/a"), NULL, 0), 0);
	assert_int_equal(gstate_cookie(gs, 2, S("/b"), NULL, 0), 0);
	assert_int_equal(gstate_cookie(gs, 3, S("/c"), NULL, 0), -ENOSPC);
	assert_int_equal(gstate_cookie(gs, 2, S("/b2"), NULL, 0), 0);	/* update ok */
	/* unknown cookie and no room for a placeholder */
	assert_int_equal(gstate_mmap(gs, 1, 0x1000, 0x2000, 0, 9), -ENOSPC);

	assert_int_equal(gstate_mmap(gs, 1, 0x1000, 0x2000, 0, 1), 0);
	assert_int_equal(gstate_mmap(gs, 1, 0x3000, 0x4000, 0, 1), 0);
	assert_int_equal(gstate_mmap(gs, 1, 0x5000, 0x6000, 0, 1), 0);
	assert_int_equal(gstate_mmap(gs, 1, 0x7000, 0x8000, 0, 1), -ENOSPC);	/* per proc */
	/* splitting would exceed the per-process bound too */
	assert_int_equal(gstate_munmap(gs, 1, 0x1400, 0x1800), -ENOSPC);
	/* replacing in place stays within bounds */
	assert_int_equal(gstate_mmap(gs, 1, 0x5000, 0x6000, 0, 2), 0);
	assert_int_equal(gstate_mmap(gs, 2, 0x1000, 0x2000, 0, 1), 0);
	assert_int_equal(gstate_mmap(gs, 2, 0x3000, 0x4000, 0, 1), 0);
	assert_int_equal(gstate_mmap(gs, 3, 0x3000, 0x4000, 0, 1), -ENOSPC);	/* global */
	assert_int_equal(gstate_nr_mappings(gs), 5);

	assert_int_equal(gstate_module(gs, S("m1"), 0x1000, 0x10), 0);
	assert_int_equal(gstate_module(gs, S("m2"), 0x2000, 0x10), 0);
	assert_int_equal(gstate_module(gs, S("m3"), 0x3000, 0x10), -ENOSPC);
	assert_int_equal(gstate_nr_modules(gs), 2);
	gstate_free(gs);
}

static int count_proc(const struct gstate_process *p, void *arg)
{
	(*(size_t *)arg)++;
	return 0;
}

/* A guest that forks, execs and reaps processes forever: tables return to
 * their baseline, lookups stay right. */
static void test_forker_churn(void **state)
{
	struct gstate *gs = mkgs();
	size_t np, nt, nm, nc, n = 0;

	assert_int_equal(gstate_cookie(gs, 1, S("/bin/sh"), NULL, 0), 0);
	assert_int_equal(gstate_cookie(gs, 2, S("/bin/true"), NULL, 0), 0);
	assert_int_equal(gstate_cookie(gs, 3, S("/lib/libc.so.6"), NULL, 0), 0);
	assert_int_equal(gstate_proc(gs, 1, 0, 0x2000, S("sh"), 1), 0);
	assert_int_equal(gstate_mmap(gs, 1, 0x400000, 0x500000, 0, 1), 0);
	assert_int_equal(gstate_mmap(gs, 1, 0x7f0000000000ull, 0x7f0000100000ull, 0, 3), 0);
	np = gstate_nr_processes(gs);
	nt = gstate_nr_threads(gs);
	nm = gstate_nr_mappings(gs);
	nc = gstate_nr_cookies(gs);
	for (uint32_t i = 0; i < 100000; i++) {
		uint32_t tgid = 2 + (i % 30000) * 2;	/* pids get reused */
		uint64_t cr3 = 0x100000 + (uint64_t)(i % 777) * 0x2000;

		assert_int_equal(gstate_proc(gs, tgid, 1, cr3, S("sh"), 1), 0);
		assert_int_equal(gstate_thread(gs, tgid + 1, tgid, S("sh")), 0);
		assert_int_equal(gstate_exec(gs, tgid, cr3, S("true"), 2), 0);
		assert_int_equal(gstate_mmap(gs, tgid, 0x400000, 0x401000, 0, 2), 0);
		assert_int_equal(gstate_mmap(gs, tgid, 0x7f0000000000ull, 0x7f0000100000ull, 0, 3), 0);
		assert_int_equal(gstate_proc_by_cr3(gs, cr3)->tgid, tgid);
		assert_string_equal(gstate_map_find(gstate_proc_by_cr3(gs, cr3), 0x400000)->cookie->path,
				    "/bin/true");
		if (i & 1)
			assert_int_equal(gstate_thread_exit(gs, tgid + 1), 0);
		assert_int_equal(gstate_proc_exit(gs, tgid), 0);
	}
	assert_int_equal(gstate_nr_processes(gs), np);
	assert_int_equal(gstate_nr_threads(gs), nt);
	assert_int_equal(gstate_nr_mappings(gs), nm);
	assert_int_equal(gstate_nr_cookies(gs), nc);
	assert_int_equal(gstate_for_each_proc(gs, count_proc, &n), 0);
	assert_int_equal(n, np);
	assert_non_null(gstate_map_find(gstate_proc_by_cr3(gs, 0x2000), 0x400000));
	assert_int_equal(gstate_get_stats(gs)->refused, 0);
	gstate_free(gs);
}

/* Many processes: every one is found by tgid and cr3 after deletions
 * scattered through the hash tables. */
static void test_hash_many(void **state)
{
	struct gstate *gs = mkgs();

	for (uint32_t i = 1; i <= 20000; i++)
		assert_int_equal(gstate_proc(gs, i, 0, (uint64_t)i << 13, S("p"), 0), 0);
	for (uint32_t i = 1; i <= 20000; i += 3)
		assert_int_equal(gstate_proc_exit(gs, i), 0);
	for (uint32_t i = 1; i <= 20000; i++) {
		const struct gstate_process *p = gstate_proc_by_cr3(gs, (uint64_t)i << 13);

		if (i % 3 == 1) {
			assert_null(p);
			assert_null(gstate_proc_by_tgid(gs, i));
		} else {
			assert_non_null(p);
			assert_int_equal(p->tgid, i);
		}
	}
	for (uint32_t i = 1; i <= 20000; i++)
		if (i % 3 != 1)
			assert_int_equal(gstate_proc_exit(gs, i), 0);
	assert_int_equal(gstate_nr_processes(gs), 0);
	gstate_lost(gs, 5);
	gstate_lost(gs, UINT64_MAX);
	assert_int_equal(gstate_get_stats(gs)->guest_lost, UINT64_MAX);
	gstate_free(gs);
}

/*
 * Random mmap/munmap/exec/exit sequences against a page-by-page reference
 * model: every lookup agrees with the reference (file, file offset), and
 * every process's mappings stay sorted and disjoint.
 */
#define RP	64	/* pages in the test address range */
#define RT	4	/* processes */

struct refpage {
	int mapped;
	uint64_t cookie;	/* 0: anonymous */
	uint64_t off;		/* file offset of the page */
};

static uint64_t lcg = 12345;

static uint64_t rnd(void)
{
	lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
	return lcg >> 33;
}

static void check_invariants(struct gstate *gs, struct refpage ref[RT][RP], const int *alive)
{
	size_t total = 0;

	for (int t = 0; t < RT; t++) {
		const struct gstate_process *p = gstate_proc_by_tgid(gs, 10 + (uint32_t)t);

		if (!alive[t]) {
			assert_null(p);
			continue;
		}
		assert_non_null(p);
		total += p->nr_maps;
		for (size_t i = 0; i < p->nr_maps; i++) {
			assert_true(p->maps[i].start < p->maps[i].end);
			if (i)
				assert_true(p->maps[i - 1].end <= p->maps[i].start);
		}
		for (int pg = 0; pg < RP; pg++) {
			uint64_t addr = (uint64_t)pg * 0x1000 + 0x10;
			const struct gstate_mapping *m = gstate_map_find(p, addr);

			if (!ref[t][pg].mapped) {
				assert_null(m);
				continue;
			}
			assert_non_null(m);
			assert_int_equal(m->cookie ? m->cookie->id : 0, ref[t][pg].cookie);
			assert_int_equal(addr - m->start + m->pgoff, ref[t][pg].off + 0x10);
		}
	}
	assert_int_equal(gstate_nr_mappings(gs), total);
}

static void test_random_against_reference(void **state)
{
	struct gstate *gs = mkgs();
	static struct refpage ref[RT][RP];
	int alive[RT] = { 0 };

	memset(ref, 0, sizeof(ref));
	for (uint64_t c = 1; c <= 3; c++)
		assert_int_equal(gstate_cookie(gs, c, "/lib/x", 6, NULL, 0), 0);
	for (int op = 0; op < 30000; op++) {
		int t = (int)(rnd() % RT);
		uint32_t tgid = 10 + (uint32_t)t;
		uint64_t a = rnd() % RP, b = rnd() % (RP + 1), r = rnd() % 100;

		if (r < 5) {		/* exit */
			assert_int_equal(gstate_proc_exit(gs, tgid), alive[t] ? 0 : -ENOENT);
			alive[t] = 0;
			memset(ref[t], 0, sizeof(ref[t]));
		} else if (r < 10) {	/* exec, or a new process */
			assert_int_equal(gstate_exec(gs, tgid, (uint64_t)(t + 1) << 13, "x", 1, 1), 0);
			alive[t] = 1;
			memset(ref[t], 0, sizeof(ref[t]));
		} else if (!alive[t]) {
			assert_int_equal(gstate_proc(gs, tgid, 1, (uint64_t)(t + 1) << 13, "x", 1, 1), 0);
			alive[t] = 1;
		} else if (a < b && r < 70) {	/* mmap [a, b) */
			uint64_t cookie = rnd() % 4, pgoff = (rnd() % 16) * 0x1000;

			assert_int_equal(gstate_mmap(gs, tgid, a * 0x1000, b * 0x1000, pgoff, cookie), 0);
			for (uint64_t pg = a; pg < b; pg++)
				ref[t][pg] = (struct refpage){ 1, cookie, pgoff + (pg - a) * 0x1000 };
		} else if (a < b) {		/* munmap [a, b) */
			assert_int_equal(gstate_munmap(gs, tgid, a * 0x1000, b * 0x1000), 0);
			for (uint64_t pg = a; pg < b; pg++)
				ref[t][pg].mapped = 0;
		}
		if (op % 16 == 0)
			check_invariants(gs, ref, alive);
	}
	check_invariants(gs, ref, alive);
	gstate_free(gs);
}

/* Long paths for many cookies: each model stops at its own byte limit,
 * both together at the shared budget; a rename flood does not grow a
 * model; freeing a model gives its bytes back to the budget. */
static void test_mem_budget(void **state)
{
	struct gstate_budget b = { .limit = 3u << 19 };	/* 1.5 MiB */
	struct gstate_limits lim;
	struct gstate *gs[2];
	char path[4000];
	size_t before;

	gstate_default_limits(&lim);
	assert_int_equal(lim.max_bytes, OPVM_MODEL_MAX_BYTES);
	lim.max_bytes = 1u << 20;
	lim.shared = &b;
	memset(path, 'p', sizeof(path));
	for (int k = 0; k < 2; k++) {
		int ok = 0;

		gs[k] = gstate_new(&lim);
		assert_non_null(gs[k]);
		for (uint64_t id = 1; id <= 2000; id++) {
			path[0] = '/';
			path[1] = (char)('a' + id % 26);
			if (gstate_cookie(gs[k], id, path, sizeof(path), NULL, 0) == 0)
				ok++;
		}
		print_message("model %d: %d of 2000 cookies, %zu bytes, %llu refused for memory\n",
			      k, ok, gstate_mem_bytes(gs[k]),
			      (unsigned long long)gstate_get_stats(gs[k])->nomem);
		assert_true(ok > 50);
		assert_true(ok < 2000);
		assert_true(gstate_mem_bytes(gs[k]) <= lim.max_bytes);
		assert_true(gstate_get_stats(gs[k])->nomem > 0);
	}
	/* the second model ran into the shared budget first */
	assert_true(gstate_mem_bytes(gs[1]) < gstate_mem_bytes(gs[0]));
	assert_int_equal(b.used, gstate_mem_bytes(gs[0]) + gstate_mem_bytes(gs[1]));
	assert_true(b.used <= b.limit);
	/* renaming one cookie again and again holds no more memory */
	before = gstate_mem_bytes(gs[0]);
	for (int i = 0; i < 10000; i++) {
		snprintf(path, sizeof(path), "/renamed/%d", i);
		assert_int_equal(gstate_cookie(gs[0], 1, path, strlen(path), NULL, 0), 0);
	}
	assert_true(gstate_mem_bytes(gs[0]) <= before);
	/* a process table flood stops at the limit too */
	for (uint32_t t = 1; t < 200000; t++)
		gstate_proc(gs[1], t, 1, (uint64_t)t << 12, "x", 1, 0);
	assert_true(gstate_mem_bytes(gs[1]) <= lim.max_bytes);
	assert_true(b.used <= b.limit);
	gstate_free(gs[0]);
	assert_int_equal(b.used, gstate_mem_bytes(gs[1]));
	gstate_free(gs[1]);
	assert_int_equal(b.used, 0);
}

static void test_stats_json(void **state)
{
	struct opvm_stats a = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 }, b = { 0 }, c;
	static const char *keys[] = { "received", "kernel", "user", "lost_overflow",
		"lost_no_mapping", "lost_no_process", "throttled", "unresolved", "guest_lost",
		"before_start", "python", "python_unnamed" };
	json_t *o = stats_to_json(&a);
	char *txt;
	json_t *back;

	assert_non_null(o);
	assert_int_equal(json_object_size(o), ARRAY_SIZE(keys));
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
		assert_int_equal(json_integer_value(json_object_get(o, keys[i])), i + 1);
	txt = json_dumps(o, 0);
	back = json_loads(txt, 0, NULL);
	assert_int_equal(stats_from_json(back, &b), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	stats_add(&b, &a);
	assert_int_equal(b.guest_lost, 18);
	assert_int_equal(b.received, 2);
	c = (struct opvm_stats){ .user = UINT64_MAX };
	stats_add(&c, &a);
	assert_int_equal(c.user, UINT64_MAX);
	/* a saturated counter goes to session.json as INT64_MAX and comes
	 * back saturated (printed as such, not as 9223372036854775807) */
	{
		json_t *sat = stats_to_json(&c);
		char buf[OPVM_COUNT_BUF];

		assert_int_equal(json_integer_value(json_object_get(sat, "user")), INT64_MAX);
		assert_int_equal(stats_from_json(sat, &b), 0);
		assert_true(b.user >= OPVM_COUNT_SATURATED);
		assert_string_equal(stats_fmt_count(b.user, buf), ">= 2^63");
		assert_int_equal(b.received, 1);
		json_decref(sat);
	}
	/* missing keys read as 0, wrong types are refused */
	json_object_del(back, "kernel");
	assert_int_equal(stats_from_json(back, &b), 0);
	assert_int_equal(b.kernel, 0);
	json_object_set_new(back, "user", json_string("x"));
	assert_int_equal(stats_from_json(back, &b), -EINVAL);
	json_decref(o);
	o = json_array();
	assert_int_equal(stats_from_json(o, &b), -EINVAL);
	free(txt);
	json_decref(back);
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello_reset),
		cmocka_unit_test(test_procs_threads),
		cmocka_unit_test(test_shared_cr3),
		cmocka_unit_test(test_exit_after_shared_cr3_is_o1),
		cmocka_unit_test(test_cookie_renames),
		cmocka_unit_test(test_mappings),
		cmocka_unit_test(test_fork_empty),
		cmocka_unit_test(test_cgroups),
		cmocka_unit_test(test_modules),
		cmocka_unit_test(test_hostile_strings),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_forker_churn),
		cmocka_unit_test(test_hash_many),
		cmocka_unit_test(test_random_against_reference),
		cmocka_unit_test(test_mem_budget),
		cmocka_unit_test(test_stats_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
