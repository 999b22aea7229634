// SPDX-License-Identifier: MIT
/*
 * Unit tests for sync (host/collect/attribution.c): attribution rules, separation, late
 * guest state held back and resolved, expiry and overflow accounting, and
 * the seed test (a 1 %/99 % profile survives rings -> sync -> sample files).
 * Results are read back from the sample files with the store's reader.
 */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/collect/gstate.h"
#include "lib/array.h"
#include "lib/pynames.h"
#include "lib/ring.h"
#include "host/collect/store.h"
#include "host/collect/attribution.h"

#define S(x) x, sizeof(x) - 1

#define CR3_A	0x1234000ull	/* process 100, /bin/app */
#define CR3_B	0x5678000ull	/* process 200, /usr/bin/other */
#define EXE_LO	0x400000ull
#define EXE_HI	0x480000ull
#define LIBC_LO	0x7f0000000000ull
#define LIBC_HI	0x7f0000200000ull
#define MOD_LO	0xffffffffc0010000ull
#define KTEXT	0xffffffff81000000ull

struct fix {
	char dir[256];
	struct store *st;
	struct gstate *gs;
	struct attribution *sy;
	struct ring *rings[2];
};

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(p);
}

static void fix_open(struct fix *f, unsigned sep, unsigned hold_ms, size_t hold_max,
		     bool hello)
{
	struct store_event ev[2] = { { .name = "TIMER", .count = 1 },
				     { .name = "CYCLES", .count = 100000 } };
	struct attribution_config cfg = { .hold_ms = hold_ms, .hold_max = hold_max };
	const char *tmp = getenv("TMPDIR");

	snprintf(f->dir, sizeof(f->dir), "%s/opvm-test-attribution-XXXXXX", tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(f->dir));
	f->st = store_open(f->dir, "g1", ev, 2, sep, 0);
	assert_non_null(f->st);
	f->gs = gstate_new(NULL);
	assert_non_null(f->gs);
	f->rings[0] = ring_new(1 << 16);
	f->rings[1] = ring_new(1 << 16);
	assert_non_null(f->rings[0]);
	assert_non_null(f->rings[1]);
	f->sy = attribution_new(f->st, f->gs, f->rings, 2, &cfg);
	assert_non_null(f->sy);
	if (hello) {
		struct chan_hello h = { .version = 1, .nr_cpus = 2 };

		assert_int_equal(gstate_hello(f->gs, &h), 0);
		assert_int_equal(gstate_cookie(f->gs, 1, S("/bin/app"), (const uint8_t *)"\xab\xcd", 2), 0);
		assert_int_equal(gstate_cookie(f->gs, 2, S("/lib/libc.so.6"), NULL, 0), 0);
		assert_int_equal(gstate_cookie(f->gs, 3, S("/usr/bin/other"), NULL, 0), 0);
		assert_int_equal(gstate_proc(f->gs, 100, 1, CR3_A | 0x1005, S("app"), 1), 0);
		assert_int_equal(gstate_thread(f->gs, 101, 100, S("app-worker")), 0);
		assert_int_equal(gstate_mmap(f->gs, 100, EXE_LO, EXE_HI, 0x1000, 1), 0);
		assert_int_equal(gstate_mmap(f->gs, 100, LIBC_LO, LIBC_HI, 0x26000, 2), 0);
		assert_int_equal(gstate_proc(f->gs, 200, 1, CR3_B, S("other"), 3), 0);
		assert_int_equal(gstate_mmap(f->gs, 200, EXE_LO, EXE_HI, 0, 3), 0);
		assert_int_equal(gstate_module(f->gs, S("e1000"), MOD_LO, 0x8000), 0);
	}
}

static void fix_close(struct fix *f)
{
	attribution_free(f->sy);
	store_close(f->st);
	gstate_free(f->gs);
	ring_free(f->rings[0]);
	ring_free(f->rings[1]);
	nftw(f->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static struct opvm_sample user(uint64_t cr3, uint64_t rip, uint32_t tid, uint32_t tgid)
{
	return (struct opvm_sample){
		.rip = rip, .cr3 = cr3, .slot_cr3 = cr3, .slot_tid = tid,
		.slot_tgid = tgid, .cpl = 3, .flags = tid ? OPVM_SAMPLE_SLOT : 0,
	};
}

static struct opvm_sample kern(uint64_t cr3, uint64_t rip, uint32_t tid, uint32_t tgid,
			       uint8_t flags)
{
	return (struct opvm_sample){
		.rip = rip, .cr3 = cr3, .slot_tid = tid, .slot_tgid = tgid,
		.cpl = 0, .flags = flags,
	};
}

/* ---- reading results back ------------------------------------------------ */

struct query {
	const char *app, *image;	/* app NULL: any */
	int64_t tgid, tid, cpu;		/* -2: any */
	const char *event;		/* NULL: any */
	uint64_t offset;		/* UINT64_MAX: all offsets */
	uint64_t lo, len;		/* len != 0: offsets in [lo, lo + len) */
	uint64_t sum;
	unsigned files;
	int kernel;
	int python;			/* files under {py} seen */
	const char *cg;			/* NULL: any; "": none */
};

static int sum_cb(uint64_t off, uint64_t count, void *arg)
{
	struct query *q = arg;

	if (q->len ? off - q->lo < q->len : (q->offset == UINT64_MAX || q->offset == off))
		q->sum += count;
	return 0;
}

static int walk_cb(const struct store_entry *e, void *arg)
{
	struct query *q = arg;
	struct sfile_reader *r;
	char err[256];

	if (q->image && strcmp(e->image, q->image))
		return 0;
	if (q->app && strcmp(e->app, q->app))
		return 0;
	if ((q->tgid != -2 && e->tgid != q->tgid) || (q->tid != -2 && e->tid != q->tid) ||
	    (q->cpu != -2 && e->cpu != q->cpu))
		return 0;
	if (q->event && strcmp(e->event, q->event))
		return 0;
	if (q->cg && (*q->cg ? !e->cgroup || strcmp(e->cgroup, q->cg) : !!e->cgroup))
		return 0;
	r = sfile_reader_open(e->path, err, sizeof(err));
	if (!r)
		fail_msg("cannot read %s: %s", e->path, err);
	q->files++;
	q->kernel = e->kernel;
	q->python += e->python;
	assert_int_equal(sfile_reader_foreach(r, sum_cb, q), 0);
	sfile_reader_close(r);
	return 0;
}

static uint64_t count_at(struct fix *f, const char *app, const char *image,
			 int64_t tgid, int64_t tid, int64_t cpu, uint64_t offset,
			 unsigned *files)
{
	struct query q = { .app = app, .image = image, .tgid = tgid, .tid = tid,
			   .cpu = cpu, .offset = offset };

	assert_int_equal(store_sync(f->st), 0);
	assert_int_equal(store_walk(f->dir, "current", walk_cb, &q, NULL), 0);
	if (files)
		*files = q.files;
	return q.sum;
}

#define ANY -2
#define ALL UINT64_MAX

static uint64_t count_range(struct fix *f, const char *image, uint64_t lo, uint64_t len)
{
	struct query q = { .image = image, .tgid = ANY, .tid = ANY, .cpu = ANY,
			   .lo = lo, .len = len };

	assert_int_equal(store_sync(f->st), 0);
	assert_int_equal(store_walk(f->dir, "current", walk_cb, &q, NULL), 0);
	return q.sum;
}

static void test_kernel(void **state)
{
	struct fix f;
	struct opvm_sample s;
	struct opvm_stats st;

	fix_open(&f, OPVM_SEP_NONE, 1000, 0, true);
	s = kern(CR3_A, KTEXT + 0x1234, 100, 100, OPVM_SAMPLE_SLOT);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s.rip = MOD_LO + 0x42;
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s.rip = MOD_LO + 0x8000;	/* just past the module: its record may be late */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	assert_int_equal(attribution_flush(f.sy, 0), 0);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.lost_no_mapping, 1);
	/* vmlinux keeps the run-time address, modules the offset from base */
	assert_int_equal(count_at(&f, "vmlinux", "vmlinux", -1, -1, -1, KTEXT + 0x1234, NULL), 2);
	assert_int_equal(count_at(&f, "vmlinux", "vmlinux", -1, -1, -1, MOD_LO + 0x8000, NULL), 1);
	assert_int_equal(count_at(&f, "e1000", "e1000", -1, -1, -1, 0x42, NULL), 1);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.received, 4);
	assert_int_equal(st.kernel, 4);
	assert_int_equal(st.user, 0);
	fix_close(&f);
}

static void test_user_and_lib(void **state)
{
	struct fix f;
	struct opvm_sample s;
	struct opvm_stats st;
	unsigned files;

	fix_open(&f, OPVM_SEP_NONE, 1000, 0, true);
	/* raw CR3 with PCID and the PTI bit: normalised before lookup */
	s = user(CR3_A | 0x1005 | (1ull << 63), EXE_LO + 0x10, 100, 100);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s.rip = LIBC_LO + 0x100;
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = user(CR3_B, EXE_LO + 0x10, 200, 200);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	/* file offsets: addr - start + pgoff */
	assert_int_equal(count_at(&f, "/bin/app", "/bin/app", -1, -1, -1, 0x1010, NULL), 1);
	assert_int_equal(count_at(&f, "/lib/libc.so.6", "/lib/libc.so.6", -1, -1, -1, 0x26100, NULL), 1);
	assert_int_equal(count_at(&f, "/usr/bin/other", "/usr/bin/other", -1, -1, -1, 0x10, &files), 1);
	assert_int_equal(files, 1);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.user, 3);
	assert_int_equal(st.lost_no_mapping + st.lost_no_process + st.unresolved, 0);
	fix_close(&f);

	/* --separate=lib: libc under the app's {dep} */
	fix_open(&f, OPVM_SEP_LIB, 1000, 0, true);
	s = user(CR3_A, LIBC_LO + 0x100, 100, 100);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = user(CR3_A, EXE_LO, 100, 100);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(count_at(&f, "/bin/app", "/lib/libc.so.6", -1, -1, -1, 0x26100, NULL), 1);
	assert_int_equal(count_at(&f, "/bin/app", "/bin/app", -1, -1, -1, 0x1000, NULL), 1);
	assert_int_equal(count_at(&f, "/lib/libc.so.6", "/lib/libc.so.6", ANY, ANY, ANY, ALL, NULL), 0);
	fix_close(&f);
}

