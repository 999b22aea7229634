// SPDX-License-Identifier: MIT
/*
 * The "gdbstub" sampler backend for QEMU guests.  See gdbstub-sampler.h for
 * the design (tick thread, slot hand-over).
 */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "guest-kmod/opvm_proto.h"
#include "lib/pynames.h"
#include "lib/channel.h"
#include "lib/ring.h"
#include "lib/sample.h"
#include "vmm/guest/callgraph.h"
#include "vmm/introspect/kcurrent.h"
#include "vmm/qemu/gdbstub.h"
#include "vmm/guest/guestmem.h"
#include "vmm/guest/int3loop.h"
#include "vmm/guest/pyguest.h"
#include "vmm/qemu/gdbstub-sampler.h"
#include "lib/clock.h"
#include "lib/errbuf.h"

/* How long a running guest may take to answer "\x03" (a loaded host can be
 * slow), and how long we wait when we believe someone else paused it. */
#define STOP_TIMEOUT_MS		1000
/* How long the tick thread's last act (tick_settle()) waits for QEMU: a
 * guest left stopped by us is the one outcome never allowed, and a QEMU
 * starved by a loaded host (two busy loops and a build beside it) can take
 * longer than STOP_TIMEOUT_MS to answer the settling "qC".  Only a stopping
 * session waits, at most three times this against a QEMU that hangs. */
#define SETTLE_TIMEOUT_MS	5000
#define PAUSED_PROBE_MS		20
/* The guest keeps at least 4/5 of its time: with ticks costing C on
 * average, the next one waits at least 4*C. */
#define DUTY_FACTOR		4
/* Consecutive unusable answers before the sampler gives up. */
#define MAX_BAD_TICKS		20
/* A task pointer's name is read again after this long (a freed task_struct
 * reused by another task keeps the old name at most that long). */
#define CUR_MAX_AGE_NS		1000000000ll
/* While opvm.ko's slots name the tasks, the current-task pointers are read
 * for the cross-check only, at one stop in this many: two more answers a
 * stop (2 vCPUs) on top of five are not worth paying at every one. */
#define CUR_XC_EVERY		4
/* The longest a tick lets a stop's answers gather before it reads them
 * (gather_read()): a pause that lands mid-tick is seen, and restored,
 * after this long at the latest, as before this wait, when QEMU is quick. */
#define GATHER_MAX_NS		2000000ll

struct qsamp {
	struct sampler s;
	struct gdbstub *gs;
	unsigned nr_vcpus;		/* gdbstub threads */
	int64_t period_ns;
	int resume;
	struct sampler_sink sink;

	int efd;			/* wakes the tick thread on stop */
	atomic_int stop;
	atomic_int state;		/* enum sampler_state or -errno */
	char errmsg[256];		/* written before state is published */

	pthread_t tick;
	int tick_started;
	int ever_started;		/* start() ran: the guest is resumed */
	struct gdbstub_regs *regs;
	uint8_t *slotbuf;

	/* Call graphs (NULL: none): chains walked while the guest is stopped,
	 * chain[i * UNWIND_MAX_DEPTH...] for vCPU i. */
	struct callgraph *cg;
	struct guestmem *mem;
	uint64_t *chains;
	unsigned *nchain;
	struct callgraph_user *users;	/* per vCPU, SAMPLER_CG_DWARF only */
	uint64_t kernel_cr3;		/* a kernel-mode CR3 seen, for ORC */
	/* Python frames of user samples in CPython processes (with call
	 * graphs: read in the same stop), PYFRAMES_MAX_DEPTH per vCPU. */
	struct pyguest *py;
	struct guestmem_view *pyview;
	struct pyframe *pyfr;
	unsigned *npy;

	/* Slot array, published by one writer (the collector's thread,
	 * through guest_hello) with a sequence count. */
	atomic_uint slot_gen;		/* odd while being written */
	_Atomic uint64_t slot_pa;
	atomic_uint slot_size, nr_slots;

	/* Each vCPU's current task (introspection, guest_current): the
	 * collector publishes a copy (cur_pub), the tick thread takes it and
	 * reads the pointers in its stops (cur: NULL when none are known). */
	_Atomic(struct kcurrent_info *) cur_pub;
	struct kcurrent *cur;
	uint64_t cur_pa[KCURRENT_MAX_CPUS];	/* the words to read, cur_n of them */
	unsigned cur_n;
	int cur_on;			/* the gdbstub reads them now */
	_Atomic uint64_t cur_named, cur_agree, cur_differ, cur_bad, kernel_no_task;

	/* Relay. */
	/* Statistics, written by the tick thread (hellos: guest_hello). */
	_Atomic uint64_t ticks, samples, throttled, cost_ns, exits;
	_Atomic uint64_t hellos, slot_reads, slot_odd, paused_ticks, resets, max_cost;
	_Atomic uint64_t late_stops, restores;
	/* pyguest's counters, for get_stats from other threads */
	_Atomic uint64_t py_samples, py_kept, py_changed, py_bytes, py_cost_ns;

	/* A vCPU looping on a stale int3 (TCG only, int3loop.h): the
	 * collector publishes where the int3 path is (i3_pub), the tick
	 * thread watches its samples (i3) and drops QEMU's translated code
	 * with a single step.  test_flush_at: OPVM_TEST_TB_FLUSH's one
	 * forced step (ns, monotonic; 0: none). */
	struct int3loop *i3;
	_Atomic(struct sampler_int3 *) i3_pub;
	int64_t test_flush_at;
	_Atomic uint64_t tb_flushes, int3_loops, steps_late, step_ns;
};

static const struct sampler_ops qemu_sampler_ops;

static struct qsamp *to_q(struct sampler *s)
{
	return s->priv;
}

static void set_fault(struct qsamp *q, int err, const char *fmt, const char *detail)
{
	snprintf(q->errmsg, sizeof(q->errmsg), fmt, detail);
	atomic_store_explicit(&q->state, err, memory_order_release);
}

/* ---- slot hand-over ------------------------------------------------------- */

