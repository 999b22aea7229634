/* SPDX-License-Identifier: MIT */
/*
 * Sampler backends: everything that takes samples from a hypervisor sits
 * behind struct sampler_ops.  A backend is created by its own constructor
 * (its configuration differs: a gdbstub address, a kernel to boot...), and
 * from then on driven only through the ops.
 *
 * Contract: between start() and stop(), the backend pushes samples into the
 * rings of the sink it was given (one producer thread per ring), never
 * allocates or locks on that path, and counts what it throttles.  (One
 * exception: a backend that samples in several threads takes turns on the
 * sink's Python name table, which has one producer at a time.)  A backend
 * knows rings (lib/ring.h), never the collector that drains them: vmm/
 * includes nothing from host/.
 *
 * The guest channel is read by the collector alone (one framer, one
 * decoder): a backend that needs what the guest module announces (where
 * the current-task slots and the task-switch rings are) is told through
 * guest_hello, never reads the channel itself.
 */
#ifndef OPVM_SAMPLER_H
#define OPVM_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

struct sampler;
struct ring;
struct kcurrent_info;
struct chan_hello;		/* lib/channel.h */
struct pynames;

/* Where a backend puts its samples: rings[i] takes vCPU i's samples.  The
 * caller (the collector) owns the array and the rings; both outlive stop(). */
struct sampler_sink {
	struct ring *const *rings;
	unsigned nr_rings;
	/* Python frames a sampler reads go here, their indices in the chain
	 * (lib/pynames.h); NULL: the collector takes none.  The sampler's
	 * thread is its one producer. */
	struct pynames *py;
};

enum sampler_state {
	SAMPLER_RUNNING = 0,
	SAMPLER_TARGET_GONE = 1,	/* guest powered off / QEMU exited */
};

struct sampler_stats {
	uint64_t ticks;			/* sampling attempts */
	uint64_t samples;		/* samples pushed */
	uint64_t throttled;		/* ticks skipped by the rate cap */
	uint64_t cost_ns_total;		/* host time spent taking samples */
	uint64_t exits;			/* VM exits / stops caused */
	/* The current task read by introspection (guest_current), per
	 * sample: named it (no module slot), or compared it with the
	 * module's slot (same tgid or not), or could not read it; and the
	 * kernel samples (protected mode) that neither source named. */
	uint64_t cur_named, cur_agree, cur_differ, cur_bad, kernel_no_task;
	/* Python frames (docs/runtimes.md), for backends that read them:
	 * user samples in CPython address spaces, samples filed with Python
	 * frames, frames dropped because they changed under the read; the
	 * perf sampler's reads dropped because the task switched between the
	 * sample and the read's end (or was never named), user samples seen
	 * too late to read; guest bytes and host CPU time of the reads. */
	uint64_t py_samples, py_kept, py_changed, py_switched, py_stale, py_bytes,
		py_cost_ns;
};

/*
 * Call graphs, for backends that stop the vCPU at a sample (gdbstub, the
 * built-in VMM): each sample's chain of callers, read from guest memory
 * while the vCPU is stopped.  User stacks by frame pointers; kernel stacks
 * by the guest kernel's own ORC tables (unwind/orc.h), then on into the
 * interrupted task's user stack.  The ORC tables' run-time addresses come
 * from the guest's own kallsyms when its relay sends them (guest_orc), or
 * from System.map (link-time, looked up by the session) plus the slide,
 * which the sampler works out from HELLO's anchor symbol.
 * A backend that cannot unwind (perf) refuses a mode other than NONE.
 */
enum sampler_callgraph {
	SAMPLER_CG_NONE = 0,
	SAMPLER_CG_FP,			/* frame pointers (and ORC in the kernel) */
	SAMPLER_CG_DWARF,		/* + a copied user stack window, unwound
					 * with the binaries' CFI by the collector */
};
#define SAMPLER_CG_ANCHORS	2
/* Where the guest kernel's ORC tables are, run-time addresses. */
struct sampler_orc {
	uint64_t ip_start, ip_stop, orc_start;
	/* the kernel's release (its ORC format); empty: the HELLO's holds */
	char release[65 + 1];
};
struct sampler_callgraph_cfg {
	enum sampler_callgraph mode;
	unsigned max_depth;		/* 1..UNWIND_MAX_DEPTH; 0: the maximum */
	/* link-time addresses, 0 if System.map has none: kernel samples
	 * then keep their leaf only */
	uint64_t orc_ip_start, orc_ip_stop, orc_start;
	struct { char name[32]; uint64_t addr; } anchors[SAMPLER_CG_ANCHORS];
};

