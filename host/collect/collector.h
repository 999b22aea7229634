/* SPDX-License-Identifier: MIT */
/*
 * The collector: one per `opvm run`/`opvm attach`.  Owns the session's
 * stores, per-guest rings, guest-state models, channel decoders and sync.
 *
 * Threads: sampler backends (vmm/) run their own threads and only ever call
 * ring_push() on the rings they were given (one producer per ring).  Every
 * thing else — reading channel sockets, decoding, guest-state updates, sync,
 * the status line — happens in the thread that calls collector_run().
 */
#ifndef OPVM_COLLECTOR_H
#define OPVM_COLLECTOR_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "host/collect/store.h"
#include "vmm/introspect/introspect.h"
#include "vmm/sampler.h"

struct collector;
struct cguest;
struct ring;
struct gstate;
struct guestmem;
/* Where the session's symbols come from, as absolute paths (run/attach
 * --guest-root, --system-map, --vmlinux, or the test image's): written to
 * session.json "symbols" so report/annotate/export need no flags. */
#define COLLECTOR_MAX_ROOTS	8
struct collector_symbols {
	const char *roots[COLLECTOR_MAX_ROOTS];	/* "DIR" or "GUEST=DIR" */
	size_t nr_roots;
	const char *system_map;		/* may be NULL */
	const char *vmlinux;		/* may be NULL */
};

/* What a live status line shows: handed to collector_config.progress. */
struct collector_progress {
	double secs;			/* since collector_new() */
	double rate;			/* samples/s between the last two syncs
					 * that brought samples */
	uint64_t received, lost, held;	/* lost: ring overflow only */
	size_t nr_guests;
};

struct collector_config {
	const char *session_dir;	/* default "./opvm_data" */
	unsigned separate;		/* enum opvm_separate */
	int append;			/* --append */
	struct store_event events[8];	/* OPVM_MAX_EVENTS */
	size_t nr_events;
	unsigned sync_ms;		/* sync interval, default 1000 */
	unsigned hold_ms;		/* how long a user sample whose mapping is
					 * unknown is held back, default 2000 */
	const char *mode;		/* "gdbstub-timer", "kvm-timer", "kvm-pmu", ... */
	unsigned rate_hz;		/* timer modes: ticks per second */
	/* Called in collector_run()'s thread about twice a second, once with
	 * last set when the run ends, and with p NULL and last set when the
	 * collector is freed mid-run (a shown line is to be ended).  Libraries
	 * never print: the command draws the line.  NULL: none. */
	void (*progress)(void *arg, const struct collector_progress *p, bool last);
	void *progress_arg;
	struct store_limits store_limits; /* per guest; 0 fields: defaults */
	int public_tree;		/* 1: tree modes from the umask
					 * (--umask), else 0700/0600 */
	size_t model_max_bytes;		/* guest-state model heap per guest;
					 * 0: OPVM_MODEL_MAX_BYTES */
	size_t model_total_bytes;	/* all guests together; 0:
					 * OPVM_MODEL_TOTAL_BYTES */
	struct collector_symbols symbols;	/* its strings outlive the collector */
	/* Windows (host/collect/collector-window.c): every window_ms each
	 * guest's samples/current is sealed as samples/w-<start>-<end>
	 * (host/collect/store.h); 0: one current/ for the whole session */
	unsigned window_ms;
	const char *start_exec;		/* --from-exec: see attribution_config; NULL:
					 * from the start */
	const char *callgraph;		/* "fp" or "dwarf": samples carry call
					 * chains, kept in the stack table;
					 * NULL: none */
	/* -g dwarf: attribution_config's host_file, called with the guest's name
	 * first; NULL: none */
	int (*host_file)(void *arg, const char *guest, const char *path,
			 const uint8_t *build_id, size_t build_id_len, char *out, size_t outlen);
	void *host_file_arg;
	int python_off;			/* --no-python: the sampler is never told
					 * of CPython processes, so it reads no
					 * Python frames (docs/runtimes.md) */
	/* Guest binaries by build-id and kernel symbols (fetch.h). */
	struct {
		int off;			/* --no-fetch: neither */
		const char *cache_dir;		/* build-id cache root: a guest's
						 * files go to DIR/<guest>/;
						 * NULL: binaries are not fetched */
		uint64_t max_file, max_session;	/* 0: fetch.h's defaults */
		uint64_t max_cache;		/* 0: fetch.h's default */
		uint64_t max_ksyms;		/* 0: fetch.h's default */
		/* fetch_config.verify (symbols/ has the ELF reader). */
		int (*verify)(const char *path, const uint8_t *bid, size_t len);
	} fetch;
};
#define OPVM_MODEL_TOTAL_BYTES	((size_t)512 << 20)

/* Returns NULL and sets errno. */
struct collector *collector_new(const struct collector_config *cfg);
void collector_free(struct collector *c);	/* NULL-safe; syncs first */

/* Adds a guest with nr_vcpus rings.  name becomes the guest's tree name
 * (mangled).  Returns NULL and sets errno. */
struct cguest *collector_add_guest(struct collector *c, const char *name,
				   unsigned nr_vcpus);
struct ring *cguest_ring(struct cguest *g, unsigned vcpu);
/* The guest's rings, for a sampler's start() (valid until collector_free). */
struct sampler_sink cguest_sink(struct cguest *g);
unsigned cguest_nr_vcpus(const struct cguest *g);
struct gstate *cguest_gstate(struct cguest *g);
const char *cguest_name(const struct cguest *g);

/* Channel: the collector reads fd (a connected socket or a file) and feeds
 * the guest's decoder; it owns fd from here on.  reconnect, if non-NULL, is
 * called when fd reaches EOF to get a fresh fd (guest reboot), or returns -1.
 * Returns 0 or -errno. */
int cguest_set_channel(struct cguest *g, int fd,
		       int (*reconnect)(void *arg), void *arg);

/* Introspection (vmm/introspect/introspect.h) of this guest's memory,
 * read through mem (borrowed: it must outlive the collector); mode OFF or
 * mem NULL: none.  Its records go through a decoder of their own into the
 * guest's model and fetch, as the channel's do.  Returns 0 or -errno. */
int cguest_set_introspect(struct cguest *g, struct guestmem *mem,
			  enum introspect_mode mode);

/* The sampler feeding this guest: collector_run() polls its status and stops
 * it at the end, and every HELLO read from the channel is passed to its
 * guest_hello op (vmm/sampler.h).  The collector does not free it. */
void cguest_set_sampler(struct cguest *g, struct sampler *s);

/* Drains every ring, attributes and files the samples, writes session.json.
 * Returns 0 or -errno. */
int collector_sync(struct collector *c);

/* Main loop until *stop is set, duration_ms elapses (0: no limit), or every
 * guest's sampler reports that its target has gone.  Returns 0, or -errno
 * for a fault that stopped profiling (a sampler's, poll()'s) or a
 * session.json that could not be written at the end.  Samples that could
 * not be filed (out of memory, disk full) and records the model refused are
 * counted in session.json, not faults: profiling goes on.  The data
 * collected so far is synced either way. */
int collector_run(struct collector *c, volatile sig_atomic_t *stop,
		  uint64_t duration_ms);

#endif /* OPVM_COLLECTOR_H */
