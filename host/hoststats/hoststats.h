/* SPDX-License-Identifier: MIT */
/*
 * Every guest on this host, measured: the model behind `opvm top` and
 * `opvm exporter`.
 *
 * Guests are QEMU processes found in /proc (bare, or started by libvirt)
 * and the active domains of a libvirt connection; a libvirt domain and its
 * local QEMU process are one guest.  Each refresh reads, per guest and per
 * vCPU thread, cumulative CPU time, guest-mode time and run-queue delay
 * (host/hoststats/procstat.h), KVM exit counters (host/hoststats/kvmstat.h: QMP query-stats for
 * a bare QEMU with a QMP socket, libvirt's VM statistics for a domain, KVM's
 * debugfs otherwise) and libvirt's block and network byte counters; rates
 * are the difference to the previous refresh over the time between them.
 *
 * Nothing here stops, pauses or slows a guest: every source is a read.
 * A QMP socket is held only for the two queries of one refresh, so the
 * guest's owner (or `opvm attach`) can use it in between.
 *
 * A QEMU command line, and so a QMP socket, is any local user's: each
 * guest's QMP exchange (connect, greeting, queries) has one budget
 * (hs_config.qmp_timeout_ms).  A guest whose socket does not answer within
 * it costs its own row only: the row is marked (hs_guest.stale), and that
 * socket is left alone for a while (10 s, doubling up to 5 min) so that
 * the next refreshes do not pay again.  libvirt likewise: its connection
 * and calls run in a worker thread (virtstats_reader_read()), and a daemon that
 * does not answer within hs_config.libvirt_timeout_ms costs one refresh
 * that budget, the next ones nothing, until it answers.
 */
#ifndef OPVM_HOSTSTATS_H
#define OPVM_HOSTSTATS_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "host/hoststats/kvmstat.h"
#include "host/hoststats/pmcount.h"
#include "host/hoststats/procstat.h"

#define HS_MAX_VCPUS	256

struct hs_vcpu {
	int index;		/* QEMU's cpu-index */
	int tid;		/* host thread, 0 if unknown (remote libvirt) */
	/* cumulative */
	uint64_t cpu_ns, guest_ns, wait_ns;
	struct kvmstat kvm;
	/* over the last interval */
	double cpu_pct, guest_pct, steal_pct, exits_ps;
	double reason_ps[KVMSTAT_NR_REASONS];
	int has_hw;		/* hw[] valid (a host PMU, a KVM guest) */
	uint64_t hw[PMC_NR];	/* guest-mode cycles, instructions, LLC misses */
	double hw_ps[PMC_NR];
};

struct hs_guest {
	char name[PS_NAME_MAX];
	const char *source;		/* "libvirt" or "qemu" */
	int pid;			/* 0: no local process (remote libvirt) */
	uint64_t start_ticks;
	enum ps_accel accel;
	char qmp[PS_PATH_MAX];		/* "" if none */
	char channel[PS_PATH_MAX];	/* org.opvm.0 socket, "" if none */
	int running;			/* 0 when libvirt says paused */
	unsigned nr_vcpus;		/* entries in vcpu[] */
	struct hs_vcpu *vcpu;		/* nr_vcpus entries, by index */
	int fresh;			/* 1 on the first refresh it was seen: no rates yet */
	int stale;			/* a source did not answer within the budget */
	char stale_why[128];		/* then why ("" otherwise) */
	/* When its counters were read (monotonic s): a refresh reads guests
	 * one after the other, and a slow QMP reply must not skew the others'
	 * rates, so each rate is over its own readings' interval. */
	double t_proc, t_kvm;

	/* cumulative, whole guest */
	uint64_t cpu_ns, guest_ns, wait_ns;
	struct kvmstat kvm;		/* summed over vCPUs, or VM-wide (debugfs) */
	int has_exits;			/* kvm is valid */
	const char *exits_src;		/* "qmp", "libvirt", "debugfs" */
	char exits_why[96];		/* why there are none */
	int has_io;
	uint64_t rd_bytes, wr_bytes, rx_bytes, tx_bytes;
	const char *hw_why;		/* why no hardware counters (has_hw 0) */
	int has_hw;
	uint64_t hw[PMC_NR];		/* summed over vCPUs */
	double hw_ps[PMC_NR], ipc;

