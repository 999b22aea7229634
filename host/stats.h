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
#include <stdint.h>

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
};

/* dst += src, field by field (saturating at UTIL_SATURATED, which
 * session.json holds as INT64_MAX: lib/util.h). */
void stats_add(struct opvm_stats *dst, const struct opvm_stats *src);

/* New JSON object with exactly the documented keys.  NULL on ENOMEM. */
json_t *stats_to_json(const struct opvm_stats *s);

/* Reads a "stats" object.  Missing keys read as 0 (files from older
 * versions); a key of the wrong type is -EINVAL.  Returns 0 or -errno. */
int stats_from_json(const json_t *obj, struct opvm_stats *out);

#endif /* OPVM_STATS_H */
