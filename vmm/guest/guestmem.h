/* SPDX-License-Identifier: MIT */
/*
 * Guest memory reader: guest-physical reads of a running guest from the host,
 * without stopping it.  One mechanism for every backend that needs guest RAM
 * (the perf backend's switch rings, the gdbstub backend's slots, call graphs).
 *
 * A reader holds a table of RAM ranges {gpa, len, hva} of one process that
 * maps the guest's RAM (QEMU, or opvm's own VMM) and reads them through
 * /proc/PID/mem (pread) or process_vm_readv.  For QEMU the ranges come from
 * the monitor (`info mtree -f` for the RAM regions, `gpa2hva` for their host
 * address); for the built-in VMM from its own memory layout.
 *
 * Every read is bounded: a read that is not wholly inside one range fails
 * with -EFAULT, never reads host memory outside guest RAM.  Reads of a running
 * guest may be torn: callers use the guest's own seq protocols.
 *
 * The gdbstub backend does not use it: its vCPUs are stopped anyway, and one
 * gdbstub round trip carries the registers and the slot.  The built-in VMM
 * reads its own mapping in-process (kvm_vm_gpa()).
 *
 * Threads: add ranges first, from one thread; afterwards guestmem_read and
 * guestmem_virt_to_phys may be called from any number of threads.
 */
#ifndef OPVM_GUESTMEM_H
#define OPVM_GUESTMEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/x86.h"

struct guestmem;
struct qmp;

/* Reader of process pid's memory.  Returns NULL and sets errno. */
struct guestmem *guestmem_open(pid_t pid);
void guestmem_close(struct guestmem *m);	/* NULL-safe */

/* Adds one RAM range.  Overlapping ranges are refused (-EEXIST).
 * Returns 0 or -errno. */
int guestmem_add_range(struct guestmem *m, uint64_t gpa, uint64_t len,
		       uint64_t hva);

/* Runs one HMP command on a QEMU's monitor (QMP human-monitor-command, or
 * libvirt's monitor passthrough); *out is malloc'd.  0 or -errno. */
typedef int (*guestmem_hmp_fn)(void *arg, const char *cmd, char **out);

/* Fills the ranges of a QEMU guest from its monitor: the RAM and ROM regions
 * of the system address space (`info mtree -f`), each at its `gpa2hva`
 * address, which must lie wholly inside the mappings of m's process
 * (/proc/PID/maps): else nothing is added and -EFAULT (the monitor does not
 * describe that process).  Returns 0, -ENXIO (no region found) or -errno. */
int guestmem_add_monitor_ranges(struct guestmem *m, guestmem_hmp_fn hmp, void *arg);
/* A guestmem_hmp_fn for a QMP connection (arg: struct qmp *). */
int guestmem_qmp_hmp(void *qmp, const char *cmd, char **out);
/* guestmem_add_monitor_ranges() through a QMP connection. */
int guestmem_add_qemu_ranges(struct guestmem *m, struct qmp *q);

/*
 * Reads without a system call: the ranges that the VMM maps from a shared
 * file (QEMU with memory-backend-memfd or -file share=on, as opvm run -g
 * starts it) are mapped into opvm read-only through /proc/PID/map_files
 * (root only), and their reads become memory copies; the others keep
 * pread.  Why: under nested virtualisation a pread of /proc/PID/mem costs
 * microseconds, and a page-table walk takes four.  Returns how many ranges
 * are mapped (0: none could be), or -errno.
 */
int guestmem_map_shared(struct guestmem *m);

/* Reads without a system call when the guest's RAM is this process's
 * own (the built-in VMM's sampler reading its guest): every range's host
 * address is used as it is.  Returns how many ranges, or -EINVAL when m
 * reads another process. */
int guestmem_map_self(struct guestmem *m);

/* Number of ranges held. */
unsigned guestmem_nr_ranges(const struct guestmem *m);
/* Range i (0 .. nr - 1, in guest-physical order): its start and length.
 * Returns 0 or -ERANGE. */
int guestmem_range(const struct guestmem *m, unsigned i, uint64_t *gpa, uint64_t *len);

/* Reads len bytes at guest-physical gpa.  Returns 0 or -errno (-EFAULT:
 * outside guest RAM or the read came back short). */
int guestmem_read(struct guestmem *m, uint64_t gpa, void *buf, size_t len);

/* Translates a guest-virtual address through the guest page tables rooted at
 * cr3 (4- and 5-level, 4K/2M/1G pages).  Only cr3's bits 51:12 are used (the
 * PCID and bit 63 are dropped); a PTI user CR3 (bit 12) is the caller's to
 * normalise.  Returns 0 or -errno (-ENOENT: not mapped, -EFAULT: a table
 * outside guest RAM). */
int guestmem_virt_to_phys(struct guestmem *m, uint64_t cr3, uint64_t va,
			  uint64_t *gpa);

/* Reads len bytes at guest-virtual va in the address space rooted at cr3,
 * page by page (each translated with guestmem_virt_to_phys).  Returns 0 or
 * -errno (-ENOENT: a page not mapped, -EFAULT: outside guest RAM). */
int guestmem_read_virt(struct guestmem *m, uint64_t cr3, uint64_t va, void *buf,
		       size_t len);

/*
 * A view of one guest address space for the stack walkers of unwind/: an
 * unwind_mem whose reads go through the page tables rooted at cr3 and keep
 * the last few pages they touched, so a walk that reads 16 bytes a frame
 * costs one page-table walk and one read per stack page, not per frame.
 * At most max_pages distinct pages are fetched per guestmem_view_reset()
 * (a hostile frame chain that jumps from page to page ends early, with
 * -EFAULT).  A view is one thread's: the samplers keep one each.
 */
#define GUESTMEM_VIEW_PAGES	8
struct guestmem_view_page {
	uint64_t va;			/* page address; 1: empty slot */
	uint8_t data[OPVM_PAGE_SIZE];
};
struct guestmem_view {
	struct guestmem *m;
	uint64_t cr3;
	unsigned budget;		/* page fetches left */
	unsigned next;			/* slot to replace next */
	uint64_t fetches;		/* pages read since init (statistics) */
	struct guestmem_view_page page[GUESTMEM_VIEW_PAGES];
};
void guestmem_view_init(struct guestmem_view *v, struct guestmem *m);
/* A new sample: address space cr3 (normalised here), up to max_pages page
 * fetches.  Forgets the cached pages: the guest ran since. */
void guestmem_view_reset(struct guestmem_view *v, uint64_t cr3, unsigned max_pages);
/* The unwind_mem read callback (arg: the view): 0 or -EFAULT. */
int guestmem_view_read(void *arg, uint64_t gva, void *buf, size_t len);

/* Paging levels for guestmem_virt_to_phys: 4 (default) or 5 (CR4.LA57). */
void guestmem_set_paging_levels(struct guestmem *m, unsigned levels);

#endif /* OPVM_GUESTMEM_H */