static void set_slots(struct qsamp *q, uint64_t slot_pa, uint32_t slot_size,
		      uint32_t nr_slots)
{
	unsigned gen = atomic_load_explicit(&q->slot_gen, memory_order_relaxed);

	/* Release stores: a reader that sees any new field also sees the odd
	 * count stored before it, and rejects the snapshot. */
	atomic_store_explicit(&q->slot_gen, gen + 1, memory_order_relaxed);
	atomic_store_explicit(&q->slot_pa, slot_pa, memory_order_release);
	atomic_store_explicit(&q->slot_size, slot_size, memory_order_release);
	atomic_store_explicit(&q->nr_slots, nr_slots, memory_order_release);
	atomic_store_explicit(&q->slot_gen, gen + 2, memory_order_release);
}

/* A consistent snapshot, or 0 if none is published or it is being
 * rewritten right now. */
static int get_slots(struct qsamp *q, unsigned *gen, uint64_t *pa, uint32_t *size, uint32_t *nr)
{
	unsigned g1 = atomic_load_explicit(&q->slot_gen, memory_order_acquire), g2;

	if (g1 == 0 || (g1 & 1))
		return 0;
	/* Acquire loads: the second count cannot be read before them. */
	*pa = atomic_load_explicit(&q->slot_pa, memory_order_acquire);
	*size = atomic_load_explicit(&q->slot_size, memory_order_acquire);
	*nr = atomic_load_explicit(&q->nr_slots, memory_order_acquire);
	g2 = atomic_load_explicit(&q->slot_gen, memory_order_relaxed);
	*gen = g1;
	return g1 == g2;
}

/* ---- tick thread ---------------------------------------------------------- */

/* Sleeps until deadline (monotonic ns) or until stop is signalled. */
static void wait_until(struct qsamp *q, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - clk_now_ns();
		struct pollfd pfd = { .fd = q->efd, .events = POLLIN };
		struct timespec ts;

		if (left <= 0 || atomic_load(&q->stop))
			return;
		ts.tv_sec = left / 1000000000;
		ts.tv_nsec = left % 1000000000;
		if (ppoll(&pfd, 1, &ts, NULL) > 0)
			return;
	}
}

struct tick_state {
	int outstanding;	/* we sent "\x03" and saw no stop reply yet */
	int paused;		/* someone else paused the guest */
	int resync;		/* a batch timed out: read its late answers first */
	int resync_marker;	/* it found the guest paused by someone else */
	int c_after;		/* and a "c" went after it */
	int ours;		/* stopped by us, our "c" not sent yet */
	unsigned flush;		/* 1 + the vCPU to step at the next stop of
				 * ours (drops QEMU's translated code), 0 */
	unsigned bad_gen;	/* slot generation invalidated by a reset */
	unsigned bad_ticks;
	int64_t gather_ns;	/* see gather_read() */
	int64_t took_ns;	/* the answers' time, when last waited for */
	int64_t slept;		/* this tick's wait past it: not its cost */
};

/* The task vCPU i ran, by the pointer read in the stop: into smp's slot
 * fields when the module's slot gave none (mod 0), else compared with it. */
static void cur_fill(struct qsamp *q, unsigned i, struct opvm_sample *smp, int mod, uint64_t now)
{
	struct ktask_cur t;
	uint64_t ptr;

	if (!q->cur || gdbstub_word(q->gs, i, &ptr) < 0 || !q->regs[i].cr3)
		return;
	if (kcurrent_task(q->cur, ptr, smp->cpl == 3, (uint64_t)now, &t)) {
		q->cur_bad++;
		return;
	}
	if (mod) {
		if (t.tgid == smp->slot_tgid)
			q->cur_agree++;
		else
			q->cur_differ++;
		return;
	}
	smp->flags |= OPVM_SAMPLE_SLOT;
	smp->slot_tid = t.tid;
	smp->slot_tgid = t.tgid;
	smp->slot_cr3 = t.cr3;
	if (t.kthread)
		smp->flags |= OPVM_SAMPLE_KTHREAD;
	q->cur_named++;
}

/*
 * vCPU i's chain with its Python frames after the native callers, as
 * indices of lib/pynames.h, into w and smp: the native part cut to leave
 * them room (OPVM_MAX_CALLCHAIN in all).  A frame the table refuses (full)
 * is left out with its callers.
 */
static void chain_with_python(struct qsamp *q, unsigned i, uint64_t *w, struct opvm_sample *smp)
{
	const struct pyframe *fr = q->pyfr + (size_t)i * PYFRAMES_MAX_DEPTH;
	unsigned npy = q->npy[i], nat = q->cg ? q->nchain[i] : 0, n;

	if (npy > PYFRAMES_MAX_DEPTH)
		npy = PYFRAMES_MAX_DEPTH;
	if (nat > OPVM_MAX_CALLCHAIN - npy)
		nat = OPVM_MAX_CALLCHAIN - npy;
	if (nat)
		memcpy(w, q->chains + (size_t)i * UNWIND_MAX_DEPTH, nat * sizeof(*w));
	n = nat;
	for (unsigned k = 0; k < npy; k++) {
		uint32_t idx;

		if (pynames_intern(q->sink.py, fr[k].name, fr[k].file, fr[k].first_line,
				   fr[k].line, &idx))
			break;
		w[n++] = idx;
	}
	smp->chain = w;
	smp->nr_chain = (uint8_t)n;
	smp->nr_py = (uint8_t)(n - nat);
}

