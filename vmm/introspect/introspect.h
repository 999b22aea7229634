/* SPDX-License-Identifier: MIT */
/*
 * Introspection: what opvm.ko would tell the host, read from the guest's
 * own memory instead, for guests that run without the module (or before
 * it loads).  A second *source* of the channel's records: it emits
 * well-formed records of the wire format (guest-kmod/opvm_proto.h) that
 * the collector feeds through a decoder into the same guest-state model,
 * fetch and store as the module's, so attribution and the reports have
 * one path whatever the source.
 *
 * What it reads (docs/introspection.md): the VMCOREINFO page, found by
 * scanning guest RAM, for the release, the KASLR offset, phys_base and the
 * kernel page-table root; then kallsyms through those page tables, sent as
 * KSYMS records and a KSYMS_END (fetch.h writes <guest>/kallsyms from
 * them, as from the relay's); then the struct offsets from the kernel's own
 * BTF (libbpf) and init_task's process list, sent as PROC, EXEC and
 * PROC_EXIT records against the previous walk, and the loadable modules'
 * list, sent as MODULE and MODULE_FREE records and their text symbols as
 * a KSYMS transfer of the modules only (what opvm.ko's MODULE records and
 * "kmod" walk send).  The lists are walked when something changed, not at
 * every poll (introspect_poll()).
 *
 * Guest memory is hostile: every read goes through the one guest-memory
 * reader (vmm/guest/guestmem.h), which refuses anything outside guest RAM;
 * scans are bounded per call (introspect_config.scan_bytes), tables by
 * vmm/introspect/kallsyms.h's caps; what is refused is counted.  A lying
 * guest can mislabel its own samples, nothing else.
 *
 * Threads: one (the collector's).  The guestmem is borrowed and must
 * outlive the introspector.
 */
#ifndef OPVM_INTROSPECT_H
#define OPVM_INTROSPECT_H

#include <jansson.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

struct guestmem;
struct introspect;
struct kcurrent_info;		/* vmm/introspect/kcurrent.h */

enum introspect_mode {
	INTROSPECT_AUTO = 0,	/* when opvm.ko has not said it */
	INTROSPECT_OFF,		/* never */
	INTROSPECT_ONLY,	/* the channel is not read at all */
};
/* "auto", "off", "only" -> mode; -EINVAL for anything else. */
int introspect_parse_mode(const char *s, enum introspect_mode *out);
const char *introspect_mode_name(enum introspect_mode m);

struct introspect_config {
	uint64_t scan_bytes;	/* RAM scanned per poll; 0: 1 GiB */
	unsigned retry_ms;	/* between two full scans that found nothing;
				 * 0: 1000, doubling after 30 such scans up
				 * to 64 s */
	int no_ksyms;		/* 1: send no KSYMS */
	unsigned nr_cpus;	/* the guest's vCPUs: the current-task
				 * pointers introspect_tool.current gets */
};

/* What the parts count, shown through struct introspect_stats: each
 * process's executable mappings (kvmas.c) and the loadable modules
 * (kmods.c).  Defined here, on the room's face, so that a reader of the
 * statistics needs no header of the parts. */
struct kvmas_stats {
	const char *walk;		/* "maple_tree" (6.1 on) or "vma_list" */
	uint64_t refreshes;
	uint64_t procs_read;		/* mm trees walked */
	uint64_t procs_unchanged;	/* not read: same mm, counts and root */
	uint64_t procs_deferred;	/* left for the next refresh (budget) */
	uint64_t nodes, vmas;		/* tree nodes and VMAs read */
	uint64_t exec_maps;		/* executable file mappings in the last
					 * refresh, all processes */
	uint64_t maps_sent, munmaps_sent, cookies_sent;
	uint64_t tree_bad;		/* walks stopped at a bad node: type,
					 * pointer, pivots out of order; or
					 * at a list's VMA out of order */
	uint64_t tree_cut;		/* walks stopped at a cap: depth, nodes,
					 * VMAs */
	uint64_t vma_bad;		/* VMAs not read, or not where the tree
					 * says */
	uint64_t path_bad;		/* paths cut (depth, length, unreadable) */
	uint64_t buildid_missing;	/* files whose build-id did not read */
	uint64_t buildid_late;		/* of those, read at a later walk */
	uint64_t files_full;		/* file table full: emptied */
	uint64_t refresh_us;		/* the last refresh */
};

