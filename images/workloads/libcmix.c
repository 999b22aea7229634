/* SPDX-License-Identifier: MIT */
/*
 * libcmix [seconds]: dynamically linked; alternates memset() in libc.so.6
 * with a loop in this binary.  Iteration counts are calibrated so memset
 * takes about 40 % of the time; the share actually measured (wall time of
 * each phase, summed over the run) is printed as the known answer.
 * libc's memset is an ifunc: the symbol may be __memset_<variant>.
 *
 * First it maps one page of /usr/bin/opvm-true executable and unmaps it
 * again, and prints both addresses: the channel must carry the MMAP and the
 * MUNMAP.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include "common.h"

#define BUF_SIZE (64 * 1024)

static unsigned char buf[BUF_SIZE];
static volatile uint64_t sink;

static void __attribute__((noinline)) own_loop(unsigned long n)
{
	uint64_t x = sink;

	for (unsigned long i = 0; i < n; i++)
		x = x * 2862933555777941757ull + 3037000493ull;
	sink = x;
}

static void __attribute__((noinline)) libc_part(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		memset(buf, (int)i, sizeof(buf));
		sink += buf[i % BUF_SIZE];
	}
}

static void map_unmap(void)
{
	const char *path = "/usr/bin/opvm-true";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	void *p;

	if (fd < 0)
		return;
	p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return;
	TRUTH("libcmix mapped path=%s start=%p\n", path, p);
	munmap(p, 4096);
	TRUTH("libcmix unmapped start=%p\n", p);
}

int main(int argc, char **argv)
{
	double secs = arg_double(argc, argv, 1, 3.0);
	uint64_t t0, t_libc = 0, t_own = 0, end;
	unsigned long n_libc = 1, n_own = 1000;

	TRUTH("libcmix pid=%d seconds=%.1f\n", getpid(), secs);
	map_unmap();
	/* Calibrate both phases to about 20 ms each. */
	for (;;) {
		t0 = now_ns();
		libc_part(n_libc);
		if (now_ns() - t0 > 20000000ull)
			break;
		n_libc *= 2;
	}
	for (;;) {
		t0 = now_ns();
		own_loop(n_own);
		if (now_ns() - t0 > 20000000ull)
			break;
		n_own *= 2;
	}
	/* 40 % libc, 60 % own: scale the own loop to 1.5x the libc time. */
	{
		uint64_t a, b;

		t0 = now_ns();
		libc_part(n_libc);
		a = now_ns() - t0;
		t0 = now_ns();
		own_loop(n_own);
		b = now_ns() - t0;
		if (b)
			n_own = (unsigned long)((double)n_own * 1.5 * (double)a / (double)b);
		if (!n_own)
			n_own = 1;
	}
	TRUTH("libcmix intended memset=0.40 own_loop=0.60\n");
	end = now_ns() + (uint64_t)(secs * 1e9);
	do {
		t0 = now_ns();
		libc_part(n_libc);
		t_libc += now_ns() - t0;
		t0 = now_ns();
		own_loop(n_own);
		t_own += now_ns() - t0;
	} while (now_ns() < end);
	TRUTH("libcmix measured memset=%.3f own_loop=%.3f image libc.so.6=%.3f libcmix=%.3f\n",
	      (double)t_libc / (double)(t_libc + t_own),
	      (double)t_own / (double)(t_libc + t_own),
	      (double)t_libc / (double)(t_libc + t_own),
	      (double)t_own / (double)(t_libc + t_own));
	return 0;
}