static void push_samples(struct qsamp *q, struct tick_state *ts, unsigned n,
			 int have_slots, unsigned nr_slots)
{
	int64_t now = clk_now_ns();
	uint64_t w[OPVM_MAX_CALLCHAIN];

	for (unsigned i = 0; i < n && i < q->sink.nr_rings; i++) {
		struct opvm_sample smp = {
			.rip = q->regs[i].rip,
			.cr3 = q->regs[i].cr3,
			.vcpu = i,
			.cpl = (uint8_t)gdbstub_regs_cpl(&q->regs[i]),
		};

		if (q->cg && q->nchain[i]) {
			smp.chain = q->chains + (size_t)i * UNWIND_MAX_DEPTH;
			smp.nr_chain = (uint8_t)q->nchain[i];
		}
		if (q->npy && q->npy[i] && q->sink.py)
			chain_with_python(q, i, w, &smp);
		if (q->users && q->users[i].valid) {
			const struct callgraph_user *u = &q->users[i];

			smp.flags |= OPVM_SAMPLE_STACK;
			smp.user_ip = u->ip;
			smp.user_sp = u->sp;
			smp.user_bp = u->bp;
			smp.stack = u->stack;
			smp.stack_len = u->len;
		}

		if (have_slots && i < nr_slots) {
			struct opvm_slot sl;

			memcpy(&sl, q->slotbuf + (size_t)i * sizeof(sl), sizeof(sl));
			/* Odd: the vCPU stopped inside the writer's update. */
			if (le32toh(sl.seq) & 1) {
				q->slot_odd++;
			} else {
				smp.flags |= OPVM_SAMPLE_SLOT;
				smp.slot_tid = le32toh(sl.pid);
				smp.slot_tgid = le32toh(sl.tgid);
				smp.slot_cr3 = le64toh(sl.cr3);
				if (le32toh(sl.flags) & OPVM_SLOT_KTHREAD)
					smp.flags |= OPVM_SAMPLE_KTHREAD;
				q->slot_reads++;
			}
		}
		cur_fill(q, i, &smp, !!(smp.flags & OPVM_SAMPLE_SLOT), (uint64_t)now);
		if (!(smp.flags & OPVM_SAMPLE_SLOT) && smp.cpl == 0 && smp.cr3) {
			q->kernel_no_task++;
			/* its stack names the task later (lib/sample.h) */
			if (q->regs[i].rsp >= OPVM_KERNEL_HALF) {
				smp.flags |= OPVM_SAMPLE_KSP;
				smp.slot_cr3 = q->regs[i].rsp;
			}
		}
		if (ring_push(q->sink.rings[i], &smp) == 0)
			q->samples++;
		if (int3loop_sample(q->i3, i, smp.rip, now) && !ts->flush)
			ts->flush = i + 1;
	}
}

/* The thread vCPU i runs, from this stop's slot (len bytes of slots
 * read) or current-task pointer; 0 if neither names it. */
static uint32_t stop_tid(struct qsamp *q, unsigned i, size_t len, int user)
{
	struct opvm_slot sl;
	struct ktask_cur t;
	uint64_t ptr;

	if ((size_t)(i + 1) * sizeof(sl) <= len) {
		memcpy(&sl, q->slotbuf + (size_t)i * sizeof(sl), sizeof(sl));
		if (!(le32toh(sl.seq) & 1))
			return le32toh(sl.pid);
	}
	if (q->cur && q->cur_on && gdbstub_word(q->gs, i, &ptr) >= 0 &&
	    !kcurrent_task(q->cur, ptr, user, (uint64_t)clk_now_ns(), &t))
		return t.tid;
	return 0;
}

/* vCPU i's Python frames, if it runs CPython in user mode: in the stop
 * (with call graphs), or right after it (check: then validated). */
static void walk_python(struct qsamp *q, unsigned i, size_t len, int check)
{
	const struct gdbstub_regs *g = &q->regs[i];
	struct unwind_mem um = { guestmem_view_read, q->pyview };
	uint64_t cr3 = opvm_cr3_normalise(g->cr3);

	q->npy[i] = 0;
	if (gdbstub_regs_cpl(g) != 3 || !pyguest_is_python(q->py, cr3))
		return;
	guestmem_view_reset(q->pyview, cr3, PYGUEST_PAGES);
	q->npy[i] = pyguest_read(q->py, &um, cr3, stop_tid(q, i, len, 1),
				 q->pyfr + (size_t)i * PYFRAMES_MAX_DEPTH, PYFRAMES_MAX_DEPTH,
				 check);
}

/* The Python counters, for get_stats (other threads). */
static void py_publish(struct qsamp *q)
{
	struct pyguest_stats st;

	pyguest_get_stats(q->py, &st);
	q->py_samples = st.samples;
	q->py_kept = st.with_frames;
	q->py_changed = st.fr.changed;
	q->py_bytes = st.fr.bytes;
	q->py_cost_ns = st.cost_ns;
}

/* Without call graphs the stop ended with the read ("c" in the same
 * write): each vCPU's Python frames, read while it runs again. */
static void walk_python_after(struct qsamp *q, unsigned n, size_t len)
{
	for (unsigned i = 0; i < n; i++)
		walk_python(q, i, len, 1);
}

/* With every vCPU stopped: each one's call chain. */
static void walk_chains(struct qsamp *q, unsigned n, size_t len)
{
	for (unsigned i = 0; i < n; i++) {
		const struct gdbstub_regs *g = &q->regs[i];
		struct unwind_regs r = { .ip = g->rip, .sp = g->rsp, .bp = g->rbp,
					 .cpl = (uint8_t)gdbstub_regs_cpl(g) };

		q->nchain[i] = 0;
		if (q->npy)
			q->npy[i] = 0;
		if (q->users)
			q->users[i].valid = 0;
		if (!g->cr3 || !g->rsp)
			continue;	/* firmware, or a stub without rsp */
		if (r.cpl == 0)
			q->kernel_cr3 = g->cr3;
		q->nchain[i] = callgraph_walk(q->cg, &r, g->cr3,
					      q->chains + (size_t)i * UNWIND_MAX_DEPTH,
					      OPVM_MAX_CALLCHAIN, q->users ? &q->users[i] : NULL);
		if (q->py)
			walk_python(q, i, len, 0);
	}
}

/*
 * The fast path stopped the guest without "c": walk the stacks, then let it
 * run.  The guest stays stopped for the walk (a few page reads a vCPU);
 * a monitor "stop" that lands in that window is undone by the "c", which
 * is why a session without call graphs sends "c" in the same write.
 */
static int callgraph_stop(struct qsamp *q, struct tick_state *ts, unsigned n, size_t len,
			  int read_err)
{
	int err;

	/* registers that did not read are no place to walk from: the read's
	 * error is the tick's (no sample), not hidden by the "c" */
	if (!read_err)
		walk_chains(q, n, len);
	err = gdbstub_continue(q->gs);
	if (!err)
		ts->ours = 0;
	return read_err ? read_err : err;
}

