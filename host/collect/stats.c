// SPDX-License-Identifier: MIT
/*
 * session.json "stats" object <-> struct opvm_stats.  The key names are a
 * stable file format (docs/session-json.md): add, never rename.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/collect/stats.h"
#include "lib/array.h"

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
	{ "before_start",	offsetof(struct opvm_stats, before_start) },
	{ "python",		offsetof(struct opvm_stats, python) },
	{ "python_unnamed",	offsetof(struct opvm_stats, python_unnamed) },
};
#define NR_KEYS (ARRAY_SIZE(stats_keys))

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

		if (__builtin_add_overflow(*d, v, d))
			*d = UINT64_MAX;
	}
}

json_t *stats_json_count(uint64_t v)
{
	/* json_int_t is signed 64-bit: counts beyond it saturate */
	return json_integer(v >= OPVM_COUNT_SATURATED ? INT64_MAX : (json_int_t)v);
}

const char *stats_fmt_count(uint64_t v, char *buf)
{
	char tmp[OPVM_COUNT_BUF];
	size_t i = sizeof(tmp);

	if (v >= OPVM_COUNT_SATURATED) {
		snprintf(buf, OPVM_COUNT_BUF, ">= 2^63");
		return buf;
	}
	/* By hand, not "%llu": a report prints one a row, 100 k rows. */
	tmp[--i] = '\0';
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	memcpy(buf, tmp + i, sizeof(tmp) - i);
	return buf;
}

uint64_t stats_json_get(const json_t *obj, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(obj, key));

	return v > 0 ? (uint64_t)v : 0;
}

#define JSON_FILE_MAX	(64u << 20)

json_t *stats_json_loadfd(int fd, size_t flags, json_error_t *err)
{
	size_t cap = 8192, len = 0;
	char *buf = malloc(cap);
	const char *why = buf ? NULL : "out of memory";
	json_t *root = NULL;

	while (!why) {
		ssize_t n;

		if (len == cap) {
			char *b = cap < JSON_FILE_MAX ? realloc(buf, cap * 2) : NULL;

			if (!b) {
				why = cap < JSON_FILE_MAX ? "out of memory" : "over 64 MiB";
				break;
			}
			buf = b;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			why = strerror(errno);
		} else if (n == 0) {
			root = json_loadb(buf, len, flags, err);
			break;
		}
		len += n > 0 ? (size_t)n : 0;
	}
	if (why && err)
		snprintf(err->text, sizeof(err->text), "cannot read the file: %s", why);
	free(buf);
	return root;
}

json_t *stats_store_to_json(const struct store_stats *ss,
			    const struct store_limits *lim)
{
	json_t *o = json_object(), *l = json_object();
	const struct {
		const char *key;
		uint64_t v;
	} f[] = {
		{ "files", ss->files }, { "dirs", ss->dirs },
		{ "mapped", ss->mapped }, { "mapped_peak", ss->mapped_peak },
		{ "disk_bytes", ss->disk_bytes },
		{ "overflow_samples", ss->overflow_samples },
		{ "overflow_keys", ss->overflow_keys },
		{ "unmaps", ss->unmaps }, { "remaps", ss->remaps },
		{ "build_ids_late", ss->build_ids_late },
		{ "stacks", ss->stacks }, { "stacks_dropped", ss->stacks_dropped },
		{ "python_frames", ss->py_frames }, { "python_refused", ss->py_refused },
	}, lf[] = {
		{ "max_files", lim->max_files }, { "max_dirs", lim->max_dirs },
		{ "max_mapped", lim->max_mapped }, { "max_disk", lim->max_disk },
	};
	size_t i;
	int bad = !o || !l;

	for (i = 0; !bad && i < ARRAY_SIZE(f); i++)
		bad = json_object_set_new(o, f[i].key, stats_json_count(f[i].v));
	for (i = 0; !bad && i < ARRAY_SIZE(lf); i++)
		bad = json_object_set_new(l, lf[i].key, stats_json_count(lf[i].v));
	if (bad) {
		json_decref(l);
		json_decref(o);
		return NULL;
	}
	if (json_object_set_new(o, "limits", l)) {	/* l is taken either way */
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *stats_to_json(const struct opvm_stats *s)
{
	json_t *o = json_object();
	size_t i;

	if (!o)
		return NULL;
	for (i = 0; i < NR_KEYS; i++) {
		uint64_t v = *field((struct opvm_stats *)s, i);

		if (json_object_set_new(o, stats_keys[i].key, stats_json_count(v))) {
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
		*field(&s, i) = iv < 0 ? 0 : (uint64_t)iv;
	}
	*out = s;
	return 0;
}
