// SPDX-License-Identifier: MIT
/*
 * Events database: parser for events/data/<family>.{events,unit_masks},
 * the search for those files (-e specs: events/event-spec.c).  Format:
 * docs/events.md.
 *
 * The files are trusted more than guest bytes but still parsed defensively
 * (a user may point $OPVM_EVENTS_DIR anywhere): bounded line length, file
 * size and entry count, every number range-checked, every error reported
 * as "file:line: what is wrong".
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/perf_event.h>

#include "events/builtin.h"
#include "events/events.h"
#include "events/events-priv.h"
#include "lib/array.h"
#include "lib/errbuf.h"
#include "lib/fs.h"


/* ---- small parsing helpers ----------------------------------------------- */

/* Whole-string unsigned number, decimal or 0x hex.  No sign, no junk, and
 * no octal: a leading zero is a decimal's ("TIMER:000001000" is 1000). */
int parse_u64(const char *s, uint64_t *out)
{
	int hex = s && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	char *end;
	unsigned long long v;

	if (!s || !(hex ? isxdigit((unsigned char)s[2]) : isdigit((unsigned char)s[0])))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, hex ? 16 : 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

static int valid_name(const char *s, size_t max)
{
	size_t n = 0;

	if (!*s)
		return 0;
	for (; *s; s++, n++) {
		if (n + 1 >= max)
			return 0;
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' &&
		    *s != '.')
			return 0;
	}
	return 1;
}

/* Iterates over the lines of text; NUL-terminated copy of each in buf.
 * Returns 1 with a line, 0 at the end, -E2BIG for an over-long line. */
struct line_iter {
	const char *p;
	unsigned lineno;
	char buf[EV_MAX_LINE];
};

static int line_next(struct line_iter *it)
{
	const char *nl;
	size_t len;

	if (!*it->p)
		return 0;
	nl = strchr(it->p, '\n');
	len = nl ? (size_t)(nl - it->p) : strlen(it->p);
	it->lineno++;
	if (len >= sizeof(it->buf))
		return -E2BIG;
	memcpy(it->buf, it->p, len);
	it->buf[len] = '\0';
	if (len && it->buf[len - 1] == '\r')
		it->buf[len - 1] = '\0';
	it->p = nl ? nl + 1 : it->p + len;
	return 1;
}

static int blank_or_comment(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return !*s || *s == '#';
}

/* Splits off the next whitespace-separated token; NULL at the end. */
static char *next_token(char **pp)
{
	char *p = *pp, *t;

	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p)
		return NULL;
	t = p;
	while (*p && *p != ' ' && *p != '\t')
		p++;
	if (*p)
		*p++ = '\0';
	*pp = p;
	return t;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		*--e = '\0';
	return s;
}

/* ---- unit masks ------------------------------------------------------------ */

static void um_table_free(struct um_table *t)
{
	for (size_t i = 0; i < t->nr; i++) {
		struct opvm_unit_mask *g = &t->groups[i];

		for (size_t j = 0; j < g->nr_values; j++) {
			free((char *)g->values[j].name);
			free((char *)g->values[j].desc);
		}
		free((void *)g->values);
		free((char *)g->name);
	}
	free(t->groups);
	t->groups = NULL;
	t->nr = 0;
}

static const struct opvm_unit_mask *um_find(const struct um_table *t,
					    const char *name)
{
	for (size_t i = 0; i < t->nr; i++)
		if (!strcmp(t->groups[i].name, name))
			return &t->groups[i];
	return NULL;
}

uint32_t um_all_bits(const struct opvm_unit_mask *g)
{
	uint32_t all = 0;

	for (size_t i = 0; i < g->nr_values; i++)
		all |= g->values[i].value;
	return all;
}

int um_has_value(const struct opvm_unit_mask *g, uint32_t v)
{
	for (size_t i = 0; i < g->nr_values; i++)
		if (g->values[i].value == v)
			return 1;
	return 0;
}

