// SPDX-License-Identifier: MIT
/*
 * What the collector's loop (collector.c) and its session.json writer
 * (collector-json.c) share.  Not for use outside host/collect/.
 */
#ifndef OPVM_COLLECTOR_PRIV_H
#define OPVM_COLLECTOR_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "host/collect/collector.h"
#include "host/collect/gstate.h"
#include "host/collect/stats.h"
#include "vmm/introspect/introspect.h"
#include "vmm/sampler.h"

/* Memory set aside at the start and given back when session.json cannot be
 * written for want of memory: the last write must not lag the files. */
#define RESERVE_BYTES		(512u * 1024)
#define MAX_GUESTS		256

struct cguest {
	struct collector *c;
	char *name;
	unsigned nr_vcpus;
	struct ring **rings;
	struct gstate *gs;
	struct decoder *dec;
	struct store *st;
	struct attribution *sy;
	struct pynames *py;		/* Python frame names from the sampler */
	struct fetch *fetch;		/* kernel symbols from the guest */
	/* introspection: the second source of records, read from the
	 * guest's memory; its own decoder (its own framing and sequence)
	 * into the same model, fetch and callbacks as the channel's */
	struct introspect *intro;
	struct decoder *idec;
	enum introspect_mode intro_mode;
	/* what introspection told at its last poll (introspect_tool), and
	 * the KSYMS records it sent so far (the fetch counts the relay's too) */
	struct introspect_tool intro_tool;
	enum introspect_state intro_state;
	bool intro_ksyms_sent;
	char intro_release[65 + 1];
	uint64_t intro_ksyms_records;
	/* attribution_os_counts() at the last poll; fw_since: firmware or a
	 * boot loader ran since the OS last did (the next OS sample is the
	 * OS starting) */
	uint64_t os_seen, boot_seen;
	bool fw_since;
	/* introspection's processes against opvm.ko's, per walk while both
	 * speak: same address space and name, another one, or unknown */
	uint64_t xc_walks, xc_seen, xc_agree, xc_differ, xc_missing;
	int fd;				/* channel, -1 if none */
	int (*reconnect)(void *arg);
	void *reconnect_arg;
	bool want_reconnect;		/* EOF seen, reconnect failed: retry */
	bool hello_due;			/* the connection's ask for HELLO is
					 * still to be written (hello_ask()) */
	struct sampler *smp;
	uint64_t hellos_told;		/* gstate's HELLO count the sampler
					 * was last told about */
	bool smp_stopped;
	bool gone;			/* sampler said TARGET_GONE */
	int last_err;			/* last sync/store error, for the json */
	uint64_t meta_failures;		/* session.json writes that failed */
	uint64_t meta_ms;		/* clk_now_ms() of its last write, 0 */
	bool meta_due;			/* write it at the next sync: a window
					 * ends or begins */
	size_t retry_budget;		/* held-sample retries left for record
					 * syncs until the next periodic sync */
	uint64_t settled_seen;		/* fetch_settled() the sync was told */
	struct sampler_int3 int3_told;	/* the int3 path the sampler was
					 * told of this boot (int3_tell()) */
	struct sampler_orc orc_told;	/* what the sampler was told of this
					 * boot's ORC tables (0: nothing) */
	/* the sampler was told where the current-task pointers are
	 * (introspect_tool.current, guest_current) */
	bool cur_known;
	/* The CPython processes the sampler was told of (NULL: none yet),
	 * and the guest state's generation they were looked for at. */
	struct sampler_python *py_told;
	uint64_t py_gen;
	int64_t py_at;
	uint64_t word_wait_ms;		/* since when the relay's word is due
					 * (ksyms_word()), 0: not due */
	int64_t win_start, win_end;	/* the open window, wall-clock ms */
	uint64_t windows;		/* windows sealed */
	struct cmemsyms *msy;		/* images whose symbols memory may
					 * give (collector-memsyms.c), or NULL */
};

struct collector {
	struct collector_config cfg;
	char *session_dir;
	char *mode;
	struct cguest *guests[MAX_GUESTS];
	size_t nr_guests;
	struct timespec start_wall;
	uint64_t start_ms;		/* monotonic */
	uint64_t status_ms, status_received;	/* at the last growth of received */
	uint64_t status_shown_ms;		/* the last refresh */
	double status_rate;			/* samples/s, shown until stale */
	bool status_shown;
	bool finished;
	uint8_t *buf;			/* READ_CHUNK */
	void *reserve;			/* RESERVE_BYTES, or NULL once spent */
	struct gstate_budget model_budget; /* every guest's model together */
};

/* collector-memsyms.c: user binaries' symbols read from guest memory for
 * images with samples and no binary in the cache (an image_used's cookie;
 * read at the next polls, a few at a time). */
void cguest_memsyms_want(struct cguest *g, const struct gstate_cookie *ck);
void cguest_memsyms_poll(struct cguest *g, bool all);	/* all: the last sync */
void cguest_memsyms_free(struct cguest *g);	/* NULL-safe inside */

/* collector-window.c */
void cguest_window_begin(struct cguest *g);	/* before its store opens */
/* Whether g's window has ended by wall-clock time now.  The caller syncs
 * g (everything up to now into the closing window), then rotates it: seals
 * the window and opens the next; 0, or -errno when g was left without a
 * store. */
bool cguest_window_due(const struct cguest *g, int64_t now);
int cguest_window_rotate(struct cguest *g);
/* ms until the next window ends, at most max. */
unsigned collector_window_wait_ms(const struct collector *c, unsigned max);
void cguest_window_seal(struct cguest *g);	/* after its store closed */

int collector_write_session(struct collector *c, struct cguest *g, uint64_t now);
void collector_guest_stats(const struct cguest *g, struct opvm_stats *st,
			   struct sampler_stats *ss);

#endif /* OPVM_COLLECTOR_PRIV_H */
