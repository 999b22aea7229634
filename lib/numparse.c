// SPDX-License-Identifier: MIT
/* Strict decimal numbers (lib/numparse.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/numparse.h"
#include "lib/util.h"

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

int num_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (!is_digit(*p))
			return -EINVAL;
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
			return -ERANGE;
	}
	if (v < lo || v > hi)
		return -ERANGE;
	*out = v;
	return 0;
}

int num_parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	uint64_t v;
	int r = num_parse_u64(s, lo, hi, &v);

	if (!r)
		*out = (unsigned)v;
	return r;
}

int num_parse_decimal(const char *s, double lo, double hi, double *out)
{
	size_t digits = 0, dots = 0;
	double v;

	if (!s || !is_digit(*s))
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p == '.')
			dots++;
		else if (is_digit(*p))
			digits++;
		else
			return -EINVAL;
	}
	if (dots > 1 || digits > 30)
		return dots > 1 ? -EINVAL : -ERANGE;
	v = strtod(s, NULL);	/* only digits and one dot: strtod reads all */
	if (!(v >= lo && v <= hi))
		return -ERANGE;
	*out = v;
	return 0;
}

const char *num_bad_value(char *err, size_t len, const char *opt, const char *arg,
			  const char *want)
{
	char shown[12 * 4 + 4], cut[16];

	/* a value past 12 bytes is cut: the message stays one line of 80 */
	snprintf(cut, sizeof(cut), "%.12s%s", arg ? arg : "",
		 arg && strlen(arg) > 12 ? "..." : "");
	snprintf(err, len, "%s '%s': use %s", opt,
		 util_text_escape(shown, sizeof(shown), cut), want);
	return err;
}
