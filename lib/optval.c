// SPDX-License-Identifier: MIT
/* Option values through their rows' parsers (lib/optval.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "lib/array.h"
#include "lib/numparse.h"
#include "lib/optval.h"
#include "lib/size.h"

/* The largest value a field of type f holds (0: none, or not a number). */
static uint64_t field_max(enum opt_field f)
{
	switch (f) {
	case OPT_F_INT:
		return INT_MAX;
	case OPT_F_UINT:
		return UINT_MAX;
	case OPT_F_U64:
		return UINT64_MAX;
	case OPT_F_I64:
		return INT64_MAX;
	case OPT_F_DOUBLE:
		return 1ull << 53;	/* exact in a double */
	default:
		return 0;
	}
}

static int is_number_field(enum opt_field f)
{
	return field_max(f) != 0;
}

int optval_numeric(const struct opt_def *d)
{
	return d->type == OPT_T_UINT || d->type == OPT_T_OCTAL || d->type == OPT_T_SIZE ||
	       d->type == OPT_T_DECIMAL || d->type == OPT_T_DURATION || d->type == OPT_T_TIME;
}

/* Why row d cannot be parsed, or NULL. */
static const char *row_fault(const struct opt_def *d)
{
	switch (d->type) {
	case OPT_T_FLAG:
	case OPT_T_ENUM:
		if (d->field != OPT_F_INT && d->field != OPT_F_UINT)
			return "binds a field that is not an int";
		if (d->type == OPT_T_ENUM && (!d->enums || !d->enums[0].name))
			return "has no names";
		return (d->type == OPT_T_FLAG) == !!d->metavar ? "has a value name that "
		       "does not match its type" : NULL;
	case OPT_T_STRING:
		return d->field != OPT_F_STR ? "binds a field that is not a string" : NULL;
	case OPT_T_UINT: case OPT_T_OCTAL: case OPT_T_SIZE:
		if (d->field == OPT_F_DOUBLE || !is_number_field(d->field) ||
		    d->hi > field_max(d->field) || d->lo > d->hi)
			return "has a range its field cannot hold";
		return NULL;
	case OPT_T_DECIMAL: case OPT_T_DURATION:
		if (!is_number_field(d->field) || !(d->dlo <= d->dhi) || d->dlo < 0 ||
		    (d->type == OPT_T_DECIMAL && d->field != OPT_F_DOUBLE) ||
		    (d->type == OPT_T_DURATION && !d->scale_ms) ||
		    d->dhi * 1000.0 / (d->scale_ms ? d->scale_ms : 1) > (double)field_max(d->field))
			return "has a range its field cannot hold";
		return NULL;
	case OPT_T_TIME:
		return d->field != OPT_F_I64 ? "binds a field that is not an int64_t" : NULL;
	case OPT_T_CALLBACK:
		return d->cb ? NULL : "has no callback";
	default:
		return "has no parser";
	}
}

int optval_check(const struct opt_def *d, char *err, size_t errlen)
{
	const char *why = d->flags & OPTS_POSITIONAL ? NULL : row_fault(d);

	if (!why)
		return 0;
	snprintf(err, errlen, "option --%s %s (its table is wrong)",
		 d->name ? d->name : "?", why);
	return -EINVAL;
}

static void store_u64(const struct opt_def *d, void *base, uint64_t v)
{
	char *p = (char *)base + d->off;

	/* the range was checked against the field (optval_check) */
	switch (d->field) {
	case OPT_F_INT: { int x = (int)v; memcpy(p, &x, sizeof(x)); break; }
	case OPT_F_UINT: { unsigned x = (unsigned)v; memcpy(p, &x, sizeof(x)); break; }
	case OPT_F_U64: memcpy(p, &v, sizeof(v)); break;
	case OPT_F_I64: { int64_t x = (int64_t)v; memcpy(p, &x, sizeof(x)); break; }
	case OPT_F_DOUBLE: { double x = (double)v; memcpy(p, &x, sizeof(x)); break; }
	default: break;
	}
}

