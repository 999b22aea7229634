// SPDX-License-Identifier: MIT
/*
 * session.json "stats" object <-> struct opvm_stats.  The key names are a
 * stable file format (docs/session-json.md): add, never rename.
 */
#include <errno.h>
#include <stddef.h>

#include "host/stats.h"
#include "lib/util.h"

static const struct {
	const char *key;
	size_t off;
} stats_keys[] = {
	{ "received",		offsetof(struct opvm_stats, received) },
	{ "kernel",		offsetof(struct opvm_stats, kernel) },
	{ "user",		offsetof(struct opvm_stats, user) },
	{ "lost_overflow",	offsetof(struct opvm_stats, lost_overflow) },
	{ "lost_no_mapping",	offsetof(struct opvm_stats, lost_no_mapping) },
	{ "lost_no_process",	offsetof(struct opvm_stats, lost_no_process) },
	{ "throttled",		offsetof(struct opvm_stats, throttled) },
	{ "unresolved",		offsetof(struct opvm_stats, unresolved) },
	{ "guest_lost",		offsetof(struct opvm_stats, guest_lost) },
};
#define NR_KEYS (sizeof(stats_keys) / sizeof(stats_keys[0]))

static inline uint64_t *field(struct opvm_stats *s, size_t i)
{
	return (uint64_t *)((char *)s + stats_keys[i].off);
}

void stats_add(struct opvm_stats *dst, const struct opvm_stats *src)
{
	size_t i;

	for (i = 0; i < NR_KEYS; i++) {
		uint64_t *d = field(dst, i);
		uint64_t v = *field((struct opvm_stats *)src, i);

		*d = util_sat_add(*d, v);
	}
}

json_t *stats_to_json(const struct opvm_stats *s)
{
	json_t *o = json_object();
	size_t i;

	if (!o)
		return NULL;
	for (i = 0; i < NR_KEYS; i++) {
		/* json_int_t is signed 64-bit: counts beyond it saturate */
		json_int_t jv = util_count_to_json(*field((struct opvm_stats *)s, i));

		if (json_object_set_new(o, stats_keys[i].key, json_integer(jv))) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

int stats_from_json(const json_t *obj, struct opvm_stats *out)
{
	struct opvm_stats s = { 0 };
	size_t i;

	if (!json_is_object(obj))
		return -EINVAL;
	for (i = 0; i < NR_KEYS; i++) {
		json_t *v = json_object_get(obj, stats_keys[i].key);
		json_int_t iv;

		if (!v)
			continue;
		if (!json_is_integer(v))
			return -EINVAL;
		iv = json_integer_value(v);
		*field(&s, i) = util_count_from_json(iv);
	}
	*out = s;
	return 0;
}