/*
 * Finds out whether the guest runs when we have reason to doubt it (someone
 * paused it, or a stop reply is overdue): "+\x03" alone, and wait for the
 * answer.  Returns 1 when it is stopped by us now, 0 when it is not
 * running, -errno.
 */
static int probe_stop(struct qsamp *q, struct tick_state *ts)
{
	int err = gdbstub_drain(q->gs), stopped = 0;

	if (err < 0)
		return err;
	if (err > 0) {
		/* A stop reply we did not wait for: our own late one, or
		 * someone else paused the guest. */
		stopped = ts->outstanding;
		ts->paused = !stopped;
		ts->outstanding = 0;
		if (stopped)
			return 1;
	}
	err = gdbstub_interrupt(q->gs, ts->paused ? PAUSED_PROBE_MS : STOP_TIMEOUT_MS);
	if (err == -EALREADY) {
		stopped = ts->outstanding;
		ts->paused = !stopped;
		ts->outstanding = 0;
		return stopped;
	}
	if (err == -ETIMEDOUT) {
		/* Not running: QEMU ignores "\x03" while paused.  If it was
		 * slow instead, its reply comes later (above). */
		ts->outstanding = 1;
		ts->paused = 1;
		return 0;
	}
	if (err < 0)
		return err;
	ts->paused = 0;
	ts->outstanding = 0;
	return 1;
}

/* A monitor "stop" landed while the fast path's write was on its way
 * (c_went: a "c" of ours followed it).  Returns 0 or -errno. */
static int paused_meanwhile(struct qsamp *q, struct tick_state *ts, int c_went)
{
	int err;

	ts->paused = 1;
	q->paused_ticks++;
	if (!c_went)
		return 0;	/* the pause holds */
	/* our "c" undid it: restore that pause */
	q->restores++;
	err = gdbstub_interrupt(q->gs, STOP_TIMEOUT_MS);
	/* -ETIMEDOUT: its stop reply comes later and, with nothing
	 * outstanding, is taken for a pause. */
	if (err < 0 && err != -ETIMEDOUT && err != -EALREADY)
		return err;
	return 0;
}

/* A new guest_current() publication, if any, into the stops: one 8-byte
 * read per vCPU from now on (or none). */
static void cur_take(struct qsamp *q)
{
	struct kcurrent_info *ci = atomic_exchange(&q->cur_pub, NULL);
	unsigned n;

	if (!ci)
		return;
	kcurrent_free(q->cur);
	q->cur = NULL;
	n = ci->nr < q->nr_vcpus ? ci->nr : q->nr_vcpus;
	if (n && q->mem && !gdbstub_set_words(q->gs, ci->slot_pa, n))
		q->cur = kcurrent_new(q->mem, ci, CUR_MAX_AGE_NS);
	q->cur_on = !!q->cur;
	if (!q->cur)
		gdbstub_set_words(q->gs, NULL, 0);
	q->cur_n = q->cur ? n : 0;
	memcpy(q->cur_pa, ci->slot_pa, (size_t)q->cur_n * sizeof(q->cur_pa[0]));
	free(ci);
}

/* Read the pointers at this stop?  Always without the module's slots; with
 * them, at one stop in CUR_XC_EVERY. */
static void cur_arm(struct qsamp *q, int have_slots)
{
	int on = q->cur && (!have_slots || q->ticks % CUR_XC_EVERY == 0);

	if (on == q->cur_on)
		return;
	q->cur_on = on;
	gdbstub_set_words(q->gs, q->cur_pa, on ? q->cur_n : 0);
}

/*
 * A fast-path batch got no (or not all) answers in time: a slow QEMU, a
 * loaded host.  QEMU has read it, so the guest is stopped now, by it or by
 * someone else before it (stopped as gdbstub_stop_sample() says, -1: not
 * known yet).  Without call graphs the batch carried its "c"; with them
 * the "c" goes now, unless the guest is known to have been paused by
 * someone else: a stop of ours waits for no answer (it was taken for
 * someone else's pause once the late answers came, and the guest stayed
 * paused for the rest of the session).  The late answers are read next
 * tick (resync()); they tell whether that "c" undid someone's pause.
 */
static int batch_late(struct qsamp *q, struct tick_state *ts, int stopped)
{
	int err = 0;

	ts->resync = 1;
	ts->resync_marker = stopped == 0 || stopped == 2;
	ts->c_after = !q->cg;
	if (q->cg && !ts->resync_marker) {
		err = gdbstub_continue(q->gs);
		ts->c_after = !err;
		if (err == -EPIPE)
			return err;
	}
	return ++ts->bad_ticks >= MAX_BAD_TICKS ? -ETIMEDOUT : 0;
}

/* The tick after a timed-out batch: its late answers, before anything else
 * is sent, so the next batch reads its own.  0 or -errno. */
static int resync(struct qsamp *q, struct tick_state *ts)
{
	int marker = 0, err = gdbstub_catch_up(q->gs, STOP_TIMEOUT_MS, &marker);

	if (err == -ETIMEDOUT)
		return ++ts->bad_ticks >= MAX_BAD_TICKS ? err : 0;
	if (err < 0)
		return err;
	ts->resync = 0;
	if (marker || ts->resync_marker)
		return paused_meanwhile(q, ts, ts->c_after);
	return 0;
}

/*
 * The fast path's write with its "c", then its answers read in one go.
 * QEMU writes an acknowledgement and a reply for each request, each in a
 * write of its own (a dozen a stop with two vCPUs), and a thread waiting
 * on the socket is woken for most of them, each wake-up most of what
 * reading them costs.  So the tick sleeps until they should all be in,
 * ts->gather_ns after its write: half as long again as they took the last
 * time some came late and were waited for, shortened by 1/64 at each tick
 * they were all in, down to where some are late again; then it reads
 * them with one call.  The guest runs meanwhile (the
 * write resumed it); a pause that landed while the write was on its way is
 * seen as soon as before, give or take that margin, and at most
 * GATHER_MAX_NS after the write when QEMU answers in time.
 */
