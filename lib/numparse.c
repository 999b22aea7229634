// SPDX-License-Identifier: MIT
/* Strict decimal numbers (lib/numparse.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/numparse.h"
#include "lib/text.h"

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
		 text_escape(shown, sizeof(shown), cut), want);
	return err;
}

/* n digits at *s into *v, *s moved past them. */
static int digits(const char **s, int n, int *v)
{
	int x = 0;

	for (int i = 0; i < n; i++, (*s)++) {
		if (**s < '0' || **s > '9')
			return -EINVAL;
		x = x * 10 + (**s - '0');
	}
	*v = x;
	return 0;
}

/* ".fff" (any number of digits, milliseconds kept) at *s, if there. */
static int fraction_ms(const char **s, int *ms)
{
	int scale = 100, n = 0;

	*ms = 0;
	if (**s != '.')
		return 0;
	for ((*s)++; **s >= '0' && **s <= '9'; (*s)++, n++) {
		*ms += (**s - '0') * scale;
		scale /= 10;
	}
	return n ? 0 : -EINVAL;
}

/* "HH:MM[:SS]" today, local time. */
static int parse_clock(const char *s, int64_t *ms)
{
	struct tm tm;
	time_t now = time(NULL), t;
	int h, m, sec = 0;

	if (digits(&s, 2, &h) || *s++ != ':' || digits(&s, 2, &m) ||
	    (*s == ':' && (s++, digits(&s, 2, &sec))) || *s || h > 23 || m > 59 || sec > 60)
		return -EINVAL;
	localtime_r(&now, &tm);
	tm.tm_hour = h;
	tm.tm_min = m;
	tm.tm_sec = sec;
	tm.tm_isdst = -1;
	t = mktime(&tm);
	if (t == (time_t)-1)
		return -ERANGE;
	*ms = (int64_t)t * 1000;
	return 0;
}

static int parse_rfc3339(const char *s, int64_t *ms)
{
	struct tm tm = { 0 };
	int y, mo, d, h, mi, sec, frac, oh = 0, om = 0, sign = 0;
	time_t t;

	if (digits(&s, 4, &y) || *s++ != '-' || digits(&s, 2, &mo) || *s++ != '-' ||
	    digits(&s, 2, &d) || (*s != 'T' && *s != 't' && *s != ' ') || !*s++ ||
	    digits(&s, 2, &h) || *s++ != ':' || digits(&s, 2, &mi) || *s++ != ':' ||
	    digits(&s, 2, &sec) || fraction_ms(&s, &frac))
		return -EINVAL;
	if (*s == 'Z' || *s == 'z')
		s++;
	else if ((*s == '+' || *s == '-') && (sign = *s++ == '+' ? 1 : -1) &&
		 (digits(&s, 2, &oh) || *s++ != ':' || digits(&s, 2, &om)))
		return -EINVAL;
	else if (!sign)
		return -EINVAL;
	if (*s || y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
	    sec > 60 || oh > 23 || om > 59)
		return y < 1970 ? -ERANGE : -EINVAL;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	*ms = ((int64_t)t - sign * (oh * 3600 + om * 60)) * 1000 + frac;
	return *ms < 0 ? -ERANGE : 0;
}

int num_parse_time(const char *s, int64_t *ms)
{
	size_t n = s ? strlen(s) : 0;
	double v;
	int r;

	if (!n || n > 40)
		return -EINVAL;
	if (strspn(s, "0123456789.") == n) {
		r = num_parse_decimal(s, 0, 253402300799.0, &v);	/* 9999-12-31 */
		if (!r)
			*ms = (int64_t)(v * 1000.0 + 0.5);
		return r;
	}
	if (n <= 8 && s[2] == ':')
		return parse_clock(s, ms);
	return parse_rfc3339(s, ms);
}
