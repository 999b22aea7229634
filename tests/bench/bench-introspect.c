// SPDX-License-Identifier: MIT
/*
 * Introspection: the cost of finding a guest kernel's VMCOREINFO in RAM and
 * decoding its kallsyms into KSYMS records, through the real guest-memory
 * reader (/proc/self/mem) over a synthetic guest (tests/unit/introspect-
 * image.h): 256 MiB of RAM with the VMCOREINFO page in its last MiB (a
 * whole scan), and the test image's own symbols (build/images/System.map:
 * Debian 12's 6.1, ~94000 with KALLSYMS_ALL) or, without it, as many made
 * up.  Time is the process's CPU time (shared machines), best of ROUNDS.
 *
 * Then one refresh of the process list and of the mappings of a synthetic
 * guest with XT_MAX (120) processes, 108 of them with a maple tree of six
 * VMAs (two executable file mappings, their files known from the first
 * refresh), averaged over REFRESHES: every mm's map_count is changed
 * before each, so every tree is walked again (the worst case; an
 * unchanged mm costs three reads), and compared, nothing sent.
 *
 * Then the gdbstub sampler's naming of a sample's current-task pointer
 * (vmm/introspect/kcurrent.h) on a cache hit, the common case: one 8-byte
 * read (pid, tgid) through /proc/self/mem, averaged over LOOKUPS.
 *
 * Then the same for a kernel before 6.0 (introspect-kallsyms-search): the
 * same symbols laid out as 5.10 lays them out, 16 MiB into the kernel
 * image, and a VMCOREINFO that lists no tables, so they are found by
 * their shape (vmm/introspect/kallsyms-find.c) before they are decoded.
 *
 * Prints:  introspect-kallsyms: N ms
 *          introspect-kallsyms-search: N ms
 *          introspect-refresh: N us
 *          introspect-current-hit: N ns
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vmm/guest/guestmem.h"
#include "vmm/introspect/introspect.h"
#include "vmm/introspect/kcurrent.h"
#include "vmm/introspect/kvmas.h"
#include "../unit/introspect-image.h"

/* A tool that takes the records only (vmm/introspect/introspect.h). */
#define TOOL(fn, a)	(&(const struct introspect_tool){ .record = (fn), .arg = (a) })

#define RAM		(256u << 20)
#define ROUNDS		3
#define MAX_SYMS	200000

static double cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The test image's System.map, link-time addresses (no KASLR: _text is
 * XI_KERNEL_VA), or made-up names. */
static uint32_t load_syms(struct xi_sym *s, char *names, size_t room)
{
	const char *b = getenv("BUILD");
	char path[512], line[600], type, name[512];
	unsigned long long addr;
	uint32_t n = 0;
	size_t used = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/images/System.map", b ? b : "build");
	f = fopen(path, "r");
	while (f && n < MAX_SYMS && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %511s", &addr, &type, name) != 3 ||
		    used + strlen(name) + 1 > room || strlen(name) > 400)
			continue;
		s[n++] = (struct xi_sym){ strcpy(names + used, name), type, addr };
		used += strlen(name) + 1;
	}
	if (f)
		fclose(f);
	for (; n < 94000 && used + 48 <= room; n++) {
		char *p = names + used;

		used += (size_t)snprintf(p, 48, "synthetic_function_%u", n) + 1;
		s[n] = (struct xi_sym){ p, 'T', XI_KERNEL_VA + 64ull * n };
	}
	return n;
}

static void sink(void *arg, const void *rec, size_t len)
{
	*(size_t *)arg += len;
}

#define REFRESHES	200
#define LOOKUPS		200000

/* introspect-current-hit: 0, or 1 on a failure. */
static int bench_current(struct introspect *in, struct guestmem *m)
{
	struct kcurrent_info *ci = calloc(1, sizeof(*ci));
	struct kcurrent *k;
	struct ktask_cur cur;
	uint64_t ptr[2];
	double t0;

	if (!ci || introspect_current_info(in, 2, ci) ||
	    guestmem_read(m, ci->slot_pa[0], &ptr[0], 8) ||
	    guestmem_read(m, ci->slot_pa[1], &ptr[1], 8) || !(k = kcurrent_new(m, ci, ~0ull))) {
		fprintf(stderr, "bench-introspect: no current task\n");
		return 1;
	}
	t0 = cpu_ms();
	for (int i = 0; i < LOOKUPS; i++)
		if (kcurrent_task(k, ptr[i & 1], false, 0, &cur))
			return 1;
	t0 = cpu_ms() - t0;
	fprintf(stderr, "bench-introspect: %d lookups, %llu misses, %.1f ms\n", LOOKUPS,
		(unsigned long long)kcurrent_get_stats(k)->misses, t0);
	printf("introspect-current-hit: %.0f ns\n", t0 * 1e6 / LOOKUPS);
	kcurrent_free(k);
	free(ci);
	return 0;
}

