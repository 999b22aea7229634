/* SPDX-License-Identifier: MIT */
/*
 * One option's value through its row's parser (lib/optdef.h) into the
 * field the row binds: the typed half of the option tables, without
 * getopt and without printing (host/cli/options.c does both).  Every bad
 * value, whatever its parser, comes back as the same one line,
 * "OPT 'ARG': use WANT" (lib/numparse.h's num_bad_value()).
 */
#ifndef OPVM_OPTVAL_H
#define OPVM_OPTVAL_H

#include <stddef.h>

#include "lib/optdef.h"

/* Whether row d can be parsed: a type, a field its parser can write, a
 * range that fits the field.  0, or -EINVAL with why in err (a table
 * written wrong, caught before any value is taken). */
int optval_check(const struct opt_def *d, char *err, size_t errlen);

/* arg (NULL for a row without a value) parsed by d into its field in base,
 * opt the option as the user wrote it ("-F", "--rate").  0, or -EINVAL
 * with the one line in err, the field left alone. */
int optval_set(const struct opt_def *d, void *base, const char *opt, char *arg,
	       char *err, size_t errlen);

/* d's parser as `opvm CMD --dump-options` lists it ("uint:40-1000",
 * "size:4096-18446744073709551615", "enum:text|json", "flag", ...): what the
 * tests read to try bad values on every numeric option.  Returns buf. */
const char *optval_describe(const struct opt_def *d, char *buf, size_t len);

/* Whether d's parser reads a number (UINT, OCTAL, SIZE, DECIMAL,
 * DURATION, TIME). */
int optval_numeric(const struct opt_def *d);

#endif /* OPVM_OPTVAL_H */
