// SPDX-License-Identifier: MIT
/*
 * Builds the report fixture (tests/golden/fixture.h) under DIR and prints
 * "ROOT SESSION" for integration scripts.
 *   cc -I. tests/golden/mkfixture.c build/lib*.a $(pkg-config --libs ...)
 */
#include "tests/golden/fixture.h"

int main(int argc, char **argv)
{
	struct fixture fx;

	if (argc != 2) {
		fprintf(stderr, "usage: mkfixture DIR\n");
		return 2;
	}
	if (fixture_build(&fx, argv[1])) {
		fprintf(stderr, "mkfixture: cannot build the fixture\n");
		return 1;
	}
	printf("%s %s\n", fx.root, fx.session);
	return 0;
}
