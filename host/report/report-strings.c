// SPDX-License-Identifier: MIT
/*
 * The report model's string pool: strings interned so that row keys compare
 * by pointer (host/report/report.c).
 */
#include <stdlib.h>
#include <string.h>

#include "host/report/report-priv.h"
#include "lib/array.h"
#include "lib/strset.h"

void strpool_free(struct strpool *p)
{
	for (size_t i = 0; i < p->nr_owned; i++)
		free(p->owned[i]);
	free(p->owned);
	strset_free(&p->set);
}

/* Returns the pool's copy of s; borrow: keep s itself (it outlives the
 * pool).  NULL on ENOMEM. */
const char *strpool_intern(struct strpool *p, const char *s, int borrow)
{
	void **slot = strset_slot(&p->set, s);
	char *c;

	if (!slot)
		return NULL;
	if (*slot)
		return *slot;
	if (borrow) {
		c = (char *)s;	/* the set never writes through an entry */
	} else {
		if (ARRAY_GROW(p->owned, p->cap_owned, p->nr_owned + 1, 256))
			return NULL;
		c = strdup(s);
		if (!c)
			return NULL;
		p->owned[p->nr_owned++] = c;
	}
	strset_fill(&p->set, slot, c);
	return c;
}