/* A finished group must be self-consistent: values listed, default allowed. */
static int um_group_check(const struct opvm_unit_mask *g, const char *fname,
			  unsigned lineno, char *err, size_t errlen)
{
	if (!g->nr_values) {
		errbuf_set(err, errlen, "%s:%u: unit mask '%s' lists no values",
			    fname, lineno, g->name);
		return -EINVAL;
	}
	if (g->type == OPVM_UM_BITMASK) {
		if (g->default_value & ~um_all_bits(g)) {
			errbuf_set(err, errlen,
				    "%s:%u: default 0x%x of bitmask '%s' has bits no value lists",
				    fname, lineno, g->default_value, g->name);
			return -EINVAL;
		}
	} else if (!um_has_value(g, g->default_value)) {
		errbuf_set(err, errlen,
			    "%s:%u: default 0x%x of unit mask '%s' is not one of its values",
			    fname, lineno, g->default_value, g->name);
		return -EINVAL;
	}
	if (g->type == OPVM_UM_MANDATORY && g->nr_values != 1) {
		errbuf_set(err, errlen,
			    "%s:%u: mandatory unit mask '%s' must list exactly one value",
			    fname, lineno, g->name);
		return -EINVAL;
	}
	return 0;
}

static int um_parse_header(struct um_table *t, char *line, const char *fname,
			   unsigned lineno, char *err, size_t errlen)
{
	struct opvm_unit_mask g = { 0 };
	char *p = line, *tok, *name = NULL;
	int have_type = 0, have_default = 0;
	uint64_t v;
	void *n;

	while ((tok = next_token(&p))) {
		char *val = strchr(tok, ':');

		if (!val) {
			errbuf_set(err, errlen, "%s:%u: '%s' is not key:value",
				    fname, lineno, tok);
			return -EINVAL;
		}
		*val++ = '\0';
		if (!strcmp(tok, "name") && !name) {
			if (!valid_name(val, OPVM_EVENT_NAME_MAX)) {
				errbuf_set(err, errlen, "%s:%u: bad unit mask name '%s'",
					    fname, lineno, val);
				return -EINVAL;
			}
			name = val;
		} else if (!strcmp(tok, "type") && !have_type) {
			if (!strcmp(val, "mandatory"))
				g.type = OPVM_UM_MANDATORY;
			else if (!strcmp(val, "exclusive"))
				g.type = OPVM_UM_EXCLUSIVE;
			else if (!strcmp(val, "bitmask"))
				g.type = OPVM_UM_BITMASK;
			else {
				errbuf_set(err, errlen,
					    "%s:%u: type '%s' is not mandatory, exclusive or bitmask",
					    fname, lineno, val);
				return -EINVAL;
			}
			have_type = 1;
		} else if (!strcmp(tok, "default") && !have_default) {
			if (parse_u64(val, &v) || v > 0xff) {
				errbuf_set(err, errlen,
					    "%s:%u: default '%s' is not a unit mask (0..0xff)",
					    fname, lineno, val);
				return -EINVAL;
			}
			g.default_value = (uint32_t)v;
			have_default = 1;
		} else {
			errbuf_set(err, errlen, "%s:%u: unexpected or repeated key '%s'",
				    fname, lineno, tok);
			return -EINVAL;
		}
	}
	if (!name || !have_type || !have_default) {
		errbuf_set(err, errlen, "%s:%u: a unit mask needs name:, type: and default:",
			    fname, lineno);
		return -EINVAL;
	}
	if (um_find(t, name)) {
		errbuf_set(err, errlen, "%s:%u: unit mask '%s' defined twice",
			    fname, lineno, name);
		return -EINVAL;
	}
	if (t->nr >= EV_MAX_ENTRIES) {
		errbuf_set(err, errlen, "%s:%u: too many unit masks", fname, lineno);
		return -E2BIG;
	}
	n = realloc(t->groups, (t->nr + 1) * sizeof(*t->groups));
	if (!n)
		return -ENOMEM;
	t->groups = n;
	g.name = strdup(name);
	if (!g.name)
		return -ENOMEM;
	t->groups[t->nr++] = g;
	return 0;
}

