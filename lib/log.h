/* SPDX-License-Identifier: MIT */
/*
 * Messages to the user.  Only command code (host/cli/opvm.c, host/cmd-*.c) may
 * print; libraries return -errno and let the command explain.
 */
#ifndef OPVM_LOG_H
#define OPVM_LOG_H

#include <stdio.h>

extern int opvm_verbose;	/* -v count, set by main() */

#define pr_err(fmt, ...)	fprintf(stderr, "opvm: error: " fmt "\n", ##__VA_ARGS__)
#define pr_warn(fmt, ...)	fprintf(stderr, "opvm: warning: " fmt "\n", ##__VA_ARGS__)
#define pr_info(fmt, ...)	fprintf(stderr, "opvm: " fmt "\n", ##__VA_ARGS__)
#define pr_debug(fmt, ...)						\
	do {								\
		if (opvm_verbose)					\
			fprintf(stderr, "opvm: debug: " fmt "\n", ##__VA_ARGS__); \
	} while (0)

#endif /* OPVM_LOG_H */
