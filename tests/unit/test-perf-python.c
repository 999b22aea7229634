// SPDX-License-Identifier: MIT
/*
 * The perf sampler's Python frame reads (vmm/perf/perf-python.c) against a
 * forged guest (pyguest-image.h): guest RAM read as a sampler reads it, the
 * current-task slots, page tables, a CPython 3.11 executable with its
 * .dynsym and a three-frame chain.  A read right after the sample, held
 * until the timeline names the sample's task, filed only when the task ran
 * from the sample to the read's end; and a guest that keeps running: a
 * thread that changes the frames (or switches the task) while they are
 * read: what changed is dropped and counted, what is kept is a state the
 * guest's memory really had.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/pynames.h"
#include "pyguest-image.h"
#include "vmm/perf/perf-python.h"

static const char *const chain3[] = { "leaf", "Cls.mid", "<module>" };
static const struct guest_tsc clk0;

struct fixture {
	struct pyimg im;
	struct perf_python *pp;
	struct pynames *names;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct sampler_python set;

	if (!f || pyimg_build(&f->im, chain3, 3, 2))
		return -1;
	f->pp = perf_python_new(2);
	f->names = pynames_new();
	if (!f->pp || !f->names)
		return -1;
	pyimg_set(&set);
	perf_python_publish(f->pp, &set);
	perf_python_set_slots(f->pp, PYIMG_SLOTS, sizeof(struct opvm_slot), 2);
	*state = f;
	return 0;
}

/* No opvm.ko: the image's forged kernel (pyimg_kernel()) names the task. */
static int setup_cur(void **state)
{
	struct kcurrent_info ci;
	struct fixture *f;

	if (setup(state))
		return -1;
	f = *state;
	perf_python_set_slots(f->pp, 0, 0, 0);		/* no module */
	pyimg_kernel(&f->im, 2, &ci);
	perf_python_set_current(f->pp, &ci);
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	perf_python_free(f->pp);
	pynames_free(f->names);
	pyimg_free(&f->im);
	free(f);
	return 0;
}

static const struct timeline_task task42 = { .tsc = 1000, .pid = PYIMG_TID,
					      .tgid = PYIMG_TID, .cr3 = PYIMG_CR3 };

/* perf_python_chain(), the tgid it gives in chain_tgid. */
static uint32_t chain_tgid;

static unsigned chain_of(struct perf_python *pp, unsigned vcpu, uint32_t h,
			 const struct timeline_task *at_sample,
			 const struct timeline_task *at_end, uint64_t *w)
{
	return perf_python_chain(pp, vcpu, h, at_sample, at_end, w, &chain_tgid);
}

static const struct pyname *word_name(const struct fixture *f, uint64_t w)
{
	assert_true(w < PYNAMES_MAX);
	return pynames_get(f->names, (uint32_t)w);
}

/* Read, held, confirmed: the three frames with their lines. */
static void test_read_kept(void **state)
{
	struct fixture *f = *state;
	struct perf_python_stats st;
	uint64_t w[PYFRAMES_MAX_DEPTH];
	uint32_t h;

	assert_int_equal(perf_python_take(f->pp, f->im.m), 1);
	h = perf_python_read(f->pp, f->im.m, f->names, 1, &clk0);
	assert_int_not_equal(h, 0);
	assert_true(perf_python_read_end(f->pp, 1, h) > 0);
	assert_int_equal(perf_python_read_end(f->pp, 0, h), 0);	/* another vCPU's */
	assert_int_equal(chain_of(f->pp, 1, h, &task42, &task42, w), 3);
	assert_string_equal(word_name(f, w[0])->name, "leaf");
	assert_int_equal(word_name(f, w[0])->line, 13);
	assert_int_equal(word_name(f, w[0])->first_line, 10);
	assert_string_equal(word_name(f, w[1])->name, "Cls.mid");
	assert_string_equal(word_name(f, w[2])->name, "<module>");
	assert_string_equal(word_name(f, w[2])->file, "/srv/app.py");
	/* done with: a second confirmation finds nothing */
	assert_int_equal(chain_of(f->pp, 1, h, &task42, &task42, w), 0);
	perf_python_publish_stats(f->pp);
	perf_python_get_stats(f->pp, &st);
	assert_int_equal(st.reads, 1);
	assert_int_equal(st.kept, 1);
	assert_int_equal(st.py.samples, 1);
	assert_int_equal(st.py.with_frames, 1);
	assert_int_equal(st.py.fr.changed, 0);
	assert_true(st.py.fr.bytes > 0 && st.py.fr.bytes < 4096);
}

/* The timeline says the task switched between the sample and the read's
 * end, or another task ran, or none is known: nothing filed, counted. */
