// SPDX-License-Identifier: MIT
/*
 * Sets of entries by string key (lib/strset.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"
#include "lib/strset.h"

#define STRSET_MIN	256	/* slots of a set's first table */

int strset_grow(struct strset *s)
{
	size_t cap = s->cap ? s->cap * 2 : STRSET_MIN;
	void **t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < s->cap; i++) {
		size_t h;

		if (!s->slot[i])
			continue;
		/* keys are unique: the first empty slot, no comparing */
		for (h = hash_str(strset_key(s, s->slot[i])) & (cap - 1); t[h]; h = (h + 1) & (cap - 1))
			;
		t[h] = s->slot[i];
	}
	free(s->slot);
	s->slot = t;
	s->cap = cap;
	return 0;
}

int strset_add(struct strset *s, void *entry)
{
	void **slot = strset_slot(s, strset_key(s, entry));

	if (!slot)
		return -ENOMEM;
	strset_fill(s, slot, entry);
	return 0;
}

void strset_free(struct strset *s)
{
	if (!s)
		return;
	free(s->slot);
	s->slot = NULL;
	s->cap = s->nr = 0;
}
