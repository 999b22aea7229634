// SPDX-License-Identifier: MIT
/*
 * Host sample pipeline throughput: ring push -> ring pop -> attribution ->
 * sample-file add, on one core.
 *
 * Synthetic guest: 200 processes x 30 executable mappings (an executable and
 * 29 shared libraries at per-process ASLR addresses), 60 kernel modules.
 * 4 vCPUs; each runs one process for a time slice of 32..160 samples, then
 * switches; 70 % of samples are in user mode (half in the executable, half
 * over the libraries), 30 % in the kernel (a fifth of those in modules).
 * Offsets come from 4096 hot spots per image (16 bytes apart).
 *
 * Two distributions: "pipeline" draws the library and the hot spot from a
 * Zipf (s = 1) law, as real profiles go (the top 10 of 4096 hot spots take
 * 29 % of the samples, the top 100 55 %); "pipeline-uniform" draws both
 * uniformly, the worst case for every cache (about a million distinct
 * offsets in all).  A sync runs
 * every 4096 samples per vCPU.
 *
 * Time is the process's CPU time (one thread, so one core): the machines
 * this runs on are shared, and wall time would measure the neighbours.
 * The replayed pattern is kept as compact records (struct pat, 32 bytes)
 * and each sample is built on the stack as a sampler builds it: a pattern
 * of struct opvm_sample (88 bytes since the -g dwarf fields) would make
 * pipeline-rss and the memory traffic measure the harness, not the pipeline.
 *
 * Prints:  pipeline: N M samples/s (target >= 50)
 *          pipeline-ns-per-sample: N ns (target <= 20)
 *          pipeline-uniform: N M samples/s
 *          pipeline-rss: N KiB (target <= 26000: 5d33b23's 25.5 MB)
 */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "host/collect/gstate.h"
#include "lib/ring.h"
#include "host/collect/store.h"
#include "host/collect/attribution.h"

#define NR_PROCS	200
#define NR_LIBS		29
#define NR_MODS		60
#define NR_VCPUS	4
#define PATTERN		(1u << 18)	/* pre-generated samples, replayed */
#ifndef TOTAL
#define TOTAL		(24u << 20)	/* samples pushed in all (-DTOTAL: fewer, for callgrind) */
#endif
#define BATCH		4096		/* per vCPU between syncs */
#define KTEXT		0xffffffff81000000ull
#define MODBASE		0xffffffffc0000000ull

/* One pattern sample: what a sampler reads from a vCPU. */
struct pat {
	uint64_t rip;
	uint64_t cr3;
	uint64_t slot_cr3;
	uint32_t tgid;		/* slot tid = tgid */
	uint8_t vcpu, cpl, flags, pad;
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static inline uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(p);
}

static uint64_t proc_cr3(unsigned p)
{
	return 0x10000000ull + (uint64_t)p * 0x4000;
}

static uint64_t lib_base(unsigned p, unsigned l)
{
	return 0x7f0000000000ull + (uint64_t)p * 0x100000000ull + (uint64_t)l * 0x400000;
}

static int build_guest(struct gstate *gs)
{
	struct chan_hello h = { .version = 1, .nr_cpus = NR_VCPUS };
	char path[64];
	unsigned p, l, m;

	if (gstate_hello(gs, &h))
		return -1;
	for (l = 0; l < NR_LIBS; l++) {
		int n = snprintf(path, sizeof(path), "/usr/lib/x86_64-linux-gnu/lib%u.so.1", l);

		if (gstate_cookie(gs, 1000 + l, path, (size_t)n, NULL, 0))
			return -1;
	}
	for (p = 0; p < NR_PROCS; p++) {
		int n = snprintf(path, sizeof(path), "/usr/bin/prog%u", p);

		if (gstate_cookie(gs, 1 + p, path, (size_t)n, (const uint8_t *)"0123456789abcdefghij", 20) ||
		    gstate_proc(gs, 100 + p, 1, proc_cr3(p), path + 9, strlen(path + 9), 1 + p) ||
		    gstate_mmap(gs, 100 + p, 0x400000, 0x800000, 0x1000, 1 + p))
			return -1;
		for (l = 0; l < NR_LIBS; l++)
			if (gstate_mmap(gs, 100 + p, lib_base(p, l), lib_base(p, l) + 0x200000,
					0x20000, 1000 + l))
				return -1;
	}
	for (m = 0; m < NR_MODS; m++) {
		int n = snprintf(path, sizeof(path), "mod%u", m);

		if (gstate_module(gs, path, (size_t)n, MODBASE + (uint64_t)m * 0x100000, 0x40000))
			return -1;
	}
	return 0;
}

/* [0, n): uniform, or Zipf-like (s = 1, log-uniform: P(x < k) = ln(k+1) /
 * ln(n+1)) */
static unsigned pick(unsigned n, int skew)
{
	double u = (double)(rnd() >> 11) / 9007199254740992.0;

	if (skew)
		return (unsigned)(exp(u * log(n + 1.0)) - 1.0) % n;
	return (unsigned)(u * n) % n;
}

