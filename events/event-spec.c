// SPDX-License-Identifier: MIT
/*
 * -e spec parsing and what a parsed spec means to perf and the timer: the
 * other half of the events database (events/events.c reads the files).
 * Format: docs/events.md.
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
#include "lib/errbuf.h"

/* ---- specs ------------------------------------------------------------- */

int events_usable(const struct opvm_event *ev, int has_pmu)
{
	if (!ev)
		return 0;
	if (ev->flags & OPVM_EV_HARDWARE)
		return has_pmu != 0;
	return 1;
}

/* Lists an event's named unit mask values into buf, for error messages. */
static void um_names(const struct opvm_unit_mask *g, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < g->nr_values && off < len; i++) {
		int k;

		if (g->values[i].name)
			k = snprintf(buf + off, len - off, "%s%s (0x%x)",
				     i ? ", " : "", g->values[i].name,
				     g->values[i].value);
		else
			k = snprintf(buf + off, len - off, "%s0x%x",
				     i ? ", " : "", g->values[i].value);
		if (k < 0)
			break;
		off += (size_t)k;
	}
}

static int parse_unit_mask(const struct opvm_event *ev, char *s, uint32_t *out,
			   char *err, size_t errlen)
{
	const struct opvm_unit_mask *g = ev->um;
	static const char *const types[] = { "mandatory", "exclusive", "bitmask" };
	char names[512];
	uint64_t v = 0;

	if (isdigit((unsigned char)*s)) {
		if (parse_u64(s, &v) || v > 0xff) {
			errbuf_set(err, errlen, "unit mask '%s' for %s is not a number 0..0xff",
				    s, ev->name);
			return -EINVAL;
		}
	} else {
		char *save = NULL, *tok;

		for (tok = strtok_r(s, "+", &save); tok;
		     tok = strtok_r(NULL, "+", &save)) {
			size_t i;

			for (i = 0; i < g->nr_values; i++)
				if (g->values[i].name &&
				    !strcasecmp(g->values[i].name, tok))
					break;
			if (i == g->nr_values) {
				um_names(g, names, sizeof(names));
				errbuf_set(err, errlen,
					    "unit mask '%s' is not one of %s's: %s",
					    tok, ev->name, names);
				return -EINVAL;
			}
			if (v && g->type != OPVM_UM_BITMASK) {
				errbuf_set(err, errlen,
					    "%s's unit mask is %s: give one value, not a '+' list",
					    ev->name, types[g->type]);
				return -EINVAL;
			}
			v |= g->values[i].value;
		}
		if (!v && g->type == OPVM_UM_BITMASK) {
			errbuf_set(err, errlen, "empty unit mask for %s", ev->name);
			return -EINVAL;
		}
	}
	if ((g->type == OPVM_UM_BITMASK && (!v || (v & ~um_all_bits(g)))) ||
	    (g->type != OPVM_UM_BITMASK && !um_has_value(g, (uint32_t)v))) {
		um_names(g, names, sizeof(names));
		errbuf_set(err, errlen,
			    "unit mask 0x%llx is not valid for %s (%s%s: %s)",
			    (unsigned long long)v, ev->name, types[g->type],
			    g->type == OPVM_UM_BITMASK ? ", OR of" : ", one of",
			    names);
		return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

static int parse_bool(const char *s, int *out)
{
	if (!strcmp(s, "0") || !strcmp(s, "1")) {
		*out = *s == '1';
		return 0;
	}
	return -EINVAL;
}

static const char *unit_word(const struct opvm_event *ev)
{
	switch (ev->unit) {
	case OPVM_UNIT_US:
		return " microseconds";
	case OPVM_UNIT_NS:
		return " nanoseconds";
	case OPVM_UNIT_EVENTS:
		break;
	}
	return "";
}

/* Split buf in place at ':' into at most 5 fields; the count, or -1. */
static int spec_split(char *buf, char *f[5], const char *spec, char *err, size_t errlen)
{
	int nf = 0;

	for (char *p = buf;;) {
		char *c = strchr(p, ':');

		if (nf == 5) {
			errbuf_set(err, errlen,
				    "too many fields in '%s': use NAME:count[:unitmask[:kernel[:user]]]",
				    spec);
			return -1;
		}
		f[nf++] = p;
		if (!c)
			return nf;
		*c = '\0';
		p = c + 1;
	}
}

/* The count field: a positive number at or above the event's minimum. */
static int spec_count(const struct opvm_event *ev, const char *f, uint64_t *count,
		      char *err, size_t errlen)
{
	if (!isdigit((unsigned char)*f) || parse_u64(f, count) || !*count) {
		errbuf_set(err, errlen, "count '%s' for %s is not a positive number",
			    f, ev->name);
		return -EINVAL;
	}
	if (*count < ev->min_count) {
		errbuf_set(err, errlen,
			    "count %llu for %s is below its minimum %llu; use at least %llu%s",
			    (unsigned long long)*count, ev->name,
			    (unsigned long long)ev->min_count,
			    (unsigned long long)ev->min_count, unit_word(ev));
		return -EINVAL;
	}
	return 0;
}

int events_parse_spec(const struct events_db *db, const char *spec,
		      struct opvm_event_spec *out, char *err, size_t errlen)
{
	char buf[EV_MAX_SPEC];
	char *f[5] = { NULL };
	int nf;
	const struct opvm_event *ev;
	struct opvm_event_spec s = { 0 };

	if (!db || !spec || !out)
		return -EINVAL;
	if (strlen(spec) >= sizeof(buf)) {
		errbuf_set(err, errlen, "event spec too long (at most %zu bytes)",
			    sizeof(buf) - 1);
		return -EINVAL;
	}
	strcpy(buf, spec);
	nf = spec_split(buf, f, spec, err, errlen);
	if (nf < 0)
		return -EINVAL;
	if (!*f[0]) {
		errbuf_set(err, errlen,
			    "no event name in '%s': use NAME:count[:unitmask[:kernel[:user]]]",
			    spec);
		return -EINVAL;
	}
	ev = events_find(db, f[0]);
	if (!ev) {
		errbuf_set(err, errlen,
			    "unknown event '%s' for this CPU (%s); 'opvm list-events' lists the events you can use",
			    f[0], db->family);
		return -ENOENT;
	}
	s.event = ev;
	s.count = ev->default_count;
	s.unit_mask = ev->um->default_value;
	s.kernel = s.user = 1;
	if (nf > 1 && *f[1] && spec_count(ev, f[1], &s.count, err, errlen))
		return -EINVAL;
	if (nf > 2 && *f[2] &&
	    parse_unit_mask(ev, f[2], &s.unit_mask, err, errlen))
		return -EINVAL;
	if (nf > 3 && *f[3] && parse_bool(f[3], &s.kernel)) {
		errbuf_set(err, errlen, "kernel field '%s' must be 0 or 1", f[3]);
		return -EINVAL;
	}
	if (nf > 4 && *f[4] && parse_bool(f[4], &s.user)) {
		errbuf_set(err, errlen, "user field '%s' must be 0 or 1", f[4]);
		return -EINVAL;
	}
	if (!s.kernel && !s.user) {
		errbuf_set(err, errlen,
			    "%s with kernel=0 and user=0 would never sample; set one to 1",
			    ev->name);
		return -EINVAL;
	}
	*out = s;
	return 0;
}

int events_default(const struct events_db *db, int has_pmu,
		   struct opvm_event_spec *out)
{
	const struct opvm_event *pick = NULL;

	if (!db || !out)
		return -EINVAL;
	/* Family file first, so its own cycles event beats perf's generic
	 * one; without a PMU only the timer is certain to work. */
	for (size_t i = 0; i < db->nr_events && !pick; i++) {
		const struct opvm_event *ev = &db->events[i];

		if (has_pmu && (ev->flags & OPVM_EV_DEFAULT) &&
		    (ev->flags & OPVM_EV_HARDWARE))
			pick = ev;
	}
	for (size_t i = 0; i < db->nr_events && !pick; i++)
		if (db->events[i].flags & OPVM_EV_TIMER)
			pick = &db->events[i];
	if (!pick)
		return -ENOENT;
	out->event = pick;
	out->count = pick->default_count;
	out->unit_mask = pick->um->default_value;
	out->kernel = 1;
	out->user = 1;
	return 0;
}

uint64_t events_perf_config(const struct opvm_event_spec *spec)
{
	const struct opvm_event *ev = spec->event;
	uint64_t code;

	if (ev->perf_type != PERF_TYPE_RAW)
		return ev->perf_config;
	/* x86 PERFEVTSEL layout: select[7:0], umask[15:8], and AMD's
	 * extended select[11:8] in bits 35:32. */
	code = ev->perf_config;
	return (code & 0xff) | ((uint64_t)(spec->unit_mask & 0xff) << 8) |
	       (((code >> 8) & 0xf) << 32);
}

uint64_t events_spec_period_ns(const struct opvm_event_spec *spec)
{
	switch (spec->event->unit) {
	case OPVM_UNIT_US:
		return spec->count > UINT64_MAX / 1000 ? UINT64_MAX :
		       spec->count * 1000;
	case OPVM_UNIT_NS:
		return spec->count;
	case OPVM_UNIT_EVENTS:
		break;
	}
	return 0;
}

unsigned events_spec_rate_hz(const struct opvm_event_spec *spec)
{
	uint64_t ns = events_spec_period_ns(spec), hz;

	if (!ns)
		return 0;
	hz = (1000000000ull + ns / 2) / ns;
	return hz ? (unsigned)hz : 1;
}

int events_spec_perf_attr(const struct opvm_event_spec *spec,
			  struct perf_event_attr *attr)
{
	const struct opvm_event *ev = spec->event;

	attr->size = sizeof(*attr);
	attr->type = ev->perf_type;
	attr->config = events_perf_config(spec);
	/* Time events run on nanosecond clocks whatever the file's unit. */
	attr->sample_period = ev->unit == OPVM_UNIT_EVENTS ? spec->count :
			      events_spec_period_ns(spec);
	attr->exclude_kernel = !spec->kernel;
	attr->exclude_user = !spec->user;
	return 0;
}

char *events_spec_format(const struct opvm_event_spec *spec, char *buf,
			 size_t len)
{
	snprintf(buf, len, "%s:%llu:0x%x:%d:%d", spec->event->name,
		 (unsigned long long)spec->count, spec->unit_mask,
		 spec->kernel, spec->user);
	return buf;
}

int events_timer_spec(const struct events_db *db, unsigned hz,
		      struct opvm_event_spec *out, char *err, size_t errlen)
{
	const struct opvm_event *ev = NULL;
	uint64_t max_hz;

	for (size_t i = 0; db && i < db->nr_events && !ev; i++)
		if (db->events[i].flags & OPVM_EV_TIMER)
			ev = &db->events[i];
	if (!ev) {
		errbuf_set(err, errlen, "no TIMER event in the %s events file",
			    db ? db->family : "?");
		return -ENOENT;
	}
	max_hz = 1000000 / ev->min_count;
	if (!hz || hz > max_hz || 1000000 / hz < ev->min_count) {
		errbuf_set(err, errlen,
			    "a timer rate of %u Hz is not allowed; use 1 to %llu samples/s per vCPU",
			    hz, (unsigned long long)max_hz);
		return -EINVAL;
	}
	out->event = ev;
	out->count = 1000000 / hz;
	out->unit_mask = ev->um->default_value;
	out->kernel = 1;
	out->user = 1;
	return 0;
}