static uint64_t count_cg(struct fix *f, const char *image, const char *cg)
{
	struct query q = { .image = image, .tgid = ANY, .tid = ANY, .cpu = ANY, .offset = ALL,
			   .cg = cg };

	assert_int_equal(store_sync(f->st), 0);
	assert_int_equal(store_walk(f->dir, "current", walk_cb, &q, NULL), 0);
	return q.sum;
}

/* Two processes of one binary in two cgroups: their samples stay apart
 * even with nothing separated; a move files the next samples under the
 * new cgroup (the caches follow); a process's kernel time is in its
 * cgroup where kernel time is filed under the process. */
static void test_cgroup_keys(void **state)
{
	struct fix f;
	struct opvm_sample s;

	fix_open(&f, OPVM_SEP_NONE, 1000, 0, true);
	assert_int_equal(gstate_mmap(f.gs, 200, EXE_LO, EXE_HI, 0x1000, 1), 0); /* /bin/app */
	assert_int_equal(gstate_cgroup(f.gs, 100, S("/a")), 0);
	assert_int_equal(gstate_cgroup(f.gs, 200, S("/b")), 0);
	for (int i = 0; i < 3; i++) {
		s = user(CR3_A, EXE_LO + 0x10, 100, 100);
		assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	}
	s = user(CR3_B, EXE_LO + 0x10, 200, 200);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(count_cg(&f, "/bin/app", "/a"), 3);
	assert_int_equal(count_cg(&f, "/bin/app", "/b"), 1);
	assert_int_equal(count_cg(&f, "/bin/app", ""), 0);
	/* 200 moves to /a: the same file as 100's from now on */
	assert_int_equal(gstate_cgroup(f.gs, 200, S("/a")), 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(count_cg(&f, "/bin/app", "/a"), 4);
	assert_int_equal(count_cg(&f, "/bin/app", "/b"), 1);
	/* the kernel's own samples have no cgroup here */
	s = kern(CR3_A, KTEXT + 0x40, 100, 100, OPVM_SAMPLE_SLOT);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(count_cg(&f, "vmlinux", ""), 1);
	fix_close(&f);

	fix_open(&f, OPVM_SEP_LIB | OPVM_SEP_KERNEL, 1000, 0, true);
	assert_int_equal(gstate_cgroup(f.gs, 100, S("/a")), 0);
	s = kern(CR3_A, KTEXT + 0x40, 100, 100, OPVM_SAMPLE_SLOT);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(count_cg(&f, "vmlinux", "/a"), 1);
	fix_close(&f);
}

static void test_thread_cpu(void **state)
{
	struct fix f;
	struct opvm_sample s;

	fix_open(&f, OPVM_SEP_THREAD | OPVM_SEP_CPU, 1000, 0, true);
	s = user(CR3_A, EXE_LO + 8, 100, 100);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = user(CR3_A, EXE_LO + 8, 101, 100);	/* worker thread */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s.vcpu = 1;
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(count_at(&f, "/bin/app", "/bin/app", 100, 100, 0, 0x1008, NULL), 1);
	assert_int_equal(count_at(&f, "/bin/app", "/bin/app", 100, 101, 0, 0x1008, NULL), 2);
	assert_int_equal(count_at(&f, "/bin/app", "/bin/app", 100, 101, 1, 0x1008, NULL), 1);
	fix_close(&f);

	/* merged: one file with tgid/tid/cpu "all" */
	fix_open(&f, OPVM_SEP_NONE, 1000, 0, true);
	s = user(CR3_A, EXE_LO + 8, 100, 100);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = user(CR3_A, EXE_LO + 8, 101, 100);
	s.vcpu = 1;
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	{
		unsigned files;

		assert_int_equal(count_at(&f, "/bin/app", "/bin/app", -1, -1, -1, 0x1008, &files), 2);
		assert_int_equal(files, 1);
	}
	fix_close(&f);
}

/* Idle (pid 0 by the slot: Linux marks its idle tasks as kernel threads) and
 * code below the kernel half (firmware, decompressor) are their own apps in
 * the default separation too; the per-range cache does not mix them with
 * the kernel work at the same addresses. */
static void test_idle_boot_own_apps(void **state)
{
	struct fix f;
	struct opvm_sample s;

	(void)state;
	fix_open(&f, OPVM_SEP_LIB, 1000, 0, true);
	s = kern(CR3_A, KTEXT + 0x10, 101, 100, OPVM_SAMPLE_SLOT);	/* work */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = kern(CR3_A, KTEXT + 0x14, 0, 0, OPVM_SAMPLE_SLOT | OPVM_SAMPLE_KTHREAD);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = kern(0, 0xfd09a, 0, 0, 0);					/* BIOS */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = kern(0, 0x1000000 + 0x42, 0, 0, 0);				/* decompressor */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(count_at(&f, "vmlinux", "vmlinux", -1, -1, -1, KTEXT + 0x10, NULL), 1);
	assert_int_equal(count_at(&f, "vmlinux", "vmlinux", ANY, ANY, ANY, KTEXT + 0x14, NULL), 0);
	assert_int_equal(count_at(&f, "{idle}", "vmlinux", -1, -1, -1, KTEXT + 0x14, NULL), 2);
	assert_int_equal(count_at(&f, "{boot}", "vmlinux", -1, -1, -1, 0xfd09a, NULL), 1);
	assert_int_equal(count_at(&f, "{boot}", "vmlinux", -1, -1, -1, 0x1000042, NULL), 1);
	assert_string_equal(store_app_label("{idle}"), "(idle)");
	assert_string_equal(store_app_label("{boot}"), "(firmware/boot)");
	assert_string_equal(store_app_label("/bin/app"), "/bin/app");
	fix_close(&f);
}

/* Kernel samples are named by the slot, not CR3: a kernel thread running on
 * the borrowed CR3 of process 100 is not process 100. */
static void test_kernel_separation(void **state)
{
	struct fix f;
	struct opvm_sample s;

	fix_open(&f, OPVM_SEP_KERNEL | OPVM_SEP_LIB | OPVM_SEP_THREAD, 1000, 0, true);
	assert_int_equal(gstate_proc(f.gs, 7, 2, 0, S("kworker/0:1"), 0), 0);
	s = kern(CR3_A, KTEXT + 0x10, 101, 100, OPVM_SAMPLE_SLOT);	/* syscall in app */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = kern(CR3_A, KTEXT + 0x20, 7, 7, OPVM_SAMPLE_SLOT | OPVM_SAMPLE_KTHREAD);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = kern(CR3_A, MOD_LO + 4, 0, 0, OPVM_SAMPLE_SLOT);	/* idle task */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = kern(CR3_B, KTEXT + 0x30, 0, 0, 0);			/* no slot: CR3 */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(count_at(&f, "/bin/app", "vmlinux", 100, 101, -1, KTEXT + 0x10, NULL), 1);
	assert_int_equal(count_at(&f, "{kthread}", "vmlinux", 7, 7, -1, KTEXT + 0x20, NULL), 1);
	assert_int_equal(count_at(&f, "/bin/app", "vmlinux", ANY, ANY, ANY, KTEXT + 0x20, NULL), 0);
	assert_int_equal(count_at(&f, "{idle}", "e1000", 0, 0, -1, 4, NULL), 1);
	assert_int_equal(count_at(&f, "/usr/bin/other", "vmlinux", 200, 200, -1, KTEXT + 0x30, NULL), 1);
	assert_int_equal(attribution_nr_held(f.sy), 0);

	/* ids the model does not know (a late record, or a hostile slot) are
	 * held, then merged: never a file per made-up id */
	s = kern(CR3_A, KTEXT + 0x40, 999, 999, OPVM_SAMPLE_SLOT | OPVM_SAMPLE_KTHREAD);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = kern(CR3_A, KTEXT + 0x50, 4242, 100, OPVM_SAMPLE_SLOT);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = user(CR3_A, EXE_LO + 0x60, 4243, 100);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = user(CR3_A, EXE_LO + 0x70, 101, 100);			/* known thread */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 3);
	assert_int_equal(attribution_flush(f.sy, 0), 0);
	assert_int_equal(count_at(&f, "{kthread}", "vmlinux", -1, -1, -1, KTEXT + 0x40, NULL), 1);
	assert_int_equal(count_at(&f, "/bin/app", "vmlinux", 100, 100, -1, KTEXT + 0x50, NULL), 1);
	assert_int_equal(count_at(&f, "/bin/app", "/bin/app", 100, 100, -1, 0x1060, NULL), 1);
	assert_int_equal(count_at(&f, "/bin/app", "/bin/app", 100, 101, -1, 0x1070, NULL), 1);
	fix_close(&f);

	/* without --separate=kernel the kernel is its own app */
	fix_open(&f, OPVM_SEP_LIB | OPVM_SEP_THREAD, 1000, 0, true);
	s = kern(CR3_A, KTEXT + 0x10, 101, 100, OPVM_SAMPLE_SLOT);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(count_at(&f, "vmlinux", "vmlinux", 100, 101, -1, KTEXT + 0x10, NULL), 1);
	fix_close(&f);
}