struct kmods_stats {
	uint64_t walks;
	uint64_t cut;			/* walks stopped at a cycle that misses
					 * the head, or at KMODS_MAX (kmods.h) */
	uint64_t bad_ptr;		/* walks stopped at a pointer that is not
					 * a kernel address or does not read */
	uint64_t refused;		/* modules whose name or text lie */
	uint64_t unformed;		/* modules still being loaded: skipped */
	uint64_t sym_reads;		/* modules whose symbols were read */
	uint64_t syms;			/* text symbols passed on */
	uint64_t syms_outside;		/* text symbols outside the text (its
					 * init code while it loads, or lies) */
	uint64_t syms_bad;		/* names that did not read or end */
	uint64_t syms_cut;		/* entries beyond KMODS_SYMS_MAX or the
					 * name bytes beyond KMODS_STR_MAX
					 * (kmods.h) */
	uint64_t tables_bad;		/* mod_kallsyms that does not read */
	uint64_t pages_unread;		/* symtab, typetab or strtab pages */
};

/* Where the search for the guest's kernel stands. */
enum introspect_state {
	INTROSPECT_SEARCHING = 0,	/* scanning guest RAM for VMCOREINFO */
	INTROSPECT_READY,		/* found: kallsyms, processes, modules */
	INTROSPECT_FAILED,		/* given up (not reached by today's
					 * search: it backs off instead) */
};
/* "searching", "ready", "failed": session.json's words for them. */
const char *introspect_state_name(enum introspect_state s);

