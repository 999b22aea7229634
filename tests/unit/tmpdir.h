/* SPDX-License-Identifier: MIT */
/*
 * Scratch directories for unit tests: $BUILD/tmp/<test binary>.XXXXXX
 * (BUILD defaults to build), removed with everything in it.  Header-only,
 * so each test binary stays one .c file.
 */
#ifndef OPVM_TEST_TMPDIR_H
#define OPVM_TEST_TMPDIR_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* A new empty directory (free it with tmpdir_free()), or NULL. */
static inline char *tmpdir_new(void)
{
	const char *b = getenv("BUILD");
	char base[512], *p;

	snprintf(base, sizeof(base), "%s/tmp", b ? b : "build");
	mkdir(b ? b : "build", 0755);
	mkdir(base, 0755);
	if (asprintf(&p, "%s/%s.XXXXXX", base, program_invocation_short_name) < 0)
		return NULL;
	if (!mkdtemp(p)) {
		free(p);
		return NULL;
	}
	return p;
}

/* rm -rf p, then free(p).  NULL-safe. */
static inline void tmpdir_free(char *p)
{
	char cmd[1024];

	if (!p)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
	if (system(cmd)) {}
	free(p);
}

#endif /* OPVM_TEST_TMPDIR_H */
