// SPDX-License-Identifier: GPL-2.0
/*
 * What the host reads straight from guest memory, by guest-physical address
 * (HELLO says where): the per-CPU current-task slots and the per-CPU
 * task-switch rings (opvm_proto.h has both layouts and their writer
 * protocols).  The sched_switch hook writes them, the worker announces
 * them; this file owns them and calls nothing else in the module.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/gfp.h>
#include <linux/io.h>
#include <linux/log2.h>
#include <linux/minmax.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <asm/msr.h>
#include "opvm.h"

struct opvm_slot *opvm_slots;
void *opvm_switch_block;
u32 opvm_switch_stride, opvm_switch_entries;
static size_t switch_bytes;

u64 opvm_mm_cr3(struct mm_struct *mm)
{
	return __pa(mm->pgd);
}

/*
 * Appends "from now on, next runs here" to this CPU's switch ring, by the
 * writer protocol of opvm_proto.h.  Runs with preemption and interrupts off
 * (sched_switch, or the load-time seed IPI), so nothing else writes this
 * CPU's ring meanwhile.  The full barrier before the TSC read lets a host
 * that saw no switch begun after its own time T trust that none is stamped
 * before T.
 */
void notrace opvm_switch_log(struct task_struct *next, u64 cr3, u32 flags)
{
	struct opvm_switch_ring_hdr *h;
	struct opvm_switch *e;
	u64 n;

	if (!opvm_switch_block)
		return;
	h = opvm_switch_block +
	    (size_t)raw_smp_processor_id() * opvm_switch_stride;
	n = h->head;
	e = (struct opvm_switch *)(h + 1) + (n & (opvm_switch_entries - 1));
	WRITE_ONCE(e->seq, 2 * n + 1);
	smp_mb();
	e->tsc = rdtsc_ordered();
	e->pid = next->pid;
	e->tgid = next->tgid;
	e->cr3 = cr3;
	e->flags = flags;
	smp_wmb();
	WRITE_ONCE(e->seq, 2 * n + 2);
	smp_wmb();
	WRITE_ONCE(h->head, n + 1);
}

/*
 * Seed each CPU's slot and switch ring with what runs there now (a CPU
 * that never switches would otherwise have neither).  Same seqlock steps
 * as the sched_switch hook.
 */
static void opvm_slot_seed(void *unused)
{
	struct opvm_slot *s = &opvm_slots[smp_processor_id()];
	struct mm_struct *mm = current->mm;
	u32 seq = s->seq;

	WRITE_ONCE(s->seq, seq + 1);
	smp_wmb();
	s->pid = current->pid;
	s->tgid = current->tgid;
	s->flags = mm ? 0 : OPVM_SLOT_KTHREAD;
	s->cr3 = mm ? opvm_mm_cr3(mm) : 0;
	smp_wmb();
	WRITE_ONCE(s->seq, seq + 2);
	opvm_switch_log(current, s->cr3, s->flags);
}

/*
 * The switch rings: one physically contiguous, zeroed block (the host reads
 * it by guest-physical address), each ring cache-line aligned.  A large
 * block may not be available: halve the rings until it is.  Without them
 * the module still works; the host then cannot attribute samples it takes
 * without stopping the guest.
 */
static void opvm_switch_alloc(unsigned int switch_entries)
{
	u32 entries = rounddown_pow_of_two(clamp_val(switch_entries, 64,
						     OPVM_SWITCH_MAX_ENTRIES));

	for (; entries >= 64; entries /= 2) {
		opvm_switch_stride = ALIGN(sizeof(struct opvm_switch_ring_hdr) +
					   entries * sizeof(struct opvm_switch),
					   L1_CACHE_BYTES);
		switch_bytes = (size_t)nr_cpu_ids * opvm_switch_stride;
		opvm_switch_block = alloc_pages_exact(switch_bytes, GFP_KERNEL |
						      __GFP_ZERO | __GFP_NOWARN);
		if (opvm_switch_block) {
			opvm_switch_entries = entries;
			return;
		}
	}
	pr_warn("no memory for the task-switch rings: samples taken without stopping the guest cannot be attributed\n");
}

static void opvm_switch_free(void)
{
	if (opvm_switch_block)
		free_pages_exact(opvm_switch_block, switch_bytes);
	opvm_switch_block = NULL;
}

int opvm_slots_init(unsigned int switch_entries)
{
	/* kmalloc memory is physically contiguous: one guest-physical range. */
	opvm_slots = kcalloc(nr_cpu_ids, sizeof(*opvm_slots), GFP_KERNEL);
	if (!opvm_slots)
		return -ENOMEM;
	opvm_switch_alloc(switch_entries);
	return 0;
}

void opvm_slots_seed(void)
{
	on_each_cpu(opvm_slot_seed, NULL, 1);
}

void opvm_slots_exit(void)
{
	opvm_switch_free();
	kfree(opvm_slots);
	opvm_slots = NULL;
}
