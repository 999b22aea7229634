/* SPDX-License-Identifier: MIT */
/*
 * A set of entries found by a string key: open addressing with linear
 * probing, hashed by hash_str(), grown to stay at most half full.  The
 * entries are the caller's pointers (the set never frees or writes them);
 * an entry's key is the string it points to, or a char * member of it.
 * For the tables that intern strings or find objects by name: the
 * report's string pool, the resolver's images.
 */
#ifndef OPVM_STRSET_H
#define OPVM_STRSET_H

#include <stddef.h>
#include <string.h>

#include "lib/hash.h"

struct strset {
	void **slot;		/* cap slots, NULL: empty; a walk over them
				 * visits every entry */
	size_t cap, nr;
	size_t key_off;		/* 0 (a zeroed set): the entry is its key;
				 * else STRSET_MEMBER() */
};

/* key_off for entries of type T whose key is their char * member m. */
#define STRSET_MEMBER(T, m)	(offsetof(T, m) + 1)

/* The key of entry e. */
static inline const char *strset_key(const struct strset *s, const void *e)
{
	const char *k;

	if (!s->key_off)
		return e;
	memcpy(&k, (const char *)e + s->key_off - 1, sizeof(k));
	return k;
}

/* The slot of key's entry in slot[0..cap), or the empty slot where it
 * would go (cap is a power of two and the table never full). */
static inline size_t strset_probe(const struct strset *s, void *const *slot, size_t cap,
				  const char *key)
{
	size_t h;

	for (h = hash_str(key) & (cap - 1); slot[h]; h = (h + 1) & (cap - 1))
		if (!strcmp(strset_key(s, slot[h]), key))
			break;
	return h;
}

/* The entry whose key equals key, or NULL. */
static inline void *strset_find(const struct strset *s, const char *key)
{
	return s->cap ? s->slot[strset_probe(s, s->slot, s->cap, key)] : NULL;
}

/* Adds entry, whose key the set must not hold yet: 0 or -ENOMEM (the set
 * is as it was). */
int strset_add(struct strset *s, void *entry);

/* Doubles the table (strset_slot()'s slow path): 0 or -ENOMEM. */
int strset_grow(struct strset *s);

/* Find or add in one probe, for an interning table: makes room for one
 * more entry, then returns the slot of key's entry, or the empty slot
 * where it goes (fill it with strset_fill(), or leave it empty); NULL on
 * ENOMEM.  Inline: the report's string pool interns every name it reads
 * through it. */
static inline void **strset_slot(struct strset *s, const char *key)
{
	if ((s->nr + 1) * 2 > s->cap && strset_grow(s))
		return NULL;
	return &s->slot[strset_probe(s, s->slot, s->cap, key)];
}

/* Puts entry, whose key is the one strset_slot() was given, into the
 * empty slot it returned. */
static inline void strset_fill(struct strset *s, void **slot, void *entry)
{
	*slot = entry;
	s->nr++;
}

/* Frees the slots (not the entries) and zeroes the counts; key_off
 * stays.  NULL-safe. */
void strset_free(struct strset *s);

#endif /* OPVM_STRSET_H */