/* introspect-refresh: 0, or 1 on a failure. */
static int bench_refresh(void)
{
	struct xi_sym s[XT_NSYMS];
	struct ximage x;
	struct guestmem *m;
	struct introspect *in;
	size_t bytes = 0;
	uint32_t len;
	void *btf = xt_btf(&len);
	double t0;

	if (!btf)
		return 1;
	free(btf);
	xt_syms(s, len);
	if (ximage_build(&x, XV_RAM, s, XT_NSYMS, 0x600000) || xt_tasks(&x, XT_MAX) < 0)
		return 1;
	xv_maps(&x, XT_MAX);
	m = guestmem_open(getpid());
	if (!m || guestmem_add_range(m, 0, x.size, (uint64_t)(uintptr_t)x.ram))
		return 1;
	in = introspect_new(m, NULL);
	introspect_poll(in, 1, NULL, TOOL(sink, &bytes));
	introspect_poll(in, 2, NULL, TOOL(sink, &bytes));
	if (introspect_get_stats(in)->tasks != XT_MAX || !introspect_get_stats(in)->maps ||
	    introspect_get_stats(in)->maps->maps_sent != 2 * (XT_MAX - XT_MAX / 10)) {
		fprintf(stderr, "bench-introspect: the processes or mappings were not read\n");
		return 1;
	}
	t0 = 0;
	for (int i = 0; i < REFRESHES; i++) {
		double t1;

		for (unsigned p = 0; p < XT_MAX; p++) {
			uint32_t count = 7 + (uint32_t)(i & 1);

			xi_put(&x, XT_MM_VA + (uint64_t)p * 0x100 + XM_MAP_COUNT, &count, 4);
		}
		t1 = cpu_ms();
		introspect_poll(in, 3 + (uint64_t)i, NULL, TOOL(sink, &bytes));
		t0 += cpu_ms() - t1;
	}
	fprintf(stderr, "bench-introspect: %u processes, %d refreshes, %.1f ms, %llu trees "
		"read, %llu VMAs\n", XT_MAX, REFRESHES, t0,
		(unsigned long long)introspect_get_stats(in)->maps->procs_read,
		(unsigned long long)introspect_get_stats(in)->maps->vmas);
	printf("introspect-refresh: %.0f us\n", t0 * 1000.0 / REFRESHES);
	if (bench_current(in, m))
		return 1;
	introspect_free(in);
	guestmem_close(m);
	ximage_free(&x);
	return 0;
}

/* Finds VMCOREINFO and decodes kallsyms in x (ROUNDS times): the best CPU
 * time, or < 0 when the table was not found whole. */
static double bench_kallsyms(struct ximage *x, uint32_t n, const char *what)
{
	double best = 1e30;

	for (int r = 0; r < ROUNDS; r++) {
		struct guestmem *m = guestmem_open(getpid());
		struct introspect *in;
		size_t bytes = 0;
		double t0;

		if (!m || guestmem_add_range(m, 0, RAM, (uint64_t)(uintptr_t)x->ram))
			return -1;
		in = introspect_new(m, NULL);
		t0 = cpu_ms();
		for (int i = 1; i < 16 && introspect_get_stats(in)->state == INTROSPECT_SEARCHING; i++)
			introspect_poll(in, (uint64_t)i, NULL, TOOL(sink, &bytes));	/* a scan step each */
		t0 = cpu_ms() - t0;
		if (introspect_get_stats(in)->state != INTROSPECT_READY ||
		    introspect_get_stats(in)->nr_syms != n) {
			fprintf(stderr, "bench-introspect: the table was not found (%s)\n", what);
			return -1;
		}
		if (t0 < best)
			best = t0;
		fprintf(stderr, "bench-introspect: %s: %u symbols, %llu sent, %zu bytes of records, "
			"%.1f ms\n", what, n, (unsigned long long)introspect_get_stats(in)->ksyms_sent,
			bytes, t0);
		introspect_free(in);
		guestmem_close(m);
	}
	return best;
}

int main(void)
{
	struct xi_sym *s = calloc(MAX_SYMS, sizeof(*s));
	char *names = malloc(16u << 20);
	struct xi_tables t;
	struct ximage x;
	double best;
	uint32_t n;

	if (!s || !names)
		return 1;
	n = load_syms(s, names, 16u << 20);
	if (ximage_build(&x, RAM, s, n, RAM - (1u << 20))) {
		fprintf(stderr, "bench-introspect: out of memory\n");
		return 1;
	}
	best = bench_kallsyms(&x, n, "VMCOREINFO");
	if (best < 0)
		return 1;
	printf("introspect-kallsyms: %.0f ms\n", best);
	/* before 6.0: the tables found by shape */
	xi_kallsyms_image(&x, XI_KERNEL_VA + (16u << 20), s, n, 0, &t);
	xi_vmcoreinfo_old(&x);
	best = bench_kallsyms(&x, n, "search");
	if (best < 0)
		return 1;
	printf("introspect-kallsyms-search: %.0f ms\n", best);
	ximage_free(&x);
	free(names);
	free(s);
	return bench_refresh();
}