static void test_switched(void **state)
{
	struct fixture *f = *state;
	struct timeline_task later = task42, other = task42;
	struct perf_python_stats st;
	uint64_t w[PYFRAMES_MAX_DEPTH];
	uint32_t h[5];

	assert_int_equal(perf_python_take(f->pp, f->im.m), 1);
	for (int i = 0; i < 5; i++) {
		h[i] = perf_python_read(f->pp, f->im.m, f->names, 0, &clk0);
		assert_int_not_equal(h[i], 0);
	}
	later.tsc = 2000;			/* the same task, run again */
	other.pid = 43;
	assert_int_equal(chain_of(f->pp, 0, h[0], &task42, &later, w), 0);
	assert_int_equal(chain_of(f->pp, 0, h[1], &other, &other, w), 0);
	assert_int_equal(chain_of(f->pp, 0, h[2], NULL, NULL, w), 0);
	assert_int_equal(chain_of(f->pp, 0, h[3], &task42, NULL, w), 0);
	other = task42;
	other.cr3 = 0x6000;			/* the same tid in another mm */
	assert_int_equal(chain_of(f->pp, 0, h[4], &other, &other, w), 0);
	perf_python_publish_stats(f->pp);
	perf_python_get_stats(f->pp, &st);
	assert_int_equal(st.switched, 3);
	assert_int_equal(st.unconfirmed, 2);
	assert_int_equal(st.kept, 0);
}

/* Not a CPython task, a busy slot, no slots, no names: nothing read. */
static void test_not_read(void **state)
{
	struct fixture *f = *state;
	struct opvm_slot *sl = (struct opvm_slot *)(void *)(f->im.ram + PYIMG_SLOTS);
	struct perf_python_stats st;
	uint64_t w[PYFRAMES_MAX_DEPTH];
	uint32_t h[PERF_PYTHON_HELD + 1];

	assert_int_equal(perf_python_take(f->pp, f->im.m), 1);
	sl->cr3 = 0x6000;
	assert_int_equal(perf_python_read(f->pp, f->im.m, f->names, 0, &clk0), 0);
	sl->cr3 = PYIMG_CR3;
	sl->seq = 3;
	assert_int_equal(perf_python_read(f->pp, f->im.m, f->names, 0, &clk0), 0);
	sl->seq = 4;
	assert_int_equal(perf_python_read(f->pp, f->im.m, NULL, 0, &clk0), 0); /* no names */
	assert_int_equal(perf_python_read(f->pp, f->im.m, f->names, 2, &clk0), 0); /* no vCPU 2 */
	/* the held reads are bounded; confirming the newest frees the rest */
	for (unsigned i = 0; i <= PERF_PYTHON_HELD; i++)
		h[i] = perf_python_read(f->pp, f->im.m, f->names, 1, &clk0);
	assert_int_not_equal(h[PERF_PYTHON_HELD - 1], 0);
	assert_int_equal(h[PERF_PYTHON_HELD], 0);
	assert_int_equal(chain_of(f->pp, 1, h[PERF_PYTHON_HELD - 1], &task42,
					   &task42, w), 3);
	assert_int_not_equal(perf_python_read(f->pp, f->im.m, f->names, 1, &clk0), 0);
	perf_python_publish_stats(f->pp);
	perf_python_get_stats(f->pp, &st);
	assert_int_equal(st.slot_busy, 1);
	assert_int_equal(st.held_full, 1);
	/* the slots gone (a reboot): reads off */
	perf_python_set_slots(f->pp, 0, 0, 0);
	assert_int_equal(perf_python_take(f->pp, f->im.m), 0);
	assert_int_equal(perf_python_read(f->pp, f->im.m, f->names, 1, &clk0), 0);
}

/* ---- a guest that keeps running ------------------------------------------ */

/* The mutator's steps: frame 0 runs code k ("work_k"), its caller the call
 * site of line 20 + k % 8; from step k to k + 1 the caller's instruction
 * first, then the code (so the memory passes through (k, k + 1), a state
 * a read may keep).  No state comes back within an episode. */
#define STEPS	256

struct mutator {
	struct fixture *f;
	uint64_t codes[STEPS];
	atomic_int go, done;
	int slots;			/* switch the task instead: 1 by the
					 * slot's seq, 2 by the current-task
					 * pointer */
};

static void spin_us(unsigned us)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec) < us * 1000ll);
}

