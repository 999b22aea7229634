/* SPDX-License-Identifier: MIT */
/*
 * Guest profiles on demand from `opvm exporter` (host/cli/cmd-exporter.c),
 * in the pull model of continuous profilers (Parca, Grafana Alloy's
 * pyroscope.scrape, `go tool pprof URL`):
 *
 *   GET /debug/pprof/guests    the QEMU guests of this host as JSON: each
 *                              with the sampler it would get, and why not
 *   GET /debug/pprof/profile?guest=NAME&seconds=N[&event=E][&callgraph=fp|dwarf]
 *                              N seconds of that guest, gzipped pprof (what
 *                              `opvm export --format pprof` writes)
 *
 * A profile is an `opvm attach` session and then an `opvm export`, each a
 * child process (host/cli/subcmd.h): a session sets signal handlers and a
 * umask and reads a guest's bytes, none of which may reach the server that
 * answers /metrics.  Sessions go to a private directory (0700) made here,
 * one subdirectory each, bounded by attach's caps, and removed before the
 * profile is sent.  Limits: KVM guests get the perf sampler, which never
 * stops them; TCG guests only the gdbstub, which stops them at every sample,
 * so they are refused (403) unless allow_gdbstub; one profile per guest and
 * max_profiles at once (429 with Retry-After past them); seconds clipped to
 * max_seconds (the X-Opvm-Clipped header says so); a client that goes away
 * ends its session.  Bad requests get one line of text (400, 404, 405) and
 * start nothing.
 *
 * Threads: a worker per profile watches its children and its client; the
 * HTTP connection is suspended meanwhile (libmicrohttpd's suspend/resume),
 * or waits in its own thread when the daemon runs one per connection, so a
 * profile never holds up a /metrics scrape.
 */
#ifndef OPVM_EXPORTER_HTTP_H
#define OPVM_EXPORTER_HTTP_H

#include <stdint.h>

#include "lib/optdef.h"
#include <microhttpd.h>

#define PPROF_PREFIX		"/debug/pprof/"
/* What the daemon must be started with (MHD_start_daemon's flags). */
#define PPROF_MHD_FLAGS		MHD_ALLOW_SUSPEND_RESUME

struct pprof_cfg {
	unsigned max_profiles;	/* at once; 0: the endpoints are off */
	unsigned max_seconds;	/* longest profile */
	int allow_gdbstub;	/* TCG guests too (stopped at every sample) */
	const char *dir;	/* where the private directory goes; NULL:
				 * $TMPDIR, else /tmp */
	const char *uri;	/* libvirt URI for libvirt's guests; NULL: default */
	int no_libvirt;		/* libvirt's guests cannot be profiled */
	/* --continuous (host/cli/exporter-continuous.c): every guest sampled
	 * all the time into a rolling store, profiles served from it */
	int continuous;
	unsigned rate_hz;	/* samples a second a vCPU, default 19 */
	unsigned window_s;	/* default 10 */
	unsigned retention_s;	/* default 3600 */
	uint64_t max_store;	/* bytes of sealed windows, default 1 GiB */
	const char *store_dir;	/* default ./opvm_store */
	const char *only;	/* --guests GLOB: only these sampled; NULL: all */
};

/* The exporter's options for guest profiles (lib/optdef.h), bound to a
 * struct pprof_cfg (their group's base). */
extern const struct opt_def pprof_options[];

void pprof_cfg_init(struct pprof_cfg *cfg);


struct pprof;

/* Makes the private directory.  NULL after printing why. */
struct pprof *pprof_new(const struct pprof_cfg *cfg);

/* The access handler for every URL under PPROF_PREFIX (arguments as
 * MHD_AccessHandlerCallback's); it may leave its state in *con_cls. */
enum MHD_Result pprof_request(struct pprof *p, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, void **con_cls);

/* Queues r with status, with an explicit `Connection: close`: every answer
 * of the exporter ends its connection (why: exporter-http.c). */
enum MHD_Result pprof_queue(struct MHD_Connection *c, unsigned status,
			    struct MHD_Response *r);

/* For MHD_OPTION_URI_LOG_CALLBACK (cls unused): a request with more query
 * parameters than any page takes gets none parsed, and a mark in its
 * *con_cls (pprof_uri_marked()), which the access handler answers with
 * pprof_too_many() (400, one line) before anything else. */
void *pprof_uri_check(void *cls, const char *uri, struct MHD_Connection *c);
int pprof_uri_marked(const void *con_cls);
enum MHD_Result pprof_too_many(struct pprof *p, struct MHD_Connection *c);

/* For MHD_OPTION_NOTIFY_COMPLETED (cls is the pprof): frees what
 * pprof_request() left in *con_cls; nothing for other requests. */
void pprof_completed(void *cls, struct MHD_Connection *c, void **con_cls,
		     enum MHD_RequestTerminationCode toe);

/* The profiler's own metrics in the text exposition format: s (the rest
 * of the exposition, may be NULL) with them appended, malloc'd; NULL on
 * ENOMEM. */
char *pprof_metrics(struct pprof *p, const char *s);

/* Ends every profile (its session stops and its client gets 503) and waits
 * until every suspended connection is resumed: call it before
 * MHD_stop_daemon().  NULL-safe. */
void pprof_stop(struct pprof *p);

/* Removes the private directory; after pprof_stop() and MHD_stop_daemon().
 * NULL-safe. */
void pprof_free(struct pprof *p);

#endif /* OPVM_EXPORTER_HTTP_H */
