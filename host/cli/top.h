/* SPDX-License-Identifier: MIT */
/*
 * `opvm top` internals shared by its three files: host/cli/cmd-top.c (options,
 * --once), host/cli/top-view.c (the ncurses screen) and host/cli/top-profile.c
 * (the drill-down: `opvm attach` on one guest for a few seconds, then its
 * top symbols from `opvm report`).
 */
#ifndef OPVM_TOP_H
#define OPVM_TOP_H

#include <signal.h>
#include <sys/types.h>

#include "host/hoststats/hoststats.h"

struct top_opts {
	const char *uri;		/* -c or NULL: virt_default_uri() */
	int no_libvirt;
	double delay_s;			/* refresh interval */
	enum hs_sort sort;
	const char *filter;		/* substring of guest names, or NULL */
	unsigned profile_s;		/* drill-down length */
	const char *guest_root;		/* passed to opvm report */
	const char *system_map;
	const char *session_base;	/* where drill-down sessions go */
};

#define TOP_SYMS	10

struct top_sym {
	char symbol[128];
	char image[128];
	double percent;
};

/* One drill-down in progress or done. */
struct top_profile {
	char guest[PS_NAME_MAX];
	char dir[256];			/* its session directory (kept) */
	pid_t child;			/* attach, then report; 0 when idle */
	int stage;			/* 0 idle, 1 attach, 2 report, 3 done, -1 failed */
	double started;
	unsigned seconds;
	char msg[640];			/* what went wrong, or the summary */
	unsigned nr_syms;
	unsigned long long samples;
	struct top_sym syms[TOP_SYMS];
};

/* Starts profiling g (forks `opvm attach`).  0 or -errno with p->msg set. */
int top_profile_start(struct top_profile *p, const struct top_opts *o,
		      const struct hs_guest *g);
/* Advances a running drill-down without blocking; 1 when it changed. */
int top_profile_poll(struct top_profile *p, const struct top_opts *o);
/* Stops a running child (SIGINT: attach keeps what it took).  */
void top_profile_cancel(struct top_profile *p);

/* Full-screen view until q or a signal.  0, or -errno when the guests
 * could not be read (or there is no terminal: -ENOTTY). */
int top_view_run(struct hoststats *h, struct top_opts *o, volatile sig_atomic_t *stop);

/* A guest name (any local user's bytes) for the screen: escaped with
 * text_escape() into buf[cap], so that it can neither drive the
 * terminal nor break a row.  Returns buf. */
const char *top_name(char *buf, size_t cap, const char *name);

/* Whether g passes the filter. */
int top_match(const struct top_opts *o, const struct hs_guest *g);

/* "—" in a UTF-8 locale, "-" otherwise. */
const char *top_dash(void);

/* The "TOP EXITS" cell of g: "halt 80 other 3" or why there are none. */
void top_reasons_cell(const struct hs_guest *g, char *buf, size_t cap);

/* What the last reading left unread at its /proc caps (the processes of
 * other users choose how many there are), for a header line: "" when no
 * cap was hit, else "capped: 76 threads, 1 cmdline, 5 pids unread" (what
 * top's JSON says as "capped").  Returns buf. */
const char *top_capped_cell(const struct hs_capped *c, char *buf, size_t cap);

#endif /* OPVM_TOP_H */