/* A kernel sample in a module announced late: held, then filed in the
 * module. */
static void test_late_module(void **state)
{
	struct fix f;
	struct opvm_sample s;
	struct opvm_stats st;

	fix_open(&f, OPVM_SEP_NONE, 1000, 0, true);
	s = kern(CR3_A, MOD_LO + 0x100000 + 0x24, 100, 100, OPVM_SAMPLE_SLOT);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = kern(CR3_A, KTEXT + 8, 100, 100, OPVM_SAMPLE_SLOT);	/* fills the cache */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	assert_int_equal(gstate_module(f.gs, S("late_mod"), MOD_LO + 0x100000, 0x1000), 0);
	assert_int_equal(attribution_run(f.sy, 10), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	assert_int_equal(count_at(&f, "late_mod", "late_mod", -1, -1, -1, 0x24, NULL), 1);
	assert_int_equal(count_at(&f, "vmlinux", "vmlinux", -1, -1, -1, KTEXT + 8, NULL), 1);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.lost_no_mapping, 0);
	assert_int_equal(st.kernel, 2);
	fix_close(&f);
}

/* The mapping arrives after the sample: held, then filed where it belongs. */
static void test_hold_then_resolve(void **state)
{
	struct fix f;
	struct opvm_sample s;
	struct opvm_stats st;

	fix_open(&f, OPVM_SEP_NONE, 1000, 0, true);
	/* unknown mapping of a known process */
	s = user(CR3_A, 0x900000 + 0x44, 100, 100);
	assert_int_equal(ring_push(f.rings[0], &s), 0);
	/* unknown process */
	s = user(0xabc000, 0x500000 + 0x10, 300, 300);
	assert_int_equal(ring_push(f.rings[1], &s), 0);
	assert_int_equal(attribution_run(f.sy, 100), 0);
	assert_int_equal(attribution_nr_held(f.sy), 2);
	assert_int_equal(count_at(&f, NULL, NULL, ANY, ANY, ANY, ALL, NULL), 0);
	/* nothing new: still held */
	assert_int_equal(attribution_run(f.sy, 500), 0);
	assert_int_equal(attribution_nr_held(f.sy), 2);
	/* the channel catches up */
	assert_int_equal(gstate_cookie(f.gs, 9, S("/opt/plugin.so"), NULL, 0), 0);
	assert_int_equal(gstate_mmap(f.gs, 100, 0x900000, 0x901000, 0x2000, 9), 0);
	assert_int_equal(gstate_proc(f.gs, 300, 1, 0xabc000, S("late"), 3), 0);
	assert_int_equal(gstate_mmap(f.gs, 300, 0x500000, 0x501000, 0, 3), 0);
	assert_int_equal(attribution_run(f.sy, 900), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	assert_int_equal(count_at(&f, "/opt/plugin.so", "/opt/plugin.so", -1, -1, -1, 0x2044, NULL), 1);
	assert_int_equal(count_at(&f, "/usr/bin/other", "/usr/bin/other", -1, -1, -1, 0x10, NULL), 1);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.received, 2);
	assert_int_equal(st.user, 2);
	assert_int_equal(st.lost_no_mapping, 0);
	assert_int_equal(st.lost_no_process, 0);
	fix_close(&f);
}

/* Never resolved: filed on expiry under anonymous names, and counted. */
static void test_hold_expiry(void **state)
{
	struct fix f;
	struct opvm_sample s;
	struct opvm_stats st;

	fix_open(&f, OPVM_SEP_LIB, 1000, 0, true);
	s = user(CR3_A, 0x900000 + 0x44, 100, 100);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = user(0xabc000, 0x500010, 300, 300);
	assert_int_equal(attribution_sample(f.sy, &s, 10), 0);
	assert_int_equal(attribution_nr_held(f.sy), 2);
	assert_int_equal(attribution_run(f.sy, 999), 0);
	assert_int_equal(attribution_nr_held(f.sy), 2);
	assert_int_equal(attribution_run(f.sy, 1000), 0);	/* first one expires */
	assert_int_equal(attribution_nr_held(f.sy), 1);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.lost_no_mapping, 1);
	assert_int_equal(st.lost_no_process, 0);
	assert_int_equal(attribution_run(f.sy, 1010), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.lost_no_process, 1);
	assert_int_equal(st.user, 2);
	/* anonymous memory keeps its process's tgid whatever the separation
	 * (store_key.own_tgid: JIT code named by that process's perf map) */
	assert_int_equal(count_at(&f, "/bin/app", "{anon}", 100, -1, -1, 0x900044, NULL), 1);
	assert_int_equal(count_at(&f, "{anon-cr3:0xabc000}", "{anon-cr3:0xabc000}",
				  -1, -1, -1, 0x500010, NULL), 1);
	fix_close(&f);
}

/* Introspection names processes and mappings at its walks: a sample held
 * for a mapping waits past the hold time for the next walk (a loaded host
 * can delay it), and no longer than five hold times if walks stop. */
/* A model introspection filled (no HELLO) after `walks` walks: process 100,
 * /bin/app, mapped at EXE_LO. */
static void walked_app(struct fix *f, uint64_t walks)
{
	gstate_set_procs_walked(f->gs);
	gstate_set_maps_walked(f->gs);
	gstate_set_walks(f->gs, walks);
	assert_int_equal(gstate_cookie(f->gs, 1, S("/bin/app"), NULL, 0), 0);
	assert_int_equal(gstate_proc(f->gs, 100, 1, CR3_A, S("app"), 1), 0);
	assert_int_equal(gstate_mmap(f->gs, 100, EXE_LO, EXE_HI, 0x1000, 1), 0);
}