/* Octal digits to the end (a umask: "022", "0077"). */
static int parse_octal(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s || strspn(s, "01234567") != strlen(s) || strlen(s) > 22)
		return -EINVAL;
	for (; *s; s++)
		v = v * 8 + (uint64_t)(*s - '0');
	if (v < lo || v > hi)
		return -ERANGE;
	*out = v;
	return 0;
}

/* "90", "1.5", "90m", "2h", "45s" into seconds in [lo, hi]. */
static int parse_seconds(const char *s, double lo, double hi, double *out)
{
	static const struct { char unit; double mul; } units[] = {
		{ 's', 1 }, { 'm', 60 }, { 'h', 3600 },
	};
	size_t n = strlen(s);
	double mul = 1, v;
	char num[40];

	for (size_t i = 0; n && i < ARRAY_SIZE(units); i++)
		if (s[n - 1] == units[i].unit) {
			mul = units[i].mul;
			n--;
		}
	if (!n || n >= sizeof(num))
		return -EINVAL;
	memcpy(num, s, n);
	num[n] = '\0';
	if (num_parse_decimal(num, 0, 1e15, &v))
		return -EINVAL;
	v *= mul;
	if (!(v >= lo && v <= hi))
		return -ERANGE;
	*out = v;
	return 0;
}

/* A duration into its field: seconds, or whole units of scale_ms. */
static int store_seconds(const struct opt_def *d, void *base, double s)
{
	double units = s * 1000.0 / d->scale_ms, whole;

	if (d->field == OPT_F_DOUBLE) {
		memcpy((char *)base + d->off, &units, sizeof(units));
		return 0;
	}
	whole = (double)(uint64_t)(units + 0.5);
	if (units - whole > 1e-6 || whole - units > 1e-6)
		return -EINVAL;	/* 1.5 s into a field of whole seconds */
	store_u64(d, base, (uint64_t)whole);
	return 0;
}

static int set_enum(const struct opt_def *d, void *base, const char *arg)
{
	for (const struct opt_enum *e = d->enums; e->name; e++)
		if (!strcmp(e->name, arg)) {
			memcpy((char *)base + d->off, &e->value, sizeof(e->value));
			return 0;
		}
	return -EINVAL;
}

/* Parses arg by d's numeric or enum type into d's field.  0 or -errno. */
static int set_value(const struct opt_def *d, void *base, const char *arg)
{
	uint64_t u = 0;
	double x = 0;
	int64_t t;
	int r;

	switch (d->type) {
	case OPT_T_UINT:
		r = num_parse_u64(arg, d->lo, d->hi, &u);
		break;
	case OPT_T_OCTAL:
		r = parse_octal(arg, d->lo, d->hi, &u);
		break;
	case OPT_T_SIZE:
		r = size_parse(arg, &u);
		r = r ? r : u < d->lo || u > d->hi ? -ERANGE : 0;
		break;
	case OPT_T_DECIMAL:
		r = num_parse_decimal(arg, d->dlo, d->dhi, &x);
		if (!r)
			memcpy((char *)base + d->off, &x, sizeof(x));
		return r;
	case OPT_T_DURATION:
		r = parse_seconds(arg, d->dlo, d->dhi, &x);
		return r ? r : store_seconds(d, base, x);
	case OPT_T_TIME:
		r = num_parse_time(arg, &t);
		if (!r)
			memcpy((char *)base + d->off, &t, sizeof(t));
		return r;
	case OPT_T_ENUM:
		return set_enum(d, base, arg);
	default:
		return -EINVAL;
	}
	if (!r)
		store_u64(d, base, u);
	return r;
}

/* v as a size a user would write: 64M rather than 67108864. */
static const char *size_text(char *buf, size_t len, uint64_t v)
{
	static const char units[] = "kMGT";
	int i = -1;

	while (i < 3 && v && !(v & 1023)) {
		v >>= 10;
		i++;
	}
	snprintf(buf, len, "%llu%.*s", (unsigned long long)v, i >= 0, i >= 0 ? units + i : "");
	return buf;
}

