/* SPDX-License-Identifier: MIT */
/*
 * Call chains for samplers that stop the vCPU (vmm/sampler.h's
 * sampler_callgraph): the one place that turns a stopped vCPU's registers
 * into the chain a sample carries.  It reads the guest through a
 * guestmem_view (vmm/guest/guestmem.h) and walks with unwind/: the kernel part by
 * the guest kernel's ORC tables, the user part by frame pointers.
 *
 * Threads: callgraph_hello() runs on the collector's thread, everything
 * else on the one sampling thread; the hello is handed over with a
 * generation count, never a lock.
 */
#ifndef OPVM_VMM_CALLGRAPH_H
#define OPVM_VMM_CALLGRAPH_H

#include <stdint.h>

#include "lib/sample.h"
#include "unwind/unwind.h"
#include "vmm/sampler.h"

struct callgraph;
struct guestmem;

struct callgraph_stats {
	uint64_t walks;			/* samples walked */
	uint64_t frames;		/* callers found */
	uint64_t kernel_walks;		/* walks that began in the kernel */
	uint64_t kernel_to_user;	/* ...and went on into user space */
	uint64_t no_orc;		/* kernel samples left at their leaf */
	uint64_t pages;			/* guest pages read */
	uint64_t cost_ns;		/* time in callgraph_walk() */
	uint64_t orc_entries;		/* entries of the loaded ORC table */
	unsigned orc_from_kallsyms;	/* ... located by the guest's kallsyms */
	char orc_error[160];		/* why the ORC tables did not load */
};

/* NULL and errno on failure; mem is borrowed (may be NULL: chains are then
 * empty).  cfg->mode must not be SAMPLER_CG_NONE. */
struct callgraph *callgraph_new(const struct sampler_callgraph_cfg *cfg, struct guestmem *mem);
void callgraph_free(struct callgraph *cg);	/* NULL-safe */

/* A HELLO: the kernel may be a new one (reboot): its slide and ORC format;
 * the tables System.map locates, else none until callgraph_orc(). */
void callgraph_hello(struct callgraph *cg, const struct chan_hello *h);
/* The guest's kallsyms located this boot's ORC tables (after its HELLO):
 * they are loaded from there, with no System.map. */
void callgraph_orc(struct callgraph *cg, const struct sampler_orc *o);

/* SAMPLER_CG_DWARF: where the user part starts, for the collector to
 * unwind (lib/sample.h's OPVM_SAMPLE_STACK). */
struct callgraph_user {
	int valid;			/* user registers were found */
	uint64_t ip, sp, bp;
	uint16_t len;			/* bytes of stack[] read from sp up */
	uint8_t stack[OPVM_MAX_STACK];
};

/*
 * The callers of the sample r (cpl 0 or 3) in the address space cr3, into
 * chain[0..max) (innermost first, r->ip itself not included).  Returns how
 * many.  With SAMPLER_CG_DWARF the chain stops at the kernel's callers and
 * *u gets the user registers and stack instead.  Call with the vCPU
 * stopped.
 */
unsigned callgraph_walk(struct callgraph *cg, const struct unwind_regs *r, uint64_t cr3,
			uint64_t *chain, unsigned max, struct callgraph_user *u);

/* With the guest running again: loads the ORC tables if a HELLO asked for
 * them (through the kernel address space kernel_cr3, 0 if none seen yet). */
void callgraph_idle(struct callgraph *cg, uint64_t kernel_cr3);

void callgraph_get_stats(const struct callgraph *cg, struct callgraph_stats *out);

#endif /* OPVM_VMM_CALLGRAPH_H */
