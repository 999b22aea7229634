/* SPDX-License-Identifier: GPL-2.0 */
/*
 * opvm.ko internals.
 *
 * Three layers, each with one job:
 *  - hooks.c: tracepoint, kprobe and module-notifier callbacks.  They run in
 *    atomic context on hot paths, so they only update the per-CPU slot and
 *    switch ring (sched_switch) or push a small fixed-size event into the
 *    FIFO (events.c), taking references on the mm/file the worker will need.
 *  - describe.c: the single worker (an ordered workqueue).  It turns events
 *    into channel records: paths, build-ids and VMA walks need to sleep, so
 *    they happen only here.  Cookies are only touched by the worker, which
 *    therefore needs no lock for them.
 *  - ring.c: the bounded record ring read through /dev/opvm.  When it is
 *    full, records are dropped and counted, and a LOST record with the count
 *    goes out as soon as there is room.
 * ksyms.c sends the kernel's symbols when the relay asks ("ksym").
 * Under them slots.c owns what the host reads from guest memory (slots,
 * switch rings).  Calls go one way, down: main.c -> hooks.c -> events.c ->
 * ring.c; main.c -> describe.c -> events.c, ring.c; main.c -> ksyms.c ->
 * ring.c, describe.c (opvm_lookup_name); hooks.c and describe.c -> slots.c.
 * Where a lower file must reach up (the FIFO waking the worker, /dev/opvm
 * asking for a resync or the symbols) it calls a function main.c handed it.
 */
#ifndef OPVM_H
#define OPVM_H

#include <linux/types.h>
#include <linux/mm_types.h>
#include <linux/fs.h>
#include <linux/sched.h>
#include "opvm_proto.h"

/* ---- ring.c -------------------------------------------------------------- */
int opvm_ring_init(size_t size);
void opvm_ring_exit(void);
/*
 * Append one record: rec points to a record whose header's type and len are
 * set; magic and seq are filled in here.  Returns 0 or -ENOSPC (counted as
 * lost).  Any context.
 */
int opvm_ring_put(void *rec);
/*
 * Append bulk data (kernel symbols, files): only while the ring is at most
 * half full after it and a HELLO is queued, so process and mapping records
 * always find room.  Returns 0 or -EAGAIN (try later; nothing counted).
 */
int opvm_ring_put_bulk(struct opvm_rec_hdr *hdr);
/* Count records dropped before they reached the ring. */
void opvm_ring_lost(u64 n);
u64 opvm_ring_lost_total(void);
void opvm_ring_reset(void);
/* on_sync: called when a reader writes "sync" (a host connected);
 * on_ksyms: when it writes "ksym" (kptr_restrict hides the symbols:
 * modules_only false) or "kmod" (the host has vmlinux's: true). */
int opvm_dev_register(void (*on_sync)(void), void (*on_ksyms)(bool modules_only));
void opvm_dev_unregister(void);

/* ---- events (hooks.c produces, describe.c consumes) ---------------------- */
enum opvm_ev_type {
	OPVM_EV_FORK = 1,	/* new process: mm (ref) may be set */
	OPVM_EV_THREAD,		/* new thread */
	OPVM_EV_EXEC,		/* mm (ref) and file (ref, the executable) */
	OPVM_EV_EXIT,		/* a thread exits; group_dead: it saw the last */
	OPVM_EV_MMAP,		/* file (ref) may be set */
	OPVM_EV_MUNMAP,
	OPVM_EV_MODULE,
	OPVM_EV_MODULE_FREE,
	OPVM_EV_CGROUP,		/* tgid moved to another cgroup */
};

struct opvm_event {
	u16 type;
	u32 pid;
	u32 tgid;
	u32 ppid;
	u32 prot;
	bool group_dead;
	u64 cr3;
	struct mm_struct *mm;	/* mmget() reference or NULL */
	struct file *file;	/* get_file() reference or NULL */
	union {
		struct {
			u64 start, end, pgoff;
		} map;
		struct {
			u64 base, size;
		} mod;
	};
	char name[OPVM_MODNAME_LEN];	/* comm (16) or module name */
};

/* ready: called after each event is published, from the hook's context. */
int opvm_events_init(unsigned int nr, void (*ready)(void));
void opvm_events_exit(void);
/* Drop the mm/file references an event holds; may sleep. */
void opvm_event_release(struct opvm_event *ev);
/*
 * Reserve, fill and publish an event from any context.  Returns false (and
 * counts a lost record) when the FIFO is full; the caller must then not take
 * references.
 */
struct opvm_event *opvm_event_reserve(unsigned long *flags);
void opvm_event_commit(struct opvm_event *ev, unsigned long flags);
bool opvm_event_pop(struct opvm_event *out);
unsigned int opvm_events_pending(void);

int opvm_hooks_register(void);
void opvm_hooks_unregister(void);
int opvm_hooks_mmap_register(void);	/* kprobes; failure is not fatal */
void opvm_hooks_mmap_unregister(void);

/* ---- describe.c ---------------------------------------------------------- */
int opvm_describe_init(void);
void opvm_describe_exit(void);
void opvm_kick(void);			/* queue the worker */
void opvm_request_resync(void);		/* HELLO and the walk again */
unsigned long opvm_lookup_name(const char *name);	/* kallsyms_lookup_name() */
extern bool opvm_rescan_on;		/* walk exec'd processes again later */

/* ---- ksyms.c ------------------------------------------------------------- */
/*
 * The kernel's and modules' text symbols as KSYMS records from opvm.ko's own
 * walk, for the host only, when kptr_restrict hides them from the relay, or
 * the modules' alone when the host has vmlinux's from elsewhere.
 */
void opvm_ksyms_start(bool modules_only);	/* (re)start the walk */
void opvm_ksyms_cancel(void);		/* a new host session: drop it */

/* ---- slots.c ------------------------------------------------------------- */
int opvm_slots_init(unsigned int switch_entries);
void opvm_slots_seed(void);		/* what runs on each CPU now */
void opvm_slots_exit(void);
extern struct opvm_slot *opvm_slots;
/*
 * Task-switch rings (opvm_proto.h): one per possible CPU, ring i at
 * opvm_switch_block + i * opvm_switch_stride, in one physically contiguous
 * block.  opvm_switch_entries is a power of two.  NULL block: none.
 */
extern void *opvm_switch_block;
extern u32 opvm_switch_stride, opvm_switch_entries;
/* Appends next (with the slot's cr3 and flags) to this CPU's ring. */
void opvm_switch_log(struct task_struct *next, u64 cr3, u32 flags);
u64 opvm_mm_cr3(struct mm_struct *mm);

#endif /* OPVM_H */
