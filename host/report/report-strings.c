// SPDX-License-Identifier: MIT
/*
 * The report model's string pool: strings interned so that row keys compare
 * by pointer (host/report/report.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "host/report/report-priv.h"
#include "lib/array.h"
#include "lib/hash.h"

void strpool_free(struct strpool *p)
{
	for (size_t i = 0; i < p->nr_owned; i++)
		free(p->owned[i]);
	free(p->owned);
	free(p->slots);
}

static int pool_grow(struct strpool *p)
{
	size_t cap = p->cap ? p->cap * 2 : 1024;
	const char **t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < p->cap; i++) {
		size_t h;

		if (!p->slots[i])
			continue;
		for (h = hash_str(p->slots[i]) & (cap - 1); t[h]; h = (h + 1) & (cap - 1))
			;
		t[h] = p->slots[i];
	}
	free(p->slots);
	p->slots = t;
	p->cap = cap;
	return 0;
}

/* Returns the pool's copy of s; borrow: keep s itself (it outlives the
 * pool).  NULL on ENOMEM. */
const char *strpool_intern(struct strpool *p, const char *s, int borrow)
{
	size_t h;
	char *c;

	if ((p->nr + 1) * 2 > p->cap && pool_grow(p))
		return NULL;
	for (h = hash_str(s) & (p->cap - 1); p->slots[h]; h = (h + 1) & (p->cap - 1))
		if (!strcmp(p->slots[h], s))
			return p->slots[h];
	if (borrow) {
		p->slots[h] = s;
	} else {
		if (ARRAY_GROW(p->owned, p->cap_owned, p->nr_owned + 1, 256))
			return NULL;
		c = strdup(s);
		if (!c)
			return NULL;
		p->owned[p->nr_owned++] = c;
		p->slots[h] = c;
	}
	p->nr++;
	return p->slots[h];
}