static void test_hold_waits_for_walk(void **state)
{
	struct fix f;
	struct opvm_sample s;
	struct opvm_stats st;

	fix_open(&f, OPVM_SEP_LIB, 1000, 0, false);
	walked_app(&f, 7);
	s = user(CR3_A, LIBC_LO + 0x10, 0, 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	assert_int_equal(attribution_run(f.sy, 3000), 0);	/* no walk yet */
	assert_int_equal(attribution_nr_held(f.sy), 1);
	gstate_set_walks(f.gs, 8);		/* the walk found the mapping */
	assert_int_equal(gstate_cookie(f.gs, 2, S("/lib/libc.so.6"), NULL, 0), 0);
	assert_int_equal(gstate_mmap(f.gs, 100, LIBC_LO, LIBC_HI, 0x26000, 2), 0);
	assert_int_equal(attribution_run(f.sy, 3100), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	assert_int_equal(count_at(&f, "/bin/app", "/lib/libc.so.6", -1, -1, -1,
				  0x26000 + 0x10, NULL), 1);
	/* walks stop: filed after five hold times, counted */
	s = user(CR3_A, 0x900044, 0, 0);
	assert_int_equal(attribution_sample(f.sy, &s, 4000), 0);
	assert_int_equal(attribution_run(f.sy, 8999), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	assert_int_equal(attribution_run(f.sy, 9000), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.lost_no_mapping, 1);
	fix_close(&f);
}

/* Each sample held for what the model lacks asks for a walk (on_hold),
 * once, when first held: introspection walks on change, and an exec
 * changes no count it reads.  A sample the model names asks nothing, nor
 * does one held again at a retry. */
static unsigned walks_asked;

static void ask_walk(void *arg)
{
	(void)arg;
	walks_asked++;
}

static void test_hold_asks_for_walk(void **state)
{
	struct attribution_config cfg = { .hold_ms = 1000, .on_hold = ask_walk };
	struct fix f;
	struct opvm_sample s;

	(void)state;
	fix_open(&f, OPVM_SEP_LIB, 1000, 0, false);
	attribution_free(f.sy);
	f.sy = attribution_new(f.st, f.gs, f.rings, 2, &cfg);
	assert_non_null(f.sy);
	walks_asked = 0;
	walked_app(&f, 12);
	s = user(CR3_A, EXE_LO + 0x10, 0, 0);		/* known: filed */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(walks_asked, 0);
	s = user(CR3_B, EXE_LO + 0x10, 0, 0);		/* exec'd since the walk */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = user(CR3_A, LIBC_LO + 0x10, 0, 0);		/* a library mapped since */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(walks_asked, 2);
	/* another process: the model changed, the held ones are retried */
	assert_int_equal(gstate_proc(f.gs, 300, 1, 0x9abc000ull, S("late"), 0), 0);
	assert_int_equal(attribution_run(f.sy, 500), 0);	/* retried: still held */
	assert_int_equal(attribution_nr_held(f.sy), 2);
	assert_int_equal(walks_asked, 2);
	/* the walk brings the exec'd process */
	assert_int_equal(gstate_proc(f.gs, 200, 1, CR3_B, S("new"), 1), 0);
	assert_int_equal(gstate_mmap(f.gs, 200, EXE_LO, EXE_HI, 0x1000, 1), 0);
	gstate_set_walks(f.gs, 13);
	assert_int_equal(attribution_run(f.sy, 600), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	assert_int_equal(walks_asked, 2);
	fix_close(&f);
}

/* A user sample taken before introspection's first walk (the kernel still
 * searched for on a loaded host) waits for the second: the first may name
 * its process before its mappings are read.  At most HOLD_BOOT_MS. */
static void test_hold_before_first_walk(void **state)
{
	struct fix f;
	struct opvm_sample s;
	struct opvm_stats st;

	(void)state;
	fix_open(&f, OPVM_SEP_LIB, 1000, 0, false);
	gstate_set_procs_expected(f.gs, true);
	s = user(CR3_A, EXE_LO + 0x10, 0, 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_run(f.sy, 5000), 0);	/* still searching */
	assert_int_equal(attribution_nr_held(f.sy), 1);
	/* the first walk: the process, not yet its mappings */
	assert_int_equal(gstate_cookie(f.gs, 1, S("/bin/app"), NULL, 0), 0);
	assert_int_equal(gstate_proc(f.gs, 100, 1, CR3_A, S("app"), 1), 0);
	gstate_set_procs_walked(f.gs);
	gstate_set_maps_walked(f.gs);
	gstate_set_walks(f.gs, 1);
	gstate_set_procs_expected(f.gs, false);
	assert_int_equal(attribution_run(f.sy, 6000), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	/* the second: its mappings */
	assert_int_equal(gstate_mmap(f.gs, 100, EXE_LO, EXE_HI, 0x1000, 1), 0);
	gstate_set_walks(f.gs, 2);
	assert_int_equal(attribution_run(f.sy, 7000), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	assert_int_equal(count_at(&f, "/bin/app", "/bin/app", -1, -1, -1, 0x1000 + 0x10, NULL), 1);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.lost_no_mapping, 0);
	fix_close(&f);
}

/* A window's end (attach --window) files the held samples past their hold
 * time, whatever they still wait for: a KVM guest that is not Linux (the
 * perf sampler's samples, no CR3) held them for the whole kernel search,
 * its windows empty, a later one holding them all.  A sample still within
 * its hold time waits on. */
static void test_window_end_files_past_hold(void **state)
{
	struct fix f;
	struct opvm_sample s;

	(void)state;
	fix_open(&f, OPVM_SEP_LIB, 1000, 0, false);
	gstate_set_procs_expected(f.gs, true);	/* the kernel searched for */
	s = user(0, 0x10000, 0, 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_sample(f.sy, &s, 1500), 0);
	assert_int_equal(attribution_run(f.sy, 1800), 0);
	assert_int_equal(attribution_nr_held(f.sy), 2);		/* still searching */
	assert_int_equal(attribution_window_end(f.sy, 2000), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);		/* the younger waits */
	assert_int_equal(count_at(&f, "{unmapped}", "{unmapped}", -1, -1, -1, 0x10000, NULL), 1);
	assert_int_equal(attribution_window_end(f.sy, 2500), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	assert_int_equal(count_at(&f, "{unmapped}", "{unmapped}", -1, -1, -1, 0x10000, NULL), 2);
	fix_close(&f);
}

/* Introspection sees a process exit and, in the same walk, the process
 * that took its page-table root: a held sample outside the exited one's
 * mappings is not filed under it as {anon} when it is forgotten, but waits
 * and is filed under its successor. */
static void test_exit_leaves_root_to_successor(void **state)
{
	struct fix f;
	struct opvm_sample s;
	struct opvm_stats st;

	(void)state;
	fix_open(&f, OPVM_SEP_LIB, 1000, 0, false);
	gstate_set_procs_walked(f.gs);
	gstate_set_maps_walked(f.gs);
	gstate_set_walks(f.gs, 3);
	assert_int_equal(gstate_cookie(f.gs, 1, S("/bin/app"), NULL, 0), 0);
	assert_int_equal(gstate_cookie(f.gs, 2, S("/usr/bin/next"), NULL, 0), 0);
	assert_int_equal(gstate_proc(f.gs, 100, 1, CR3_A, S("app"), 1), 0);
	assert_int_equal(gstate_mmap(f.gs, 100, EXE_LO, EXE_HI, 0x1000, 1), 0);
	/* the successor's code, on the exited process's root */
	s = user(CR3_A, 0x55a000001000ull, 0, 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	gstate_set_walks(f.gs, 4);	/* the walk: 100 gone, 300 on CR3_A */
	assert_int_equal(attribution_forget_process(f.sy, 100, 100), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	assert_int_equal(gstate_proc_exit(f.gs, 100), 0);
	assert_int_equal(gstate_proc(f.gs, 300, 1, CR3_A, S("next"), 2), 0);
	assert_int_equal(gstate_mmap(f.gs, 300, 0x55a000000000ull, 0x55a000010000ull, 0, 2), 0);
	assert_int_equal(attribution_run(f.sy, 200), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	assert_int_equal(count_at(&f, "/usr/bin/next", "/usr/bin/next", -1, -1, -1, 0x1000, NULL), 1);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.lost_no_mapping, 0);
	fix_close(&f);
}

/* Boot: kernel samples that carry their stack pointer (no task read yet)
 * wait while introspection looks for the kernel, then are filed under the
 * task whose stack holds it: init, swapper (idle); one on an interrupt
 * stack (no task's) under the kernel alone.  At most HOLD_BOOT_MS. */
#define SP_INIT		0xffffc90000010000ull
static bool sp_ready;

static int fake_task_by_sp(void *arg, uint64_t sp, uint32_t *tgid, bool *kthread)
{
	(void)arg;
	if (!sp_ready || sp < SP_INIT || sp >= SP_INIT + 2 * 16384)
		return -ENOENT;
	*tgid = sp < SP_INIT + 16384 ? 1 : 0;
	*kthread = *tgid == 0;
	return 0;
}

static struct opvm_sample ksp(uint64_t cr3, uint64_t rip, uint64_t sp)
{
	struct opvm_sample s = kern(cr3, rip, 0, 0, OPVM_SAMPLE_KSP);

	s.slot_cr3 = sp;
	return s;
}

static void test_boot_by_stack(void **state)
{
	struct attribution_config cfg = { .hold_ms = 1000, .task_by_sp = fake_task_by_sp };
	struct fix f;
	struct opvm_sample s;

	(void)state;
	fix_open(&f, OPVM_SEP_KERNEL | OPVM_SEP_LIB, 1000, 0, false);
	attribution_free(f.sy);
	f.sy = attribution_new(f.st, f.gs, f.rings, 2, &cfg);
	assert_non_null(f.sy);
	sp_ready = false;
	gstate_set_procs_expected(f.gs, true);
	s = ksp(CR3_A, KTEXT + 0x10, SP_INIT + 0x3f00);		/* init's initcalls */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = ksp(CR3_A, KTEXT + 0x20, SP_INIT + 16384 + 8);	/* swapper idles */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = ksp(CR3_B, KTEXT + 0x30, 0xfffffe0000001000ull);	/* an IRQ stack */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_run(f.sy, 5000), 0);
	assert_int_equal(attribution_nr_held(f.sy), 3);
	/* the kernel is found and walked */
	sp_ready = true;
	assert_int_equal(gstate_cookie(f.gs, 1, S("/sbin/init"), NULL, 0), 0);
	assert_int_equal(gstate_proc(f.gs, 1, 0, CR3_A, S("init"), 1), 0);
	gstate_set_procs_walked(f.gs);
	gstate_set_walks(f.gs, 1);
	gstate_set_procs_expected(f.gs, false);
	assert_int_equal(attribution_run(f.sy, 5100), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	assert_int_equal(count_at(&f, "/sbin/init", "vmlinux", ANY, ANY, ANY, KTEXT + 0x10, NULL), 1);
	assert_int_equal(count_at(&f, "{idle}", "vmlinux", -1, -1, -1, KTEXT + 0x20, NULL), 1);
	assert_int_equal(count_at(&f, "vmlinux", "vmlinux", -1, -1, -1, KTEXT + 0x30, NULL), 1);
	/* a search that never ends: filed after HOLD_BOOT_MS, with no task */
	sp_ready = false;
	gstate_set_procs_expected(f.gs, true);
	s = ksp(CR3_B, KTEXT + 0x40, SP_INIT + 8);
	assert_int_equal(attribution_sample(f.sy, &s, 6000), 0);
	assert_int_equal(attribution_run(f.sy, 65999), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	assert_int_equal(attribution_run(f.sy, 66000), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	assert_int_equal(count_at(&f, "vmlinux", "vmlinux", -1, -1, -1, KTEXT + 0x40, NULL), 1);
	fix_close(&f);
}

/* A full hold queue files its oldest sample (counted), never drops; the
 * final flush files the rest. */
static void test_hold_overflow_and_flush(void **state)
{
	struct fix f;
	struct opvm_sample s;
	struct opvm_stats st;

	fix_open(&f, OPVM_SEP_NONE, 60000, 4, true);
	for (int i = 0; i < 10; i++) {
		s = user(0xdee000, 0x500000 + i, 300, 300);
		assert_int_equal(ring_push(f.rings[i & 1], &s), 0);
	}
	assert_int_equal(attribution_run(f.sy, 1), 0);
	assert_int_equal(attribution_nr_held(f.sy), 4);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.lost_no_process, 6);
	assert_int_equal(attribution_flush(f.sy, 2), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.lost_no_process, 10);
	assert_int_equal(st.received, 10);
	assert_int_equal(count_at(&f, NULL, "{anon-cr3:0xdee000}", ANY, ANY, ANY, ALL, NULL), 10);
	fix_close(&f);
}

/* No guest module: user samples go per address space right away. */
static void test_no_module(void **state)
{
	struct fix f;
	struct opvm_sample s;
	struct opvm_stats st;

	fix_open(&f, OPVM_SEP_NONE, 1000, 0, false);
	s = user(0x42000 | 0x3, 0x401000, 0, 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = kern(0x42000, KTEXT + 5, 0, 0, 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.unresolved, 2);
	assert_int_equal(st.user, 2);
	assert_int_equal(st.kernel, 1);
	assert_int_equal(count_at(&f, "{anon-cr3:0x42000}", "{anon-cr3:0x42000}", -1, -1, -1,
				  0x401000, NULL), 2);
	assert_int_equal(count_at(&f, "vmlinux", "vmlinux", -1, -1, -1, KTEXT + 5, NULL), 1);
	fix_close(&f);
}

/* Samples without a CR3 or a task (the perf sampler): the one process whose
 * mapping holds the address, "{ambiguous}" where two do (the fixture's
 * /bin/app and /usr/bin/other share a range), "{unmapped}" where none does
 * (held first: a mapping may still come), counted. */
static void test_no_cr3_by_mapping(void **state)
{
	struct attribution_bymap_stats bm;
	struct opvm_sample s;
	struct opvm_stats st;
	struct fix f;

	fix_open(&f, OPVM_SEP_THREAD, 1000, 0, true);
	s = user(0, LIBC_LO + 0x100, 0, 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s.rip = EXE_LO + 0x10;
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s.rip = 0x10000;	/* nobody's: held for the next walk */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	assert_int_equal(count_at(&f, "/lib/libc.so.6", "/lib/libc.so.6", 100, 100, -1, 0x26100,
				  NULL), 2);
	assert_int_equal(count_at(&f, "{ambiguous}", "{ambiguous}", -1, -1, -1, EXE_LO + 0x10,
				  NULL), 1);
	/* a mapping there arrives: the held sample is that process's */
	assert_int_equal(gstate_mmap(f.gs, 200, 0x10000, 0x11000, 0x5000, 3), 0);
	assert_int_equal(attribution_run(f.sy, 10), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	assert_int_equal(count_at(&f, "/usr/bin/other", "/usr/bin/other", 200, 200, -1, 0x5000,
				  NULL), 1);
	/* and one that nobody maps, expired */
	s.rip = 0x20000;
	assert_int_equal(attribution_sample(f.sy, &s, 20), 0);
	assert_int_equal(attribution_run(f.sy, 2000), 0);
	assert_int_equal(count_at(&f, "{unmapped}", "{unmapped}", -1, -1, -1, 0x20000, NULL), 1);
	/* a forked child (an address space, no mappings of its own): libc
	 * is then both's, at one offset: the binary is known, the process
	 * not */
	assert_int_equal(gstate_proc(f.gs, 101, 100, 0x9999000, S("app"), 1), 0);
	s.rip = LIBC_LO + 0x100;
	assert_int_equal(attribution_sample(f.sy, &s, 2100), 0);
	assert_int_equal(count_at(&f, "{ambiguous}", "/lib/libc.so.6", -1, -1, -1, 0x26100,
				  NULL), 1);
	attribution_get_bymap_stats(f.sy, &bm);
	assert_int_equal(bm.attributed, 3);
	assert_int_equal(bm.ambiguous, 2);
	assert_int_equal(bm.unknown, 1);
	assert_true(bm.index_builds >= 3);
	assert_int_equal(bm.index_mappings, 6);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.user, 6);
	assert_int_equal(st.lost_no_process + st.lost_no_mapping + st.unresolved, 0);
	fix_close(&f);

	/* no module, no introspection: nothing is mapped, nothing held */
	fix_open(&f, OPVM_SEP_NONE, 1000, 0, false);
	s = user(0, LIBC_LO, 0, 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	attribution_get_bymap_stats(f.sy, &bm);
	assert_int_equal(bm.unknown, 1);
	assert_int_equal(count_at(&f, "{unmapped}", "{unmapped}", -1, -1, -1, LIBC_LO, NULL), 1);
	fix_close(&f);
}

/*
 * The range caches' entries decide at fill time what must match (struct
 * cent's masks): samples that differ only in the event, the vCPU, the
 * slot's thread or its flags go to their own files whenever the separation
 * says they must, through the rings (entries read in place) as through
 * attribution_sample().  Each is sent twice after the other: the second is
 * a cache hit (or must be a miss) in the entry the first one filled.
 */
static uint64_t count_ev(struct fix *f, const char *app, const char *image, int64_t tid,
			 int64_t cpu, const char *event)
{
	struct query q = { .app = app, .image = image, .tgid = ANY, .tid = tid, .cpu = cpu,
			   .event = event, .offset = ALL };

	assert_int_equal(store_sync(f->st), 0);
	assert_int_equal(store_walk(f->dir, "current", walk_cb, &q, NULL), 0);
	return q.sum;
}

static void send_pair(struct fix *f, const struct opvm_sample *a, const struct opvm_sample *b,
		      bool rings)
{
	for (int i = 0; i < 4; i++) {
		const struct opvm_sample *x = i & 1 ? b : a;

		if (rings)
			assert_int_equal(ring_push(f->rings[x->vcpu], x), 0);
		else
			assert_int_equal(attribution_sample(f->sy, x, 0), 0);
	}
	assert_int_equal(attribution_run(f->sy, 0), 0);
}

static void test_cache_keys(void **state)
{
	struct fix f;
	struct opvm_sample a, b;

	for (int rings = 0; rings < 2; rings++) {
		/* the event, user and kernel, whatever the separation */
		fix_open(&f, OPVM_SEP_NONE, 1000, 0, true);
		a = user(CR3_A, EXE_LO + 8, 100, 100);
		b = a;
		b.event = 1;
		send_pair(&f, &a, &b, rings);
		a = kern(CR3_A, KTEXT + 8, 100, 100, OPVM_SAMPLE_SLOT);
		b = a;
		b.event = 1;
		send_pair(&f, &a, &b, rings);
		assert_int_equal(count_ev(&f, "/bin/app", "/bin/app", ANY, ANY, "TIMER"), 2);
		assert_int_equal(count_ev(&f, "/bin/app", "/bin/app", ANY, ANY, "CYCLES"), 2);
		assert_int_equal(count_ev(&f, "vmlinux", "vmlinux", ANY, ANY, "TIMER"), 2);
		assert_int_equal(count_ev(&f, "vmlinux", "vmlinux", ANY, ANY, "CYCLES"), 2);
		/* nothing else apart: one file each, the thread and vCPU merged */
		a = user(CR3_A, EXE_LO + 8, 101, 100);
		a.vcpu = 1;
		send_pair(&f, &a, &a, rings);
		assert_int_equal(count_ev(&f, "/bin/app", "/bin/app", -1, -1, "TIMER"), 6);
		fix_close(&f);

		/* a sample with a stack pointer for a task never hits an entry
		 * of its address: it waits for its task */
		{
			struct attribution_config cfg = { .hold_ms = 1000,
							   .task_by_sp = fake_task_by_sp };

			fix_open(&f, OPVM_SEP_NONE, 1000, 0, true);
			attribution_free(f.sy);
			f.sy = attribution_new(f.st, f.gs, f.rings, 2, &cfg);
			assert_non_null(f.sy);
			sp_ready = false;
			gstate_set_procs_expected(f.gs, true);
			a = kern(CR3_A, KTEXT + 8, 100, 100, OPVM_SAMPLE_SLOT);
			b = ksp(CR3_A, KTEXT + 8, SP_INIT + 8);
			send_pair(&f, &a, &b, rings);
			assert_int_equal(attribution_nr_held(f.sy), 2);
			assert_int_equal(count_ev(&f, "vmlinux", "vmlinux", ANY, ANY, NULL), 2);
			fix_close(&f);
		}

		/* the vCPU under --separate=cpu */
		fix_open(&f, OPVM_SEP_CPU, 1000, 0, true);
		a = user(CR3_A, EXE_LO + 8, 100, 100);
		b = a;
		b.vcpu = 1;
		send_pair(&f, &a, &b, rings);
		a = kern(CR3_A, KTEXT + 8, 100, 100, OPVM_SAMPLE_SLOT);
		b = a;
		b.vcpu = 1;
		send_pair(&f, &a, &b, rings);
		assert_int_equal(count_ev(&f, "/bin/app", "/bin/app", ANY, 0, NULL), 2);
		assert_int_equal(count_ev(&f, "/bin/app", "/bin/app", ANY, 1, NULL), 2);
		assert_int_equal(count_ev(&f, "vmlinux", "vmlinux", ANY, 0, NULL), 2);
		assert_int_equal(count_ev(&f, "vmlinux", "vmlinux", ANY, 1, NULL), 2);
		fix_close(&f);

		/* the slot's thread under --separate=thread, user and kernel;
		 * the slot's flags (a kernel thread) under --separate=kernel */
		fix_open(&f, OPVM_SEP_THREAD | OPVM_SEP_KERNEL, 1000, 0, true);
		a = user(CR3_A, EXE_LO + 8, 100, 100);
		b = user(CR3_A, EXE_LO + 8, 101, 100);
		send_pair(&f, &a, &b, rings);
		a = kern(CR3_A, KTEXT + 8, 100, 100, OPVM_SAMPLE_SLOT);
		b = kern(CR3_A, KTEXT + 8, 101, 100, OPVM_SAMPLE_SLOT);
		send_pair(&f, &a, &b, rings);
		assert_int_equal(count_ev(&f, "/bin/app", "/bin/app", 100, ANY, NULL), 2);
		assert_int_equal(count_ev(&f, "/bin/app", "/bin/app", 101, ANY, NULL), 2);
		assert_int_equal(count_ev(&f, "/bin/app", "vmlinux", 100, ANY, NULL), 2);
		assert_int_equal(count_ev(&f, "/bin/app", "vmlinux", 101, ANY, NULL), 2);
		a = kern(CR3_A, KTEXT + 0x18, 100, 100, OPVM_SAMPLE_SLOT);
		b = a;
		b.flags |= OPVM_SAMPLE_KTHREAD;
		send_pair(&f, &a, &b, rings);
		assert_int_equal(count_ev(&f, "/bin/app", "vmlinux", 100, ANY, NULL), 4);
		assert_int_equal(count_ev(&f, "{kthread}", "vmlinux", ANY, ANY, NULL), 2);
		assert_int_equal(attribution_nr_held(f.sy), 0);
		fix_close(&f);
	}
}

/* The range caches keep 16 bits of the epoch (struct cent): an entry
 * filled 65536 model changes ago must not come back when they wrap.  The
 * mapping is gone, so no sample in between fills the entry again. */
static void test_cache_epoch_wrap(void **state)
{
	struct fix f;
	struct opvm_sample s;
	struct opvm_stats st;
	enum { CHANGES = 65536 + 8 };

	fix_open(&f, OPVM_SEP_NONE, 0, 0, true);
	s = user(CR3_A, EXE_LO + 0x10, 100, 100);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(gstate_exec(f.gs, 100, CR3_A, S("app"), 1), 0);
	for (int i = 0; i < CHANGES; i++) {
		assert_int_equal(gstate_thread(f.gs, 101, 100, S("app-worker")), 0);
		assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	}
	assert_int_equal(count_at(&f, "/bin/app", "/bin/app", ANY, ANY, ANY, ALL, NULL), 1);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.lost_no_mapping, CHANGES);
	fix_close(&f);
}

/* A cached mapping must not outlive a change of the model. */
static void test_cache_invalidation(void **state)
{
	struct fix f;
	struct opvm_sample s;

	fix_open(&f, OPVM_SEP_NONE, 1000, 0, true);
	s = user(CR3_A, EXE_LO + 0x10, 100, 100);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(gstate_exec(f.gs, 100, CR3_A, S("other"), 3), 0);
	assert_int_equal(gstate_mmap(f.gs, 100, EXE_LO, EXE_HI, 0, 3), 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(count_at(&f, "/bin/app", "/bin/app", ANY, ANY, ANY, ALL, NULL), 1);
	assert_int_equal(count_at(&f, "/usr/bin/other", "/usr/bin/other", ANY, ANY, ANY, 0x10, NULL), 1);
	/* a HELLO (reboot) forgets everything: held again */
	{
		struct chan_hello h = { .version = 1 };

		assert_int_equal(gstate_hello(f.gs, &h), 0);
	}
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	assert_int_equal(attribution_flush(f.sy, 0), 0);
	fix_close(&f);
}

/* An address space the model does not know, named by the slot.  Only a
 * process without a known address space is taken from the slot (one with
 * another CR3 may have just exec'd), and the cache must not carry one
 * task's answer over to another task on that CR3. */
static void test_slot_fallback(void **state)
{
	struct fix f;
	struct opvm_sample s;

	fix_open(&f, OPVM_SEP_NONE, 1000, 0, true);
	assert_int_equal(gstate_proc(f.gs, 300, 1, 0, S("nocr3"), 3), 0);
	assert_int_equal(gstate_mmap(f.gs, 300, EXE_LO, EXE_HI, 0x7000, 3), 0);
	s = user(0x776000, EXE_LO + 0x10, 300, 300);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	s = user(0x776000, EXE_LO + 0x10, 100, 100);	/* 100 has another CR3 */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	assert_int_equal(count_at(&f, "/usr/bin/other", "/usr/bin/other", ANY, ANY, ANY, 0x7010, NULL), 1);
	assert_int_equal(count_at(&f, "/bin/app", "/bin/app", ANY, ANY, ANY, ALL, NULL), 0);
	assert_int_equal(attribution_flush(f.sy, 0), 0);
	assert_int_equal(count_at(&f, NULL, "{anon-cr3:0x776000}", ANY, ANY, ANY, ALL, NULL), 1);
	fix_close(&f);
}

/* A forked child whose address space the module never described (it
 * exec'd before the module got to it) runs its parent's code until exec. */
static void test_fork_child_uses_parent(void **state)
{
	struct fix f;
	struct opvm_sample s;

	fix_open(&f, OPVM_SEP_LIB, 1000, 0, true);
	assert_int_equal(gstate_proc(f.gs, 300, 100, 0x3330000, S("app"), 1), 0);
	s = user(0x3330000, LIBC_LO + 0x30, 300, 300);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	assert_int_equal(count_at(&f, "/bin/app", "/lib/libc.so.6", ANY, ANY, ANY, 0x26030, NULL), 1);
	/* once it has mappings of its own, the parent's are not looked at */
	assert_int_equal(gstate_exec(f.gs, 300, 0x3330000, S("other"), 3), 0);
	assert_int_equal(gstate_mmap(f.gs, 300, EXE_LO, EXE_HI, 0, 3), 0);
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	assert_int_equal(attribution_flush(f.sy, 0), 0);
	fix_close(&f);
}

/* A process is about to be forgotten: its held samples are filed at once
 * (their mapping or thread can no longer come), others stay held. */
static void test_forget_process(void **state)
{
	struct fix f;
	struct opvm_sample s;
	struct opvm_stats st;

	fix_open(&f, OPVM_SEP_THREAD, 60000, 0, true);
	s = user(CR3_A, 0x900000, 100, 100);		/* no mapping */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = user(CR3_A, EXE_LO, 555, 100);		/* unknown thread */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s = user(CR3_B, 0x900000, 200, 200);		/* another process */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 3);
	assert_int_equal(attribution_forget_process(f.sy, 100, 10), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.lost_no_mapping, 1);
	assert_int_equal(count_at(&f, "/bin/app", "/bin/app", 100, 100, -1, 0x1000, NULL), 1);
	assert_int_equal(count_at(&f, "{anon}", "{anon}", 100, 100, -1, 0x900000, NULL), 1);
	assert_int_equal(attribution_flush(f.sy, 20), 0);
	fix_close(&f);
}

/*
 * A shell that execs the interpreter: Python samples named by the slot
 * before the process's EXEC came wait for it, then are filed as {py}
 * samples of the new program, never under the shell.  root is the page-
 * table root the model knows for the shell: CR3_A (the slot names no
 * process with another root: held as any such sample), or 0 (the slot
 * names it: only file_python()'s py_owner() holds it).
 */
#define PY_CR3		0x9990000ull	/* python3.13's page-table root */
#define PY_RIP		0x7f0000001000ull
#define BB_LO		0x400000ull
#define BB_HI		0x500000ull

static void py_model(struct fix *f, uint64_t root)
{
	struct chan_hello h = { .version = 1, .nr_cpus = 2 };

	assert_int_equal(gstate_hello(f->gs, &h), 0);
	assert_int_equal(gstate_cookie(f->gs, 1, S("/bin/busybox"), NULL, 0), 0);
	assert_int_equal(gstate_cookie(f->gs, 2, S("/usr/bin/python3.13"), NULL, 0), 0);
	assert_int_equal(gstate_proc(f->gs, 100, 1, root, S("sh"), 1), 0);
	assert_int_equal(gstate_mmap(f->gs, 100, BB_LO, BB_HI, 0, 1), 0);
}

/* Samples of app under {py}, and how many of its files are there. */
static uint64_t count_py(struct fix *f, const char *app, int *py_files)
{
	struct query q = { .app = app, .tgid = ANY, .tid = ANY, .cpu = ANY, .offset = ALL };

	assert_int_equal(store_sync(f->st), 0);
	assert_int_equal(store_walk(f->dir, "current", walk_cb, &q, NULL), 0);
	*py_files = q.python;
	return q.sum;
}

static void py_waits_for_exec(struct pynames *names, uint32_t idx, uint64_t root)
{
	struct attribution_config cfg = { .hold_ms = 1000, .py = names };
	const uint64_t chain[] = { PY_RIP + 0x40, idx };	/* a caller, a Python frame */
	struct opvm_stats st;
	struct opvm_sample s;
	struct fix f;
	int py_files;

	fix_open(&f, OPVM_SEP_NONE, 1000, 0, false);
	attribution_free(f.sy);
	f.sy = attribution_new(f.st, f.gs, f.rings, 2, &cfg);
	assert_non_null(f.sy);
	py_model(&f, root);
	s = user(PY_CR3, PY_RIP, 100, 100);
	s.chain = chain;
	s.nr_chain = 2;
	s.nr_py = 1;
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 1);
	assert_int_equal(count_at(&f, NULL, NULL, ANY, ANY, ANY, ALL, NULL), 0);
	/* the EXEC: the new root and the interpreter's mappings */
	assert_int_equal(gstate_exec(f.gs, 100, PY_CR3, S("python3.13"), 2), 0);
	assert_int_equal(gstate_mmap(f.gs, 100, PY_RIP & ~0xfffffull, PY_RIP + 0x100000, 0, 2), 0);
	assert_int_equal(attribution_run(f.sy, 10), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	assert_int_equal(count_py(&f, "/usr/bin/python3.13", &py_files), 1);
	assert_int_equal(py_files, 1);
	assert_int_equal(count_at(&f, "/bin/busybox", NULL, ANY, ANY, ANY, ALL, NULL), 0);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.python, 1);
	assert_int_equal(st.user, 1);
	fix_close(&f);
}

static void test_python_waits_for_exec(void **state)
{
	struct pynames *names = pynames_new();
	uint32_t idx;

	(void)state;
	assert_non_null(names);
	assert_int_equal(pynames_intern(names, "main.loop", "/srv/app.py", 10, 12, &idx), 0);
	py_waits_for_exec(names, idx, CR3_A);
	py_waits_for_exec(names, idx, 0);
	pynames_free(names);
}

/*
 * The perf sampler without opvm.ko: a sample with no CR3 and no task whose
 * Python frames were read for the process the kernel's current-task
 * pointer named (OPVM_SAMPLE_PYTASK, slot_tgid).  Filed by mapping; the
 * frames go with it ({py}) only when the mapping's process is that one:
 * read for another process, at an address several processes map, or
 * with no process named, they are dropped and counted.
 */
/* The fixture with opvm.ko's model and an attribution that reads names'
 * frames; the sample a libc address (process 100's alone) whose chain is
 * one Python frame, chain[0]. */
static struct opvm_sample py_fix_open(struct fix *f, struct pynames *names, uint64_t *chain)
{
	struct attribution_config cfg = { .hold_ms = 1000, .py = names };
	struct opvm_sample s;
	uint32_t idx;

	assert_non_null(names);
	assert_int_equal(pynames_intern(names, "main.loop", "/srv/app.py", 10, 12, &idx), 0);
	chain[0] = idx;
	fix_open(f, OPVM_SEP_NONE, 1000, 0, true);
	attribution_free(f->sy);
	f->sy = attribution_new(f->st, f->gs, f->rings, 2, &cfg);
	assert_non_null(f->sy);
	s = user(0, LIBC_LO + 0x100, 0, 0);
	s.chain = chain;
	s.nr_chain = s.nr_py = 1;
	return s;
}

static void test_python_by_mapping(void **state)
{
	struct attribution_bymap_stats bm;
	struct pynames *names = pynames_new();
	uint64_t chain[1];
	struct opvm_sample s;
	struct opvm_stats st;
	struct fix f;
	int py_files;

	(void)state;
	s = py_fix_open(&f, names, chain);
	s.flags = OPVM_SAMPLE_PYTASK;
	s.slot_tgid = 100;			/* read for 100: kept */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s.slot_tgid = 200;			/* read for 200: not its frames */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s.slot_tgid = 0;
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s.flags = 0;				/* no process with them */
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	s.flags = OPVM_SAMPLE_PYTASK;		/* 100 and 200 map it */
	s.slot_tgid = 100;
	s.rip = EXE_LO + 0x10;
	assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
	assert_int_equal(attribution_nr_held(f.sy), 0);
	assert_int_equal(count_py(&f, NULL, &py_files), 5);
	assert_int_equal(py_files, 1);
	assert_int_equal(count_py(&f, "/bin/app", &py_files), 1);	/* 100's {py} */
	assert_int_equal(py_files, 1);
	/* the four without frames: by mapping, as any */
	assert_int_equal(count_at(&f, "/lib/libc.so.6", "/lib/libc.so.6", ANY, ANY, ANY, 0x26100,
				  NULL), 3);
	assert_int_equal(count_at(&f, "{ambiguous}", "{ambiguous}", ANY, ANY, ANY, ALL, NULL),
			 1);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.python, 1);
	assert_int_equal(st.user, 5);
	attribution_get_bymap_stats(f.sy, &bm);
	assert_int_equal(bm.py_unconfirmed, 4);
	assert_int_equal(bm.attributed, 4);
	assert_int_equal(bm.ambiguous, 1);
	fix_close(&f);
	pynames_free(names);
}

/*
 * A window's rotation (store_rotate(), then attribution_set_store()): a
 * Python frame met again is defined again in the new window's frame
 * table, so each window names its own frames.
 */
static void test_python_after_rotate(void **state)
{
	struct pynames *names = pynames_new();
	char name[STORE_WINDOW_NAME_MAX], p[512];
	struct store_stats ss;
	uint64_t chain[1];
	struct opvm_sample s;
	struct stat sb;
	struct fix f;
	int sealed, py_files;

	(void)state;
	s = py_fix_open(&f, names, chain);
	s.flags = OPVM_SAMPLE_PYTASK;
	s.slot_tgid = 100;
	for (int w = 0; w < 2; w++) {
		assert_int_equal(attribution_sample(f.sy, &s, 0), 0);
		assert_int_equal(attribution_window_end(f.sy, 10), 0);
		assert_int_equal(count_py(&f, "/bin/app", &py_files), 1);
		store_get_stats(f.st, &ss);
		assert_int_equal(ss.py_frames, 1);
		store_window_name(name, 1000000 + w * 10, 1000010 + w * 10);
		assert_int_equal(store_rotate(f.st, name, &sealed), 0);
		assert_int_equal(sealed, 0);
		assert_int_equal(attribution_set_store(f.sy, f.st), 0);
		snprintf(p, sizeof(p), "%s/guests/g1/samples/%s/python.def", f.dir, name);
		assert_int_equal(stat(p, &sb), 0);
	}
	fix_close(&f);
	pynames_free(names);
}

/* Ring overflow shows in the stats, once drained (the drops come with the
 * samples), and keeps counting past a window's rotation (a new store). */
static void test_overflow_stats(void **state)
{
	struct fix f;
	struct opvm_sample s = user(CR3_A, EXE_LO, 100, 100);
	char name[STORE_WINDOW_NAME_MAX];
	struct opvm_stats st;
	unsigned pushed = 0, dropped = 0;
	int sealed;

	fix_open(&f, OPVM_SEP_NONE, 1000, 0, true);
	for (int w = 0; w < 2; w++) {
		/* ring 0 in the first window, ring 1 in the second */
		for (int i = 0; i < 20000; i++) {
			if (ring_push(f.rings[w], &s) == 0)
				pushed++;
			else
				dropped++;
		}
		assert_true(dropped > (unsigned)w * 10000);
		assert_int_equal(attribution_run(f.sy, 0), 0);
		attribution_get_stats(f.sy, &st);
		assert_int_equal(st.received, pushed);
		assert_int_equal(st.lost_overflow, dropped);
		if (w)
			break;
		assert_int_equal(count_at(&f, "/bin/app", "/bin/app", ANY, ANY, ANY, 0x1000, NULL),
				 pushed);
		store_window_name(name, 1000000, 1000010);
		assert_int_equal(store_rotate(f.st, name, &sealed), 0);
		assert_int_equal(attribution_set_store(f.sy, f.st), 0);
	}
	fix_close(&f);
}

/*
 * The seed test.  A program loops over function A (1 unit of work) then B
 * (99 units); a timer samples it every 7 units (coprime to the loop, so the
 * phase sweeps the whole loop).  After 100k samples through the rings, sync
 * and the sample files, A must read 1 % and B 99 % (within 0.5 points).
 */
#define FN_A	0x401000ull	/* A: [0x401000, 0x401040) */
#define FN_B	0x402000ull	/* B: [0x402000, 0x402400) */

static void test_seed_1_99(void **state)
{
	struct fix f;
	uint64_t t = 0, a, b, total;
	struct opvm_stats st;

	fix_open(&f, OPVM_SEP_NONE, 1000, 0, true);
	for (int i = 0; i < 100000; i++) {
		uint64_t phase;
		struct opvm_sample s;

		t += 7;
		phase = t % 100;
		if (phase < 1)
			s = user(CR3_A, FN_A + (t / 100) % 0x40, 100, 100);
		else
			s = user(CR3_A, FN_B + ((phase - 1) * 0x400) / 99, 100, 100);
		s.vcpu = (uint32_t)(i & 1);
		assert_int_equal(ring_push(f.rings[i & 1], &s), 0);
		if (i % 4096 == 4095)	/* the collector's periodic sync */
			assert_int_equal(attribution_run(f.sy, 0), 0);
	}
	assert_int_equal(attribution_flush(f.sy, 0), 0);
	attribution_get_stats(f.sy, &st);
	assert_int_equal(st.received, 100000);
	assert_int_equal(st.lost_overflow, 0);

	/* read back and bin by function (file offset = addr - 0x400000 + 0x1000) */
	total = count_at(&f, "/bin/app", "/bin/app", ANY, ANY, ANY, ALL, NULL);
	assert_int_equal(total, 100000);
	a = count_range(&f, "/bin/app", FN_A - EXE_LO + 0x1000, 0x40);
	b = count_range(&f, "/bin/app", FN_B - EXE_LO + 0x1000, 0x400);
	print_message("seed: A %.3f %%, B %.3f %% of %llu samples\n", 100.0 * a / total,
		      100.0 * b / total, (unsigned long long)total);
	assert_int_equal(a + b, total);
	assert_true(fabs(100.0 * a / total - 1.0) <= 0.5);
	assert_true(fabs(100.0 * b / total - 99.0) <= 0.5);
	fix_close(&f);
}

/*
 * Random samples (any CPL, flags, slot contents, vCPU) interleaved with
 * random model changes, syncs and expiries: every sample ends up filed
 * exactly once, and the files hold exactly what the stats say.
 */
static uint64_t lcg = 99;

static uint64_t rnd(void)
{
	lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
	return lcg >> 33;
}

/* ---- -g dwarf: stacks that wait for a binary -------------------------------- */

struct wait_fix {
	int have;		/* host_file finds the binary */
	int coming;		/* image_wait: the guest is sending it */
	unsigned asked;		/* image_wait calls */
};

static int wait_host_file(void *arg, const char *path, const uint8_t *bid, size_t len,
			  char *out, size_t outlen)
{
	struct wait_fix *w = arg;

	if (!w->have)
		return -ENOENT;
	snprintf(out, outlen, "/proc/self/exe");	/* an ELF; the unwind may stop */
	return 0;
}

static int wait_image(const struct gstate_cookie *c, void *arg)
{
	struct wait_fix *w = arg;

	w->asked++;
	assert_int_equal(c->build_id_len, 2);
	return w->coming;
}

/* A sample in /bin/app (build-id abcd) with a user stack to unwind. */
static int take_stack(struct fix *f, uint64_t now)
{
	static const uint8_t stack[64];
	struct opvm_sample x = user(CR3_A, EXE_LO + 0x100, 100, 100);

	x.flags |= OPVM_SAMPLE_STACK;
	x.user_ip = x.rip;
	x.user_sp = 0x7ffe0000;
	x.user_bp = 0;
	x.stack = stack;
	x.stack_len = sizeof(stack);
	return attribution_sample(f->sy, &x, now);
}

/* First-session stacks (attribution.h): an unwind that needs a binary on its way
 * waits, and is redone when it came; one that cannot wait (not coming, its
 * process going, too old, the end) is filed and counted cut short. */
static void test_dwarf_wait(void **state)
{
	struct wait_fix w = { .coming = 1 };
	struct attribution_config cfg = { .hold_ms = 1000, .chains = true,
				   .host_file = wait_host_file, .host_file_arg = &w,
				   .image_wait = wait_image, .image_arg = &w };
	struct attribution_dwarf_stats d;
	struct fix f;

	fix_open(&f, OPVM_SEP_LIB | OPVM_SEP_KERNEL, 1000, 0, true);
	attribution_free(f.sy);
	cfg.image_arg = &w;
	f.sy = attribution_new(f.st, f.gs, f.rings, 2, &cfg);
	assert_non_null(f.sy);

	/* waits, then whole once the binary is there */
	assert_int_equal(take_stack(&f, 10), 0);
	assert_int_equal(attribution_nr_deferred(f.sy), 1);
	assert_int_equal(attribution_run(f.sy, 20), 0);
	assert_int_equal(attribution_nr_deferred(f.sy), 1);	/* nothing came */
	w.have = 1;
	attribution_images_changed(f.sy);
	assert_int_equal(attribution_run(f.sy, 30), 0);
	assert_int_equal(attribution_nr_deferred(f.sy), 0);
	attribution_get_dwarf_stats(f.sy, &d);
	assert_int_equal(d.waited, 1);
	assert_int_equal(d.redone, 1);
	assert_int_equal(d.cut_missing, 0);
	assert_int_equal(d.waiting_peak, 1);

	/* the binary will not come: filed at once, counted */
	w.have = 0;
	w.coming = 0;
	assert_int_equal(take_stack(&f, 40), 0);
	assert_int_equal(attribution_nr_deferred(f.sy), 0);
	attribution_get_dwarf_stats(f.sy, &d);
	assert_int_equal(d.cut_missing, 1);

	/* its process is about to go: filed with what there is */
	w.coming = 1;
	assert_int_equal(take_stack(&f, 50), 0);
	assert_int_equal(take_stack(&f, 50), 0);
	assert_int_equal(attribution_nr_deferred(f.sy), 2);
	assert_int_equal(attribution_forget_process(f.sy, 200, 60), 0);	/* another */
	assert_int_equal(attribution_nr_deferred(f.sy), 2);
	assert_int_equal(attribution_forget_process(f.sy, 100, 60), 0);
	assert_int_equal(attribution_nr_deferred(f.sy), 0);

	/* too old, then the end of the session */
	assert_int_equal(take_stack(&f, 100), 0);
	assert_int_equal(take_stack(&f, 100 + SYNC_DEFER_MS / 2), 0);
	assert_int_equal(attribution_run(f.sy, 100 + SYNC_DEFER_MS), 0);
	assert_int_equal(attribution_nr_deferred(f.sy), 1);
	assert_int_equal(attribution_flush(f.sy, 200 + SYNC_DEFER_MS), 0);
	assert_int_equal(attribution_nr_deferred(f.sy), 0);
	attribution_get_dwarf_stats(f.sy, &d);
	assert_int_equal(d.waited, 5);
	assert_int_equal(d.redone, 1);
	assert_int_equal(d.cut_missing, 5);
	assert_int_equal(d.waiting, 0);
	assert_true(w.asked >= 6);

	/* a waiting stack left at attribution_free() is freed (ASan checks) */
	assert_int_equal(take_stack(&f, 300 + SYNC_DEFER_MS), 0);
	assert_int_equal(attribution_nr_deferred(f.sy), 1);
	fix_close(&f);
}

static void test_random_consistency(void **state)
{
	static const unsigned seps[] = { OPVM_SEP_NONE, OPVM_SEP_ALL,
					 OPVM_SEP_THREAD | OPVM_SEP_KERNEL | OPVM_SEP_LIB };

	for (size_t si = 0; si < ARRAY_SIZE(seps); si++) {
		struct fix f;
		struct opvm_stats st;
		uint64_t now = 0, total;

		fix_open(&f, seps[si], 50, 256, true);
		for (int i = 0; i < 20000; i++) {
			uint64_t r = rnd();
			struct opvm_sample x = {
				.cr3 = (r & 1) ? CR3_A : (r & 2) ? CR3_B : 0x10000ull * (r % 7),
				.rip = (r & 4) ? EXE_LO + rnd() % 0x90000 :
				       (r & 8) ? MOD_LO + rnd() % 0x20000 : KTEXT + rnd() % 0x1000,
				.cpl = (r & 16) ? 3 : 0,
				.event = (uint8_t)((r >> 5) & 1),
				.flags = (uint8_t)((r >> 6) & 3),
				.slot_tid = (uint32_t)(100 + rnd() % 5),
				.slot_tgid = (uint32_t)((r & 256) ? 100 : 200 + rnd() % 3),
				.vcpu = (uint32_t)(rnd() % 4),
			};

			assert_int_equal(ring_push(f.rings[rnd() % 2], &x), 0);
			switch (rnd() % 64) {
			case 0:
				assert_int_equal(attribution_run(f.sy, now), 0);
				break;
			case 1:
				now += 20;
				break;
			case 2:
				gstate_thread(f.gs, (uint32_t)(100 + rnd() % 5), 100, "t", 1);
				break;
			case 3:
				gstate_thread_exit(f.gs, (uint32_t)(100 + rnd() % 5));
				break;
			case 4:
				gstate_mmap(f.gs, 100, EXE_LO + (rnd() % 9) * 0x10000,
					    EXE_LO + (rnd() % 9 + 1) * 0x10000, 0, 1 + rnd() % 3);
				break;
			case 5:
				gstate_munmap(f.gs, 100, EXE_LO + (rnd() % 9) * 0x10000,
					      EXE_LO + (rnd() % 9 + 1) * 0x10000);
				break;
			case 6:
				gstate_proc(f.gs, (uint32_t)(200 + rnd() % 3), 1,
					    0x10000ull * (rnd() % 7), "p", 1, 3);
				break;
			case 7:
				assert_int_equal(attribution_forget_process(f.sy, (uint32_t)(200 + rnd() % 3), now), 0);
				gstate_proc_exit(f.gs, (uint32_t)(200 + rnd() % 3));
				break;
			case 8:
				gstate_module(f.gs, "late", 4, MOD_LO + 0x10000, 0x8000);
				break;
			default:
				break;
			}
		}
		assert_int_equal(attribution_flush(f.sy, now), 0);
		attribution_get_stats(f.sy, &st);
		assert_int_equal(attribution_nr_held(f.sy), 0);
		assert_int_equal(attribution_store_errors(f.sy), 0);
		assert_int_equal(st.received, 20000);
		assert_int_equal(st.kernel + st.user, 20000);
		total = count_at(&f, NULL, NULL, ANY, ANY, ANY, ALL, NULL);
		assert_int_equal(total, 20000);
		fix_close(&f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernel),
		cmocka_unit_test(test_user_and_lib),
		cmocka_unit_test(test_cgroup_keys),
		cmocka_unit_test(test_thread_cpu),
		cmocka_unit_test(test_kernel_separation),
		cmocka_unit_test(test_idle_boot_own_apps),
		cmocka_unit_test(test_late_module),
		cmocka_unit_test(test_hold_then_resolve),
		cmocka_unit_test(test_hold_expiry),
		cmocka_unit_test(test_hold_waits_for_walk),
		cmocka_unit_test(test_hold_asks_for_walk),
		cmocka_unit_test(test_hold_before_first_walk),
		cmocka_unit_test(test_window_end_files_past_hold),
		cmocka_unit_test(test_exit_leaves_root_to_successor),
		cmocka_unit_test(test_boot_by_stack),
		cmocka_unit_test(test_hold_overflow_and_flush),
		cmocka_unit_test(test_no_module),
		cmocka_unit_test(test_no_cr3_by_mapping),
		cmocka_unit_test(test_cache_invalidation),
		cmocka_unit_test(test_cache_keys),
		cmocka_unit_test(test_cache_epoch_wrap),
		cmocka_unit_test(test_slot_fallback),
		cmocka_unit_test(test_forget_process),
		cmocka_unit_test(test_fork_child_uses_parent),
		cmocka_unit_test(test_python_waits_for_exec),
		cmocka_unit_test(test_python_by_mapping),
		cmocka_unit_test(test_python_after_rotate),
		cmocka_unit_test(test_overflow_stats),
		cmocka_unit_test(test_seed_1_99),
		cmocka_unit_test(test_random_consistency),
		cmocka_unit_test(test_dwarf_wait),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
