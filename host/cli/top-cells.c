// SPDX-License-Identifier: MIT
/*
 * The cells opvm top's two views share: the --once text table (cmd-top.c)
 * and the full-screen view (top-view.c) fill their columns alike.
 */
#include <langinfo.h>
#include <stdio.h>
#include <string.h>

#include "host/cli/top.h"
#include "host/hoststats/hoststats.h"
#include "host/hoststats/kvmstat.h"
#include "lib/array.h"
#include "lib/text.h"

const char *top_dash(void)
{
	static const char *dash;

	if (!dash) {
		const char *cs = nl_langinfo(CODESET);

		dash = cs && !strcmp(cs, "UTF-8") ? "\u2014" : "-";
	}
	return dash;
}

const char *top_name(char *buf, size_t cap, const char *name)
{
	return text_escape(buf, cap, name);
}

int top_match(const struct top_opts *o, const struct hs_guest *g)
{
	return !o->filter || !o->filter[0] || strstr(g->name, o->filter);
}

void top_reasons_cell(const struct hs_guest *g, char *buf, size_t cap)
{
	unsigned top[3], n;
	size_t off = 0;

	buf[0] = '\0';
	if (g->stale) {
		snprintf(buf, cap, "(no answer)");
		return;
	}
	if (!g->has_exits) {
		snprintf(buf, cap, "%s", g->accel == PS_ACCEL_KVM ? "(no counters)" : "(tcg)");
		return;
	}
	if (g->fresh) {
		snprintf(buf, cap, "(first reading)");
		return;
	}
	n = hoststats_top_reasons(g, top, 3);
	for (unsigned i = 0; i < n; i++) {
		char one[48];
		int l = snprintf(one, sizeof(one), "%s%s %.0f", i ? " " : "",
				 kvmstat_reason_label(top[i]), g->reason_ps[top[i]]);

		if (l < 0 || off + (size_t)l >= cap)
			break;		/* whole reasons only */
		memcpy(buf + off, one, (size_t)l + 1);
		off += (size_t)l;
	}
}

const char *top_capped_cell(const struct hs_capped *c, char *buf, size_t cap)
{
	const struct { unsigned n; const char *what; } parts[] = {
		{ c->threads_unread, "thread" },
		{ c->cmdlines_cut, "cmdline" },
		{ c->pids_unread, "pid" },
	};
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
		int l;

		if (!parts[i].n)
			continue;
		l = snprintf(buf + off, cap - off, "%s%u %s%s", off ? ", " : "capped: ",
			     parts[i].n, parts[i].what, parts[i].n == 1 ? "" : "s");
		if (l < 0 || (size_t)l >= cap - off)
			break;
		off += (size_t)l;
	}
	if (off && off + sizeof(" unread") <= cap)
		memcpy(buf + off, " unread", sizeof(" unread"));
	return buf;
}
