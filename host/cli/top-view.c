// SPDX-License-Identifier: MIT
/*
 * opvm top's full-screen view (ncurses): one row per guest, vCPU rows under
 * the expanded one, the drill-down's top symbols at the bottom.  The screen
 * redraws every 100 ms (keys, the profile's progress); the guests are read
 * every --delay seconds.
 */
#include <curses.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host/cli/top.h"
#include "lib/clock.h"
#include "lib/text.h"

struct view {
	struct hoststats *h;
	struct top_opts *o;
	char selected[PS_NAME_MAX];	/* follows the guest when the order changes */
	char expanded[PS_NAME_MAX];	/* whose vCPUs are shown, "" none */
	char filter[64];
	int editing;			/* typing a filter */
	char status[160];		/* one-line message */
	struct top_profile prof;
	struct hs_guest **gs;		/* visible guests, in order */
	size_t n;
};

/* The visible guests in sort order; keeps the selection valid. */
static void view_collect(struct view *v)
{
	struct hs_guest **all;
	size_t n = hoststats_guests(v->h, v->o->sort, &all), k = 0;
	int found = 0;

	free(v->gs);
	v->gs = calloc(n + 1, sizeof(*v->gs));
	if (!v->gs) {
		v->n = 0;
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (top_match(v->o, all[i])) {
			v->gs[k++] = all[i];
			found |= !strcmp(all[i]->name, v->selected);
		}
	v->n = k;
	if (!found && k)
		snprintf(v->selected, sizeof(v->selected), "%s", v->gs[0]->name);
}

static size_t view_sel_index(const struct view *v)
{
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->gs[i]->name, v->selected))
			return i;
	return 0;
}

static void fmt_rate(char *buf, size_t cap, int valid, double x)
{
	if (!valid)
		snprintf(buf, cap, "%s", top_dash());
	else if (x >= 1e6)
		snprintf(buf, cap, "%.1fM", x / 1e6);
	else if (x >= 1e4)
		snprintf(buf, cap, "%.0fk", x / 1e3);
	else
		snprintf(buf, cap, "%.0f", x);
}

static void draw_guest(int y, const struct hs_guest *g, int sel, int wide)
{
	char exits[16], reasons[64], io[40] = "", name[17];

	fmt_rate(exits, sizeof(exits), g->has_exits && !g->fresh, g->exits_ps);
	top_reasons_cell(g, reasons, sizeof(reasons));
	if (wide) {
		char d[16], n[16];

		fmt_rate(d, sizeof(d), g->has_io, (g->rd_bps + g->wr_bps) / 1024);
		fmt_rate(n, sizeof(n), g->has_io, (g->rx_bps + g->tx_bps) / 1024);
		snprintf(io, sizeof(io), " %9s %9s", d, n);
	}
	if (sel)
		attron(A_REVERSE);
	mvprintw(y, 0, "%-16s %-7s %4u %6.1f %6.1f %6.1f %8s%s  %-.*s",
		 top_name(name, sizeof(name), g->name), g->source,
		 g->nr_vcpus, g->cpu_pct, g->guest_pct, g->steal_pct, exits, io,
		 COLS > 66 + (int)strlen(io) ? COLS - 66 - (int)strlen(io) : 0, reasons);
	clrtoeol();
	if (sel)
		attroff(A_REVERSE);
}

static int draw_vcpus(int y, int maxy, const struct hs_guest *g)
{
	for (unsigned i = 0; i < g->nr_vcpus && y < maxy; i++) {
		const struct hs_vcpu *c = &g->vcpu[i];
		char exits[16];

		if (!c->tid && g->pid)
			continue;
		fmt_rate(exits, sizeof(exits), c->kvm.valid && !g->fresh, c->exits_ps);
		mvprintw(y++, 0, "  vcpu %-3d tid %-7d %11s %6.1f %6.1f %6.1f %8s", c->index, c->tid,
			 "", c->cpu_pct, c->guest_pct, c->steal_pct, exits);
		if (c->has_hw && c->hw_ps[PMC_CYCLES] > 0)
			printw("  IPC %.2f  LLC miss/s %.3g",
			       c->hw_ps[PMC_INSTRUCTIONS] / c->hw_ps[PMC_CYCLES], c->hw_ps[PMC_LLC_MISSES]);
		clrtoeol();
	}
	return y;
}

