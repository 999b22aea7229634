/* SPDX-License-Identifier: MIT */
/*
 * Every active libvirt domain's figures in one call
 * (virConnectGetAllDomainStats): state, CPU time, per-vCPU time and wait
 * (libvirt's schedstat reading), KVM exit counters where libvirt passes
 * QEMU's query-stats on (VIR_DOMAIN_STATS_VM, libvirt 8.9+), and block and
 * network byte counters.  A read: no domain is paused or changed, and no
 * monitor command is sent behind libvirt's back.
 */
#ifndef OPVM_VIRT_STATS_H
#define OPVM_VIRT_STATS_H

#include <signal.h>
#include <stdint.h>

#include "host/hoststats/kvmstat.h"
#include "vmm/libvirt/virt.h"

#define VIRTSTATS_VCPUS	64	/* vCPUs kept per domain; the rest summed in */

struct virtstats_dom {
	char name[128];
	int running;			/* 1 running, 0 paused or other */
	unsigned nr_vcpus;
	uint64_t cpu_ns;		/* cpu.time: whole QEMU process */
	uint64_t vcpu_ns[VIRTSTATS_VCPUS];	/* vcpu.N.time */
	uint64_t vcpu_wait_ns[VIRTSTATS_VCPUS];	/* vcpu.N.wait */
	int has_wait;
	struct kvmstat kvm[VIRTSTATS_VCPUS];	/* vcpu.N.exits.sum ... */
	int has_block, has_net;
	uint64_t rd_bytes, wr_bytes;	/* all block devices */
	uint64_t rx_bytes, tx_bytes;	/* all interfaces */
};

/* Active domains of v.  *out is malloc'd (free()).  Returns the count or
 * -errno with libvirt's message in err. */
int virtstats_all(struct virt *v, struct virtstats_dom **out, char *err, size_t errlen);

/*
 * virtstats_all() with a deadline, for top and the exporter: a libvirtd
 * that accepts and never answers (hung, or any local user's socket a URI
 * names) would hold a refresh for ever, and libvirt's client has no timeout
 * of its own (its keepalive needs an event loop and starts only once a
 * connection is open).  The connection and every call on it live in one
 * worker thread; the caller waits for a reading at most its budget and
 * goes on without it.  A call that is still pending at the next reading is
 * not waited on again (one hung daemon costs one budget, not one a
 * refresh), and its late result is dropped, never used as a new reading.
 * A failed connection is tried again after retry_s.
 */
struct virtstats_reader;

/* uri: as virt_open() takes it (copied).  NULL + errno. */
struct virtstats_reader *virtstats_reader_new(const char *uri, unsigned budget_ms, unsigned retry_s);
/* Never waits on a pending call: the worker, when the call returns,
 * closes the connection and frees what is left.  NULL-safe. */
void virtstats_reader_free(struct virtstats_reader *r);

/* As virtstats_all(), waiting at most the budget (in slices, giving up
 * early when *stop, if given, is set).  0 with err set when libvirt did
 * not answer in time, is pending from an earlier reading, or is not
 * connected (between tries); -errno for failures of opvm's own. */
int virtstats_reader_read(struct virtstats_reader *r, const volatile sig_atomic_t *stop,
			  struct virtstats_dom **out, char *err, size_t errlen);

/*
 * Any other libvirt call by the same worker and budget (one mechanism for
 * every wait on libvirtd): fn(v, arg, err, errlen) runs in the worker on
 * its connection (opened first if need be) and returns 0, a count or
 * -errno.  Returns fn's result with its message in err; -ENOTCONN when
 * libvirt cannot be reached; -ETIMEDOUT (-EINTR on *stop) when fn did not
 * return within the budget, or an earlier call is still pending.  Then fn
 * may still be running: arg, and what fn fills in, stay the worker's (the
 * caller neither frees nor reads them).  Objects fn opens on v live until
 * virtstats_reader_free().
 */
typedef int virtstats_job_fn(struct virt *v, void *arg, char *err, size_t errlen);
int virtstats_reader_run(struct virtstats_reader *r, virtstats_job_fn *fn, void *arg,
			 const volatile sig_atomic_t *stop, char *err, size_t errlen);

#endif /* OPVM_VIRT_STATS_H */