static void gen_pattern(struct pat *pat, int skew)
{
	unsigned cur[NR_VCPUS], left[NR_VCPUS] = { 0 };
	unsigned i;

	for (i = 0; i < PATTERN; i++) {
		unsigned v = i % NR_VCPUS, p;
		uint64_t r = rnd(), hot = (uint64_t)pick(4096, skew) * 16;
		struct pat *s = &pat[i];

		if (!left[v]) {
			cur[v] = (unsigned)(rnd() % NR_PROCS);
			left[v] = 32 + (unsigned)(rnd() % 129);
		}
		left[v]--;
		p = cur[v];
		memset(s, 0, sizeof(*s));
		s->vcpu = v;
		s->cr3 = proc_cr3(p) | 0x1 | ((r & 1) ? 0x1000 : 0);	/* PCID, PTI */
		s->slot_cr3 = proc_cr3(p);
		s->tgid = 100 + p;
		s->flags = OPVM_SAMPLE_SLOT;
		if (r % 10 < 7) {
			s->cpl = 3;
			if ((r >> 8) & 1)
				s->rip = 0x400000 + hot;
			else
				s->rip = lib_base(p, pick(NR_LIBS, skew)) + hot;
		} else {
			s->cpl = 0;
			if ((r >> 8) % 5)
				s->rip = KTEXT + hot * 8;
			else
				s->rip = MODBASE + ((r >> 9) % NR_MODS) * 0x100000 + hot;
		}
	}
}

/* Pushes pattern sample p into its vCPU's ring, as a sampler does: into
 * that vCPU's sample (vcpu set, the rest zero), only what a sample
 * changes. */
static inline void push(struct ring **rings, struct opvm_sample *smp, const struct pat *p)
{
	struct opvm_sample *s = &smp[p->vcpu];

	s->rip = p->rip;
	s->cr3 = p->cr3;
	s->slot_cr3 = p->slot_cr3;
	s->slot_tid = s->slot_tgid = p->tgid;
	s->cpl = p->cpl;
	s->flags = p->flags;
	ring_push(rings[p->vcpu], s);
}

/* Pushes TOTAL samples through rings -> sync -> files; returns samples/s
 * of CPU time, or a negative value on failure. */
static double run(const char *dir, const char *guest, int skew)
{
	struct store_event ev = { .name = "TIMER", .count = 1 };
	struct ring *rings[NR_VCPUS] = { NULL };
	struct opvm_sample smp[NR_VCPUS];
	struct pat *pat = malloc(PATTERN * sizeof(*pat));
	struct store *store = store_open(dir, guest, &ev, 1, OPVM_SEP_NONE, 0);
	struct gstate *gs = gstate_new(NULL);
	struct attribution *sy = NULL;
	struct opvm_stats st;
	uint64_t pushed = 0;
	double t0, t1, rate = -1;
	unsigned v;

	memset(smp, 0, sizeof(smp));
	for (v = 0; v < NR_VCPUS; v++) {
		rings[v] = ring_new(1 << 16);
		smp[v].vcpu = v;
	}
	if (!pat || !store || !gs || !rings[NR_VCPUS - 1] || build_guest(gs)) {
		fprintf(stderr, "bench-pipeline: setup failed: %s\n", strerror(errno));
		goto out;
	}
	sy = attribution_new(store, gs, rings, NR_VCPUS, NULL);
	if (!sy)
		goto out;
	gen_pattern(pat, skew);

	/* warm-up pass: creates the sample files, faults in their tables */
	for (unsigned i = 0; i < PATTERN; i++) {
		push(rings, smp, &pat[i]);
		if (i % (BATCH * NR_VCPUS) == BATCH * NR_VCPUS - 1)
			attribution_run(sy, 0);
	}
	attribution_run(sy, 0);

	t0 = now_s();
	while (pushed < TOTAL) {
		for (unsigned i = 0; i < PATTERN; i++) {
			push(rings, smp, &pat[i]);
			if (i % (BATCH * NR_VCPUS) == BATCH * NR_VCPUS - 1)
				attribution_run(sy, 0);
		}
		attribution_run(sy, 0);
		pushed += PATTERN;
	}
	t1 = now_s();
	store_sync(store);
	attribution_get_stats(sy, &st);
	if (st.lost_overflow || st.lost_no_mapping || st.lost_no_process || st.unresolved ||
	    st.received != pushed + PATTERN || st.kernel + st.user != st.received ||
	    attribution_store_errors(sy)) {
		fprintf(stderr, "bench-pipeline: bad accounting: received %llu lost %llu/%llu/%llu\n",
			(unsigned long long)st.received, (unsigned long long)st.lost_overflow,
			(unsigned long long)st.lost_no_mapping, (unsigned long long)st.lost_no_process);
		goto out;
	}
	rate = (double)pushed / (t1 - t0);
out:
	attribution_free(sy);
	store_close(store);
	gstate_free(gs);
	for (v = 0; v < NR_VCPUS; v++)
		ring_free(rings[v]);
	free(pat);
	return rate;
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	double skewed, uniform;
	struct rusage ru;
	char dir[256];

	snprintf(dir, sizeof(dir), "%s/opvm-bench-pipeline-XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("bench-pipeline: mkdtemp");
		return 1;
	}
	skewed = run(dir, "skewed", 1);
	uniform = skewed > 0 ? run(dir, "uniform", 0) : -1;
	getrusage(RUSAGE_SELF, &ru);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	if (skewed < 0 || uniform < 0)
		return 1;
	printf("pipeline: %.1f M samples/s (target >= 50)\n", skewed / 1e6);
	printf("pipeline-ns-per-sample: %.1f ns (target <= 20)\n", 1e9 / skewed);
	printf("pipeline-uniform: %.1f M samples/s\n", uniform / 1e6);
	printf("pipeline-rss: %ld KiB (target <= 26000)\n", ru.ru_maxrss);
	return 0;
}