static int draw_profile(int y, const struct view *v)
{
	const struct top_profile *p = &v->prof;
	char guest[4 * PS_NAME_MAX + 1], msg[sizeof(p->msg)];

	if (!p->stage)
		return y;
	top_name(guest, sizeof(guest), p->guest);
	attron(A_BOLD);
	if (p->stage == 1)
		mvprintw(y++, 0, "profiling %s: %.0f/%u s (opvm attach)", guest,
			 ((double)clk_now_ns() / 1e9) - p->started, p->seconds);
	else if (p->stage == 2)
		mvprintw(y++, 0, "profiling %s: reading symbols (opvm report)", guest);
	else if (p->stage == 3)
		mvprintw(y++, 0, "top symbols of %s:", guest);
	else
		mvprintw(y++, 0, "profile of %s:", guest);
	attroff(A_BOLD);
	clrtoeol();
	for (unsigned i = 0; p->stage == 3 && i < p->nr_syms && y < LINES - 2; i++) {
		mvprintw(y++, 0, "  %6.2f%%  %-40.40s %.*s", p->syms[i].percent, p->syms[i].symbol,
			 COLS > 52 ? COLS - 52 : 0, p->syms[i].image);
		clrtoeol();
	}
	if (p->msg[0] && y < LINES - 1) {
		mvprintw(y++, 0, "  %.*s", COLS > 2 ? COLS - 2 : 0,
			 text_escape(msg, sizeof(msg), p->msg));
		clrtoeol();
	}
	return y;
}

/* The first line: guests, interval, sort and filter, and the /proc caps
 * when the last reading hit them (top_capped_cell()). */
static const char *head_line(const struct view *v, const char *capped, char *buf, size_t cap)
{
	snprintf(buf, cap, "opvm top  %zu guest%s%s%s  every %.1f s  sort: %s  filter: %s",
		 v->n, v->n == 1 ? "" : "s", capped[0] ? "  " : "", capped, v->o->delay_s,
		 hs_sort_name(v->o->sort), v->filter[0] ? v->filter : top_dash());
	return buf;
}

static void draw(struct view *v)
{
	int wide = COLS >= 100, y = 3, prof_rows = v->prof.stage == 3 ? (int)v->prof.nr_syms + 2
						 : v->prof.stage ? 2 : 0;
	int maxy = LINES - 1 - prof_rows;
	size_t sel = view_sel_index(v);
	const char *hw = NULL;
	char lv[1024], capped[96];

	for (size_t i = 0; i < v->n; i++)
		if (!v->gs[i]->has_hw && v->gs[i]->hw_why)
			hw = v->gs[i]->hw_why;

	erase();
	/* the caps first: a narrow screen cuts the end of the line */
	top_capped_cell(hoststats_capped(v->h), capped, sizeof(capped));
	mvprintw(0, 0, "%.*s", COLS > 0 ? COLS : 0, head_line(v, capped, lv, sizeof(lv)));
	if (!v->n)
		hw = "no guests";
	mvprintw(1, 0, "hw counters: %s (%s)%s%s", hw ? top_dash() : "IPC in vCPU rows",
		 hw ? hw : "guest mode",
		 hoststats_libvirt_error(v->h)[0] ? "  libvirt: " : "",
		 text_escape(lv, sizeof(lv), hoststats_libvirt_error(v->h)));
	attron(A_UNDERLINE);
	mvprintw(2, 0, "%-16s %-7s %4s %6s %6s %6s %8s%s  %s", "GUEST", "SOURCE", "VCPU", "CPU%",
		 "GUEST%", "STEAL%", "EXITS/s", wide ? " DISK KB/s  NET KB/s" : "", "TOP EXITS/s");
	attroff(A_UNDERLINE);
	for (size_t i = 0; i < v->n && y < maxy; i++) {
		draw_guest(y++, v->gs[i], i == sel, wide);
		if (!strcmp(v->gs[i]->name, v->expanded))
			y = draw_vcpus(y, maxy, v->gs[i]);
	}
	if (!v->n)
		mvprintw(y++, 0, "(no guests%s)", v->filter[0] ? " match the filter" : " on this host");
	draw_profile(maxy, v);
	if (v->editing)
		mvprintw(LINES - 1, 0, "filter: %s_", v->filter);
	else
		mvprintw(LINES - 1, 0, "%s", v->status[0] ? v->status :
			 "q quit  arrows select  Enter vCPUs  c t x i n sort  / filter  + - interval  p profile");
	clrtoeol();
	refresh();
}

