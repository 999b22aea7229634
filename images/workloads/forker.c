/* SPDX-License-Identifier: MIT */
/*
 * forker [count] [program]: fork+exec+exit `count` short-lived children
 * (default 200, exec'ing /usr/bin/opvm-true).  Known answer: every child's
 * pid, each of which must be announced (PROC/EXEC) and retired (PROC_EXIT).
 * Also prints "OPVM-BENCH forker ns_per_child=N" (module overhead benchmark).
 */
#include <sys/wait.h>
#include "common.h"

int main(int argc, char **argv)
{
	long count = arg_long(argc, argv, 1, 200);
	const char *prog = argc > 2 ? argv[2] : "/usr/bin/opvm-true";
	long failed = 0;
	uint64_t t0 = now_ns();

	TRUTH("forker pid=%d count=%ld prog=%s\n", getpid(), count, prog);
	for (long i = 0; i < count; i++) {
		int status;
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			execl(prog, prog, (char *)NULL);
			_exit(127);
		}
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			failed++;
		TRUTH("forker child=%d\n", pid);
	}
	printf("OPVM-BENCH forker ns_per_child=%.0f\n",
	       count ? (double)(now_ns() - t0) / (double)count : 0.0);
	TRUTH("forker done children=%ld failed=%ld\n", count, failed);
	return failed != 0;
}
