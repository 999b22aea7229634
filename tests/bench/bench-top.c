// SPDX-License-Identifier: MIT
/*
 * Cost of one opvm top refresh on a host with 50 guests: 50 real, idle QEMU
 * processes (SeaBIOS without a boot disk, 1 vCPU, named with
 * debug-threads=on): 45 under TCG and 5 under KVM with a QMP socket each
 * (their exits are read through QMP query-stats at every refresh).
 * Measures opvm's own CPU time (CLOCK_PROCESS_CPUTIME_ID) per refresh,
 * median of 20; the QEMU side of the 5 QMP queries is QEMU's time, not
 * counted.  Libvirt is not asked (--no-libvirt's path).
 *
 *   top-refresh-50-guests: N ms     (target < 50 ms)
 *   top-refresh-cost: N ms          (the same figure, the name)
 *   top-refresh-wall-50-guests: N ms
 * Prints SKIP: reason when QEMU is missing.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "host/hoststats/hoststats.h"

#define NGUESTS	50
#define NKVM	5
#define REPS	20

static double clock_s(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static pid_t start_qemu(const char *tmp, const char *prefix, int i)
{
	char name[96], qmp[256];
	int kvm = i < NKVM && access("/dev/kvm", W_OK) == 0;
	pid_t pid;

	snprintf(name, sizeof(name), "%s-%02d,debug-threads=on", prefix, i);
	snprintf(qmp, sizeof(qmp), "unix:%s/q%d,server=on,wait=off", tmp, i);
	pid = fork();
	if (pid == 0) {
		freopen("/dev/null", "w", stdout);
		freopen("/dev/null", "w", stderr);
		execlp("qemu-system-x86_64", "qemu-system-x86_64", "-accel", kvm ? "kvm" : "tcg",
		       "-cpu", "qemu64", "-m", "16", "-nodefaults", "-display", "none",
		       "-name", name, "-qmp", qmp, (char *)NULL);
		_exit(127);
	}
	return pid;
}

int main(void)
{
	char tmp[] = "/tmp/opvm-bench-top.XXXXXX", prefix[32], cmd[300];
	const char *filt = prefix;
	struct hs_config cfg = { .no_libvirt = 1, .filter = &filt };
	pid_t pids[NGUESTS];
	double cpu[REPS], wall[REPS];
	struct hoststats *h;
	struct hs_guest **gs;
	size_t n = 0;

	if (system("command -v qemu-system-x86_64 >/dev/null 2>&1")) {
		printf("SKIP: qemu-system-x86_64 is not installed\n");
		return 0;
	}
	if (!mkdtemp(tmp))
		return 1;
	snprintf(prefix, sizeof(prefix), "bt%d", (int)getpid());
	for (int i = 0; i < NGUESTS; i++)
		pids[i] = start_qemu(tmp, prefix, i);
	h = hoststats_new(&cfg);
	/* Wait until all are up (SeaBIOS under nested KVM is slow to start). */
	for (int t = 0; h && t < 120; t++) {
		sleep(1);
		if (hoststats_refresh(h) == 0 && (n = hoststats_guests(h, HS_SORT_NAME, &gs)) >= NGUESTS)
			break;
	}
	for (int r = 0; h && n >= NGUESTS && r < REPS; r++) {
		double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);

		hoststats_refresh(h);
		cpu[r] = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
		wall[r] = clock_s(CLOCK_MONOTONIC) - w0;
		n = hoststats_guests(h, HS_SORT_NAME, &gs);
		usleep(100000);
	}
	hoststats_free(h);
	for (int i = 0; i < NGUESTS; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGTERM);
	for (int i = 0; i < NGUESTS; i++)
		if (pids[i] > 0)
			waitpid(pids[i], NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd))
		fprintf(stderr, "bench-top: could not remove %s\n", tmp);
	if (n < NGUESTS) {
		printf("SKIP: only %zu of %d QEMU guests came up\n", n, NGUESTS);
		return 0;
	}
	qsort(cpu, REPS, sizeof(double), cmp_d);
	qsort(wall, REPS, sizeof(double), cmp_d);
	printf("top-refresh-50-guests: %.2f ms\n", cpu[REPS / 2] * 1e3);
	printf("top-refresh-cost: %.2f ms\n", cpu[REPS / 2] * 1e3);
	printf("top-refresh-wall-50-guests: %.2f ms\n", wall[REPS / 2] * 1e3);
	return 0;
}
