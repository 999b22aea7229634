/* SPDX-License-Identifier: MIT */
/*
 * Per-guest sample accounting, as written to session.json ("stats" object,
 * docs/session-json.md) and read back by the report commands.
 *
 * Every sample a sampler tried to take ends up in exactly one of: filed
 * (kernel or user; unresolved, lost_no_mapping and lost_no_process samples
 * are filed too, under anonymous images, and are counted in kernel/user as
 * well), lost_overflow (ring full), or throttled (rate cap).  guest_lost
 * counts channel records the guest module itself dropped.
 */
#ifndef OPVM_STATS_H
#define OPVM_STATS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "host/collect/store.h"

/* session.json holds counts as JSON integers, which are signed 64-bit: a
 * count at or past this is written as this value and means "at least
 * 2^63 - 1" (the counter saturated).  People see it as ">= 2^63". */
#define OPVM_COUNT_SATURATED	((uint64_t)INT64_MAX)
#define OPVM_COUNT_BUF		24

struct opvm_stats {
	uint64_t received;		/* samples popped from the rings */
	uint64_t kernel;		/* filed under a kernel image */
	uint64_t user;			/* filed under a user image */
	uint64_t lost_overflow;		/* dropped: ring full */
	uint64_t lost_no_mapping;	/* process known, mapping never arrived: {anon} */
	uint64_t lost_no_process;	/* address space never described: {anon-cr3:...} */
	uint64_t throttled;		/* not taken: rate cap (sampler) */
	uint64_t unresolved;		/* no guest module at all: {anon-cr3:...} */
	uint64_t guest_lost;		/* records the guest dropped (LOST) */
	uint64_t before_start;		/* not filed: taken before --from-exec's
					 * process started */
	uint64_t python;		/* of user: filed under their innermost
					 * Python frame ({py}) */
	uint64_t python_unnamed;	/* Python frames the sampler read that
					 * got no name (a table full): left out */
};

/* dst += src, field by field (saturating). */
void stats_add(struct opvm_stats *dst, const struct opvm_stats *src);

/* New JSON object with exactly the documented keys.  NULL on ENOMEM. */
json_t *stats_to_json(const struct opvm_stats *s);

/* A count for session.json (saturating at OPVM_COUNT_SATURATED).  NULL on
 * ENOMEM. */
json_t *stats_json_count(uint64_t v);
/* A count for people: "123", or ">= 2^63" once saturated.  buf holds
 * OPVM_COUNT_BUF bytes; returns buf. */
const char *stats_fmt_count(uint64_t v, char *buf);
/* The rest of fd (a session.json: a regular file) parsed as JSON, as
 * json_loadfd() does, but read in a few calls: jansson reads a file
 * descriptor one byte a call (5 k calls for a real session.json, twice a
 * report).  NULL when it does not parse (err says why), cannot be read or
 * is over 64 MiB. */
json_t *stats_json_loadfd(int fd, size_t flags, json_error_t *err);
/* Reads a count written by stats_json_count() (absent or negative: 0). */
uint64_t stats_json_get(const json_t *obj, const char *key);

/* session.json's "store" object: what the sample-file store holds and its
 * caps (docs/session-json.md).  NULL on ENOMEM. */
json_t *stats_store_to_json(const struct store_stats *ss,
			    const struct store_limits *lim);

/* Reads a "stats" object.  Missing keys read as 0 (files from older
 * versions); a key of the wrong type is -EINVAL.  Returns 0 or -errno. */
int stats_from_json(const json_t *obj, struct opvm_stats *out);

#endif /* OPVM_STATS_H */