static int gather_read(struct qsamp *q, struct tick_state *ts, unsigned n, uint64_t pa,
		       size_t len, int *merr, int *stopped)
{
	int err = gdbstub_stop_sample_send(q->gs, n, pa, len, 1);
	int64_t t0 = clk_now_ns(), waited, took, cap = q->period_ns / (DUTY_FACTOR + 1);
	unsigned long waits;

	*stopped = 0;
	if (err)
		return err;
	if (ts->gather_ns)
		wait_until(q, t0 + ts->gather_ns);
	waited = clk_now_ns() - t0;
	waits = gdbstub_waits(q->gs);
	err = gdbstub_stop_sample_recv(q->gs, q->regs, q->slotbuf, merr, stopped);
	took = clk_now_ns() - t0;
	if (gdbstub_waits(q->gs) == waits) {
		/* All in: the tick counts as its cost the time they took
		 * when last waited for, not its margin on that. */
		if (waited > ts->took_ns)
			ts->slept = waited - ts->took_ns;
		ts->gather_ns -= ts->gather_ns / 64;
	} else {
		ts->took_ns = took;
		ts->gather_ns = took + took / 2;
	}
	if (cap > GATHER_MAX_NS)
		cap = GATHER_MAX_NS;
	if (ts->gather_ns > cap)
		ts->gather_ns = cap;
	return err;
}

/*
 * The fast path: stop, read and resume in one write, which QEMU handles in
 * one pass of its main loop, so no monitor command can come in between: a
 * "stop" from the monitor or libvirt lands before (its stop reply makes the
 * drain inside return -EALREADY, or, sent in the last microseconds, is
 * taken for ours and undone) or after (it holds).  Sending "c" only after
 * reading the answers would leave the guest stopped by us for a round trip,
 * during which a monitor "stop" is silently absorbed and then undone by our
 * "c" (seen under ASan).  The price: a guest that suspended itself to RAM
 * (S3), the one stop QEMU announces to nobody, is woken.
 * With call graphs the stacks are read before "c": they must be the stacks
 * of the registers read (see callgraph_stop()).
 * Returns the read's error (0: sampled), or, with *final set, the tick's
 * result.
 */
static int tick_fast(struct qsamp *q, struct tick_state *ts, unsigned n, uint64_t pa,
		     size_t len, int *merr, int *final)
{
	int stopped = 0, err;

	if (q->cg)
		err = gdbstub_stop_sample(q->gs, q->regs, n, pa, q->slotbuf, len, 0, merr,
					  &stopped);
	else
		err = gather_read(q, ts, n, pa, len, merr, &stopped);
	*final = 1;
	if (err == -EALREADY) {
		ts->paused = 1;
		q->paused_ticks++;
		return 0;
	}
	if (err == -EPIPE || err == -ESHUTDOWN)
		return err;
	if (err == -ETIMEDOUT)
		return batch_late(q, ts, stopped);
	if (stopped == 2)
		return paused_meanwhile(q, ts, !q->cg);
	if (!stopped) {
		/* No stop reply: the guest was not running (S3); our "c"
		 * woke it. */
		q->paused_ticks++;
		return 0;
	}
	*final = 0;
	q->exits++;
	if (q->cg) {
		ts->ours = 1;
		err = callgraph_stop(q, ts, n, *merr ? 0 : len, err);
	}
	return err;
}

/*
 * Our stop ends with a single step instead of "c" when QEMU's translated
 * code must go (a vCPU loops on a stale int3, int3loop.h): turning TCG's
 * single-step mode on and off flushes it.  The step lets the guest run, so
 * it belongs to the slow path's stop, read and resume in turn, never to
 * the fast path's one write.  Its stop reply: SIGTRAP, the step ended, "c"
 * as usual; SIGINT, someone else paused the guest during the step, and the
 * pause holds; none in time, it comes later, and the probe (outstanding)
 * takes it for ours.  Returns 0 or -errno.
 */
static int step_resume(struct qsamp *q, struct tick_state *ts)
{
	int64_t t0 = clk_now_ns();
	int sig = -1, err = gdbstub_step(q->gs, ts->flush - 1, STOP_TIMEOUT_MS, &sig);

	ts->flush = 0;
	if (err == -ETIMEDOUT) {
		ts->outstanding = 1;
		q->steps_late++;
		return 0;
	}
	if (err == -EPIPE || err == -ESHUTDOWN)
		return err;
	if (!err && sig == 2) {
		ts->paused = 1;
		q->paused_ticks++;
		return 0;
	}
	if (!err) {
		q->step_ns += (uint64_t)(clk_now_ns() - t0);
		q->tb_flushes += sig == 5;
	}
	/* stepped, or not known: the guest must run */
	return gdbstub_continue(q->gs);
}

/* The slow path, after a pause or to drop QEMU's translated code: probe,
 * then stop, read and resume in turn.  Returns as tick_fast(). */
static int tick_probe(struct qsamp *q, struct tick_state *ts, unsigned n, uint64_t pa,
		      size_t len, int *merr, int *final)
{
	int err = probe_stop(q, ts);

	*final = err <= 0;
	if (err < 0)
		return err;
	if (!err) {
		q->paused_ticks++;
		return 0;
	}
	err = gdbstub_sample(q->gs, q->regs, n, pa, q->slotbuf, len, merr);
	q->exits++;
	if (!err && q->cg)
		walk_chains(q, n, len);
	/* Whatever happened, the guest must run again. */
	if (err != -EPIPE && err != -ESHUTDOWN) {
		int cerr = !err && ts->flush ? step_resume(q, ts) : gdbstub_continue(q->gs);

		if (!err)
			err = cerr;
	}
	if (err == -ETIMEDOUT) {
		/* late answers: read them next tick */
		ts->resync = 1;
		ts->resync_marker = 0;
		ts->c_after = 1;
	}
	return err;
}

/* CR3 == 0: firmware or early boot after a reset.  The old slot address
 * means nothing any more; wait for the next HELLO.  Whether the slots
 * read at this stop still count. */
static int slots_still_good(struct qsamp *q, struct tick_state *ts, unsigned n,
			    int have_slots, unsigned gen)
{
	for (unsigned i = 0; i < n; i++) {
		if (q->regs[i].cr3 == 0) {
			if (have_slots || (gen && gen != ts->bad_gen)) {
				q->resets++;
				ts->bad_gen = gen;
			}
			return 0;
		}
	}
	return have_slots;
}

