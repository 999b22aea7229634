/* SPDX-License-Identifier: MIT */
/*
 * What `opvm run` (QEMU) and `opvm attach` share: the sampling options,
 * the profiling session around the collector, and the closing summary.
 * Implemented in host/cmd-attach.c.  Command code: it prints.
 */
#ifndef OPVM_CMD_QEMU_H
#define OPVM_CMD_QEMU_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "host/store.h"

struct sampler;
struct cguest;

struct qprof_opts {
	const char *session_dir;	/* default ./opvm_data */
	unsigned separate;		/* enum opvm_separate */
	int separate_set;
	int append;
	unsigned rate_hz;		/* 0: default */
	const char *event;		/* -e spec, or NULL */
	uint64_t duration_ms;		/* 0: until the guests go */
	unsigned sync_ms;
	struct store_limits limits;	/* --max-files ...; 0: defaults */
	uint64_t model_max_bytes;	/* --max-model-mem; 0: default */
	int umask_set;			/* --umask given */
	unsigned umask;
};

/* One guest being profiled. */
struct qprof_target {
	char name[128];			/* tree name */
	struct sampler *sampler;	/* the caller frees it, after qprof_collect() */
	int chan_fd;			/* -1: none; qprof_collect() takes it */
	int (*reconnect)(void *arg);	/* may be NULL */
	void *reconnect_arg;
	unsigned nr_vcpus;
	const char *how;		/* "boot", "libvirt domain", "QMP socket" */
};

/* Options shared by run and attach.  Returns 1 if argv[*i] (and maybe its
 * argument, *i advanced) was one of ours, 0 if not, -1 after printing a
 * usage error. */
int qprof_parse_opt(struct qprof_opts *o, int argc, char **argv, int *i);

/* Only the session-tree options (--max-files, --max-dirs, --max-mapped,
 * --max-disk, --umask), for commands with parsers of their own.  Returns
 * as qprof_parse_opt(). */
int qprof_parse_tree_opt(struct qprof_opts *o, int argc, char **argv, int *i);
/* The process umask for the session tree: --umask, else 077 (private).
 * Call before anything of the session is created. */
void qprof_apply_umask(const struct qprof_opts *o);
/* The --help lines for the options above. */
extern const char qprof_tree_usage[];

/* Turns -F / -e into the rate; prints and returns -1 for an event the
 * gdbstub sampler cannot take. */
int qprof_resolve_rate(struct qprof_opts *o);

/* A qprof_target reconnect callback: arg is the channel's unix socket path
 * (it must outlive the collector, which calls this after EOF).  The new fd,
 * or -1. */
int qprof_reconnect_unix(void *arg);

/* SIGINT/SIGTERM set *flag; SIGPIPE is ignored. */
void qprof_signals(volatile sig_atomic_t *flag);

/*
 * Creates the collector, adds every target (the collector reads its
 * channel and passes HELLO to its sampler), starts the samplers, runs until *stop, the duration, or every
 * guest has gone, then syncs and closes the collector.  Returns 0, or -1
 * after printing what failed (samples taken so far are kept).
 */
int qprof_collect(const struct qprof_opts *o, struct qprof_target *t, size_t n,
		  volatile sig_atomic_t *stop);

/* Prints the summary of each target from its sample files: how samples
 * were taken, samples, lost, top applications, and how to report. */
void qprof_summary(const struct qprof_opts *o, struct qprof_target *t, size_t n,
		   const char *report_hint);

#endif /* OPVM_CMD_QEMU_H */