static void view_profile(struct view *v)
{
	size_t sel = view_sel_index(v);

	if (!v->n)
		return;
	if (v->prof.stage == 1 || v->prof.stage == 2) {
		snprintf(v->status, sizeof(v->status), "already profiling %s", v->prof.guest);
		return;
	}
	top_profile_start(&v->prof, v->o, v->gs[sel]);
}

/* A key while typing a filter. */
static void view_filter_key(struct view *v, int ch)
{
	size_t l = strlen(v->filter);

	if (ch == '\n' || ch == KEY_ENTER || ch == 27) {
		v->editing = 0;
	} else if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && l) {
		v->filter[l - 1] = '\0';
	} else if (ch >= 32 && ch < 127 && l + 1 < sizeof(v->filter)) {
		v->filter[l] = (char)ch;
		v->filter[l + 1] = '\0';
	}
	v->o->filter = v->filter;
}

/* Handles one key; returns 1 to quit. */
static int view_key(struct view *v, int ch)
{
	size_t sel = view_sel_index(v);

	if (v->editing) {
		view_filter_key(v, ch);
		return 0;
	}
	v->status[0] = '\0';
	switch (ch) {
	case 'q': case 'Q':
		return 1;
	case KEY_UP: case 'k':
		if (sel > 0)
			snprintf(v->selected, sizeof(v->selected), "%s", v->gs[sel - 1]->name);
		break;
	case KEY_DOWN: case 'j':
		if (sel + 1 < v->n)
			snprintf(v->selected, sizeof(v->selected), "%s", v->gs[sel + 1]->name);
		break;
	case '\n': case KEY_ENTER: case 'v':
		if (v->n)
			snprintf(v->expanded, sizeof(v->expanded), "%s",
				 strcmp(v->expanded, v->gs[sel]->name) ? v->gs[sel]->name : "");
		break;
	case 'c': v->o->sort = HS_SORT_CPU; break;
	case 't': v->o->sort = HS_SORT_STEAL; break;
	case 'x': v->o->sort = HS_SORT_EXITS; break;
	case 'i': v->o->sort = HS_SORT_IO; break;
	case 'n': v->o->sort = HS_SORT_NAME; break;
	case '/':	/* a new filter, as top(1) asks for one */
		v->editing = 1;
		v->filter[0] = '\0';
		break;
	case '+':
		v->o->delay_s = v->o->delay_s < 60 ? v->o->delay_s * 2 : 120;
		break;
	case '-':
		v->o->delay_s = v->o->delay_s > 0.5 ? v->o->delay_s / 2 : 0.25;
		break;
	case 'p':
		view_profile(v);
		break;
	default:
		break;
	}
	return 0;
}

int top_view_run(struct hoststats *h, struct top_opts *o, volatile sig_atomic_t *stop)
{
	struct view v = { .h = h, .o = o };
	double next = 0;
	int err = 0;

	if (o->filter)
		snprintf(v.filter, sizeof(v.filter), "%s", o->filter);
	o->filter = v.filter;
	if (!initscr())
		return -ENOTTY;
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	curs_set(0);
	timeout(100);
	while (!*stop) {
		int ch;

		if (((double)clk_now_ns() / 1e9) >= next) {
			err = hoststats_refresh(h);
			if (err == -EINTR && *stop)
				err = 0;	/* stopped by a signal mid-refresh */
			if (err)
				break;
			next = ((double)clk_now_ns() / 1e9) + o->delay_s;
		}
		top_profile_poll(&v.prof, o);
		view_collect(&v);
		draw(&v);
		ch = getch();
		if (ch != ERR && view_key(&v, ch))
			break;
		if (ch != ERR)
			view_collect(&v);
	}
	top_profile_cancel(&v.prof);
	endwin();
	free(v.gs);
	return err;
}
