/* SPDX-License-Identifier: MIT */
/*
 * Messages to the user.  Only command code (host/cli/opvm.c, host/cli/cmd-*.c) may
 * print; libraries return -errno and let the command explain.
 */
#ifndef OPVM_LOG_H
#define OPVM_LOG_H

#include <stdio.h>

#include "lib/text.h"

extern int opvm_verbose;	/* -v count, set by main() */

/* Broken at spaces to fit 80 columns; continuation lines indented. */
#define log_err(fmt, ...)	text_fprintf_wrapped(stderr, 2, "opvm: error: " fmt, ##__VA_ARGS__)
#define log_warn(fmt, ...)	text_fprintf_wrapped(stderr, 2, "opvm: warning: " fmt, ##__VA_ARGS__)
#define log_info(fmt, ...)	text_fprintf_wrapped(stderr, 2, "opvm: " fmt, ##__VA_ARGS__)
#define log_debug(fmt, ...)						\
	do {								\
		if (opvm_verbose)					\
			fprintf(stderr, "opvm: debug: " fmt "\n", ##__VA_ARGS__); \
	} while (0)

#endif /* OPVM_LOG_H */
