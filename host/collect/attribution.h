/* SPDX-License-Identifier: MIT */
/*
 * Sync: drains one guest's per-vCPU rings, attributes every sample with the
 * guest-state model and adds it to the guest's sample files.
 *
 * Attribution rules (OProfile's, adapted to a whole guest):
 *
 *  Kernel samples (CPL != 3):
 *   - image: the module whose core text holds rip (gstate_module_find), file
 *     offset rip - base; otherwise "vmlinux" at the run-time address (the
 *     report removes the KASLR slide).  kernel = 1.  An address in the x86-64
 *     module area that no known module covers is held like a late user
 *     sample (below), then filed under vmlinux, counted in lost_no_mapping.
 *   - task: named by the current-task slot (OPVM_SAMPLE_SLOT), never by CR3:
 *     kernel threads run on whatever CR3 the last user task left (lazy TLB).
 *     Without a slot, CR3 names the process.
 *   - "{idle}" for pid 0 (by the slot) and "{boot}" for an address below
 *     the kernel half (firmware, boot loader, decompressor) are their own
 *     app whatever the separation, tgid/tid 0: reports show them as
 *     "(idle)" and "(firmware/boot)".
 *   - app: with OPVM_SEP_KERNEL, the task's executable path (else its comm);
 *     "{kthread}" for kernel threads, "{unknown}" for a
 *     task the model still does not know after hold_ms (held until then,
 *     like a late user sample), and the image itself (vmlinux) while the
 *     guest module has not spoken (no process is known: mostly boot).
 *     Without OPVM_SEP_KERNEL the app is the image itself, as in OProfile.
 *  User samples (CPL 3):
 *   - process: normalised CR3 -> gstate_proc_by_cr3(); else the slot's tgid
 *     if the model knows no address space for it (a process with another
 *     CR3 may just have exec'd: its old mappings must not name the new
 *     image's addresses).
 *   - mapping: gstate_map_find() (a forked child with no mappings described
 *     at all is looked up in its parent's: until it execs it is a copy);
 *     image = the cookie's path, offset
 *     rip - start + pgoff, build-id from the cookie; an anonymous executable
 *     mapping (cookie 0, e.g. a JIT) is image "{anon}" at the virtual address.
 *   - app: the process's executable path, else its comm.  OPVM_SEP_LIB keeps
 *     libraries under their app's {dep}; otherwise each image is its own app.
 *  User samples without a CR3 (the perf sampler: host perf gives no CR3, and
 *  with no task-switch timeline no task either: no OPVM_SAMPLE_SLOT, cr3 0):
 *   - process: the one whose mapping holds rip, by an interval index over
 *     every process's mappings (host/collect/execmap.h), rebuilt when the
 *     model changed; then image and offset as above.  Two or more processes
 *     mapping rip: app "{ambiguous}", never a guess, in the binary at its
 *     offset when they all map one file at one offset there, else image
 *     "{ambiguous}" at rip; none:
 *     held like a late sample while some source announces mappings, then
 *     app/image "{unmapped}" at rip.  Counted (attribution_get_bymap_stats).
 *  Everywhere: OPVM_SEP_THREAD keeps tgid/tid (else "all"), OPVM_SEP_CPU
 *  keeps the vCPU (else "all").  The tid comes from the slot, which is guest
 *  memory: a tid the model does not know as a thread of that process is
 *  held (below) and, on expiry, merged into the process's tgid, so a hostile
 *  slot cannot create files per made-up id.
 *
 * Late guest state: the channel may lag the sampler (a process runs before
 * its PROC/MMAP records are decoded).  A user sample whose process or mapping
 * is unknown while the guest module is present (a HELLO was seen) is held in
 * a bounded per-guest queue and retried at every sync for hold_ms.  On expiry
 * it is filed anyway, never dropped: under "{anon}" of its known process
 * (counted in lost_no_mapping) or under app/image "{anon-cr3:0x<cr3>}"
 * (counted in lost_no_process).  A full queue files its oldest sample the
 * same way to make room.  attribution_flush() files everything still held.
 *  Without any guest module (no HELLO ever), user samples go straight to
 * "{anon-cr3:0x<cr3>}" per address space (counted in unresolved), kernel
 * samples to vmlinux.
 *
 * Ordering: samples reach the rings at once, channel records with a delay,
 * so when a record that makes the model forget (PROC_EXIT, EXEC,
 * THREAD_EXIT, MUNMAP, a replacing MMAP or MODULE, a COOKIE giving a known
 * id another path or build-id, HELLO) is read, every
 * sample taken before the guest sent it is already in a ring.  The
 * collector therefore syncs (or at least drains) right before applying such
 * a record: a process that lives for less than a sync interval is still
 * attributed, and attribution_forget_process() files its held samples while the
 * model still knows it.
 *
 * Call chains are carried by the rings but not filed yet (the store keeps
 * flat profiles).
 *
 * Hot path: direct-mapped caches of recent user mappings (all vCPUs) and
 * kernel ranges (per vCPU: module text, or vmlinux between modules) with
 * their sample file and offset adjustment; behind them a two-way hash from
 * (app, image, tgid, tid, cpu, event) to the sample file.  Both are dropped in O(1)
 * (an epoch) whenever gstate_generation() moves.  Samples are queued as
 * (file, offset) and added file by file at the end of each call, which keeps
 * one file's table hot at a time; nothing stays queued between calls.
 *
 * Threads: everything runs in the caller's thread (the collector's loop);
 * only the rings are shared, with their producers.
 */