/* A new int3-path publication, if any, into the detector; and
 * OPVM_TEST_TB_FLUSH's forced step once its time has come (vCPU 0). */
static void i3_take(struct qsamp *q, struct tick_state *ts)
{
	struct sampler_int3 *r = atomic_exchange(&q->i3_pub, NULL);

	if (r && q->i3)
		int3loop_set_ranges(q->i3, r);
	free(r);
	if (q->i3)
		q->int3_loops = int3loop_loops(q->i3);
	if (q->test_flush_at && clk_now_ns() >= q->test_flush_at) {
		q->test_flush_at = 0;
		if (!ts->flush)
			ts->flush = 1;
	}
}

/*
 * One tick.  Returns 1 if the guest was stopped and sampled, 0 if it was
 * not running, or -errno for a fault.
 */
static int tick_once(struct qsamp *q, struct tick_state *ts)
{
	unsigned gen = 0, n = q->nr_vcpus;
	uint64_t pa = 0;
	uint32_t size = 0, nr = 0;
	int have_slots, merr = 0, final, err;
	size_t len = 0;

	have_slots = get_slots(q, &gen, &pa, &size, &nr) && gen != ts->bad_gen &&
		     size == sizeof(struct opvm_slot) && nr > 0;
	if (have_slots)
		len = (size_t)(nr < n ? nr : n) * size;

	cur_take(q);
	cur_arm(q, have_slots);
	if (q->py)
		pyguest_take(q->py);
	i3_take(q, ts);
	if (ts->resync)
		return resync(q, ts);
	if (!ts->paused && !ts->outstanding && !ts->flush)
		err = tick_fast(q, ts, n, pa, len, &merr, &final);
	else
		err = tick_probe(q, ts, n, pa, len, &merr, &final);
	if (final)
		return err;
	if (err == -EPIPE || err == -ESHUTDOWN)
		return err;
	if (err) {
		if (++ts->bad_ticks >= MAX_BAD_TICKS)
			return err;
		return 0;
	}
	ts->bad_ticks = 0;
	if (q->py && !q->cg && q->sink.py)
		walk_python_after(q, n, merr ? 0 : len);
	have_slots = slots_still_good(q, ts, n, merr ? 0 : have_slots, gen);
	push_samples(q, ts, n, have_slots, have_slots ? nr : 0);
	if (q->cg)
		callgraph_idle(q->cg, q->kernel_cr3);
	if (q->py)
		py_publish(q);
	return 1;
}

/*
 * The tick thread's last act when told to stop: nothing of ours may stop
 * the guest once we are gone.  A "\x03" whose stop reply has not come yet
 * (outstanding: a probe that a busy QEMU answers late, after the guest's
 * owner had resumed it) stops the guest for good if no "c" follows; a batch
 * that timed out (resync) still has its "c" queued, and what QEMU has not
 * read when the gdbstub is removed is never run.  So: wait until QEMU has
 * read everything; then, if a "\x03" is unanswered, send "qC" and read up
 * to its answer.  QEMU handles it after finishing any stop, so a stop reply
 * before the answer (or instead of it: the "qC" itself stopped a guest
 * resumed meanwhile) is a stop of ours, to undo; an answer alone means the
 * guest had been paused by its owner all along.
 */
static void tick_settle(struct qsamp *q, struct tick_state *ts)
{
	int r, stopped;

	/* Our stop whose "c" could not be sent: once more. */
	if (ts->ours && !gdbstub_continue(q->gs))
		ts->ours = 0;
	r = gdbstub_wait_read(q->gs, SETTLE_TIMEOUT_MS);
	if (r < 0 || !ts->outstanding)
		return;
	stopped = gdbstub_settle(q->gs, SETTLE_TIMEOUT_MS);
	if (stopped > 0) {
		q->late_stops++;
		if (!gdbstub_continue(q->gs))
			gdbstub_wait_read(q->gs, SETTLE_TIMEOUT_MS);
	}
}

static void *tick_main(void *arg)
{
	struct qsamp *q = arg;
	/* A guest we did not resume is taken for paused until it answers a
	 * probe: the fast path would resume it. */
	struct tick_state ts = { .paused = !q->resume };
	int64_t next = clk_now_ns() + q->period_ns, avg = 0;

	while (!atomic_load(&q->stop)) {
		int64_t t0, t1, cost;
		int r;

		wait_until(q, next);
		if (atomic_load(&q->stop))
			break;
		t0 = clk_now_ns();
		if (t0 > next + q->period_ns) {
			int64_t missed = (t0 - next) / q->period_ns;

			q->throttled += (uint64_t)missed;
			next += missed * q->period_ns;
		}
		next += q->period_ns;
		q->ticks++;
		ts.slept = 0;
		r = tick_once(q, &ts);
		t1 = clk_now_ns();
		if (r < 0) {
			if (r == -EPIPE || r == -ESHUTDOWN) {
				snprintf(q->errmsg, sizeof(q->errmsg),
					 "the guest's QEMU closed its gdbstub (guest powered off or QEMU exited)");
				atomic_store_explicit(&q->state, SAMPLER_TARGET_GONE,
						      memory_order_release);
				return NULL;
			}
			set_fault(q, r, "gdbstub sampling failed: %s", strerror(-r));
			break;
		}
		if (r == 0)
			continue;
		cost = t1 - t0 - ts.slept;
		q->cost_ns += (uint64_t)cost;
		if ((uint64_t)cost > q->max_cost)
			q->max_cost = (uint64_t)cost;
		/* The cap follows the average cost (1/8 weight per tick), so
		 * one slow tick on a busy host does not skip the next ones. */
		avg = avg ? avg - avg / 8 + cost / 8 : cost;
		while (next < t1 + DUTY_FACTOR * avg) {
			next += q->period_ns;
			q->throttled++;
		}
	}
	tick_settle(q, &ts);
	return NULL;
}

/* ---- ops ------------------------------------------------------------------ */

/* Tests only: OPVM_TEST_TB_FLUSH=SECONDS forces one step (one drop of
 * QEMU's translated code) that long after start, loop or not. */
