/* SPDX-License-Identifier: MIT */
/*
 * Counting (not sampling) perf events on one vCPU thread, guest mode only
 * (exclude_host): cycles, instructions and last-level-cache misses, read as
 * one group so IPC comes from one scheduling window.  Counting never
 * interrupts the guest.  Needs a host PMU: where there is none (nested or
 * cloud VMs) pmcount_open() fails with -ENOENT and opvm top says so.
 * PMC_SOFTWARE opens three software events in the same shape (task clock,
 * context switches, page faults) so the group code runs on any host (tests).
 */
#ifndef OPVM_PMCOUNT_H
#define OPVM_PMCOUNT_H

#include <stddef.h>
#include <stdint.h>

enum pmc_kind { PMC_HARDWARE, PMC_SOFTWARE };
enum { PMC_CYCLES, PMC_INSTRUCTIONS, PMC_LLC_MISSES, PMC_NR };

struct pmcount;

/* Opens the group on thread tid.  NULL + errno (ENOENT: no such event on
 * this host; EACCES/EPERM: perf_event_paranoid). */
struct pmcount *pmcount_open(int tid, enum pmc_kind kind);
void pmcount_close(struct pmcount *p);		/* NULL-safe */

/* Cumulative counts since open, scaled when the kernel multiplexed the
 * group (time running < time enabled).  0 or -errno. */
int pmcount_read(struct pmcount *p, uint64_t v[PMC_NR]);

#endif /* OPVM_PMCOUNT_H */
