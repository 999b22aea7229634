/* SPDX-License-Identifier: MIT */
/*
 * One profiling session: what `opvm run` and `opvm attach` share.  The
 * session options, the collector, a backend's whole life cycle
 * (vmm/backend.h: prepare, open each guest, sample, finish, close), the stop
 * signals, and the closing summary.  A command parses its options (the
 * session's, its own, the backend's), finds its guests, and calls
 * session_run().  Command code: it prints.
 */
#ifndef OPVM_SESSION_H
#define OPVM_SESSION_H

#include <limits.h>
#include <stddef.h>

#include "host/collect/collector.h"
#include "host/collect/store.h"
#include "vmm/backend.h"

struct vm_monitor;

struct session_opts {
	struct backend_common common;	/* -e, -F, -d, --duration, "--" args */
	unsigned separate;		/* enum opvm_separate */
	int separate_set;
	int append;			/* --append-samples */
	unsigned sync_ms;		/* 0: 1000 */
	unsigned window_s;		/* --window; 0: none */
	struct store_limits limits;	/* --max-files ...; 0: defaults */
	uint64_t model_max_bytes;	/* --max-model-mem; 0: default */
	const char *from_exec;		/* --from-exec NAME */
	int from_workload;		/* --from-workload */
	char workload_exec[64];		/* its first workload's name, without
					 * arguments: what --from-workload
					 * waits for */
	int no_image_symbols;		/* --no-image-symbols */
	int no_fetch;			/* --no-fetch */
	int no_python;			/* --no-python: no Python frames read */
	int introspect;			/* --introspect: enum introspect_mode */
	const char *fetch_cache;	/* --fetch-cache DIR */
	uint64_t fetch_max_file, fetch_max_session, fetch_max_cache;	/* 0: defaults */
	uint64_t fetch_max_ksyms;	/* 0: the default */
	int umask;			/* --umask; -1: not given */
	struct collector_symbols sym;	/* --guest-root, --system-map, --vmlinux */
	struct sampler_callgraph_cfg callgraph;	/* -g, --call-graph */
	char sym_buf[COLLECTOR_MAX_ROOTS + 2][PATH_MAX + 136];	/* their absolute paths */
	size_t sym_used;
};

/* The session's options (lib/optdef.h), bound to a struct session_opts:
 * "session" in run's and attach's --help (host/cli/session-options.c). */
extern const struct opt_def session_options[];

void session_opts_init(struct session_opts *o);

/* How a command (run, attach) parses its argv with session_parse_argv(). */
struct session_cli {
	const char *command;		/* "run", "attach": for messages */
	enum backend_kind kind;		/* which backends it offers */
	const char *select;		/* the long option naming the backend:
					 * "vmm", "sampler" */
	const char *header;		/* usage lines and what it does */
	const struct opt_def *options;	/* the command's own, zero-terminated,
					 * bound to *arg; must include select */
	/* An argument that is not an option, in order: 0, or -1 after
	 * printing a usage error. */
	int (*argument)(void *arg, const char *value);
	void *arg;			/* the command's options struct; NULL:
					 * its rows are only listed */
};

/*
 * Parses argv by the option tables: the session's, the command's, and the
 * chosen backend's (the select option may come anywhere, so a first pass
 * looks for it).  The arguments after "--" go to o->common.extra.  On
 * return *b is the backend and *bst its new state (free it with
 * (*b)->free, also after help).  Returns 0, 1 after printing --help (every
 * backend's options), or 2 after printing a usage error.
 */
int session_parse_argv(const struct session_cli *cli, int argc, char **argv,
		       struct session_opts *o, const struct backend_ops **b, void **bst);

/* The --help text of a command: header (the usage line and what it does),
 * the backends it offers, its options, each backend's, the session's. */
void session_usage_print(FILE *f, const struct session_cli *cli);

/*
 * Profiles n guests with backend b (state bst, options parsed): prepares
 * it, opens every guest (through mons[i] for an attach backend; mons is
 * NULL and n is 1 for a launch backend), samples until Ctrl-C, --duration,
 * or every guest has gone, finishes, prints the summary and closes.  The
 * samples taken are kept whatever fails.  Returns the exit code: 0, 1 for
 * a failure, 2 for a usage error.
 */
int session_run(const struct backend_ops *b, void *bst, struct session_opts *o,
		struct vm_monitor *const *mons, size_t n);

/* Prints the end-of-session summary (host/cli/summary.c): per target and app,
 * store, fetch, DWARF and introspection counters from o's session dir. */
struct backend_setup;
struct backend_target;
void session_summary(const struct backend_ops *b, void *bst,
		     const struct session_opts *o,
		     const struct backend_setup *setup,
		     const struct backend_target *t, size_t n, uint64_t elapsed_ns);

#endif /* OPVM_SESSION_H */
