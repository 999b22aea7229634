// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for jitdumps (symbols/jitdump.c, symbols/perfmap.h):
 * the input is the file a guest runtime (or a hostile guest process)
 * wrote as /tmp/jit-PID.dump.  Whatever it holds, the read must end,
 * every whole record be taken, skipped or counted once, and the symbols be
 * sorted, none empty or overlapping, none past the user half, each name
 * valid UTF-8 without controls, every lookup inside its symbol, and each
 * symbol's code bytes (when it has them) readable to its end and no
 * further.
 *
 * Seeds: tests/fuzz/corpus/jitdump/ (loads, a move, skipped records, a
 * last record cut short).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/text.h"
#include "lib/x86.h"
#include "symbols/perfmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_counts(const struct perfmap *pm)
{
	const struct jitdump_stats *st = &perfmap_stats(pm)->jd;

	if (st->loads + st->moves + st->skipped + st->bad + st->bad_range + st->capped +
	    st->unmatched != st->records || st->unknown > st->skipped ||
	    (st->bad_header && st->records) || perfmap_nr(pm) > 2 * (st->loads + st->moves))
		abort();
}

static void check_syms(const struct perfmap *pm)
{
	uint64_t prev_end = 0;
	uint8_t buf[64];

	for (size_t i = 0; i < perfmap_nr(pm); i++) {
		const struct elfsym *s = perfmap_sym(pm, i);
		long n;

		if (!s->size || s->addr < prev_end || s->addr + s->size > OPVM_USER_TOP ||
		    !text_utf8_valid(s->name))
			abort();
		for (const char *c = s->name; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				abort();
		if (perfmap_lookup(pm, s->addr + s->size / 2) != (long)i ||
		    perfmap_lookup(pm, s->addr) != (long)i)
			abort();
		/* the last bytes of its code: there, and none past it */
		n = perfmap_code(pm, s->addr + s->size - 1, buf, sizeof(buf));
		if (n != 1 && n != -1)
			abort();
		prev_end = s->addr + s->size;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct perfmap *pm = perfmap_parse_jitdump(data, size);

	if (!pm)
		return 0;	/* ENOMEM only */
	check_counts(pm);
	check_syms(pm);
	perfmap_free(pm);
	return 0;
}
