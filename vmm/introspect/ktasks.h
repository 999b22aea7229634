/* SPDX-License-Identifier: MIT */
/*
 * The guest kernel's process list, walked from init_task's `tasks` list
 * with the offsets of its own BTF (vmm/introspect/kbtf.h): per process its
 * tgid, parent, comm and address space (the physical address of mm->pgd,
 * the CR3 its threads run on; 0 for kernel threads).
 *
 * The list is guest memory, read while the guest runs: it may be torn,
 * cyclic, or point anywhere.  Every pointer is checked to be a kernel
 * address before it is followed, a cycle that does not return to the head
 * is found (Brent's method: within twice its start and length) and ends
 * the walk, as do max entries (both counted), and a process seen twice in
 * one walk is dropped (counted).
 */
#ifndef OPVM_KTASKS_H
#define OPVM_KTASKS_H

#include <stddef.h>
#include <stdint.h>

#include "unwind/unwind.h"
#include "vmm/introspect/kbtf.h"

#define KTASKS_MAX	32768u		/* processes per walk (default cap) */

struct ktask {
	uint64_t task;			/* its task_struct */
	uint32_t tgid, ppid;
	uint64_t cr3;			/* 0: a kernel thread (no mm) */
	uint64_t mm;			/* its mm_struct (kvmas.h); 0: none */
	uint64_t cgroup_kn;		/* its cgroup's kernfs node; 0: unknown
					 * (ktasks_cgroup_path() names it) */
	char comm[16 + 1];
};

/* Kernel memory: reads (through the kernel's page tables) and a virtual to
 * physical translation for mm->pgd. */
struct ktasks_mem {
	struct unwind_mem read;
	int (*v2p)(void *arg, uint64_t va, uint64_t *pa);
	void *arg;
};

struct ktasks_stats {
	uint64_t walks;
	uint64_t cut;			/* walks stopped at a cycle that misses
					 * the head, or at the cap */
	uint64_t bad_ptr;		/* walks stopped at a pointer that is not
					 * a kernel address or not readable */
	uint64_t dups;			/* processes seen twice in a walk */
	uint64_t no_pgd;		/* mm whose pgd did not translate */
	uint64_t cgroup_bad;		/* tasks whose cgroup did not read, and
					 * paths refused (a loop, too deep, a
					 * bad pointer) */
	uint64_t cgroup_cut;		/* paths cut at their byte cap */
};

/* Walks the list from init_task into out[0..max), sorted by tgid, no
 * duplicates; *n gets the count.  Returns 0 (a walk cut short is still 0,
 * with what it found) or -EFAULT when init_task itself cannot be read. */
int ktasks_walk(const struct ktasks_mem *km, const struct kbtf_offsets *o,
		uint64_t init_task, struct ktask *out, size_t max, size_t *n,
		struct ktasks_stats *st);

/*
 * The path of cgroup node kn (struct ktask.cgroup_kn) as the kernel prints
 * it ("/", "/system.slice/x.service"): the names from kn up to the root,
 * at most KTASKS_CGROUP_DEPTH of them (more is a loop or a lie), each
 * name at most 255 bytes ('/' in one becomes '?'), into out[0..cap) (cap
 * >= 2), NUL-terminated.  Returns its length, cut at cap - 1 with *cut
 * set when longer, or -EFAULT (a pointer that is not a kernel address or
 * does not read) or -ELOOP (deeper than the cap); counted in st.
 */
#define KTASKS_CGROUP_DEPTH	64
int ktasks_cgroup_path(const struct ktasks_mem *km, const struct kbtf_offsets *o, uint64_t kn,
		       char *out, size_t cap, int *cut, struct ktasks_stats *st);

/*
 * A stopped vCPU's current task: the kernel keeps, per CPU, a pointer to
 * the task it runs (6.1: the per-CPU variable current_task; 6.2 and later:
 * pcpu_hot, whose first member it is), at __per_cpu_offset[cpu] plus the
 * variable's per-CPU offset.  With it, a sample names its task exactly,
 * whatever CR3 it ran on (a reused page-table root, a kernel thread on a
 * borrowed mm, the boot's swapper and init before any walk).
 */
#define KTASKS_MAX_CPUS	1024u		/* guest CPUs (x86-64 NR_CPUS default
					 * is 64..8192; QEMU allows 1024 here) */

struct ktask_cur {
	uint64_t task;			/* the task_struct's address */
	uint32_t tid, tgid;
	uint64_t cr3;			/* 0: a kernel thread (no mm) */
	char comm[16 + 1];
	uint8_t kthread;		/* no mm (the idle tasks too) */
};

/* Per CPU 0..nr (<= KTASKS_MAX_CPUS) the kernel address of its current-
 * task pointer, from the array at per_cpu_offset (the symbol's address)
 * and the per-CPU variable's offset cur_off.  Returns 0, -EINVAL (nr or
 * an address out of range: a CPU whose base is not a kernel address) or
 * -EFAULT (the array cannot be read). */
int ktasks_current_slots(const struct ktasks_mem *km, uint64_t per_cpu_offset,
			 uint64_t cur_off, unsigned nr, uint64_t *out);

/* The task whose pointer is at slot (ktasks_current_slots()) into *out.
 * Returns 0, -EFAULT (the slot or the task cannot be read) or -EINVAL
 * (the pointer is not a kernel address). */
int ktasks_current(const struct ktasks_mem *km, const struct kbtf_offsets *o,
		   uint64_t slot, struct ktask_cur *out);
/* The same for the task at t (a pointer read elsewhere, e.g. in a
 * sampler's stop: vmm/introspect/kcurrent.h). */
int ktasks_task(const struct ktasks_mem *km, const struct kbtf_offsets *o, uint64_t t,
		struct ktask_cur *out);

/*
 * Which task a kernel stack pointer runs on: each task's kernel stack is
 * THREAD_SIZE bytes from task_struct.stack (16 KiB on x86-64 without
 * KASAN).  Samples taken before the kernel was found carry only their
 * stack pointer; the tasks of the first walk (the boot's init, kthreads),
 * init_task (swapper/0) and each CPU's idle task then name them.
 */
#define KTASKS_THREAD_SIZE	16384u
#define KTASKS_MAX_STACKS	(KTASKS_MAX + KTASKS_MAX_CPUS + 1)

struct kstack {
	uint64_t lo;			/* the stack's base; sp in [lo, lo + THREAD_SIZE) */
	uint32_t tgid;
	uint8_t kthread;		/* no mm (idle tasks too) */
};

/*
 * The stacks of tasks[0..n), of init_task and of the idle tasks whose
 * pointers are at idle_slots[0..nr_idle) (kernel addresses of the per-CPU
 * idle_threads), sorted, into out (KTASKS_MAX_STACKS entries); returns
 * their count.  A task whose stack does not read, is not a kernel address
 * or is not aligned to THREAD_SIZE is left out (counted in *bad).
 */
size_t ktasks_stacks(const struct ktasks_mem *km, const struct kbtf_offsets *o,
		     uint64_t init_task, const uint64_t *idle_slots, unsigned nr_idle,
		     const struct ktask *tasks, size_t n, struct kstack *out, uint64_t *bad);
/* The entry of stacks[0..n) whose stack holds sp, or NULL. */
const struct kstack *ktasks_stack_find(const struct kstack *stacks, size_t n, uint64_t sp);

#endif /* OPVM_KTASKS_H */
