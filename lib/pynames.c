// SPDX-License-Identifier: MIT
/*
 * Python frame names from a sampler to the collector (lib/pynames.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/pynames.h"
#include "lib/hash.h"

#define HASH_SLOTS	(2 * PYNAMES_MAX)	/* power of two, half full at most */

struct pynames {
	struct pyname *e;		/* PYNAMES_MAX entries */
	uint32_t *slot;			/* the producer's: index + 1, 0 empty */
	uint32_t nr;			/* the producer's copy of count */
	_Atomic uint32_t count;
	_Atomic uint64_t refused;
};

struct pynames *pynames_new(void)
{
	struct pynames *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->e = calloc(PYNAMES_MAX, sizeof(*t->e));
	t->slot = calloc(HASH_SLOTS, sizeof(*t->slot));
	if (!t->e || !t->slot) {
		pynames_free(t);
		errno = ENOMEM;
		return NULL;
	}
	return t;
}

void pynames_free(struct pynames *t)
{
	if (!t)
		return;
	free(t->e);
	free(t->slot);
	free(t);
}

static void copy_cut(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);

	memcpy(dst, src, n);
	memset(dst + n, 0, cap - n);	/* whole: entries compare by memcmp */
}

static uint64_t entry_hash(const struct pyname *p)
{
	return hash_str(p->name) ^ (hash_str(p->file) * 31) ^
	       ((uint64_t)p->first_line << 32 | p->line) * 0x9e3779b97f4a7c15ull;
}

int pynames_intern(struct pynames *t, const char *name, const char *file, uint32_t first_line,
		   uint32_t line, uint32_t *idx)
{
	struct pyname k;
	size_t i;

	copy_cut(k.name, sizeof(k.name), name);
	copy_cut(k.file, sizeof(k.file), file);
	k.first_line = first_line;
	k.line = line;
	for (i = entry_hash(&k) & (HASH_SLOTS - 1);; i = (i + 1) & (HASH_SLOTS - 1)) {
		uint32_t s = t->slot[i];

		if (!s)
			break;
		if (!memcmp(&t->e[s - 1], &k, sizeof(k))) {
			*idx = s - 1;
			return 0;
		}
	}
	if (t->nr >= PYNAMES_MAX) {
		atomic_fetch_add_explicit(&t->refused, 1, memory_order_relaxed);
		return -ENOSPC;
	}
	t->e[t->nr] = k;
	t->slot[i] = t->nr + 1;
	*idx = t->nr++;
	/* the entry is whole before the count says it is there */
	atomic_store_explicit(&t->count, t->nr, memory_order_release);
	return 0;
}

uint32_t pynames_count(const struct pynames *t)
{
	return atomic_load_explicit(&t->count, memory_order_acquire);
}

const struct pyname *pynames_get(const struct pynames *t, uint32_t idx)
{
	return idx < pynames_count(t) ? &t->e[idx] : NULL;
}

uint64_t pynames_refused(const struct pynames *t)
{
	return atomic_load_explicit(&t->refused, memory_order_relaxed);
}
