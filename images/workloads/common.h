/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the ground-truth workloads.  Every workload prints its
 * known answers as console lines starting with "OPVM-TRUTH " so a test can
 * compare them with what opvm measured from the host.
 */
#ifndef OPVM_WORKLOAD_COMMON_H
#define OPVM_WORKLOAD_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double arg_double(int argc, char **argv, int i, double def)
{
	return argc > i ? strtod(argv[i], NULL) : def;
}

static inline long arg_long(int argc, char **argv, int i, long def)
{
	return argc > i ? strtol(argv[i], NULL, 0) : def;
}

static inline pid_t opvm_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

#define TRUTH(...) do { printf("OPVM-TRUTH " __VA_ARGS__); fflush(stdout); } while (0)

#endif
