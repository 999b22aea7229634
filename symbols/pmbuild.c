// SPDX-License-Identifier: MIT
/*
 * The perf map builder (symbols/pmbuild.h): entries checked and appended,
 * their names made printable.  Painting the entries into symbols is the
 * map's (symbols/perfmap.c), which owns what the symbols point into.
 */
#include <errno.h>
#include <string.h>

#include "lib/array.h"
#include "lib/text.h"
#include "lib/x86.h"
#include "symbols/pmbuild.h"

/* n bytes of s appended to names with a NUL, controls and bytes that are
 * not UTF-8 made '?' (a guest's name lands in reports and terminals):
 * 1 if any was, 0, or -ENOMEM. */
static int name_put(struct pmbuild *b, const char *s, size_t n)
{
	int fixed = 0;
	char *d;

	if (ARRAY_GROW(b->names, b->ncap, b->nlen + n + 1, 4096))
		return -ENOMEM;
	d = b->names + b->nlen;
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t k = c < 0x20 || c == 0x7f ? 0 : text_utf8_char(s + i, n - i);

		if (!k) {
			d[i++] = '?';
			fixed = 1;
			continue;
		}
		memcpy(d + i, s + i, k);
		i += k;
	}
	d[n] = '\0';
	b->nlen += n + 1;
	return fixed;
}

int pmbuild_range_ok(uint64_t start, uint64_t size)
{
	uint64_t end;

	return size && size <= PERFMAP_MAX_RANGE && !__builtin_add_overflow(start, size, &end) &&
	       end <= OPVM_USER_TOP;
}

int pmbuild_add(struct pmbuild *b, uint64_t start, uint64_t size, const char *name, size_t n,
		const uint8_t *code)
{
	size_t at;
	int fixed;

	if (b->nr >= PERFMAP_MAX_ENTRIES)
		return PMB_CAPPED;
	if (ARRAY_GROW(b->e, b->cap, b->nr + 1, 256))
		return -ENOMEM;
	at = b->nlen;
	fixed = name_put(b, name, n);
	if (fixed < 0)
		return fixed;
	b->e[b->nr] = (struct pment){ .start = start, .end = start + size, .name = at,
				      .seq = b->nr, .code = code };
	b->nr++;
	return fixed ? PMB_FIXED : PMB_TAKEN;
}
