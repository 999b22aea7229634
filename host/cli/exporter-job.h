/* SPDX-License-Identifier: MIT */
/*
 * Inside the exporter's profiler (host/cli/exporter-http.h): the guests
 * a profile can be asked for (exporter-guests.c), and one profile's job
 * (exporter-job.c): its slot, its worker thread, its `opvm attach` and
 * `opvm export` children, its directory.  exporter-http.c is the HTTP
 * side: requests, replies, metrics.
 */
#ifndef OPVM_EXPORTER_JOB_H
#define OPVM_EXPORTER_JOB_H

#include <jansson.h>
#include <limits.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "host/cli/exporter-http.h"
#include "host/hoststats/procstat.h"
#include "vmm/backend.h"

/* A QEMU process of this host, and whether the exporter may profile it. */
struct pguest {
	struct ps_qemu q;
	uid_t owner;		/* the process's user (its sockets' too) */
	/* the attach backend that samples it (backend_pick(): perf for
	 * KVM, gdbstub for TCG); never NULL after pguest_scan() */
	const struct backend_ops *sampler;
	char why[256];		/* "" if it may be profiled, else why not */
};

/*
 * The processes a scan found not to be QEMU, for a caller that scans again
 * and again (the continuous sampler, every second): the next scan reads
 * the stat of the other pids only.  Reading every process's stat and
 * schedstat each second was most of the exporter's own CPU.  Kept only
 * for processes older than a few seconds (a fork about to exec QEMU is
 * read again), and all forgotten every few scans (a pid reused, or a
 * process that exec'd QEMU later).  Zeroed to start; pguest_seen_free()
 * frees what it holds.
 */
struct pguest_seen {
	int *pids;		/* sorted */
	size_t nr;
	unsigned scans;
};

void pguest_seen_free(struct pguest_seen *seen);	/* NULL-safe */

/* The QEMU processes of this host, judged under cfg; *out is malloc'd
 * (free() it).  seen: NULL, or what the last scans learnt (updated).
 * Returns how many, or -errno. */
int pguest_scan(const struct pprof_cfg *cfg, struct pguest_seen *seen,
		struct pguest **out);

/*
 * Which of gs[0..n) a request for guest name (and owner, a user name or
 * uid, or NULL) means.  A name is any local user's to give a QEMU: guests
 * are told apart by name and owner.  Without owner, if a guest of that name
 * runs as root or as the exporter's own user, only those count, so that
 * another user's namesake can neither stand in for it nor make it
 * ambiguous.  Returns the index, -ENOENT (none), -EEXIST (several: owners
 * lists theirs, for the 409), -EINVAL (an unknown owner).
 */
int pguest_match(const struct pguest *gs, int n, const char *name, const char *owner,
		 char *owners, size_t ownlen);

/* The start of an `opvm attach` command line for g, the same for a
 * profile and for a continuous sampler: which QEMU (--qemu-pid, whose
 * monitor's answers attach checks), its monitor, name, channel and
 * sampler.  Strings in buf, which must live as long as argv.  Returns
 * the number of arguments (at most 12). */
int pguest_attach_argv(const struct pprof *p, const struct pguest *g, char **argv,
		       char buf[2][32]);

/* owner= as a uid: a user name, or its number.  0 or -EINVAL. */
int pguest_owner_uid(const char *owner, uid_t *uid);

/* The owner's user name (or number) into buf. */
const char *pguest_owner_name(const struct pguest *g, char *buf, size_t len);

enum pprof_refusal {
	PREF_BUSY,		/* max_profiles reached (429) */
	PREF_GUEST_BUSY,	/* that guest is being profiled (429) */
	PREF_STOPS_GUEST,	/* TCG without allow_gdbstub (403) */
	PREF_UNKNOWN_GUEST,	/* no such guest (404) */
	PREF_BAD_REQUEST,	/* bad parameter, path or method (400, 404, 405) */
	PREF_NOT_ITS_QEMU,	/* its monitor describes another process (403) */
	PREF_NR,
};