#ifndef OPVM_ATTRIBUTION_H
#define OPVM_ATTRIBUTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/sample.h"
#include "host/collect/stats.h"

struct attribution;
struct store;
struct gstate;
struct ring;

struct attribution_config {
	unsigned hold_ms;	/* how long to hold unresolved user samples;
				 * 0: file them at once */
	size_t hold_max;	/* held samples at most; 0: default 65536 */
	/* --from-exec: samples are counted (before_start), not filed, until
	 * the model holds a process whose executable's base name (or comm)
	 * is this; NULL: from the start.  Copied. */
	const char *start_exec;
	/* -g: every filed sample also goes into the stack table, with its
	 * chain (store_stack_add()), even a chain of its leaf alone, so the
	 * table's counts add up to the sample files'. */
	bool chains;
	/* -g dwarf: the host copy of a guest binary (its guest path and
	 * build-id) into out, 0 or -ENOENT, for the DWARF unwinder of
	 * OPVM_SAMPLE_STACK samples; NULL: their user part stops at its
	 * first frame. */
	int (*host_file)(void *arg, const char *path, const uint8_t *build_id,
			 size_t build_id_len, char *out, size_t outlen);
	void *host_file_arg;
	/* Called when a sample file is opened for a user image with a
	 * build-id (the collector asks the guest for that binary, fetch.h);
	 * may be called again for the same image.  NULL: nothing. */
	void (*image_used)(const struct gstate_cookie *c, void *arg);
	void *image_arg;
	/* Called when a sample file is opened for process tgid's anonymous
	 * memory (JIT code: the collector asks the guest for its perf map,
	 * fetch.h); may be called again.  NULL: nothing.  With image_arg. */
	void (*anon_used)(int64_t tgid, void *arg);
	/* -g dwarf: an unwind needed c's binary and the host has no file for
	 * it: 1 if the guest is sending it (asked now if need be), so the
	 * unwind waits for it (below); 0 if it will not come.  NULL: never
	 * waits.  Called with image_arg. */
	int (*image_wait)(const struct gstate_cookie *c, void *arg);
	/* The task whose kernel stack holds sp (an OPVM_SAMPLE_KSP sample:
	 * boot, before the kernel was found), 0 or -ENOENT; such samples are
	 * held while introspection still looks for the kernel (gstate's
	 * procs_expected).  NULL: they are filed as samples with no task. */
	int (*task_by_sp)(void *arg, uint64_t sp, uint32_t *tgid, bool *kthread);
	void *task_arg;
	/* A sample was held for guest state the model lacks (a process, a
	 * mapping, a thread, a module), once per sample, when it is first
	 * held: where introspection names the processes, only its next walk
	 * brings that, and introspection walks on change, not at every poll
	 * (the collector asks it for a walk, introspect_walk_wanted()).
	 * Called with task_arg.  NULL: nothing. */
	void (*on_hold)(void *arg);
	/* User samples are taken as host perf takes them: their CR3 and task
	 * dropped before attribution, so they are filed by mapping (above).
	 * For tests: host perf sees no guest code of a TCG guest, whose
	 * guest state is the same (tests/integration/introspect-nocr3.sh). */
	bool no_cr3;
	/* The table the sampler interns Python frames in (lib/pynames.h;
	 * the caller's, outliving this): samples whose chain carries them
	 * are filed under their innermost Python frame, and with -g their
	 * stacks keep them after the native frames (store.h, "Python
	 * frames").  NULL: such words are ignored. */
	struct pynames *py;
};

/*
 * First-session stacks (-g dwarf): a user stack whose unwind met a frame
 * in a binary the host does not have yet, while image_wait says the guest
 * is sending it, is not filed cut short: its sample is filed in the sample
 * files as usual, its registers, chain and stack copy wait in a bounded
 * queue (SYNC_DEFER_MAX entries, SYNC_DEFER_MAX_BYTES, SYNC_DEFER_MS) and
 * its unwind is redone after attribution_images_changed(), then filed in the
 * stack table.  What cannot wait (queue full, too old, the process gone or
 * changed, the end of the session) is unwound with what there is and
 * counted in cut_missing, as is every unwind that met a binary that never
 * came.
 */
#define SYNC_DEFER_MAX		8192
#define SYNC_DEFER_MAX_BYTES	((size_t)48 << 20)
#define SYNC_DEFER_MS		30000