/*
 * CPython processes (docs/runtimes.md): the address spaces whose executable
 * exports _PyRuntime (one named python3.N), each with where that
 * executable's first page is mapped.  A backend that reads call graphs in
 * its stops reads their Python frames there too.  The whole set each time
 * it changes; nr 0: none.
 */
#define SAMPLER_PYTHON_MAX	64
struct sampler_python {
	unsigned nr;
	struct {
		uint64_t cr3;		/* normalised */
		uint64_t exe_base;	/* the executable at file offset 0 */
		uint32_t version;	/* PY_VERSION_HEX its name says (3.N) */
	} as[SAMPLER_PYTHON_MAX];
};

/*
 * The guest kernel's int3 entry path (asm_exc_int3, exc_int3, the handlers
 * it calls), run-time addresses [start, end), from its kallsyms: a backend
 * that can drop QEMU's translated code watches for a vCPU looping there
 * (vmm/guest/int3loop.h).  nr 0: not known.
 */
#define SAMPLER_INT3_MAX	8
struct sampler_int3 {
	unsigned nr;
	struct { uint64_t start, end; } r[SAMPLER_INT3_MAX];
};

struct sampler_ops {
	const char *name;		/* "gdbstub", "kvm" */
	/* Begin sampling into the sink's rings (the struct is copied, the
	 * array it points to is not).  Returns 0 or -errno. */
	int (*start)(struct sampler *s, const struct sampler_sink *sink);
	/* Stop sampling; after return no thread touches the rings. */
	void (*stop)(struct sampler *s);
	/* enum sampler_state, or -errno for a fault (message in last_error). */
	int (*status)(struct sampler *s);
	/* Human-readable last fault, or NULL. */
	const char *(*last_error)(struct sampler *s);
	void (*get_stats)(struct sampler *s, struct sampler_stats *out);
	/*
	 * The guest module said HELLO (it loaded, or the guest rebooted): from
	 * now on its slots and rings are where h says.  May be NULL.  Called
	 * from the collector's thread at any time between the backend's
	 * constructor and free(), sampling or not; the backend publishes h to
	 * its sampling threads itself, without blocking them.
	 */
	void (*guest_hello)(struct sampler *s, const struct chan_hello *h);
	/* After a HELLO: the guest's kallsyms (host/collect/fetch.h) located
	 * that boot's kernel ORC tables, so call graphs need no System.map.
	 * Called from the collector's thread like guest_hello, again after
	 * each HELLO whose kallsyms come.  May be NULL. */
	void (*guest_orc)(struct sampler *s, const struct sampler_orc *o);
	/* Introspection (vmm/introspect/kcurrent.h) found where each guest
	 * CPU's current-task pointer is (ci->nr 0: no longer known, e.g. a
	 * reboot): the backend reads it at each sample and names the task in
	 * the sample's slot fields where the module's slot gives none, and
	 * compares the two where it does (stats' cur_*).  Called from the
	 * collector's thread like guest_hello, again whenever it changes.
	 * May be NULL. */
	void (*guest_current)(struct sampler *s, const struct kcurrent_info *ci);
	/* The guest's CPython processes changed (struct sampler_python).
	 * Called from the collector's thread like guest_hello.  May be NULL. */
	void (*guest_python)(struct sampler *s, const struct sampler_python *p);
	/* The guest kernel's int3 entry path (struct sampler_int3), after
	 * each boot's kallsyms.  Called from the collector's thread like
	 * guest_hello.  May be NULL. */
	void (*guest_int3)(struct sampler *s, const struct sampler_int3 *r);
	/* What the summary says about how samples were taken, beyond the
	 * stats: lines of at most 78 columns, each ending in '\n', into buf.
	 * May be NULL. */
	void (*describe)(struct sampler *s, char *buf, size_t len);
	/* NULL-safe destructor; stops first if needed. */
	void (*free)(struct sampler *s);
};

struct sampler {
	const struct sampler_ops *ops;
	void *priv;
};

#endif /* OPVM_SAMPLER_H */
