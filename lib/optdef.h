/* SPDX-License-Identifier: MIT */
/*
 * Command-line option tables: each option declared once, in one row that
 * names its long name, short letter, value, help text, the field it sets
 * and the parser that checks its value.  One table drives a command's
 * parsing (getopt_long), its --help, its man page (help2man reads --help)
 * and the bash completion (`opvm CMD --dump-options`), as perf's
 * parse-options does.  Shared groups (the report options, a backend's
 * options) are declared once, by their owner, and included by the commands
 * that take them.  Data only: host/cli/options.c parses and prints.
 *
 * A row binds a field by its offset in the group's struct (the commands
 * hand opts_parse() one struct per group), and the field's C type is read
 * by _Generic, so a parser never writes a field of another size:
 *
 *	{ .name = "width", .metavar = "N", .help = "columns (default 80)",
 *	  OPT_UINT(struct report_args, width, 40, 1000) },
 *
 * Every bad value gets the one line lib/numparse.h's num_bad_value() makes,
 * "OPT 'ARG': use WANT", WANT from the row (.want) or made from its range.
 */
#ifndef OPVM_OPTDEF_H
#define OPVM_OPTDEF_H

#include <stddef.h>
#include <stdint.h>

enum opt_flags {
	OPTS_POSITIONAL = 1,	/* help line for an argument, not an option */
};

/* What a row's value is and how it is parsed (its column in --dump-options). */
enum opt_type {
	OPT_T_NONE,		/* not bound: only a zeroed row or a POSITIONAL line */
	OPT_T_FLAG,		/* no value: the field is set to .set */
	OPT_T_STRING,		/* the value as given (argv's own string) */
	OPT_T_UINT,		/* decimal digits to the end, in [lo, hi] */
	OPT_T_OCTAL,		/* octal digits to the end (a umask), in [lo, hi] */
	OPT_T_SIZE,		/* bytes with an optional k, M, G, T (1024s), in [lo, hi] */
	OPT_T_DECIMAL,		/* digits with at most one '.', in [dlo, dhi] */
	OPT_T_DURATION,		/* a decimal and an optional s, m or h, in
				 * [dlo, dhi] seconds; the field counts
				 * .scale_ms milliseconds (1000: seconds) */
	OPT_T_TIME,		/* a point in time (num_parse_time), Unix ms */
	OPT_T_ENUM,		/* one of .enums' names: its value */
	OPT_T_CALLBACK,		/* .cb checks and stores it */
};

/* The C type of a bound field, from _Generic (OPT_FIELD). */
enum opt_field {
	OPT_F_BAD,		/* a type no parser writes: the table is wrong */
	OPT_F_INT,
	OPT_F_UINT,
	OPT_F_U64,
	OPT_F_I64,
	OPT_F_DOUBLE,
	OPT_F_STR,
};

/* One name an OPT_T_ENUM row takes, and the value it stores. */
struct opt_enum {
	const char *name;	/* NULL ends the list */
	int value;
};

/* An OPT_T_CALLBACK row's parser: base is the group's struct, opt the
 * option as written ("--merge"), arg argv's own string (it may be cut and
 * kept), NULL for a row without a value.  0, or -1 with the one line to
 * print in err (num_bad_value()'s shape for a bad value; no "opvm: error: "). */
typedef int (*opt_cb)(void *base, const char *opt, char *arg, char *err, size_t errlen);

struct opt_def {
	const char *name;	/* long name without "--"; NULL ends a table */
	int key;		/* short letter, or 0 for a long option only */
	const char *metavar;	/* the value's name in help; NULL: no value */
	const char *help;	/* one paragraph, wrapped by the printer */
	unsigned flags;		/* enum opt_flags */

	enum opt_type type;
	enum opt_field field;	/* the bound field's type (OPT_FIELD) */
	size_t off;		/* its offset in the group's struct */
	uint64_t lo, hi;	/* UINT, OCTAL, SIZE: the range */
	double dlo, dhi;	/* DECIMAL, DURATION: the range */
	unsigned scale_ms;	/* DURATION: what one unit of the field is */
	int set;		/* FLAG: what the field is set to */
	const struct opt_enum *enums;	/* ENUM: the names */
	opt_cb cb;		/* CALLBACK */
	const char *want;	/* what a bad value is told to use; NULL: made
				 * from the range or the names */
};

struct opt_group {
	const char *title;	/* heading in --help, NULL: none */
	const struct opt_def *opts;	/* NULL: ends a list of groups */
	void *base;		/* the struct the rows' fields are in; NULL:
				 * a table only listed (--help) */
};

/* The type of a field of T, for a row. */
#define OPT_FIELD_TYPE(T, f) _Generic(((T *)0)->f,				\
	int: OPT_F_INT, unsigned: OPT_F_UINT,					\
	unsigned long: OPT_F_U64, unsigned long long: OPT_F_U64,		\
	long: OPT_F_I64, long long: OPT_F_I64, double: OPT_F_DOUBLE,		\
	const char *: OPT_F_STR, char *: OPT_F_STR, default: OPT_F_BAD)
#define OPT_FIELD(T, f)	.field = OPT_FIELD_TYPE(T, f), .off = offsetof(T, f)

/* The parser half of a row, after its name, key, metavar and help. */
#define OPT_FLAG(T, f)			.type = OPT_T_FLAG, OPT_FIELD(T, f), .set = 1
#define OPT_SET(T, f, v)		.type = OPT_T_FLAG, OPT_FIELD(T, f), .set = (v)
#define OPT_STRING(T, f)		.type = OPT_T_STRING, OPT_FIELD(T, f)
#define OPT_UINT(T, f, l, h)		.type = OPT_T_UINT, OPT_FIELD(T, f), .lo = (l), .hi = (h)
#define OPT_OCTAL(T, f, l, h)		.type = OPT_T_OCTAL, OPT_FIELD(T, f), .lo = (l), .hi = (h)
#define OPT_SIZE(T, f, l, h)		.type = OPT_T_SIZE, OPT_FIELD(T, f), .lo = (l), .hi = (h)
#define OPT_DECIMAL(T, f, l, h)		.type = OPT_T_DECIMAL, OPT_FIELD(T, f), .dlo = (l), \
					.dhi = (h)
#define OPT_DURATION(T, f, l, h, ms)	.type = OPT_T_DURATION, OPT_FIELD(T, f), .dlo = (l), \
					.dhi = (h), .scale_ms = (ms)
#define OPT_TIME(T, f)			.type = OPT_T_TIME, OPT_FIELD(T, f)
#define OPT_ENUM(T, f, names)		.type = OPT_T_ENUM, OPT_FIELD(T, f), .enums = (names)
#define OPT_CALLBACK(fn)		.type = OPT_T_CALLBACK, .cb = (fn)

#endif /* OPVM_OPTDEF_H */