struct attribution_dwarf_stats {
	uint64_t unwinds, frames, ns;	/* unwinds done (redone ones too),
					 * frames they gave, time (ns) */
	uint64_t waited;		/* stacks that waited for a binary */
	uint64_t redone;		/* ... and were whole once it came */
	uint64_t cut_missing;		/* stacks filed although a binary
					 * they went through was missing */
	uint64_t waiting;		/* in the queue now */
	uint64_t waiting_peak;		/* most at once */
};

/* User samples without a CR3, filed by mapping (the rules above). */
struct attribution_bymap_stats {
	uint64_t attributed;		/* one process's mapping held rip */
	uint64_t ambiguous;		/* several did: "{ambiguous}" */
	uint64_t unknown;		/* none did (or no index): "{unmapped}" */
	uint64_t index_builds;		/* interval index (re)builds */
	uint64_t index_mappings;	/* mappings in the last build */
	uint64_t index_over_cap;	/* builds refused: too many mappings */
	uint64_t py_unconfirmed;	/* Python frames dropped: read for another
					 * process than the mapping's, or with none */
};

/* rings[0..nr_rings) are drained in order; the sync does not own st, gs or
 * the rings.  cfg may be NULL for the defaults (hold 2000 ms).  Returns NULL
 * and sets errno. */
struct attribution *attribution_new(struct store *st, struct gstate *gs,
		      struct ring *const *rings, unsigned nr_rings,
		      const struct attribution_config *cfg);
/* Files from now on into st instead (a new window of `attach --window`,
 * host/collect/collector.h): every cached sample file of the old store is
 * forgotten and its stack table closed, so the old store may be closed
 * right after.  Held and deferred samples stay and go into st.  Call it
 * between two attribution_run()s (nothing queued).  0 or -EINVAL. */
int attribution_set_store(struct attribution *s, struct store *st);
void attribution_free(struct attribution *s);		/* NULL-safe; files nothing */

/* Retries held samples (filing those older than hold_ms), then drains every
 * ring.  now_ms is a monotonic clock in milliseconds.  Returns 0, or the
 * first -errno from the store (the samples concerned are counted in
 * attribution_store_errors(); draining goes on). */
int attribution_run(struct attribution *s, uint64_t now_ms);

/* A window of `attach --window` ends: files the held samples older than
 * hold_ms whatever they still wait for (as on expiry): each goes into the
 * first window to end after its hold time, not windows later; younger ones
 * wait on.  Call it before the sync that closes the window.  Returns as
 * attribution_run(). */
int attribution_window_end(struct attribution *s, uint64_t now_ms);

/* The model is about to forget process tgid (PROC_EXIT, EXEC): attribution_run(),
 * then file that process's held samples whatever they still lack (their
 * mapping or thread can no longer come), merged as on expiry.  Returns as
 * attribution_run(). */
int attribution_forget_process(struct attribution *s, uint32_t tgid, uint64_t now_ms);

/* Drains the rings only (held samples wait for the next attribution_run()).  For
 * the collector to call just before the model forgets something: see
 * "Ordering" above. */
int attribution_drain(struct attribution *s, uint64_t now_ms);

/* attribution_run(), then files every held sample at once (end of session). */
int attribution_flush(struct attribution *s, uint64_t now_ms);

/* Attributes one sample as if popped from a ring (tests, benchmarks). */
int attribution_sample(struct attribution *s, const struct opvm_sample *smp, uint64_t now_ms);

/* Totals so far: the sync's counters, lost_overflow summed over the rings (as
 * of their last drain, which counts every drop before what it read) and
 * guest_lost from the guest-state model.  throttled is left 0 (the sampler
 * knows it). */
void attribution_get_stats(const struct attribution *s, struct opvm_stats *out);
/* Samples so far that an operating system took (user mode, or a kernel
 * in the upper half) and that firmware or a boot loader took (ring 0
 * below it): the OS's start, or a reboot's, shows as the first of the
 * former after the latter. */
void attribution_os_counts(const struct attribution *s, uint64_t *os, uint64_t *boot);
/* With start_exec: 1 once that process appeared (*at_ms: the now_ms of the
 * sync call that saw it), else 0.  Without: 1, *at_ms 0. */
int attribution_started(const struct attribution *s, uint64_t *at_ms);
void attribution_get_bymap_stats(const struct attribution *s,
				 struct attribution_bymap_stats *out);
size_t attribution_nr_held(const struct attribution *s);
uint64_t attribution_store_errors(const struct attribution *s);

/* -g dwarf: user stacks unwound, the frames they gave, the time it took,
 * and the first-session waits above, since attribution_new(). */
void attribution_get_dwarf_stats(const struct attribution *s, struct attribution_dwarf_stats *out);

/* -g dwarf: a binary the guest was sending arrived (or its transfer
 * ended): the waiting unwinds are redone at the next attribution_run(). */
void attribution_images_changed(struct attribution *s);
/* Stacks waiting for a binary (first-session stacks above). */
size_t attribution_nr_deferred(const struct attribution *s);

#endif /* OPVM_ATTRIBUTION_H */
