// SPDX-License-Identifier: MIT
/*
 * What the two halves of the events database share: events/events.c parses
 * the data files, events/event-spec.c parses -e specs against them.  Not for
 * use outside events/.
 */
#ifndef OPVM_EVENTS_PRIV_H
#define OPVM_EVENTS_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "events/events.h"

#define EV_MAX_FILE	(1u << 20)	/* bytes per data file */
#define EV_MAX_LINE	4096
#define EV_MAX_ENTRIES	4096		/* events or unit-mask values per file */
#define EV_MAX_SPEC	256
#define EV_DEFAULT_COUNT 100000

/* Unit-mask groups of one file.  Events point into groups[], which is never
 * reallocated once that file's events are parsed. */
struct um_table {
	struct opvm_unit_mask *groups;
	size_t nr;
};

struct events_db {
	char *family;
	char *source;
	struct opvm_event *events;
	size_t nr_events, cap_events;
	/* one per file pair loaded: the family, generic, software */
	struct um_table tables[3];
	char *file_ids[3];
	size_t nr_files;
};

int parse_u64(const char *s, uint64_t *out);
uint32_t um_all_bits(const struct opvm_unit_mask *g);
int um_has_value(const struct opvm_unit_mask *g, uint32_t v);

#endif /* OPVM_EVENTS_PRIV_H */