/* What a bad value of d is told to use, when the row does not say. */
static const char *want_text(const struct opt_def *d, char *buf, size_t len)
{
	char a[24], b[24];
	size_t off = 0;

	if (d->want)
		return d->want;
	switch (d->type) {
	case OPT_T_UINT:
		snprintf(buf, len, "%llu to %llu", (unsigned long long)d->lo,
			 (unsigned long long)d->hi);
		break;
	case OPT_T_OCTAL:
		snprintf(buf, len, "an octal number, 0%llo to 0%llo", (unsigned long long)d->lo,
			 (unsigned long long)d->hi);
		break;
	case OPT_T_SIZE:
		snprintf(buf, len, "a size, %s to %s (k, M, G)", size_text(a, sizeof(a), d->lo),
			 size_text(b, sizeof(b), d->hi));
		break;
	case OPT_T_DECIMAL:
		snprintf(buf, len, "%g to %g", d->dlo, d->dhi);
		break;
	case OPT_T_DURATION:
		snprintf(buf, len, "seconds, %g to %g", d->dlo, d->dhi);
		break;
	case OPT_T_TIME:
		snprintf(buf, len, "Unix seconds, RFC 3339 or HH:MM");
		break;
	default:	/* OPT_T_ENUM: "a, b or c" */
		buf[0] = '\0';
		for (const struct opt_enum *e = d->enums; e && e->name && off < len; e++)
			off += (size_t)snprintf(buf + off, len - off, "%s%s",
						e == d->enums ? "" : e[1].name ? ", " : " or ",
						e->name);
		break;
	}
	return buf;
}

int optval_set(const struct opt_def *d, void *base, const char *opt, char *arg,
	       char *err, size_t errlen)
{
	char want[160];

	switch (d->type) {
	case OPT_T_FLAG:
		memcpy((char *)base + d->off, &d->set, sizeof(d->set));
		return 0;
	case OPT_T_STRING:
		memcpy((char *)base + d->off, &arg, sizeof(arg));
		return 0;
	case OPT_T_CALLBACK:
		return d->cb(base, opt, arg, err, errlen) ? -EINVAL : 0;
	default:
		break;
	}
	if (arg && !set_value(d, base, arg))
		return 0;
	num_bad_value(err, errlen, opt, arg, want_text(d, want, sizeof(want)));
	return -EINVAL;
}

static const char *const type_names[] = {
	[OPT_T_NONE] = "-", [OPT_T_FLAG] = "flag", [OPT_T_STRING] = "string",
	[OPT_T_UINT] = "uint", [OPT_T_OCTAL] = "octal", [OPT_T_SIZE] = "size",
	[OPT_T_DECIMAL] = "decimal", [OPT_T_DURATION] = "duration", [OPT_T_TIME] = "time",
	[OPT_T_ENUM] = "enum", [OPT_T_CALLBACK] = "callback",
};

const char *optval_describe(const struct opt_def *d, char *buf, size_t len)
{
	const char *name = (unsigned)d->type < ARRAY_SIZE(type_names) ?
			   type_names[d->type] : "-";
	size_t off;

	switch (d->type) {
	case OPT_T_UINT: case OPT_T_OCTAL: case OPT_T_SIZE:
		snprintf(buf, len, "%s:%llu-%llu", name, (unsigned long long)d->lo,
			 (unsigned long long)d->hi);
		break;
	case OPT_T_DECIMAL: case OPT_T_DURATION:
		snprintf(buf, len, "%s:%.10g-%.10g", name, d->dlo, d->dhi);
		break;
	case OPT_T_ENUM:
		off = (size_t)snprintf(buf, len, "enum:");
		for (const struct opt_enum *e = d->enums; e->name && off < len; e++)
			off += (size_t)snprintf(buf + off, len - off, "%s%s",
						e == d->enums ? "" : "|", e->name);
		break;
	default:
		snprintf(buf, len, "%s", name);
		break;
	}
	return buf;
}
