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

#include <stdint.h>

#include "host/hoststats/kvmstat.h"
#include "vmm/libvirt/virt.h"

#define VIRT_STATS_VCPUS	64	/* vCPUs kept per domain; the rest summed in */

struct virt_dstat {
	char name[128];
	int running;			/* 1 running, 0 paused or other */
	unsigned nr_vcpus;
	uint64_t cpu_ns;		/* cpu.time: whole QEMU process */
	uint64_t vcpu_ns[VIRT_STATS_VCPUS];	/* vcpu.N.time */
	uint64_t vcpu_wait_ns[VIRT_STATS_VCPUS];	/* vcpu.N.wait */
	int has_wait;
	struct kvmstat kvm[VIRT_STATS_VCPUS];	/* vcpu.N.exits.sum ... */
	int has_block, has_net;
	uint64_t rd_bytes, wr_bytes;	/* all block devices */
	uint64_t rx_bytes, tx_bytes;	/* all interfaces */
};

/* Active domains of v.  *out is malloc'd (free()).  Returns the count or
 * -errno with libvirt's message in err. */
int virt_all_stats(struct virt *v, struct virt_dstat **out, char *err, size_t errlen);

#endif /* OPVM_VIRT_STATS_H */
