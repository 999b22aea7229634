// SPDX-License-Identifier: GPL-2.0
/*
 * opvm.ko: tells a host-side profiler which guest task runs where.
 *
 * Load order: slots and switch rings, ring, event FIFO, worker, /dev/opvm,
 * hooks, the slots' and rings' seed, then the first work item sends HELLO,
 * describes what already exists and sends SYNC.  Unload runs the same steps backwards; the hooks go
 * first so nothing new is queued while the rest is torn down.  The layers
 * are wired here: the FIFO wakes the worker and /dev/opvm asks it to resync
 * through callbacks, so no file below calls one above.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/io.h>
#include <linux/module.h>
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

/* A host connected: HELLO and the walk again; a symbol transfer still
 * open belonged to the last host (the relay asks again). */
static void opvm_on_sync(void)
{
	opvm_ksyms_cancel();
	opvm_request_resync();
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

	ret = opvm_slots_init(switch_entries);
	if (ret)
		return ret;

	ret = opvm_ring_init((size_t)ring_kb * 1024);
	if (ret)
		goto err_slots;
	ret = opvm_events_init(events, opvm_kick);
	if (ret)
		goto err_ring;
	ret = opvm_describe_init();
	if (ret)
		goto err_events;
	ret = opvm_dev_register(opvm_on_sync, opvm_ksyms_start);
	if (ret)
		goto err_describe;
	ret = opvm_hooks_register();
	if (ret)
		goto err_dev;
	/*
	 * Seeded after the sched_switch hook is in: a switch between the two
	 * is logged either way, so no interval of a ring names a task that
	 * was not running.  (The IPI and the hook both run with interrupts
	 * off on that CPU: they do not interleave.)
	 */
	opvm_slots_seed();
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
	opvm_ksyms_cancel();
err_describe:
	opvm_describe_exit();
err_events:
	opvm_events_exit();
err_ring:
	opvm_ring_exit();
err_slots:
	opvm_slots_exit();
	return ret;
}

/* opvm_init() backwards.  /dev/opvm cannot be open here (it holds a module
 * reference), and the worker still writes into the ring while it drains. */
static void __exit opvm_exit(void)
{
	opvm_hooks_mmap_unregister();
	opvm_hooks_unregister();
	opvm_dev_unregister();
	opvm_ksyms_cancel();
	opvm_describe_exit();
	opvm_events_exit();
	opvm_ring_exit();
	opvm_slots_exit();
	pr_info("unloaded, %llu records lost in total\n",
		opvm_ring_lost_total());
}

module_init(opvm_init);
module_exit(opvm_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("opvm guest agent: processes, mappings, modules and per-CPU current task for a host-side profiler");