static int um_parse_value(struct opvm_unit_mask *g, char *line,
			  const char *fname, unsigned lineno,
			  char *err, size_t errlen)
{
	struct opvm_um_value uv = { 0 };
	const char *name_src;
	char *p = line, *tok, *desc;
	uint64_t v;
	void *n;

	tok = next_token(&p);
	if (!tok || parse_u64(tok, &v) || v > 0xff) {
		errbuf_set(err, errlen, "%s:%u: '%s' is not a unit mask value (0..0xff)",
			    fname, lineno, tok ? tok : "");
		return -EINVAL;
	}
	uv.value = (uint32_t)v;
	desc = trim(p);
	if (!strncmp(desc, "name:", 5)) {
		p = desc;
		tok = next_token(&p);
		if (!valid_name(tok + 5, OPVM_EVENT_NAME_MAX) ||
		    isdigit((unsigned char)tok[5])) {
			errbuf_set(err, errlen, "%s:%u: bad unit mask value name '%s'",
				    fname, lineno, tok + 5);
			return -EINVAL;
		}
		for (size_t i = 0; i < g->nr_values; i++)
			if (g->values[i].name && !strcmp(g->values[i].name, tok + 5)) {
				errbuf_set(err, errlen, "%s:%u: value name '%s' used twice in '%s'",
					    fname, lineno, tok + 5, g->name);
				return -EINVAL;
			}
		uv.name = tok + 5;
		desc = trim(p);
	}
	if (um_has_value(g, uv.value)) {
		errbuf_set(err, errlen, "%s:%u: value 0x%x listed twice in '%s'",
			    fname, lineno, uv.value, g->name);
		return -EINVAL;
	}
	if (g->type == OPVM_UM_BITMASK && !uv.value) {
		errbuf_set(err, errlen, "%s:%u: a bitmask value cannot be 0", fname,
			    lineno);
		return -EINVAL;
	}
	if (g->nr_values >= EV_MAX_ENTRIES) {
		errbuf_set(err, errlen, "%s:%u: too many values", fname, lineno);
		return -E2BIG;
	}
	n = realloc((void *)g->values, (g->nr_values + 1) * sizeof(uv));
	if (!n)
		return -ENOMEM;
	g->values = n;
	name_src = uv.name;
	uv.name = name_src ? strdup(name_src) : NULL;
	uv.desc = strdup(desc);
	if (!uv.desc || (name_src && !uv.name)) {
		free((char *)uv.name);
		free((char *)uv.desc);
		return -ENOMEM;
	}
	((struct opvm_um_value *)g->values)[g->nr_values++] = uv;
	return 0;
}

static int um_parse(struct um_table *t, const char *text, const char *fname,
		    char *err, size_t errlen)
{
	struct line_iter *it;
	unsigned group_line = 0;
	int r;

	it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	it->p = text;
	while ((r = line_next(it)) > 0) {
		if (blank_or_comment(it->buf))
			continue;
		if (it->buf[0] == ' ' || it->buf[0] == '\t') {
			if (!t->nr) {
				errbuf_set(err, errlen,
					    "%s:%u: value before any 'name:' line",
					    fname, it->lineno);
				r = -EINVAL;
				goto out;
			}
			r = um_parse_value(&t->groups[t->nr - 1], it->buf,
					   fname, it->lineno, err, errlen);
		} else {
			if (t->nr) {
				r = um_group_check(&t->groups[t->nr - 1], fname,
						   group_line, err, errlen);
				if (r)
					goto out;
			}
			group_line = it->lineno;
			r = um_parse_header(t, it->buf, fname, it->lineno,
					    err, errlen);
		}
		if (r)
			goto out;
	}
	if (r == -E2BIG) {
		errbuf_set(err, errlen, "%s:%u: line longer than %d bytes", fname,
			    it->lineno, EV_MAX_LINE - 1);
		r = -EINVAL;
		goto out;
	}
	if (t->nr)
		r = um_group_check(&t->groups[t->nr - 1], fname, group_line,
				   err, errlen);
out:
	if (r == -E2BIG)
		r = -EINVAL;
	free(it);
	return r;
}

/* ---- events ---------------------------------------------------------------- */

struct perf_name {
	const char *name;
	uint64_t config;
};

static const struct perf_name hw_names[] = {
	{ "cycles", PERF_COUNT_HW_CPU_CYCLES },
	{ "instructions", PERF_COUNT_HW_INSTRUCTIONS },
	{ "cache-references", PERF_COUNT_HW_CACHE_REFERENCES },
	{ "cache-misses", PERF_COUNT_HW_CACHE_MISSES },
	{ "branches", PERF_COUNT_HW_BRANCH_INSTRUCTIONS },
	{ "branch-misses", PERF_COUNT_HW_BRANCH_MISSES },
	{ "bus-cycles", PERF_COUNT_HW_BUS_CYCLES },
	{ "ref-cycles", PERF_COUNT_HW_REF_CPU_CYCLES },
	{ NULL, 0 }
};

