/* SPDX-License-Identifier: MIT */
/*
 * The backend registry: every way opvm can get samples out of a guest is
 * one struct backend_ops, listed in the one array in vmm/backend.c.
 *
 *   opvm run    --vmm=NAME       launch backends   ("qemu" default, "kvm")
 *   opvm attach --sampler=NAME   attach backends   ("gdbstub", "perf"; without
 *                                --sampler, the one whose probe() takes
 *                                the guest, one that never stops it first:
 *                                perf for KVM guests, gdbstub for TCG ones)
 *
 * A backend is {name, its options, launch or attach, sampler}.  Adding one
 * is one new file in vmm/ defining a `const struct backend_ops` and one
 * entry in the array; the commands and the profiling session (host/) need
 * no edit.
 *
 * Life cycle, as the session (host/cli/session.c) drives it:
 *
 *   st = new()                               defaults
 *   parse(st, opt, arg)                      once per option of its table
 *   prepare(st, common, &setup)              check options, resolve -e/-F;
 *                                            setup says mode, rate, events
 *   for each guest:  open(st, mon, t)        launch it (mon == NULL) or
 *                                            attach to it (mon: its monitor);
 *                                            fills t: sampler, vCPUs, channel
 *   ... collector created, t->sampler->ops->start(sink) ... sampling ...
 *   ... t->sampler->ops->stop() ...
 *   for each guest:  finish(st, t)           after sampling: stop or reap a
 *                                            guest we launched, say how it ended
 *                    summary(st, t, totals, out)
 *                    close(st, t)            free what open() made
 *   free(st)
 *
 * Errors: every op that can fail returns 0 or -errno and writes a one-line
 * message, saying what to do next, into err[errlen]; -EINVAL from parse()
 * and prepare() is a usage error (exit code 2).  Backends never print to
 * stderr (only main() turns errors into messages): things the user should know that are not errors
 * go into notes (backend_note()), which the session prints as warnings.
 * summary() writes its lines to the stream it is given.
 *
 * Threads: every op runs in the command's main thread.  What the sampler
 * does on its own threads is its business (vmm/sampler.h).
 */
#ifndef OPVM_BACKEND_H
#define OPVM_BACKEND_H


#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/optdef.h"
#include "lib/sample.h"
#include "vmm/sampler.h"

struct guestmem;
struct sampler;
struct vm_monitor;

enum backend_kind {
	BACKEND_LAUNCH,		/* opvm run: boots the guest itself */
	BACKEND_ATTACH,		/* opvm attach: a guest that already runs */
};

/* How an attach backend samples, for choosing one by what it does rather
 * than by name (backend_pick(): one that never stops the guest first; the
 * exporter refuses one that stops it unless told). */
enum backend_flags {
	BACKEND_STOPS_GUEST = 1u << 1,	/* stops every vCPU at each sample */
};

/* A running guest as an attach backend's probe() sees it: what the
 * command knows before any backend touches it. */
struct backend_guest {
	int kvm;		/* 1: runs under KVM, 0: under TCG, -1: not asked
				 * (--sampler named the backend) */
	int qemu;		/* 1: a QEMU with a monitor (libvirt, QMP); 0: a
				 * built-in VMM process (`opvm run --vmm=kvm`,
				 * found by its pid: no monitor, no gdbstub) */
};

/* The session-wide options every backend sees (parsed by the command). */
struct backend_common {
	const char *event_specs[OPVM_MAX_EVENTS];	/* -e, in order */
	unsigned nr_event_specs;
	unsigned rate;			/* -F read as a decimal 1..10000 by the
					 * command, 0 if not given; the backend
					 * checks its own range */
	const char *session_dir;	/* never NULL */
	uint64_t duration_ms;		/* 0: until the guest goes */
	char *const *extra;		/* run: the arguments after "--" */
	unsigned nr_extra;
};

/* One event of the session, as the sample files name it. */
struct backend_event {
	char name[32];
	uint64_t count;			/* sample period */
	uint32_t unit_mask;
};

/* What prepare() tells the session about the samples to come. */
struct backend_setup {
	const char *mode;		/* "gdbstub-timer", "kvm-timer", "kvm-pmu",
					 * ...: every report shows it */
	unsigned rate_hz;		/* timer modes: ticks per second */
	struct backend_event events[OPVM_MAX_EVENTS];
	unsigned nr_events;		/* 0: one TIMER event */
	/* Where the guest's symbols are when the user names none (the test
	 * image's root, System.map and vmlinuz), or NULL: session.json keeps
	 * them for report/annotate/export. */
	const char *guest_root, *system_map, *vmlinux;
	/* The test image's workload opvm run boots into (--workload), or
	 * NULL: --from-workload starts sampling when it starts. */
	const char *workload;
	char notes[512];		/* warnings for the user, one per line */
};

/* One guest being profiled.  The session zeroes it and sets chan_fd to -1
 * (and, for attach, name/how from the monitor) before open(). */