static void *mutate(void *arg)
{
	struct mutator *mu = arg;
	struct pyimg *im = &mu->f->im;
	struct opvm_slot *sl = (struct opvm_slot *)(void *)(im->ram + PYIMG_SLOTS);

	while (!atomic_load(&mu->go))
		;
	for (unsigned k = 1; k < STEPS; k++) {
		spin_us(20);
		if (mu->slots == 2) {		/* another task_struct each time */
			pyimg_kcur_set(&mu->f->im, 0, PYIMG_TASK_CLONES + k * PYIMG_TASK_SIZE);
			continue;
		}
		if (mu->slots) {		/* a switch away and back */
			__atomic_store_n(&sl->seq, sl->seq + 2, __ATOMIC_RELEASE);
			continue;
		}
		pyimg_put64(im, im->frames[1] + im->l.fr_instr,
			    pyimg_instr(im, im->codes[1], k % 8));
		pyimg_put64(im, im->frames[0] + im->l.fr_code, mu->codes[k]);
	}
	atomic_store(&mu->done, 1);
	return NULL;
}

/* A kept chain is a state the memory had: (k, k) or (k, k + 1). */
static void check_kept(struct fixture *f, const uint64_t *w, unsigned n)
{
	unsigned k, line;

	if (n < 3) {			/* the callers that did not change */
		if (n == 2)
			assert_string_equal(word_name(f, w[0])->name, "Cls.mid");
		if (n)
			assert_string_equal(word_name(f, w[n - 1])->name, "<module>");
		return;
	}
	assert_int_equal(sscanf(word_name(f, w[0])->name, "work_%u", &k), 1);
	line = word_name(f, w[1])->line;
	assert_true(line == 20 + k % 8 || line == 20 + (k + 1) % 8);
	assert_string_equal(word_name(f, w[2])->name, "<module>");
}

/* Episodes of STEPS changes, reads all along, until one read saw a change
 * (bounded: a loaded host may run the two threads in turn for a while). */
static void run_episodes(struct fixture *f, int slots, uint64_t *dropped)
{
	struct mutator mu = { .f = f, .slots = slots };
	struct perf_python_stats st;
	char name[32];

	for (unsigned k = 0; k < STEPS; k++) {
		snprintf(name, sizeof(name), "work_%u", k);
		mu.codes[k] = pyimg_code(&f->im, name, 100, 8);
	}
	for (int ep = 0; ep < 200; ep++) {
		pthread_t th;

		pyimg_put64(&f->im, f->im.frames[0] + f->im.l.fr_code, mu.codes[0]);
		pyimg_put64(&f->im, f->im.frames[1] + f->im.l.fr_instr,
			    pyimg_instr(&f->im, f->im.codes[1], 0));
		atomic_store(&mu.go, 0);
		atomic_store(&mu.done, 0);
		assert_int_equal(pthread_create(&th, NULL, mutate, &mu), 0);
		atomic_store(&mu.go, 1);
		while (!atomic_load(&mu.done)) {
			uint64_t w[PYFRAMES_MAX_DEPTH];
			uint32_t h = perf_python_read(f->pp, f->im.m, f->names, 0, &clk0);

			check_kept(f, w, chain_of(f->pp, 0, h, &task42, &task42, w));
		}
		pthread_join(th, NULL);
		perf_python_publish_stats(f->pp);
		perf_python_get_stats(f->pp, &st);
		*dropped = slots ? st.switched : st.py.fr.changed;
		if (*dropped)
			return;
	}
}

/* Frames that change under the read: dropped (changed), never a chain the
 * memory did not have. */
static void test_changed_under_read(void **state)
{
	struct fixture *f = *state;
	struct perf_python_stats st;
	uint64_t w[PYFRAMES_MAX_DEPTH], dropped = 0;

	assert_int_equal(perf_python_take(f->pp, f->im.m), 1);
	run_episodes(f, 0, &dropped);
	assert_true(dropped > 0);
	/* the guest still: the whole chain again */
	uint32_t h = perf_python_read(f->pp, f->im.m, f->names, 0, &clk0);

	assert_int_equal(chain_of(f->pp, 0, h, &task42, &task42, w), 3);
	check_kept(f, w, 3);
	perf_python_publish_stats(f->pp);
	perf_python_get_stats(f->pp, &st);
	print_message("%llu reads, %llu kept, %llu frames changed under the read\n",
		      (unsigned long long)st.reads, (unsigned long long)st.kept,
		      (unsigned long long)st.py.fr.changed);
	assert_true(st.kept > 0);
	assert_int_equal(st.switched, 0);
}

/* The task switches (the slot's seq moves) while its frames are read:
 * dropped whole, counted as switched. */
static void test_switched_under_read(void **state)
{
	struct fixture *f = *state;
	uint64_t dropped = 0;

	assert_int_equal(perf_python_take(f->pp, f->im.m), 1);
	run_episodes(f, 1, &dropped);
	assert_true(dropped > 0);
}

/* ---- no opvm.ko ------------------------------------------------------------ */

/* The current-task pointer names the task: read, kept with the tgid it
 * was read for (the filing confirms it: no timeline). */
