// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for perf maps (symbols/perfmap.h): the input is the
 * text a guest runtime (or a hostile guest process) wrote to
 * /tmp/perf-PID.map.  Whatever it holds, the parse must end, every line
 * be taken or counted once, and the symbols it makes be sorted, none
 * empty or overlapping, none past the user half, each name valid UTF-8
 * without controls, and every lookup inside its symbol.
 *
 * Seeds: tests/fuzz/corpus/perfmap/ (a Node.js map's lines, reused
 * ranges, a partial last line).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/text.h"
#include "lib/x86.h"
#include "symbols/perfmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_syms(const struct perfmap *pm)
{
	const struct perfmap_stats *st = perfmap_stats(pm);
	uint64_t prev_end = 0;

	if (st->entries + st->bad + st->long_lines + st->bad_range + st->capped != st->lines ||
	    st->hidden > st->overlapped || st->overlapped > st->entries ||
	    perfmap_nr(pm) > 2 * st->entries)
		abort();
	for (size_t i = 0; i < perfmap_nr(pm); i++) {
		const struct elfsym *s = perfmap_sym(pm, i);
		uint64_t mid;

		if (!s->size || s->addr < prev_end || s->addr + s->size > OPVM_USER_TOP ||
		    !text_utf8_valid(s->name))
			abort();
		for (const char *c = s->name; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				abort();
		mid = s->addr + s->size / 2;
		if (perfmap_lookup(pm, mid) != (long)i || perfmap_lookup(pm, s->addr) != (long)i)
			abort();
		prev_end = s->addr + s->size;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct perfmap *pm = perfmap_parse((const char *)data, size);

	if (!pm)
		return 0;	/* ENOMEM only */
	check_syms(pm);
	perfmap_free(pm);
	return 0;
}