struct backend_target {
	char name[128];			/* the guest's tree name */
	const char *how;		/* "booted by opvm run", "libvirt domain", ... */
	struct sampler *sampler;	/* made by open(), freed by close() */
	unsigned nr_vcpus;		/* rings the sampler wants */
	int chan_fd;			/* the guest's org.opvm.0 channel, or -1;
					 * the session hands it to the collector */
	int (*reconnect)(void *arg);	/* new channel fd after EOF, or -1; may
					 * be NULL; called from the collector's
					 * thread */
	void *reconnect_arg;
	void *priv;			/* the backend's per-guest state */
	/* The guest's RAM for introspection (vmm/introspect/), or NULL: none.
	 * Owned by the backend (freed by close(), after the collector). */
	struct guestmem *mem;
	/* --call-graph: what open() gives the sampler, or NULL (none); set
	 * by the session only for a backend whose ops say callgraph */
	const struct sampler_callgraph_cfg *callgraph;
	char intro[512];		/* shown on a terminal before sampling */
	char notes[1024];		/* warnings for the user, one per line */
};

/* A count from session.json: its value, and how to print it (">= 2^63"
 * once saturated). */
struct backend_count {
	uint64_t n;
	char s[24];
};

/* Numbers the session gathered for summary(): from the sample files and
 * session.json the collector wrote, and its own clock.  The session prints
 * the store's own lines and the top applications after summary(). */
struct backend_totals {
	uint64_t samples;		/* in files */
	struct backend_count kernel, user;
	struct backend_count lost_overflow;	/* rings full */
	struct backend_count lost_no_process, lost_no_mapping;
	struct backend_count guest_lost;	/* channel records the guest module dropped */
	uint64_t elapsed_ns;		/* sampler start to stop */
};

struct backend_ops {
	const char *name;		/* what --vmm= / --sampler= takes */
	enum backend_kind kind;
	const char *help;		/* one line for `opvm run --help` */
	int callgraph;			/* 1: takes --call-graph fp (it stops
					 * the vCPU at each sample) */
	unsigned flags;			/* enum backend_flags: how it samples */
	/* Attach backends: whether this one can sample g, judged from what g
	 * says (a field that is -1 is no reason to refuse).  0, or -ENOTSUP
	 * with a one-line reason in err that says what to use instead.  NULL:
	 * any guest. */
	int (*probe)(const struct backend_guest *g, char *err, size_t errlen);
	/* The backend's own options (lib/optdef.h), ending with a zeroed
	 * entry, each row bound to a field of the state new() returns (the
	 * session parses them into it).  The command's --help, man page and
	 * completion show them.  May be NULL. */
	const struct opt_def *options;

	/* Backend state with defaults; NULL and errno on failure. */
	void *(*new)(void);
	/* After all options: checks them, resolves events and rate. */
	int (*prepare)(void *st, const struct backend_common *c,
		       struct backend_setup *out, char *err, size_t errlen);
	/* Launches the guest (mon is NULL) or attaches to one (mon is its
	 * monitor, vmm/guest/monitor.h; valid until close()).  On failure t may
	 * be half filled: the session still calls close(). */
	int (*open)(void *st, struct vm_monitor *mon, struct backend_target *t,
		    char *err, size_t errlen);
	/* Sampling has stopped.  Quits a guest the backend launched if it
	 * still runs, and says whether the guest ended badly (-errno). */
	int (*finish)(void *st, struct backend_target *t, char *err, size_t errlen);
	/* The closing lines about t: how samples were taken, and counts. */
	void (*summary)(void *st, const struct backend_target *t,
			const struct backend_totals *tot, FILE *out);
	/* NULL-safe on a half-opened t; frees the sampler. */
	void (*close)(void *st, struct backend_target *t);
	void (*free)(void *st);		/* NULL-safe */
};

/* The registry, in the order --help lists it; the first of each kind is
 * what backend_find(kind, NULL) returns (the run default). */
extern const struct backend_ops *const backends[];
extern const size_t nr_backends;

/* The backend of that kind and name (NULL: the default of that kind), or
 * NULL if there is none. */
const struct backend_ops *backend_find(enum backend_kind kind, const char *name);

/* The backend of that kind for guest g: the first in the registry whose
 * probe() takes it, one that never stops the guest before one that does.
 * NULL if none can, with each one's reason in err[errlen] ("NAME: why",
 * joined by "; "). */
const struct backend_ops *backend_pick(enum backend_kind kind, const struct backend_guest *g,
				       char *err, size_t errlen);

/* Appends one line to notes[size] (a backend_setup's or backend_target's
 * notes), truncating when full. */
void backend_note(char *notes, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A backend_target reconnect callback for a unix-socket channel: arg is
 * the socket's path (it must outlive the collector).  The fd, or -1. */
int backend_reconnect_unix(void *arg);

/* Connects t to its guest's org.opvm.0 channel at path (a unix socket that
 * must outlive the collector, it reconnects there): t->chan_fd and its
 * reconnect callback set.  A channel that cannot be reached is a note, not
 * an error: the guest is profiled without process names. */
void backend_connect_channel(struct backend_target *t, const char *path);

#endif /* OPVM_BACKEND_H */