static void test_flush_arm(struct qsamp *q)
{
	const char *env = getenv("OPVM_TEST_TB_FLUSH");
	char *end;
	double secs;

	if (!env || !*env)
		return;
	secs = strtod(env, &end);
	if (*end || secs < 0 || secs > 86400)
		return;
	q->test_flush_at = clk_now_ns() + (int64_t)(secs * 1e9) + 1;
}

static int qs_start(struct sampler *s, const struct sampler_sink *sink)
{
	struct qsamp *q = to_q(s);
	int err;

	if (q->tick_started)
		return -EBUSY;
	for (unsigned i = 0; i < sink->nr_rings; i++)
		if (!sink->rings[i])
			return -EINVAL;
	q->sink = *sink;
	if (q->resume) {
		err = gdbstub_continue(q->gs);
		if (err)
			return err;
	}
	q->ever_started = 1;
	test_flush_arm(q);
	err = -pthread_create(&q->tick, NULL, tick_main, q);
	if (err)
		return err;
	q->tick_started = 1;
	return 0;
}

static void qs_stop(struct sampler *s)
{
	struct qsamp *q = s ? to_q(s) : NULL;

	if (!q)
		return;

	atomic_store(&q->stop, 1);
	if (q->tick_started) {
		uint64_t one = 1;

		if (write(q->efd, &one, sizeof(one)) < 0) {
			/* eventfd cannot fail for a counter this small */
		}
		pthread_join(q->tick, NULL);
		q->tick_started = 0;
	}
}

static int qs_status(struct sampler *s)
{
	return atomic_load_explicit(&to_q(s)->state, memory_order_acquire);
}

static const char *qs_last_error(struct sampler *s)
{
	struct qsamp *q = to_q(s);

	return atomic_load_explicit(&q->state, memory_order_acquire) != SAMPLER_RUNNING ?
	       q->errmsg : NULL;
}

static void qs_get_stats(struct sampler *s, struct sampler_stats *out)
{
	struct qsamp *q = to_q(s);

	out->ticks = q->ticks;
	out->samples = q->samples;
	out->throttled = q->throttled;
	out->cost_ns_total = q->cost_ns;
	out->exits = q->exits;
	out->cur_named = q->cur_named;
	out->cur_agree = q->cur_agree;
	out->cur_differ = q->cur_differ;
	out->cur_bad = q->cur_bad;
	out->kernel_no_task = q->kernel_no_task;
	out->py_samples = q->py_samples;
	out->py_kept = q->py_kept;
	out->py_changed = q->py_changed;
	out->py_bytes = q->py_bytes;
	out->py_cost_ns = q->py_cost_ns;
}

void qemu_sampler_get_info(struct sampler *s, struct qemu_sampler_info *out)
{
	struct qsamp *q = to_q(s);

	out->hellos = q->hellos;
	out->slot_reads = q->slot_reads;
	out->slot_odd = q->slot_odd;
	out->paused_ticks = q->paused_ticks;
	out->resets = q->resets;
	out->max_cost_ns = q->max_cost;
	out->late_stops = q->late_stops;
	out->restores = q->restores;
	out->int3_loops = q->int3_loops;
	out->tb_flushes = q->tb_flushes;
	out->steps_late = q->steps_late;
	out->step_ns = q->step_ns;
}

unsigned qemu_sampler_nr_vcpus(struct sampler *s)
{
	return to_q(s)->nr_vcpus;
}

static void qs_free(struct sampler *s)
{
	struct qsamp *q;

	if (!s)
		return;
	q = to_q(s);
	qs_stop(s);
	/* Never started: our connection stopped a guest that ran before, and
	 * nobody else will resume it. */
	if (q->gs && q->resume && !q->ever_started)
		gdbstub_continue(q->gs);
	gdbstub_close(q->gs);
	if (q->efd >= 0)
		close(q->efd);
	free(q->regs);
	free(q->slotbuf);
	kcurrent_free(q->cur);
	free(atomic_exchange(&q->cur_pub, NULL));
	free(atomic_exchange(&q->i3_pub, NULL));
	int3loop_free(q->i3);
	callgraph_free(q->cg);
	pyguest_free(q->py);
	free(q->pyview);
	free(q->pyfr);
	free(q->npy);
	guestmem_close(q->mem);
	free(q->chains);
	free(q->nchain);
	free(q->users);
	free(q);
}

/* The collector read a HELLO: publish where its slots are.  The tick thread
 * never waits for this; a torn publication costs it one tick's slots. */
static void qs_guest_hello(struct sampler *s, const struct chan_hello *h)
{
	struct qsamp *q = to_q(s);

	q->hellos++;
	set_slots(q, h->slot_pa, h->slot_size, h->nr_cpus);
	if (q->cg)
		callgraph_hello(q->cg, h);
}

/* Introspection found the current-task pointers: the tick thread takes a
 * copy at its next tick (an older one not taken yet is dropped). */
static void qs_guest_current(struct sampler *s, const struct kcurrent_info *ci)
{
	struct qsamp *q = to_q(s);
	struct kcurrent_info *c = malloc(sizeof(*c));

	if (!c)
		return;		/* the old view stays */
	*c = *ci;
	free(atomic_exchange(&q->cur_pub, c));
}

/* The guest's kallsyms located its ORC tables: kernel stacks from there. */
static void qs_guest_orc(struct sampler *s, const struct sampler_orc *o)
{
	struct qsamp *q = to_q(s);

	if (q->cg)
		callgraph_orc(q->cg, o);
}

/* The guest's CPython processes: read at the tick thread's next tick. */
static void qs_guest_python(struct sampler *s, const struct sampler_python *p)
{
	struct qsamp *q = to_q(s);

	if (q->py)
		pyguest_publish(q->py, p);
}

/* The guest kernel's int3 path: the tick thread takes a copy at its next
 * tick (an older one not taken yet is dropped).  TCG only. */
static void qs_guest_int3(struct sampler *s, const struct sampler_int3 *r)
{
	struct qsamp *q = to_q(s);
	struct sampler_int3 *c;

	if (!q->i3 || !(c = malloc(sizeof(*c))))
		return;
	*c = *r;
	free(atomic_exchange(&q->i3_pub, c));
}

