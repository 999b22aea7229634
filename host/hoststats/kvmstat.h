/* SPDX-License-Identifier: MIT */
/*
 * KVM exit counters of a QEMU/KVM guest, per vCPU: QMP `query-stats`
 * (target "vcpu", provider "kvm", QEMU 7.1+), or, for a QEMU without a QMP
 * socket, KVM's debugfs files (/sys/kernel/debug/kvm/PID-FD/, one VM-wide
 * sum).  Both are reads: nothing stops or slows the guest.
 *
 * The reasons are KVM's own "*_exits" counters; "exits" counts every exit,
 * so exits minus those is "other" (EPT violations, MSR and CR accesses, ...:
 * KVM keeps no separate counter for them), and the reasons add up to exits.  Replies are untrusted JSON: missing or odd members
 * are skipped.
 */
#ifndef OPVM_KVMSTAT_H
#define OPVM_KVMSTAT_H

#include <stdint.h>
#include <jansson.h>

struct qmp;

enum kvmstat_reason {
	KVMSTAT_HALT,
	KVMSTAT_IO,
	KVMSTAT_MMIO,
	KVMSTAT_IRQ,
	KVMSTAT_IRQ_WINDOW,
	KVMSTAT_NMI_WINDOW,
	KVMSTAT_REQUEST_IRQ,
	KVMSTAT_SIGNAL,
	KVMSTAT_OTHER,		/* exits - the others (kvmstat_finish()) */
	KVMSTAT_NR_REASONS,
};

struct kvmstat {
	int valid;		/* 1 once a reading filled it */
	uint64_t exits;		/* all exits */
	uint64_t reason[KVMSTAT_NR_REASONS];
};

/* KVM's name of a reason ("halt_exits"; "other" has none: NULL); the label
 * opvm shows and exports is the same without "_exits". */
const char *kvmstat_reason_name(enum kvmstat_reason r);
const char *kvmstat_reason_label(enum kvmstat_reason r);

/*
 * Fills v[0..max) from a query-stats "return" array (stats) and a
 * query-cpus-fast "return" array (cpus; joins each vCPU's qom-path to its
 * cpu-index: query-stats lists vCPUs in no fixed order).  Returns the
 * number of vCPUs filled, or -EPROTO when stats is not a list.
 */
int kvmstat_parse(json_t *stats, json_t *cpus, struct kvmstat *v, unsigned max);

/* Sets KVMSTAT_OTHER from exits and the other reasons (the parsers call it;
 * callers that sum kvmstats call it again on the sum). */
void kvmstat_finish(struct kvmstat *v);

/* Both queries over an open QMP connection.  Count or -errno (-ENOENT:
 * this QEMU has no kvm stats provider, e.g. TCG or a QEMU before 7.1). */
int kvmstat_qmp(struct qmp *q, struct kvmstat *v, unsigned max, unsigned timeout_ms);

/* The VM-wide sums from debugfs for QEMU process pid into *v.  0, -ENOENT
 * (no directory for pid: not KVM, or debugfs not mounted), or -errno. */
int kvmstat_debugfs(const char *debugfs, int pid, struct kvmstat *v);

#endif /* OPVM_KVMSTAT_H */
