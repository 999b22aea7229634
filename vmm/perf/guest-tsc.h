/* SPDX-License-Identifier: MIT */
/*
 * A vCPU's guest TSC from the host TSC, by KVM's per-vCPU tsc-offset and
 * tsc-scaling-ratio (debugfs kvm/PID-FD/vcpuN/).  Its own header because the
 * perf sampler (which reads the figures and converts each sample's time)
 * and its Python reads (which stamp the end of a read) both convert, and
 * neither should call into the other for it.
 */
#ifndef OPVM_GUEST_TSC_H
#define OPVM_GUEST_TSC_H

#include <stdint.h>

/* guest = (host * ratio >> frac) + offset */
struct guest_tsc {
	int64_t offset;
	uint64_t ratio;			/* 0: 1:1 */
	unsigned frac;			/* the ratio's fractional bits */
};

static inline uint64_t guest_tsc(const struct guest_tsc *c, uint64_t host_tsc)
{
	uint64_t t = host_tsc;

	/* 128 bits: a 64-bit TSC times a ratio with 48 fractional bits */
	if (c->ratio && c->frac < 64)
		t = (uint64_t)(((unsigned __int128)host_tsc * c->ratio) >> c->frac);
	return t + (uint64_t)c->offset;
}

#endif /* OPVM_GUEST_TSC_H */