	/* over the last interval */
	double cpu_pct;			/* whole QEMU process; 100 = one host CPU */
	double guest_pct;		/* vCPU threads in guest mode */
	double steal_pct;		/* vCPUs' mean run-queue delay, % of the interval */
	double exits_ps;
	double reason_ps[KVMSTAT_NR_REASONS];
	double rd_bps, wr_bps, rx_bps, tx_bps;
};

struct hs_config {
	const char *uri;	/* libvirt URI; NULL: virt_default_uri() */
	int no_libvirt;		/* /proc only */
	const char *debugfs;	/* NULL: /sys/kernel/debug */
	unsigned qmp_timeout_ms;	/* a guest's whole QMP exchange; 0: 1000 */
	/* libvirt's reading (connecting and the domain statistics): past it
	 * the refresh goes on with /proc's guests; 0: 3000 */
	unsigned libvirt_timeout_ms;
	/* NULL, or a flag the stop signals set (signals_stop_on()): once
	 * set, a refresh gives up (-EINTR) at the next guest or blocking
	 * wait. */
	const volatile sig_atomic_t *stop;
	/* Only guests whose name contains *filter are read (NULL or "": all).
	 * Read at each refresh: the caller may change the string it points to.
	 * Others' QMP sockets are then left alone, and cost nothing. */
	const char *const *filter;
};

enum hs_sort {
	HS_SORT_CPU,
	HS_SORT_STEAL,
	HS_SORT_EXITS,
	HS_SORT_IO,
	HS_SORT_NAME,
	HS_SORT_NR,
};

struct hoststats;

/* NULL + errno.  Connecting to libvirt is tried at each refresh until it
 * works; its failure is kept for hoststats_libvirt_error(). */
struct hoststats *hoststats_new(const struct hs_config *cfg);
void hoststats_free(struct hoststats *h);		/* NULL-safe */

/* Takes a new reading of every guest.  0 or -errno (only for failures
 * that leave no table: out of memory, /proc unreadable; -EINTR when
 * cfg.stop was set: the previous table stays). */
int hoststats_refresh(struct hoststats *h);

/* The guests of the last refresh, sorted by key (descending figures,
 * ascending names); valid until the next refresh. */
size_t hoststats_guests(struct hoststats *h, enum hs_sort key, struct hs_guest ***out);

/* Seconds between the last two refreshes (0 after the first). */
double hoststats_interval(const struct hoststats *h);

/* What the last refresh left unread because a cap was reached: the
 * processes of other users decide how many QEMUs there are, how many
 * threads each has and how long its command line is. */
#define HS_MAX_QEMUS	1024	/* QEMU processes kept; past it, pids unread */
#define HS_MAX_THREADS	1024	/* threads read per QEMU */
struct hs_capped {
	unsigned pids_unread;	/* not examined: HS_MAX_QEMUS QEMUs were found */
	unsigned threads_unread;	/* threads past HS_MAX_THREADS, all QEMUs */
	unsigned cmdlines_cut;	/* QEMUs whose command line passed PS_CMDLINE_MAX */
};
const struct hs_capped *hoststats_capped(const struct hoststats *h);

/* "" when libvirt answered at the last refresh (or is not used), else why. */
const char *hoststats_libvirt_error(const struct hoststats *h);

/* Top exit reasons of g by rate: up to max indexes into reason_ps[], the
 * largest first, only those above zero.  Returns how many. */
unsigned hoststats_top_reasons(const struct hs_guest *g, unsigned *out, unsigned max);

/* Sort key by name ("cpu", "steal", "exits", "io", "name"), or -1. */
int hs_sort_parse(const char *s);
const char *hs_sort_name(enum hs_sort key);

/* One refresh as JSON: {"interval_s", "libvirt_error", "guests": [...]}
 * (docs/usage.md lists the keys).  New reference or NULL. */
json_t *hoststats_json(struct hoststats *h, enum hs_sort key);

/* Prometheus text exposition (version 0.0.4) of the last refresh's
 * cumulative counters: a malloc'd NUL-terminated string, or NULL. */
char *hoststats_prometheus(struct hoststats *h);

#endif /* OPVM_HOSTSTATS_H */
