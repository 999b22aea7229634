/* SPDX-License-Identifier: MIT */
/*
 * cgpair units rounds in out first: one half of a pair of processes that
 * take turns through two FIFOs: wait for a byte on `in` (but in the first
 * round of the one with first=1), do `units` million iterations of a fixed
 * loop, pass a byte on through `out`.  Two of them with units 1 and 3 split
 * the CPU 1:3 whatever the host's speed, as the turns interleave them
 * finely: the known answer of tests/integration/cgroup-split.sh, which
 * starts each in a cgroup of its own.
 */
#include <fcntl.h>
#include <signal.h>
#include "common.h"

static volatile uint64_t sink;

static void work(long units)
{
	uint64_t x = sink;

	for (long i = 0; i < units * 1000000; i++)
		x = x * 6364136223846793005ull + (uint64_t)i;
	sink = x;
}

int main(int argc, char **argv)
{
	long units = arg_long(argc, argv, 1, 1);
	long rounds = arg_long(argc, argv, 2, 10);
	long first = arg_long(argc, argv, 5, 0);
	int in, out;
	char c = 0;

	signal(SIGPIPE, SIG_IGN);	/* the other one gone: stop */
	if (argc < 5) {
		fprintf(stderr, "usage: cgpair units rounds in out first\n");
		return 2;
	}
	/* the same order in both (out of the first, in of the other): no
	 * deadlock on the FIFOs' opens */
	if (first) {
		out = open(argv[4], O_WRONLY);
		in = open(argv[3], O_RDONLY);
	} else {
		in = open(argv[3], O_RDONLY);
		out = open(argv[4], O_WRONLY);
	}
	if (in < 0 || out < 0) {
		perror("cgpair: open");
		return 1;
	}
	for (long r = 0; r < rounds; r++) {
		if ((r || !first) && read(in, &c, 1) != 1)
			break;
		work(units);
		if (write(out, &c, 1) != 1)
			break;
	}
	if (first && read(in, &c, 1) != 1)	/* the other one's last turn */
		return 1;
	return 0;
}
