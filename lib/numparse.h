/* SPDX-License-Identifier: MIT */
/*
 * Numbers from the command line and from other untrusted text, parsed
 * strictly: decimal digits only (no sign, no leading space, no 0x, no
 * octal reading of a leading 0, no "inf" or "nan"), to the end of the
 * string, inside a range.  strtoul() and atoi() take "100x" as 100 and
 * " -5" as a huge number; an option that gets either must say so.
 * Sizes with units are size_parse() (lib/size.h).
 */
#ifndef OPVM_NUMPARSE_H
#define OPVM_NUMPARSE_H

#include <stddef.h>
#include <stdint.h>

/* s as a decimal integer in [lo, hi] into *out: 0, -EINVAL (not a
 * decimal integer: empty, a sign, a space, another byte) or -ERANGE
 * (outside [lo, hi], or past UINT64_MAX).  *out is left alone on error. */
int num_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
/* The same for an unsigned int. */
int num_parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out);
/* s as digits with at most one '.' ("30", "0.5", "2."; not ".5", "1e3",
 * "0x10", "nan") in [lo, hi] into *out: 0, -EINVAL or -ERANGE. */
int num_parse_decimal(const char *s, double lo, double hi, double *out);

/* A point in time from the command line or a query string into Unix
 * milliseconds: Unix seconds ("1764645000", "1764645000.250"), RFC 3339
 * ("2026-12-02T03:10:00Z", "...T03:10:00.5+01:00"), or "HH:MM[:SS]" (today,
 * local time).  0, -EINVAL (none of those), -ERANGE (before 1970 or after
 * 9999). */
int num_parse_time(const char *s, int64_t *ms);

/* The one line every bad option value gets: "OPT 'ARG': use WANT" into
 * err[len], ARG shown escaped and cut at 12 bytes.  Returns err. */
const char *num_bad_value(char *err, size_t len, const char *opt, const char *arg,
			  const char *want);

#endif /* OPVM_NUMPARSE_H */
