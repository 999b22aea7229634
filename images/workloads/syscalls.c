/* SPDX-License-Identifier: MIT */
/*
 * syscalls [seconds]: loops of getppid() and read() of /dev/zero, so most of
 * the time is spent in the guest kernel.  Known answer: the kernel share of
 * this process's CPU time as the kernel itself accounted it (getrusage).
 */
#include <fcntl.h>
#include <sys/resource.h>
#include "common.h"

static char buf[16384];

int main(int argc, char **argv)
{
	double secs = arg_double(argc, argv, 1, 3.0);
	uint64_t end = now_ns() + (uint64_t)(secs * 1e9);
	unsigned long calls = 0;
	struct rusage ru;
	double u, s;
	int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		perror("/dev/zero");
		return 1;
	}
	TRUTH("syscalls pid=%d seconds=%.1f\n", getpid(), secs);
	do {
		for (int i = 0; i < 100; i++) {
			(void)getppid();
			if (read(fd, buf, sizeof(buf)) < 0)
				return 1;
		}
		calls += 200;
	} while (now_ns() < end);
	getrusage(RUSAGE_SELF, &ru);
	u = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
	s = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	TRUTH("syscalls done calls=%lu user=%.3f sys=%.3f kernel_share=%.3f\n",
	      calls, u, s, u + s > 0 ? s / (u + s) : 0.0);
	return 0;
}