struct introspect_stats {
	enum introspect_state state;
	uint64_t passes;		/* full scans of RAM that found nothing */
	uint64_t scanned_bytes;
	uint64_t vmcoreinfo_gpa;	/* 0: not found yet */
	uint64_t kernel_offset;		/* the KASLR slide (VMCOREINFO) */
	uint64_t pgd_gpa;		/* the kernel's page-table root */
	char release[66];
	char build_id[41];		/* vmlinux's, hex, from VMCOREINFO; "" */
	uint64_t stext;			/* run-time _stext (VMCOREINFO) */
	uint64_t text_addr;		/* run-time _text (kallsyms), 0: not seen */
	uint32_t nr_syms;		/* kallsyms_num_syms */
	uint64_t ksyms_sent;		/* text symbols sent as KSYMS */
	uint64_t ksyms_records;		/* KSYMS records, vmlinux's and the
					 * modules' (the collector tells them
					 * from the relay's) */
	uint64_t ksyms_other;		/* symbols not sent: data, too long */
	uint64_t ksyms_bad;		/* names that did not decode */
	uint64_t ksyms_unsorted;	/* addresses that went backwards */
	uint64_t ksyms_bytes_read;
	uint64_t kallsyms_ms;		/* finding and decoding the table */
	/* where the tables' addresses came from: "vmcoreinfo", "search"
	 * (the image searched by shape, before 6.0: kallsyms_find()), or
	 * NULL: not known */
	const char *kallsyms_from;
	uint64_t kallsyms_search_bytes;	/* of the image searched */
	uint64_t kallsyms_search_candidates;	/* digit runs checked */
	uint64_t refused;		/* VMCOREINFO pages or tables refused */
	/* processes (from the guest's BTF and init_task's list) */
	uint64_t btf_bytes;		/* 0: no offsets, no processes */
	uint64_t tasks;			/* processes in the last walk */
	uint64_t walks, walks_cut, walks_bad_ptr, walk_failed, task_dups;
	uint64_t procs_sent, execs_sent, exits_sent;
	/* CGROUP records sent (a new process, or one whose cgroup node
	 * changed), and paths that did not read or were cut (ktasks.h) */
	uint64_t cgroups_sent, cgroups_bad, cgroups_cut;
	uint64_t refresh_us;		/* the last walk and its records */
	int procs_live;			/* 1: a walk announced the processes */
	/* When the lists were walked (introspect_poll()): the words read at
	 * each poll to see a change ("total_forks,nr_threads,modules"; NULL:
	 * not in the guest's kallsyms, every poll walks), the polls that
	 * did not walk, and why the others did: the first polls after the
	 * kernel was found, the probe unreadable, the probe changed, samples
	 * waiting for a walk, none for 10 s */
	const char *probe;
	uint64_t probe_bad;		/* probes that did not read (walked) */
	uint64_t polls_quiet;
	uint64_t walks_boot, walks_unprobed, walks_changed, walks_wanted, walks_floor;
	uint64_t current_reads, current_bad;	/* introspect_current() */
	/* kernel stacks indexed (introspect_task_by_sp()), those that did
	 * not read, and the stack pointers looked up and named */
	uint64_t stacks, stacks_bad, sp_lookups, sp_named;
	uint64_t reboots;		/* VMCOREINFO changed: searched anew */
	/* executable mappings (vmm/introspect/kvmas.h); NULL: not read
	 * (maps_error says why) */
	const struct kvmas_stats *maps;
	char maps_error[128];
	/* loadable modules (vmm/introspect/kmods.h), walked at every poll
	 * while opvm.ko is silent; NULL: not read (modules_error says why) */
	const struct kmods_stats *modules;
	const char *modules_layout;	/* "core_layout" (6.1), "mem" (6.4) */
	uint64_t nr_modules;		/* in the last walk */
	uint64_t modules_sent, modules_freed;	/* MODULE, MODULE_FREE */
	uint64_t module_dups;		/* a name twice in one walk: dropped */
	uint64_t modsyms_transfers, modsyms_sent;	/* KSYMS of modules */
	uint64_t modules_walk_us;	/* the last walk of the list */
	uint64_t modsyms_us;		/* the last walk and symbol transfer */
	char modules_error[160];
	char last_error[160];
	/* user binaries' dynamic symbols read from memory
	 * (introspect_image_syms()) */
	struct introspect_memsyms {
		uint64_t files;		/* ELFs made */
		uint64_t refused;	/* headers or tables that lie */
		uint64_t absent;	/* a header or table not resident */
		uint64_t empty;		/* no function symbol to keep */
		uint64_t budget;	/* cut: pages per binary or session */
		uint64_t syms, syms_absent, syms_bad;	/* kept, left out */
		uint64_t plt, plt_stubs;	/* PLT sections named, stubs verified */
		uint64_t plt_refused;	/* PLT tables that lie, stubs through no relocation's slot */
		uint64_t pages, pages_absent;	/* pages read, not resident */
		uint64_t us;		/* time spent reading */
		char last_refusal[96];
	} memsyms;
};

/*
 * What introspection hands on, and how: one table of callbacks, in the
 * manner of perf's struct perf_tool, given to each poll.  Introspection is
 * a source; whoever consumes it (the collector) learns what it found from
 * these calls alone, never by reading its statistics to decide what to
 * copy.  Every pointer argument is valid during the call only.
 */