static void test_cur_read_kept(void **state)
{
	struct fixture *f = *state;
	struct perf_python_stats st;
	struct timeline_task other = task42;
	uint64_t w[PYFRAMES_MAX_DEPTH];
	uint32_t h;

	assert_int_equal(perf_python_take(f->pp, f->im.m), PERF_PYTHON_CURRENT);
	h = perf_python_read(f->pp, f->im.m, f->names, 1, &clk0);
	assert_int_not_equal(h, 0);
	assert_int_equal(chain_of(f->pp, 1, h, NULL, NULL, w), 3);
	assert_int_equal(chain_tgid, PYIMG_TID);
	assert_string_equal(word_name(f, w[0])->name, "leaf");
	assert_string_equal(word_name(f, w[2])->name, "<module>");
	/* again: a cache hit, the same */
	h = perf_python_read(f->pp, f->im.m, f->names, 1, &clk0);
	assert_int_equal(chain_of(f->pp, 1, h, NULL, NULL, w), 3);
	/* a timeline (a module come since) that names another task: dropped */
	h = perf_python_read(f->pp, f->im.m, f->names, 1, &clk0);
	other.pid = 43;
	assert_int_equal(chain_of(f->pp, 1, h, &other, &other, w), 0);
	assert_int_equal(chain_tgid, 0);
	/* another process, a kernel thread: nothing read, nothing counted */
	pyimg_kcur_set(&f->im, 1, PYIMG_TASK_OTHER);
	assert_int_equal(perf_python_read(f->pp, f->im.m, f->names, 1, &clk0), 0);
	pyimg_kcur_set(&f->im, 1, PYIMG_TASK_KTHREAD);
	assert_int_equal(perf_python_read(f->pp, f->im.m, f->names, 1, &clk0), 0);
	perf_python_publish_stats(f->pp);
	perf_python_get_stats(f->pp, &st);
	assert_int_equal(st.reads, 3);
	assert_int_equal(st.kept, 2);
	assert_int_equal(st.switched, 1);
	assert_int_equal(st.task_bad, 0);
	assert_int_equal(st.slot_busy, 0);
	/* the slots come (opvm.ko loaded): they name the task from now on */
	perf_python_set_slots(f->pp, PYIMG_SLOTS, sizeof(struct opvm_slot), 2);
	assert_int_equal(perf_python_take(f->pp, f->im.m), PERF_PYTHON_SLOT);
	/* introspection lost the pointers (a reboot), no slots: off */
	perf_python_set_slots(f->pp, 0, 0, 0);
	perf_python_set_current(f->pp, NULL);
	assert_int_equal(perf_python_take(f->pp, f->im.m), PERF_PYTHON_OFF);
	assert_int_equal(perf_python_read(f->pp, f->im.m, f->names, 1, &clk0), 0);
}

/* A forged pointer (a user address, unaligned, outside the direct map,
 * a task whose fields do not read) names no task: refused, counted. */
static void test_cur_forged(void **state)
{
	struct fixture *f = *state;
	struct perf_python_stats st;
	static const uint64_t bad[] = { 0x1000, PYIMG_KDIRECT + PYIMG_TASK_A + 4, 0xffffffffdead0000ull,
					PYIMG_KDIRECT + 0x1ffff8 };

	assert_int_equal(perf_python_take(f->pp, f->im.m), PERF_PYTHON_CURRENT);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pyimg_kput64(&f->im, PYIMG_CUR_PA, bad[i]);
		assert_int_equal(perf_python_read(f->pp, f->im.m, f->names, 0, &clk0), 0);
	}
	/* vCPU 1 still runs the task: read */
	assert_int_equal(perf_python_read(f->pp, f->im.m, f->names, 1, &clk0) != 0, 1);
	perf_python_publish_stats(f->pp);
	perf_python_get_stats(f->pp, &st);
	assert_int_equal(st.task_bad, 4);
	assert_int_equal(st.reads, 1);
}

/* The task switches (the pointer moves to another task_struct) while its
 * frames are read: dropped whole, counted as switched; what is kept is
 * the chain. */
static void test_cur_switched_under_read(void **state)
{
	struct fixture *f = *state;
	uint64_t dropped = 0;

	assert_int_equal(perf_python_take(f->pp, f->im.m), PERF_PYTHON_CURRENT);
	run_episodes(f, 2, &dropped);
	assert_true(dropped > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_read_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_switched, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_changed_under_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_switched_under_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cur_read_kept, setup_cur, teardown),
		cmocka_unit_test_setup_teardown(test_cur_forged, setup_cur, teardown),
		cmocka_unit_test_setup_teardown(test_cur_switched_under_read, setup_cur,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
