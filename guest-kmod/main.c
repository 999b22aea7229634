// SPDX-License-Identifier: GPL-2.0
/*
 * opvm.ko: tells a host-side profiler which guest task runs where.
 *
 * Load order: slots and switch rings, ring and /dev/opvm, worker, hooks, then the first work
 * item sends HELLO, describes what already exists and sends SYNC.  Unload
 * runs the same steps backwards; the hooks go first so nothing new is queued
 * while the rest is torn down.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/gfp.h>
#include <linux/log2.h>
#include <linux/minmax.h>
#include <linux/io.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include "opvm.h"

static unsigned int ring_kb = 2048;
module_param(ring_kb, uint, 0444);
MODULE_PARM_DESC(ring_kb, "record buffer size in KiB (default 2048)");

static unsigned int events = 8192;
module_param(events, uint, 0444);
MODULE_PARM_DESC(events, "pending event slots (default 8192)");

static unsigned int switch_entries = 4096;
module_param(switch_entries, uint, 0444);
MODULE_PARM_DESC(switch_entries,
		 "task switches kept per CPU for the host, a power of two (default 4096; halved until the rings fit)");

static bool track_mmap = true;
module_param(track_mmap, bool, 0444);
MODULE_PARM_DESC(track_mmap,
		 "kprobe do_mmap/munmap for library mappings (default on)");

struct opvm_slot *opvm_slots;
void *opvm_switch_block;
u32 opvm_switch_stride, opvm_switch_entries;
static size_t switch_bytes;

u64 opvm_mm_cr3(struct mm_struct *mm)
{
	return __pa(mm->pgd);
}

/*
 * kallsyms_lookup_name() is not exported; a kprobe registered by name
 * resolves its address for us.
 */
unsigned long opvm_lookup_name(const char *name)
{
	static unsigned long (*lookup)(const char *name);

	if (!lookup) {
		struct kprobe kp = { .symbol_name = "kallsyms_lookup_name" };

		if (register_kprobe(&kp) < 0)
			return 0;
		lookup = (unsigned long (*)(const char *))kp.addr;
		unregister_kprobe(&kp);
	}
	return lookup ? lookup(name) : 0;
}

/*
 * Seed each CPU's slot and switch ring with what runs there now, before the
 * first switch.
 */
static void opvm_slot_seed(void *unused)
{
	struct opvm_slot *s = &opvm_slots[smp_processor_id()];
	struct mm_struct *mm = current->mm;

	s->pid = current->pid;
	s->tgid = current->tgid;
	s->flags = mm ? 0 : OPVM_SLOT_KTHREAD;
	s->cr3 = mm ? opvm_mm_cr3(mm) : 0;
	smp_wmb();
	WRITE_ONCE(s->seq, s->seq + 2);
	opvm_switch_log(current);
}

/*
 * The switch rings: one physically contiguous, zeroed block (the host reads
 * it by guest-physical address), each ring cache-line aligned.  A large
 * block may not be available: halve the rings until it is.  Without them
 * the module still works; the host then cannot attribute samples it takes
 * without stopping the guest.
 */
static void opvm_switch_alloc(void)
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

static int __init opvm_init(void)
{
	int ret;

	BUILD_BUG_ON(sizeof(struct opvm_slot) != 24);
	BUILD_BUG_ON(sizeof(struct opvm_rec_hello) % OPVM_REC_ALIGN);
	BUILD_BUG_ON(sizeof(struct opvm_rec_cookie) % OPVM_REC_ALIGN);
	BUILD_BUG_ON(sizeof(struct opvm_switch) != 40);
	BUILD_BUG_ON(sizeof(struct opvm_switch_ring_hdr) != 32);
	BUILD_BUG_ON(sizeof(struct opvm_hello_switch) != 24);

	/* kmalloc memory is physically contiguous: one guest-physical range. */
	opvm_slots = kcalloc(nr_cpu_ids, sizeof(*opvm_slots), GFP_KERNEL);
	if (!opvm_slots)
		return -ENOMEM;
	opvm_switch_alloc();
	on_each_cpu(opvm_slot_seed, NULL, 1);

	ret = opvm_ring_init((size_t)ring_kb * 1024);
	if (ret)
		goto err_slots;
	ret = opvm_events_init(events, opvm_kick);
	if (ret)
		goto err_ring;
	ret = opvm_describe_init();
	if (ret)
		goto err_events;
	ret = opvm_dev_register(opvm_request_resync);
	if (ret)
		goto err_describe;
	ret = opvm_hooks_register();
	if (ret)
		goto err_dev;
	if (!track_mmap || opvm_hooks_mmap_register())
		opvm_rescan_on = true;
	opvm_kick();	/* HELLO, initial walk, SYNC */
	pr_info("loaded, %u slots at phys 0x%llx, %u-entry switch rings at phys 0x%llx, /dev/opvm ready\n",
		nr_cpu_ids, (unsigned long long)virt_to_phys(opvm_slots),
		opvm_switch_entries, opvm_switch_block ?
		(unsigned long long)virt_to_phys(opvm_switch_block) : 0ULL);
	return 0;

err_dev:
	opvm_dev_unregister();
err_describe:
	opvm_describe_exit();
err_events:
	opvm_events_exit();
err_ring:
	opvm_ring_exit();
err_slots:
	opvm_switch_free();
	kfree(opvm_slots);
	return ret;
}

/* opvm_init() backwards.  /dev/opvm cannot be open here (it holds a module
 * reference), and the worker still writes into the ring while it drains. */
static void __exit opvm_exit(void)
{
	opvm_hooks_mmap_unregister();
	opvm_hooks_unregister();
	opvm_dev_unregister();
	opvm_describe_exit();
	opvm_events_exit();
	opvm_ring_exit();
	opvm_switch_free();
	kfree(opvm_slots);
	pr_info("unloaded, %llu records lost in total\n",
		opvm_ring_lost_total());
}

module_init(opvm_init);
module_exit(opvm_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("opvm guest agent: processes, mappings, modules and per-CPU current task for a host-side profiler");