struct introspect_task {		/* one process of a walk */
	uint32_t tgid;
	uint64_t cr3;			/* as the kernel has it (not normalised);
					 * 0: a kernel thread */
	char comm[16 + 1];
};
struct introspect_walk {
	uint64_t walks;			/* walks so far, this one counted */
	const struct introspect_task *tasks;	/* sorted by tgid */
	size_t nr_tasks;
};
struct introspect_progress {
	enum introspect_state state;
	/* Processes will be announced soon: still searching early in the
	 * boot, or found and the first walk not done yet.  A sample of an
	 * address space nobody named is then worth holding. */
	bool procs_expected;
	bool procs_live;		/* a walk announced the processes */
	bool maps;			/* and each one's executable mappings */
	uint64_t walks;			/* of the process list, so far */
	bool ksyms_sent;		/* vmlinux's symbols went as KSYMS */
	const char *release;		/* the kernel's; "" before it is found */
};
struct introspect_tool {
	void *arg;			/* passed to every callback */
	/* One record of the wire format (guest-kmod/opvm_proto.h), the
	 * channel's own: len bytes, 8-aligned, header included.  Must not be
	 * NULL. */
	void (*record)(void *arg, const void *rec, size_t len);
	/* The process list was walked during this poll (whether its
	 * records went out or opvm.ko speaks for the guest): the processes
	 * it found, to compare with another source.  May be NULL. */
	void (*walked)(void *arg, const struct introspect_walk *w);
	/* At the end of every poll: where the search stands.  May be NULL. */
	void (*progress)(void *arg, const struct introspect_progress *p);
	/* Where each guest CPU's current-task pointer is (as
	 * introspect_current_info() gives it, for config.nr_cpus CPUs; a
	 * sampler reads them in its stops, vmm/introspect/kcurrent.h), when
	 * that changes: found, or lost at a reboot (known false).  Nothing
	 * before it is first known.  Looked for at every poll only while this
	 * is set (guest memory is read for it).  May be NULL. */
	void (*current)(void *arg, const struct kcurrent_info *ci, bool known);
};

/* Returns NULL and sets errno.  cfg may be NULL for the defaults. */
struct introspect *introspect_new(struct guestmem *m, const struct introspect_config *cfg);
void introspect_free(struct introspect *in);	/* NULL-safe */

/* A sample waits for what the next walk of the process list would bring
 * (a process, an exec's new address space, a mapping: attribution holds
 * it): walks soon, at most once every 500 ms and, while such walks find
 * nothing new (code outside every file mapping: a JIT), less and less
 * often, down to once every 4 s.  NULL-safe. */
void introspect_walk_wanted(struct introspect *in);
/*
 * What the host learned since the last poll, told with it: the one way the
 * rest of the session speaks to introspection, beside its samples'
 * introspect_walk_wanted().  relay_ksyms and module_active, once told,
 * hold for the session.
 */
struct introspect_news {
	/* opvm.ko's relay sends the kernel's symbols itself: no more KSYMS
	 * from here (two transfers into one kallsyms file would interleave) */
	bool relay_ksyms;
	/* opvm.ko speaks for the guest (its HELLO): no more process records
	 * (the process list is still walked, for introspect_tool.walked: at
	 * every poll for the first 10 walks, then every 10 s).  KSYMS still
	 * go: its relay sends vmlinux's symbols only when the host asks, and
	 * the host asks when introspection has none.  The first time also
	 * ends a search's back-off: this poll scans. */
	bool module_active;
	/* The guest's operating system started (or started again after a
	 * reboot): a search backed off scans once a second again, for a
	 * while. */
	bool os_started;
	/* The session's end: this poll only sends the modules' symbols still
	 * owed (their set changed less than 2 s after the last transfer),
	 * from the last walk. */
	bool final;
};

/*
 * Does a bounded step of work: scans for VMCOREINFO (at most scan_bytes),
 * or decodes kallsyms once it is found and emits the records, or walks
 * the process list (at most KTASKS_MAX) and emits what changed.  now_ms: a
 * monotonic clock; news may be NULL (nothing new).  Returns 0, or -errno
 * for a host-side failure (never for what the guest's memory holds).
 *
 * The walk (the module list, the process list and the mappings of what
 * changed: ~17 guest reads a process) is made at a poll only when it may
 * bring something.  Without opvm.ko: at each of the first 10 polls after
 * the kernel was found (its boot), when the probe (the kernel's fork
 * count total_forks, its thread count nr_threads and the newest module,
 * three reads) differs from the last walk's or does not read, when a
 * sample waits (introspect_walk_wanted()) or a mapping's build-id is
 * still to be read, and at least every 10 s (what no probe
 * sees, a cgroup move, a module unloaded from the middle of the list).
 * With opvm.ko (the cross-check): the first 10 polls, then every 10 s.
 */
int introspect_poll(struct introspect *in, uint64_t now_ms, const struct introspect_news *news,
		    const struct introspect_tool *t);

