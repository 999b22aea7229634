/* SPDX-License-Identifier: MIT */
/*
 * churn [s] [ms]: a hostile guest that makes the store grow (docs/usage.md,
 * "continuous").  For s seconds (default 30), one child after another, each
 * a new executable and a new cgroup: this binary copied to /tmp/churn-N (N
 * growing), a cgroup v2 directory /sys/fs/cgroup/churn-N the child moves
 * into before its exec, and the child spinning ms (default 100) of its own
 * CPU time in churn_spin(), so each one gets samples under a name no other
 * had.  The copy and the cgroup are removed when the child has exited; a
 * copy /tmp has no room for ends the churn early (nospace=1: a deleted
 * executable stays in memory while anything still holds it).  Known answer:
 * the children made, how many had their own cgroup, and how many failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "common.h"

#define CHURN_CG	"/sys/fs/cgroup"

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The child's work: ms of its own CPU time (not wall time: a slow TCG
 * guest still gives each child the same share of samples). */
static __attribute__((noinline)) int churn_spin(long ms)
{
	uint64_t end = cpu_ns() + (uint64_t)ms * 1000000ull;
	volatile uint64_t x = 0;

	while (cpu_ns() < end)
		for (int i = 0; i < 10000; i++)
			x += (uint64_t)i * 2654435761u;
	return 0;
}

/* All of /proc/self/exe into *buf: what each copy is made of. */
static ssize_t read_self(char **buf)
{
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	struct stat sb;
	ssize_t n = -1;

	if (fd < 0)
		return -1;
	if (!fstat(fd, &sb) && sb.st_size > 0 && (*buf = malloc(sb.st_size))) {
		n = 0;
		while (n < sb.st_size) {
			ssize_t r = read(fd, *buf + n, sb.st_size - n);

			if (r <= 0) {
				n = -1;
				break;
			}
			n += r;
		}
	}
	close(fd);
	return n;
}

static int write_copy(const char *path, const char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	size_t off = 0;

	if (fd < 0)
		return -1;
	while (off < len) {
		ssize_t w = write(fd, buf + off, len - off);

		if (w <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	return close(fd);
}

int main(int argc, char **argv)
{
	double secs;
	long ms, made = 0, in_cg = 0, failed = 0;
	int have_cg, nospace = 0;
	uint64_t end;
	char *self = NULL;
	ssize_t len;

	if (argc > 2 && !strcmp(argv[1], "spin"))	/* a child, exec'd */
		return churn_spin(strtol(argv[2], NULL, 0));
	secs = arg_double(argc, argv, 1, 30);
	ms = arg_long(argc, argv, 2, 100);
	len = read_self(&self);
	if (len < 0) {
		perror("churn: /proc/self/exe");
		return 1;
	}
	/* cgroup v2 where the init has not mounted it yet */
	have_cg = !access(CHURN_CG "/cgroup.procs", F_OK) ||
		  !mount("none", CHURN_CG, "cgroup2", 0, NULL);
	TRUTH("churn pid=%d seconds=%.1f spin_ms=%ld cgroups=%d\n", getpid(), secs, ms, have_cg);
	end = now_ns() + (uint64_t)(secs * 1e9);
	while (now_ns() < end) {
		char path[64], cg[64], msarg[24];
		int status, cg_ok;
		pid_t pid;

		snprintf(path, sizeof(path), "/tmp/churn-%ld", made);
		snprintf(cg, sizeof(cg), CHURN_CG "/churn-%ld", made);
		snprintf(msarg, sizeof(msarg), "%ld", ms);
		if (write_copy(path, self, (size_t)len)) {
			/* a full /tmp ends the churn, not the workload: the
			 * copies of children that exited may still be held */
			nospace = errno == ENOSPC;
			unlink(path);
			if (!nospace) {
				perror("churn: copy");
				return 1;
			}
			break;
		}
		cg_ok = have_cg && !mkdir(cg, 0755);
		pid = fork();
		if (pid < 0) {
			perror("churn: fork");
			return 1;
		}
		if (pid == 0) {
			if (cg_ok) {
				char procs[80];
				int fd;

				snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
				fd = open(procs, O_WRONLY | O_CLOEXEC);
				if (fd < 0 || write(fd, "0", 1) != 1)
					_exit(126);
				close(fd);
			}
			execl(path, path, "spin", msarg, (char *)NULL);
			_exit(127);
		}
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			failed++;
		made++;
		in_cg += cg_ok;
		unlink(path);
		if (cg_ok)
			rmdir(cg);
	}
	free(self);
	TRUTH("churn done children=%ld cgroups=%ld failed=%ld nospace=%d\n", made, in_cg, failed,
	      nospace);
	return failed != 0;
}