static const struct perf_name sw_names[] = {
	{ "cpu-clock", PERF_COUNT_SW_CPU_CLOCK },
	{ "task-clock", PERF_COUNT_SW_TASK_CLOCK },
	{ "page-faults", PERF_COUNT_SW_PAGE_FAULTS },
	{ "context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES },
	{ NULL, 0 }
};

static int perf_config_of(const char *s, const struct perf_name *names,
			  uint64_t *out)
{
	for (; names && names->name; names++)
		if (!strcmp(s, names->name)) {
			*out = names->config;
			return 0;
		}
	return parse_u64(s, out);
}

/* "raw", "hardware:X", "hw-cache:X", "software:X", "timer". */
static int parse_perf(const char *val, struct opvm_event *ev)
{
	const char *arg = strchr(val, ':');
	size_t klen = arg ? (size_t)(arg - val) : strlen(val);
	uint64_t cfg = 0;

	if (arg)
		arg++;
	if (klen == 3 && !strncmp(val, "raw", 3) && !arg) {
		ev->perf_type = PERF_TYPE_RAW;
		ev->flags |= OPVM_EV_HARDWARE;
		return 0;
	}
	if (klen == 5 && !strncmp(val, "timer", 5) && !arg) {
		/* How the built-in VMM programs it; the gdbstub backend
		 * uses the period only. */
		ev->perf_type = PERF_TYPE_SOFTWARE;
		ev->perf_config = PERF_COUNT_SW_TASK_CLOCK;
		ev->flags |= OPVM_EV_TIMER | OPVM_EV_SOFTWARE;
		return 0;
	}
	if (!arg || !*arg)
		return -EINVAL;
	if (klen == 8 && !strncmp(val, "hardware", 8)) {
		if (perf_config_of(arg, hw_names, &cfg) ||
		    cfg >= PERF_COUNT_HW_MAX)
			return -EINVAL;
		ev->perf_type = PERF_TYPE_HARDWARE;
		ev->flags |= OPVM_EV_HARDWARE;
	} else if (klen == 8 && !strncmp(val, "hw-cache", 8)) {
		/* id | op << 8 | result << 16, each field range-checked */
		if (perf_config_of(arg, NULL, &cfg) ||
		    (cfg & 0xff) >= PERF_COUNT_HW_CACHE_MAX ||
		    ((cfg >> 8) & 0xff) >= PERF_COUNT_HW_CACHE_OP_MAX ||
		    ((cfg >> 16) & 0xff) >= PERF_COUNT_HW_CACHE_RESULT_MAX ||
		    cfg >> 24)
			return -EINVAL;
		ev->perf_type = PERF_TYPE_HW_CACHE;
		ev->flags |= OPVM_EV_HARDWARE;
	} else if (klen == 8 && !strncmp(val, "software", 8)) {
		if (perf_config_of(arg, sw_names, &cfg) ||
		    cfg >= PERF_COUNT_SW_MAX)
			return -EINVAL;
		ev->perf_type = PERF_TYPE_SOFTWARE;
		ev->flags |= OPVM_EV_SOFTWARE;
	} else {
		return -EINVAL;
	}
	ev->perf_config = cfg;
	return 0;
}

static void event_clear(struct opvm_event *ev)
{
	free((char *)ev->name);
	free((char *)ev->desc);
}

static const struct opvm_event *db_find_exact(const struct events_db *db,
					      const char *name)
{
	for (size_t i = 0; i < db->nr_events; i++)
		if (!strcasecmp(db->events[i].name, name))
			return &db->events[i];
	return NULL;
}

/* One event line while it is parsed: the keys seen so far. */
struct ev_line {
	struct opvm_event ev;
	char *desc, *name, *um, *perf;
	int have_code, have_min, have_def, have_unit, have_flags;
	const char *fname;		/* for messages */
	unsigned lineno;
};

#define LINE_ERR(l, err, errlen, fmt, ...)					\
	(errbuf_set(err, errlen, "%s:%u: " fmt, (l)->fname, (l)->lineno,	\
		     ##__VA_ARGS__), -EINVAL)

/* A count key (minimum:, default:): a number above 0. */
static int key_count(struct ev_line *l, const char *key, char *val, uint64_t *out,
		     int *have, char *err, size_t errlen)
{
	if (parse_u64(val, out) || !*out)
		return LINE_ERR(l, err, errlen, "%s '%s' is not a number above 0", key, val);
	*have = 1;
	return 0;
}

static int key_unit(struct ev_line *l, char *val, char *err, size_t errlen)
{
	if (!strcmp(val, "events"))
		l->ev.unit = OPVM_UNIT_EVENTS;
	else if (!strcmp(val, "us"))
		l->ev.unit = OPVM_UNIT_US;
	else if (!strcmp(val, "ns"))
		l->ev.unit = OPVM_UNIT_NS;
	else
		return LINE_ERR(l, err, errlen, "unit '%s' is not events, us or ns", val);
	l->have_unit = 1;
	return 0;
}

/* One key:value of an event line; a key may come once. */
static int event_key(struct ev_line *l, const char *tok, char *val, char *err, size_t errlen)
{
	uint64_t v;

	if (!strcmp(tok, "event") && !l->have_code) {
		if (parse_u64(val, &v) || v > 0xfff)
			return LINE_ERR(l, err, errlen,
					"event code '%s' is not a number 0..0xfff", val);
		l->ev.code = (uint32_t)v;
		l->have_code = 1;
	} else if (!strcmp(tok, "um") && !l->um) {
		l->um = val;
	} else if (!strcmp(tok, "minimum") && !l->have_min) {
		return key_count(l, "minimum", val, &l->ev.min_count, &l->have_min, err, errlen);
	} else if (!strcmp(tok, "default") && !l->have_def) {
		return key_count(l, "default", val, &l->ev.default_count, &l->have_def,
				 err, errlen);
	} else if (!strcmp(tok, "perf") && !l->perf) {
		l->perf = val;
	} else if (!strcmp(tok, "unit") && !l->have_unit) {
		return key_unit(l, val, err, errlen);
	} else if (!strcmp(tok, "flags") && !l->have_flags) {
		if (strcmp(val, "default"))
			return LINE_ERR(l, err, errlen, "unknown flags '%s'", val);
		l->ev.flags |= OPVM_EV_DEFAULT;
		l->have_flags = 1;
	} else if (!strcmp(tok, "name") && !l->name) {
		if (!valid_name(val, OPVM_EVENT_NAME_MAX))
			return LINE_ERR(l, err, errlen, "bad event name '%s' (letters, digits, "
					"_ . -; under %d bytes)", val, OPVM_EVENT_NAME_MAX);
		l->name = val;
	} else {
		return LINE_ERR(l, err, errlen, "unexpected or repeated key '%s'", tok);
	}
	return 0;
}

/* The keys are all there and agree with each other and the unit masks. */
static int event_line_check(struct ev_line *l, const struct um_table *umt,
			    char *err, size_t errlen)
{
	struct opvm_event *ev = &l->ev;

	if (!l->desc || !*l->desc)
		return LINE_ERR(l, err, errlen, "missing ' : description' at the end");
	if (!l->have_code || !l->um || !l->have_min || !l->perf || !l->name)
		return LINE_ERR(l, err, errlen,
				"an event needs event:, um:, minimum:, perf: and name:");
	if (parse_perf(l->perf, ev))
		return LINE_ERR(l, err, errlen, "perf:%s is not raw, timer, hardware:X, "
				"hw-cache:X or software:X", l->perf);
	if (ev->perf_type == PERF_TYPE_RAW)
		ev->perf_config = ev->code;
	if (!l->have_unit && (ev->flags & OPVM_EV_TIMER))
		ev->unit = OPVM_UNIT_US;
	ev->um = um_find(umt, l->um);
	if (!ev->um)
		return LINE_ERR(l, err, errlen, "unit mask '%s' is not defined in the "
				".unit_masks file", l->um);
	if (!l->have_def)
		ev->default_count = ev->min_count > EV_DEFAULT_COUNT ?
				    ev->min_count : EV_DEFAULT_COUNT;
	if (ev->default_count < ev->min_count)
		return LINE_ERR(l, err, errlen, "default %llu is below the minimum %llu",
				(unsigned long long)ev->default_count,
				(unsigned long long)ev->min_count);
	return 0;
}

/* Appends the checked event to the database (which then owns its strings). */
static int db_add_event(struct events_db *db, struct ev_line *l, const char *family,
			char *err, size_t errlen)
{
	struct opvm_event ev = l->ev;

	if (db_find_exact(db, l->name))
		return LINE_ERR(l, err, errlen, "event '%s' defined twice", l->name);
	if (db->nr_events >= db->cap_events) {
		int r;

		if ((db->cap_events ? db->cap_events * 2 : 32) > 3 * EV_MAX_ENTRIES + 32)
			return LINE_ERR(l, err, errlen, "too many events");
		r = ARRAY_GROW(db->events, db->cap_events, db->nr_events + 1, 32);
		if (r)
			return r;
	}
	ev.family = family;
	ev.name = strdup(l->name);
	ev.desc = strdup(l->desc);
	if (!ev.name || !ev.desc) {
		event_clear(&ev);
		return -ENOMEM;
	}
	db->events[db->nr_events++] = ev;
	return 0;
}

static int event_parse_line(struct events_db *db, const struct um_table *umt,
			    const char *family, char *line, const char *fname,
			    unsigned lineno, char *err, size_t errlen)
{
	struct ev_line l = { .fname = fname, .lineno = lineno };
	char *p = line, *tok;
	int r;

	while ((tok = next_token(&p))) {
		char *val;

		if (!strcmp(tok, ":")) {
			l.desc = trim(p);
			break;
		}
		val = strchr(tok, ':');
		if (!val || !val[1])
			return LINE_ERR(&l, err, errlen, "'%s' is not key:value", tok);
		*val++ = '\0';
		r = event_key(&l, tok, val, err, errlen);
		if (r)
			return r;
	}
	r = event_line_check(&l, umt, err, errlen);
	return r ? r : db_add_event(db, &l, family, err, errlen);
}

static int events_parse_text(struct events_db *db, const struct um_table *umt,
			     const char *family, const char *text,
			     const char *fname, char *err, size_t errlen)
{
	struct line_iter *it;
	size_t first = db->nr_events;
	int r, ndefault = 0;

	it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	it->p = text;
	while ((r = line_next(it)) > 0) {
		if (blank_or_comment(it->buf))
			continue;
		r = event_parse_line(db, umt, family, it->buf, fname,
				     it->lineno, err, errlen);
		if (r)
			goto out;
		if (db->events[db->nr_events - 1].flags & OPVM_EV_DEFAULT) {
			if (++ndefault > 1) {
				errbuf_set(err, errlen,
					    "%s:%u: a second flags:default event",
					    fname, it->lineno);
				r = -EINVAL;
				goto out;
			}
		}
	}
	if (r == -E2BIG) {
		errbuf_set(err, errlen, "%s:%u: line longer than %d bytes", fname,
			    it->lineno, EV_MAX_LINE - 1);
		r = -EINVAL;
		goto out;
	}
	if (db->nr_events == first) {
		errbuf_set(err, errlen, "%s: no events in file", fname);
		r = -EINVAL;
	}
out:
	free(it);
	return r;
}

/* ---- database ---------------------------------------------------------- */

void events_db_free(struct events_db *db)
{
	if (!db)
		return;
	for (size_t i = 0; i < db->nr_events; i++)
		event_clear(&db->events[i]);
	free(db->events);
	for (size_t i = 0; i < db->nr_files; i++) {
		um_table_free(&db->tables[i]);
		free(db->file_ids[i]);
	}
	free(db->family);
	free(db->source);
	free(db);
}

static struct events_db *db_new(const char *family, const char *source)
{
	struct events_db *db = calloc(1, sizeof(*db));

	if (!db)
		return NULL;
	db->family = strdup(family);
	db->source = strdup(source);
	if (!db->family || !db->source) {
		events_db_free(db);
		errno = ENOMEM;
		return NULL;
	}
	return db;
}

/* Adds one file pair; err already says what went wrong on failure. */
static int db_add(struct events_db *db, const char *id,
		  const char *ev_text, const char *ev_name,
		  const char *um_text, const char *um_name,
		  char *err, size_t errlen)
{
	struct um_table *t;
	char *fid;
	int r;

	if (db->nr_files >= ARRAY_SIZE(db->tables))
		return -E2BIG;
	fid = strdup(id);
	if (!fid)
		return -ENOMEM;
	t = &db->tables[db->nr_files];
	db->file_ids[db->nr_files++] = fid;
	r = um_parse(t, um_text, um_name, err, errlen);
	if (r)
		return r;
	return events_parse_text(db, t, fid, ev_text, ev_name, err, errlen);
}

/* What a loader returns: db, or (r: a -errno of the loading) NULL with
 * db freed, errno set and err said. */
static struct events_db *db_done(struct events_db *db, int r, char *err, size_t errlen)
{
	if (!r)
		return db;
	if (r == -ENOMEM)
		errbuf_set(err, errlen, "out of memory");
	events_db_free(db);
	errno = -r;
	return NULL;
}

struct events_db *events_db_parse(const char *family,
				  const char *events_text, const char *events_name,
				  const char *um_text, const char *um_name,
				  char *err, size_t errlen)
{
	struct events_db *db;
	int r;

	if (!family || !events_text || !um_text) {
		errno = EINVAL;
		return NULL;
	}
	db = db_new(family, "memory");
	if (!db)
		return NULL;
	r = db_add(db, family, events_text, events_name ? events_name : "events",
		   um_text, um_name ? um_name : "unit_masks", err, errlen);
	return db_done(db, r, err, errlen);
}

/* The files a database for family is made of, in lookup order. */
static size_t family_files(const char *family, unsigned flags,
			   const char *ids[3])
{
	size_t n = 0;

	ids[n++] = family;
	if (flags & OPVM_EVDB_FAMILY_ONLY)
		return n;
	if (strcmp(family, "generic") && strcmp(family, "software"))
		ids[n++] = "generic";
	if (strcmp(family, "software"))
		ids[n++] = "software";
	return n;
}

static int known_family(const char *family)
{
	const struct opvm_event_family *fams;
	size_t n = events_families(&fams);

	for (size_t i = 0; i < n; i++)
		if (!strcmp(fams[i].id, family))
			return 1;
	return 0;
}

static char *read_text_file(const char *path, char *err, size_t errlen,
			    int *rerr)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	ssize_t k;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*rerr = -errno;
		errbuf_set(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > EV_MAX_FILE) {
		*rerr = -EINVAL;
		errbuf_set(err, errlen, "%s: not a regular file of at most %u bytes",
			    path, EV_MAX_FILE);
		goto fail;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		*rerr = -ENOMEM;
		goto fail;
	}
	while (len < (size_t)st.st_size &&
	       (k = read(fd, buf + len, (size_t)st.st_size - len)) != 0) {
		if (k < 0) {
			if (errno == EINTR)
				continue;
			*rerr = -errno;
			errbuf_set(err, errlen, "%s: %s", path, strerror(errno));
			goto fail;
		}
		len += (size_t)k;
	}
	buf[len] = '\0';
	if (strlen(buf) != len) {
		*rerr = -EINVAL;
		errbuf_set(err, errlen, "%s: contains a NUL byte", path);
		goto fail;
	}
	close(fd);
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

struct events_db *events_db_load_dir(const char *dir, const char *family,
				     unsigned flags, char *err, size_t errlen)
{
	struct opvm_cpu_id cpu;
	struct events_db *db;
	const char *ids[3];
	size_t n;
	int r = 0;

	if (!family) {
		if (events_host_cpu(&cpu))
			memset(&cpu, 0, sizeof(cpu));
		family = events_family_for_cpu(&cpu);
	}
	db = db_new(family, dir);
	if (!db)
		return NULL;
	n = family_files(family, flags, ids);
	for (size_t i = 0; i < n && !r; i++) {
		char evp[PATH_MAX], ump[PATH_MAX];
		char *evt, *umt;

		if (snprintf(evp, sizeof(evp), "%s/%s.events", dir, ids[i]) >=
		    (int)sizeof(evp) ||
		    snprintf(ump, sizeof(ump), "%s/%s.unit_masks", dir, ids[i]) >=
		    (int)sizeof(ump)) {
			errbuf_set(err, errlen, "%s: path too long", dir);
			r = -ENAMETOOLONG;
			break;
		}
		evt = read_text_file(evp, err, errlen, &r);
		if (!evt) {
			if (r == -ENOENT && !known_family(ids[i]))
				errbuf_set(err, errlen,
					    "no event family '%s'; 'opvm list-events --all' lists the families",
					    ids[i]);
			break;
		}
		umt = read_text_file(ump, err, errlen, &r);
		if (umt)
			r = db_add(db, ids[i], evt, evp, umt, ump, err, errlen);
		free(evt);
		free(umt);
	}
	return db_done(db, r, err, errlen);
}

static const char *builtin_text(const char *fname)
{
	for (size_t i = 0; i < events_builtin_nr; i++)
		if (!strcmp(events_builtin_files[i].name, fname))
			return events_builtin_files[i].text;
	return NULL;
}

static struct events_db *db_load_builtin(const char *family, unsigned flags,
					 char *err, size_t errlen)
{
	struct events_db *db;
	const char *ids[3];
	size_t n;
	int r = 0;

	db = db_new(family, "built-in");
	if (!db)
		return NULL;
	n = family_files(family, flags, ids);
	for (size_t i = 0; i < n && !r; i++) {
		char evn[128], umn[128];
		const char *evt, *umt;

		snprintf(evn, sizeof(evn), "%s.events", ids[i]);
		snprintf(umn, sizeof(umn), "%s.unit_masks", ids[i]);
		evt = builtin_text(evn);
		umt = builtin_text(umn);
		if (!evt || !umt) {
			errbuf_set(err, errlen,
				    "no event family '%s'; 'opvm list-events --all' lists the families",
				    ids[i]);
			r = -ENOENT;
			break;
		}
		r = db_add(db, ids[i], evt, evn, umt, umn, err, errlen);
	}
	return db_done(db, r, err, errlen);
}

static int dir_has(const char *dir, const char *family)
{
	char p[PATH_MAX];

	if (snprintf(p, sizeof(p), "%s/%s.events", dir, family) >= (int)sizeof(p))
		return 0;
	return access(p, R_OK) == 0;
}

struct events_db *events_db_load(const char *family, unsigned flags,
				 char *err, size_t errlen)
{
	struct opvm_cpu_id cpu;
	const char *env;
	char exe[PATH_MAX], dir[PATH_MAX], real[PATH_MAX];
	static const char *const rel[] = { "share/opvm/events", "events/data" };

	if (!family) {
		if (events_host_cpu(&cpu))
			memset(&cpu, 0, sizeof(cpu));
		family = events_family_for_cpu(&cpu);
	}
	if (flags & OPVM_EVDB_BUILTIN)
		return db_load_builtin(family, flags, err, errlen);

	/* An explicit directory is obeyed strictly: a user who sets it
	 * wants those files or an error, not a silent fallback. */
	env = getenv("OPVM_EVENTS_DIR");
	if (env && *env)
		return events_db_load_dir(env, family, flags, err, errlen);

	for (size_t i = 0; i < ARRAY_SIZE(rel); i++) {
		if (i == 0 && fs_self_dir(exe, sizeof(exe)))
			break;
		if (snprintf(dir, sizeof(dir), "%s/../%s", exe, rel[i]) >= (int)sizeof(dir) ||
		    !dir_has(dir, family))
			continue;
		/* "/usr/bin/../share/..." reads badly in messages: resolve it. */
		if (realpath(dir, real))
			return events_db_load_dir(real, family, flags, err, errlen);
		return events_db_load_dir(dir, family, flags, err, errlen);
	}
	return db_load_builtin(family, flags, err, errlen);
}

const char *events_db_family(const struct events_db *db)
{
	return db->family;
}

const char *events_db_source(const struct events_db *db)
{
	return db->source;
}

size_t events_db_count(const struct events_db *db)
{
	return db ? db->nr_events : 0;
}

const struct opvm_event *events_db_get(const struct events_db *db, size_t i)
{
	return db && i < db->nr_events ? &db->events[i] : NULL;
}

const struct opvm_event *events_find(const struct events_db *db,
				     const char *name)
{
	if (!db || !name)
		return NULL;
	return db_find_exact(db, name);
}