/* A new consumer of introspect_tool.current (another sampler) was told
 * nothing: the next poll tells it what is known, as the first time. */
void introspect_current_again(struct introspect *in);

const struct introspect_stats *introspect_get_stats(const struct introspect *in);

/*
 * Introspection's counters and findings for session.json "introspect"
 * (introspect-json.c), that the collector adds its own to: the mode is
 * given because a guest without an introspector (in NULL: mode "off",
 * or no guest memory to read) still has one, and is all there is
 * then.  Its "kernel" member is the kernel as introspection found it
 * (release, _stext, _text, build-id) in the shape of session.json's own
 * "kernel" (source "introspection"), absent while the release is unknown.
 * NULL: ENOMEM.
 */
json_t *introspect_to_json(const struct introspect *in, enum introspect_mode mode);

/*
 * The task guest CPU cpu runs now (its per-CPU current-task pointer; see
 * ktasks.h), for a vCPU the caller has stopped: exact whatever CR3 the
 * vCPU runs on.  QEMU's vCPU i is the guest's CPU i (ACPI enumerates
 * them in that order).  Returns 0, -ENOENT (not known yet: no kernel
 * found, or its kallsyms lack __per_cpu_offset and current_task/pcpu_hot,
 * or no BTF offsets), -EINVAL or -EFAULT (what the guest holds does not
 * read; counted in current_bad).
 */
struct ktask_cur;
int introspect_current(struct introspect *in, unsigned cpu, struct ktask_cur *out);

/*
 * For a sampler that reads the current-task pointers itself, in its own
 * stops (vmm/introspect/kcurrent.h): where CPU 0..nr_cpus's pointers are
 * (guest-physical) and how to name a task.  Returns 0, or -ENOENT (not
 * known yet, as for introspect_current(), or no CPU's area reads).
 */
int introspect_current_info(struct introspect *in, unsigned nr_cpus, struct kcurrent_info *out);

/*
 * The task whose kernel stack holds sp (ktasks.h: the first walk's tasks,
 * init_task and each CPU's idle task), for a kernel sample taken before
 * the kernel was found, which carries no task but its stack pointer: the
 * boot's swapper, init and kthreads.  An interrupt stack names no task.
 * Returns 0, or -ENOENT (no walk yet, or no task's stack holds sp).
 */
int introspect_task_by_sp(struct introspect *in, uint64_t sp, uint32_t *tgid, bool *kthread);

/*
 * The dynamic symbols of the ELF file that the address space cr3 (as guest
 * state names it: normalised, lib/sample.h) maps executable at exec, as a
 * small ELF file with bid as its build-id (vmm/introspect/memsyms.h; *out
 * malloc'd, *len bytes), for a binary the host has no file of.  Works
 * whether opvm.ko speaks or not: it needs only guest memory and a user
 * address space.  Bounded per session: at most
 * INTROSPECT_MEMSYMS_PAGES pages read and INTROSPECT_MEMSYMS_FILES
 * binaries.  Returns 0, memsyms_read()'s -ENOENT, -ENODATA, -EINVAL, -E2BIG, or
 * -ENOSPC (the session's budget is spent); counted in stats.memsyms.
 */
#define INTROSPECT_MEMSYMS_PAGES	65536u		/* 256 MiB a session */
#define INTROSPECT_MEMSYMS_FILES	1024u
struct introspect_map {		/* an executable file mapping */
	uint64_t start, end;		/* [start, end) */
	uint64_t pgoff;			/* the file offset at start */
};
int introspect_image_syms(struct introspect *in, uint64_t cr3, const struct introspect_map *exec,
			  const uint8_t *bid, size_t bid_len, void **out, size_t *len);
/* Whether a file introspect_image_syms() made, from its first len bytes
 * (an ELF header's at least), is of today's making: one made by an older
 * opvm lacks the PLT's names and is made again.  1 or 0. */
int introspect_image_syms_current(const void *head, size_t len);

#endif /* OPVM_INTROSPECT_H */
