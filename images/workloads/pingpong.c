/* SPDX-License-Identifier: MIT */
/*
 * pingpong [rounds] [reps]: a context-switch storm, two processes passing a
 * byte over two pipes.  Prints each repetition and the median of all but
 * the first (warm-up) as "OPVM-BENCH pingpong ns_per_roundtrip=N" (used by
 * the module overhead benchmark).
 */
#include <sys/wait.h>
#include "common.h"
#include "median.h"

int main(int argc, char **argv)
{
	long rounds = arg_long(argc, argv, 1, 20000);
	long reps = arg_long(argc, argv, 2, 5);
	int a[2], b[2];
	char c = 0;
	pid_t pid;
	double v[64];

	if (reps < 1 || reps > 64)
		reps = 5;
	if (pipe(a) || pipe(b)) {
		perror("pipe");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		/* Keep only our ends, or read() never sees EOF. */
		close(a[1]);
		close(b[0]);
		while (read(a[0], &c, 1) == 1)
			if (write(b[1], &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	close(a[0]);
	close(b[1]);
	for (long r = 0; r < reps; r++) {
		uint64_t t0 = now_ns();
		double ns;

		for (long i = 0; i < rounds; i++)
			if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1)
				return 1;
		ns = (double)(now_ns() - t0) / (double)rounds;
		printf("OPVM-BENCH pingpong rep=%ld ns_per_roundtrip=%.0f\n", r, ns);
		v[r] = ns;
	}
	close(a[1]);
	waitpid(pid, NULL, 0);
	printf("OPVM-BENCH pingpong ns_per_roundtrip=%.0f\n",
	       median_after_warmup(v, reps));
	return 0;
}