struct pprof {
	struct pprof_cfg cfg;
	char root[PATH_MAX];	/* the private directory */
	int stop_pipe[2];	/* readable once pprof_stop() began */
	pthread_mutex_t lock;	/* everything below */
	pthread_cond_t cond;	/* a job done, a connection resumed */
	struct pjob **active;	/* cfg.max_profiles slots; NULL: free */
	unsigned nr_active;
	unsigned suspended;	/* connections not resumed yet */
	int stopping;
	struct pcont *cont;	/* --continuous, or NULL */
	/* metrics */
	uint64_t served, errors, aborted, refused[PREF_NR];
	double seconds, cpu_attach, cpu_export;
};

/* One profile, from its request to its reply. */
struct pjob {
	struct pprof *p;
	struct MHD_Connection *c;
	int client_fd;		/* polled for the client going away */
	int http11;		/* an HTTP/1.1 request: a 1xx may go first */
	int probed;		/* the client half-closed: the 1xx went */
	int suspended;		/* c is suspended until the worker ends */
	int thread_started;
	pthread_t thread;
	struct pguest g;
	unsigned asked, seconds;	/* seconds asked, and after clipping */
	char event[65], callgraph[8];	/* "" if not asked */
	char owner[64];		/* owner= asked, or "" */
	char dir[PATH_MAX];	/* its directory under root */
	/* --continuous: the profile is the store's windows of
	 * [since_ms, until_ms) (Unix ms) in session directory store */
	int from_store;
	unsigned windows;		/* in the range when asked */
	int64_t since_ms, until_ms;
	char store[PATH_MAX];
	int64_t ready_ms;	/* when it should be done (Retry-After) */
	/* the outcome, set by the worker before it ends */
	int done;
	unsigned status;	/* HTTP status */
	char msg[768];		/* one line, if not 200 */
	int fd;			/* the profile (unlinked), -1 */
	uint64_t size;
};

/* Takes a slot for j (the guest's, and one of max_profiles), suspends its
 * connection if suspend (from the access handler), and starts its worker.
 * 0: the outcome comes in j (after the resume, or pjob_wait()), also when
 * the worker could not start (503); else the HTTP status to refuse it with
 * at once (429: *retry_after seconds; 503: stopping), nothing started,
 * and why in j->msg. */
unsigned pjob_start(struct pjob *j, int suspend, unsigned *retry_after);

/* Waits until j's worker is done (a daemon with a thread per
 * connection, which cannot suspend). */
void pjob_wait(struct pjob *j);

/* Joins j's worker and frees j (its profile fd closed if still there).
 * NULL-safe. */
void pjob_free(struct pjob *j);

/* ---- exporter-continuous.c: --continuous ---- */

/* The store opened (private, made if missing), what it holds pruned, and
 * the thread that keeps a sampler on every guest started.  0, or -errno
 * after printing why. */
int pcont_start(struct pprof *p);
/* Waits for the thread (ended by the stop pipe: pprof_stop()), whose
 * samplers end first; frees it.  NULL-safe. */
void pcont_stop(struct pprof *p);
/* The continuous metrics into f; under p->lock. */
void pcont_metrics(struct pprof *p, FILE *f);
/* The store's sizes, caps and what they refused, by guest, for
 * /debug/pprof/guests' "store"; under p->lock.  NULL: out of memory. */
json_t *pcont_json(struct pprof *p);
/* The cap of one window of one guest, open or sealed, in bytes (attach's
 * --max-disk): --max-store over the windows --retention implies and two
 * for each of the most guests sampled at once (the reserve), so that those
 * all fit in --max-store together. */
uint64_t pcont_window_cap(const struct pprof_cfg *cfg);
/* The store's session directory of a guest into dir: live's if it runs
 * (a guest pguest_match() picked), else the one of a guest gone that name
 * and owner (or NULL, as pguest_match()) name.  0, -ENOENT, -EEXIST
 * (several owners), -EINVAL (an unknown owner). */
int pcont_find(struct pprof *p, const struct pguest *live, const char *name,
	       const char *owner, char *dir, size_t len);

#endif /* OPVM_EXPORTER_JOB_H */