static const struct sampler_ops qemu_sampler_ops = {
	.name = "gdbstub",
	.start = qs_start,
	.stop = qs_stop,
	.status = qs_status,
	.last_error = qs_last_error,
	.get_stats = qs_get_stats,
	.guest_hello = qs_guest_hello,
	.guest_orc = qs_guest_orc,
	.guest_current = qs_guest_current,
	.guest_python = qs_guest_python,
	.guest_int3 = qs_guest_int3,
	.free = qs_free,
};

/* Call graphs: the walker and a chain buffer per vCPU.  0 or -1 (errno
 * set, errbuf says why). */
static int cg_setup(struct qsamp *q, const struct qemu_sampler_config *cfg, char *errbuf,
		    size_t errlen)
{
	if (cfg->cg.mode == SAMPLER_CG_NONE)
		return 0;
	if (!q->mem) {
		errbuf_set(errbuf, errlen, "call graphs need QEMU's memory, which the "
			    "monitor did not give (gpa2hva)");
		errno = EINVAL;
		return -1;
	}
	q->cg = callgraph_new(&cfg->cg, q->mem);
	q->chains = calloc((size_t)q->nr_vcpus * UNWIND_MAX_DEPTH, sizeof(*q->chains));
	q->nchain = calloc(q->nr_vcpus, sizeof(*q->nchain));
	if (cfg->cg.mode == SAMPLER_CG_DWARF)
		q->users = calloc(q->nr_vcpus, sizeof(*q->users));
	if (!q->cg || !q->chains || !q->nchain ||
	    (cfg->cg.mode == SAMPLER_CG_DWARF && !q->users)) {
		errbuf_set(errbuf, errlen, "out of memory for call graphs");
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/* Python frames, with or without call graphs, where QEMU's memory is
 * readable: 0 or -1 (errno). */
static int py_setup(struct qsamp *q)
{
	if (!q->mem)
		return 0;
	q->py = pyguest_new();
	q->pyview = malloc(sizeof(*q->pyview));
	q->pyfr = calloc((size_t)q->nr_vcpus * PYFRAMES_MAX_DEPTH, sizeof(*q->pyfr));
	q->npy = calloc(q->nr_vcpus, sizeof(*q->npy));
	if (!q->py || !q->pyview || !q->pyfr || !q->npy) {
		errno = ENOMEM;
		return -1;
	}
	guestmem_view_init(q->pyview, q->mem);
	return 0;
}

void qemu_sampler_python_describe(struct sampler *s, char *buf, size_t len)
{
	struct qsamp *q = to_q(s);

	if (q->py)
		pyguest_describe(q->py, buf, len);
	else if (len)
		buf[0] = '\0';
}

void qemu_sampler_callgraph_stats(struct sampler *s, struct callgraph_stats *out)
{
	struct qsamp *q = to_q(s);

	if (q->cg)
		callgraph_get_stats(q->cg, out);
	else
		memset(out, 0, sizeof(*out));
}

/* The per-vCPU buffers, the Python reads and, under TCG, the stale-int3
 * detector, once the gdbstub said how many vCPUs there are.  0, or -1
 * with errno set. */
static int qs_parts(struct qsamp *q, const struct qemu_sampler_config *cfg)
{
	q->regs = calloc(q->nr_vcpus, sizeof(*q->regs));
	q->slotbuf = calloc(q->nr_vcpus, sizeof(struct opvm_slot));
	if (!q->regs || !q->slotbuf || py_setup(q))
		return -1;
	/* Under KVM the guest runs its own code, and translations cannot
	 * go stale: no detector, no step. */
	if (cfg->tcg && !(q->i3 = int3loop_new(q->nr_vcpus)))
		return -1;
	return 0;
}

struct sampler *qemu_sampler_new(const struct qemu_sampler_config *cfg,
				 char *errbuf, size_t errlen)
{
	struct qsamp *q;
	const char *why = "connect";
	unsigned rate = cfg->rate_hz ? cfg->rate_hz : QEMU_SAMPLER_DEFAULT_HZ, tmo;
	int gdb_fd = cfg->gdb_addr ? -1 : cfg->gdb_fd, err;

	if (rate > 1000) {
		if (errbuf)
			snprintf(errbuf, errlen, "rate %u Hz is above the gdbstub sampler's 1000 Hz cap", rate);
		err = EINVAL;
		goto fail_fd;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		err = errno;
		goto fail_fd;
	}
	q->s.ops = &qemu_sampler_ops;
	q->s.priv = q;
	q->mem = cfg->mem;
	q->efd = -1;
	q->period_ns = 1000000000 / rate;
	q->resume = cfg->resume;
	q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (q->efd < 0)
		goto fail_errno;
	tmo = cfg->connect_timeout_ms ? cfg->connect_timeout_ms : 5000;
	q->gs = cfg->gdb_addr ? gdbstub_open(cfg->gdb_addr, tmo, &why) :
				gdbstub_open_fd(gdb_fd, tmo, &why);
	gdb_fd = -1;
	if (!q->gs) {
		err = errno;
		if (errbuf)
			snprintf(errbuf, errlen, "cannot talk to the gdbstub%s%s (%s: %s)",
				 cfg->gdb_addr ? " at " : "", cfg->gdb_addr ? cfg->gdb_addr : "",
				 why, strerror(err));
		errno = err;
		goto fail;
	}
	q->nr_vcpus = gdbstub_nr_threads(q->gs);
	/* Resumed by its owner while we connected, then stopped by us: it
	 * must run again, whatever it did before. */
	if (gdbstub_handshake_restarts(q->gs))
		q->resume = 1;
	if (qs_parts(q, cfg))
		goto fail_errno;
	if (cg_setup(q, cfg, errbuf, errlen))
		goto fail;
	return &q->s;

fail_errno:
	err = errno;
	if (errbuf)
		snprintf(errbuf, errlen, "%s", strerror(err));
	if (gdb_fd >= 0)
		close(gdb_fd);
	qs_free(&q->s);
	errno = err;
	return NULL;
fail:
	err = errno;
	qs_free(&q->s);
	errno = err;
	return NULL;
fail_fd:
	if (gdb_fd >= 0)
		close(gdb_fd);
	guestmem_close(cfg->mem);
	errno = err;
	return NULL;
}
