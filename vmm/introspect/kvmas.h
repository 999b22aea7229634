/* SPDX-License-Identifier: MIT */
/*
 * Each process's executable file mappings, read from guest memory: the
 * VMAs of its mm (the maple tree mm->mm_mt, Linux 6.1 and later, or the
 * list mm->mmap of vm_next before), each
 * mapped file's path (its dentry chain, across mounts) and build-id (the
 * ELF header, program headers and PT_NOTE of the file as the process maps
 * it, through that process's page tables).  They go out as the records
 * opvm.ko sends for the same facts (guest-kmod/opvm_proto.h): COOKIE once
 * per file, then MMAP and MUNMAP against what was sent before, so
 * attribution, fetch (by build-id) and the reports work unchanged.
 *
 * Guest memory is hostile: every pointer is checked to be a kernel
 * address before it is followed, the tree's node types, pivots and depth
 * are checked, and every walk is capped (nodes and VMAs per process, VMAs
 * per refresh, path depth and length, ELF headers and notes); what is
 * refused is counted.  A process whose mm looks the same as at the last
 * refresh (same mm, map_count, exec_vm and tree root) is not read again.
 *
 * Threads: one (the introspector's).
 */
#ifndef OPVM_KVMAS_H
#define OPVM_KVMAS_H

#include <stddef.h>
#include <stdint.h>

#include "unwind/unwind.h"
#include "vmm/introspect/introspect.h"
#include "vmm/introspect/kbtf.h"
#include "vmm/introspect/ktasks.h"

#define KVMAS_DEPTH_MAX		31u	/* maple tree levels (MAPLE_HEIGHT_MAX) */
#define KVMAS_NODES_MAX		4096u	/* tree nodes read per process */
#define KVMAS_VMAS_MAX		16384u	/* VMAs looked at per process */
#define KVMAS_EXEC_MAX		512u	/* executable file mappings kept per process */
#define KVMAS_REFRESH_VMAS	65536u	/* VMAs looked at per refresh, all processes */
#define KVMAS_PATH_DEPTH	32u	/* path components */
#define KVMAS_PATH_MAX		1024u	/* path bytes */
#define KVMAS_FILES_MAX		4096u	/* files remembered (cookies) */
#define KVMAS_BID_TRIES		8u	/* refreshes that try a build-id again */
/* Introspection's cookie ids: far from opvm.ko's (which count from 1), so
 * the module taking over never renames one of them. */
#define KVMAS_COOKIE_BASE	(1ull << 62)

/* Guest memory: kernel reads (through the kernel's page tables) and user
 * reads through a process's page-table root. */
struct kvmas_mem {
	struct unwind_mem kread;
	int (*uread)(void *arg, uint64_t cr3, uint64_t va, void *buf, size_t len);
	void *arg;
};

/* A record of the wire format without its header (type, len: the bytes
 * used, header included); the caller fills the header. */
typedef void (*kvmas_emit_fn)(void *arg, void *rec, unsigned type, size_t len);

struct kvmas;

/* Returns NULL (errno set). */
struct kvmas *kvmas_new(const struct kbtf_vma_offsets *o);
void kvmas_free(struct kvmas *v);		/* NULL-safe */
/* Forgets every process and file (the guest rebooted). */
void kvmas_reset(struct kvmas *v);

/*
 * The walk t[0..n) (sorted by tgid, unique, as ktasks_walk() gives it,
 * whose PROC, EXEC and PROC_EXIT records were just sent: an EXEC dropped
 * the process's mappings) against the last: each user process whose mm
 * changed is read and what changed sent.  Returns 0 or -ENOMEM.
 */
int kvmas_refresh(struct kvmas *v, const struct kvmas_mem *mem, const struct ktask *t,
		  size_t n, kvmas_emit_fn emit, void *arg);

/* Processes the last refresh left to the next: cut by the refresh's
 * budget, or mapping a file whose build-id is still to be read (at most
 * KVMAS_BID_TRIES refreshes).  The next refresh should not wait long. */
size_t kvmas_unsettled(const struct kvmas *v);

const struct kvmas_stats *kvmas_get_stats(const struct kvmas *v);

#endif /* OPVM_KVMAS_H */
