// SPDX-License-Identifier: MIT
/*
 * The cost of naming one binary from guest memory (vmm/introspect/
 * memsyms.c): the test image's libc.so.6 (Debian 12's, build/images/root;
 * the host's without it) laid out as a process maps it, its dynamic
 * section relocated, read through the real guest-memory reader
 * (/proc/self/mem pread, vmm/guest/guestmem.h) page by page and made into
 * the ELF the cache keeps.  The page-table walk of a real guest adds four
 * 8-byte reads a page, not counted here.  Time is the process's CPU time
 * (shared machines), best of ROUNDS.
 *
 * Prints:  memsyms-per-binary: N us (libc.so.6: K functions, R PLT sections of S stubs from
 *          L pages, P pages, B bytes of guest memory read)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "vmm/guest/guestmem.h"
#include "vmm/introspect/memsyms.h"
#include "tests/unit/memsyms-image.h"

#define ROUNDS	20
#define BIAS	0x7f5a00000000ull

struct rd {
	struct guestmem *m;
	uint64_t lo;
	uint64_t pages;
};

static int page_read(void *arg, uint64_t va, void *page)
{
	struct rd *r = arg;

	r->pages++;
	return guestmem_read(r->m, va - r->lo, page, PG) ? -ENOENT : 0;
}

static double cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(void)
{
	const char *img = getenv("BUILD") ? getenv("BUILD") : "build";
	static const uint8_t bid[20] = { 0x93, 0xac };
	char path[4096];
	struct fake f;
	struct rd r;
	struct memsyms_mem mm = { page_read, &r };
	struct memsyms_result res;
	double best = 1e18;

	snprintf(path, sizeof(path), "%s/images/root/lib/x86_64-linux-gnu/libc.so.6", img);
	if (access(path, R_OK))
		snprintf(path, sizeof(path), "/lib/x86_64-linux-gnu/libc.so.6");
	if (fake_load(&f, path, BIAS)) {
		printf("memsyms-per-binary: SKIP (no libc.so.6 to lay out)\n");
		return 0;
	}
	relocate(&f, 1);
	r.m = guestmem_open(getpid());
	r.lo = f.lo;
	if (!r.m || guestmem_add_range(r.m, 0, f.npages * PG, (uint64_t)(uintptr_t)f.mem)) {
		fprintf(stderr, "bench-memsyms: cannot read /proc/self/mem\n");
		return 1;
	}
	for (int i = 0; i < ROUNDS; i++) {
		void *elf;
		size_t len;
		double t0 = cpu_us(), t;
		int rc;

		r.pages = 0;
		rc = memsyms_read(&mm, &f.exec, bid, sizeof(bid), NULL, &elf, &len, &res);
		t = cpu_us() - t0;
		free(elf);
		if (rc) {
			fprintf(stderr, "bench-memsyms: %s: %d (%s)\n", path, rc, res.why ? res.why : "");
			return 1;
		}
		best = t < best ? t : best;
	}
	printf("memsyms-per-binary: %.0f us (libc.so.6: %u functions, %u PLT sections of %u stubs "
	       "from %u pages, %llu pages, %llu bytes of guest memory read)\n", best, res.kept,
	       res.plt_ranges, res.plt_stubs, res.plt_pages, (unsigned long long)r.pages,
	       (unsigned long long)r.pages * PG);
	guestmem_close(r.m);
	fake_free(&f);
	return 0;
}
