// SPDX-License-Identifier: MIT
/*
 * The "kvm" sampler backend (see vmm/kvm/kvm-sampler.h for the mechanism).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "guest-kmod/opvm_proto.h"
#include "lib/channel.h"
#include "lib/pynames.h"
#include "lib/ring.h"
#include "vmm/guest/guestmem.h"
#include "vmm/guest/pyguest.h"
#include "vmm/kvm/kvm-sampler.h"
#include "vmm/kvm/kvm.h"
#include "lib/clock.h"

#define KVM_SAMPLE_SIGNAL	(SIGRTMIN + 2)
#define DEFAULT_MAX_RATE	10000u
#define BURST_NS		100000000ull	/* token bucket depth: 100 ms */

struct ks_vcpu {
	struct ring *ring;
	int fds[OPVM_MAX_EVENTS];
	uint64_t credit_ns;		/* token bucket, owned by the vCPU thread */
	uint64_t last_ns;
	/* Written by the vCPU thread only, read by anyone (relaxed). */
	uint64_t ticks, samples, throttled, cost_ns, filtered;
	/* Python frames (NULL: none read): this vCPU's view of the guest's
	 * CPython processes, read in its own thread; pyguest's counters */
	struct pyguest *pg;
	struct guestmem_view *view;
	struct pyframe *fr;		/* PYFRAMES_MAX_DEPTH */
	uint64_t py_samples, py_kept, py_bytes, py_cost_ns;
};

struct kvm_sampler {
	struct sampler s;
	struct kvm_sampler_config cfg;
	uint64_t sample_cost_ns;	/* 1e9 / max_rate */
	int hardware;
	int started;
	char error[256];
	/* The guest's RAM, this process's own, for Python frame reads; the
	 * sink's name table, which takes one producer at a time (py_lock) */
	struct guestmem *mem;
	struct pynames *names;
	pthread_mutex_t py_lock;
	struct ks_vcpu vcpus[KVM_MAX_VCPUS];
};

/*
 * Per-thread state for the signal handler: which fds belong to this vCPU
 * thread, and which of them overflowed.  The handler only sets bits.
 */
static __thread int tls_fds[OPVM_MAX_EVENTS];
static __thread unsigned tls_nr;
static __thread volatile sig_atomic_t tls_pending;

static pthread_once_t sig_once = PTHREAD_ONCE_INIT;

static void sample_signal(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	for (unsigned i = 0; i < tls_nr; i++)
		if (tls_fds[i] == si->si_fd)
			tls_pending |= 1 << i;
}

static void sig_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sample_signal;
	sa.sa_flags = SA_SIGINFO;	/* no SA_RESTART: we want the -EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(KVM_SAMPLE_SIGNAL, &sa, NULL);
}

static inline void stat_inc(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, *p + v, __ATOMIC_RELAXED);
}

static inline uint64_t stat_get(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static int is_hw(const struct perf_event_attr *a)
{
	return a->type == PERF_TYPE_HARDWARE || a->type == PERF_TYPE_RAW ||
	       a->type == PERF_TYPE_HW_CACHE || a->type > PERF_TYPE_MAX;
}

static int ks_thread_init(struct kvm_vcpu *vcpu, void *arg)
{
	struct kvm_sampler *ks = arg;
	struct ks_vcpu *v = &ks->vcpus[kvm_vcpu_index(vcpu)];
	pid_t tid = kvm_vcpu_tid(vcpu);
	sigset_t set;
	int err = 0;

	tls_nr = 0;
	tls_pending = 0;
	sigemptyset(&set);
	sigaddset(&set, KVM_SAMPLE_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	v->last_ns = clk_now_ns();
	v->credit_ns = BURST_NS;
	for (unsigned i = 0; i < ks->cfg.nr_events; i++) {
		struct perf_event_attr attr = ks->cfg.events[i].attr;
		struct f_owner_ex owner = { .type = F_OWNER_TID, .pid = tid };
		int fd;

		attr.size = sizeof(attr);
		attr.disabled = 1;
		attr.wakeup_events = 1;
		attr.sample_type = 0;
		if (is_hw(&attr)) {
			/* Count only while the guest runs. */
			attr.exclude_host = 1;
			attr.exclude_guest = 0;
		} else {
			/* A software clock sees the guest as this thread's
			 * time in KVM_RUN: host kernel time, so no exclude
			 * bits; the guest CPL filter applies instead. */
			attr.exclude_kernel = 0;
			attr.exclude_user = 0;
			attr.exclude_hv = 0;
		}
		fd = (int)syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0)
			return -errno;
		v->fds[i] = fd;
		tls_fds[i] = fd;
		tls_nr = i + 1;
		if (fcntl(fd, F_SETOWN_EX, &owner) < 0 ||
		    fcntl(fd, F_SETSIG, KVM_SAMPLE_SIGNAL) < 0 ||
		    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC | O_NONBLOCK) < 0) {
			err = -errno;
			break;
		}
	}
	if (!err)
		for (unsigned i = 0; i < tls_nr; i++)
			if (ioctl(v->fds[i], PERF_EVENT_IOC_ENABLE, 0) < 0)
				err = -errno;
	return err;
}

static void ks_thread_exit(struct kvm_vcpu *vcpu, void *arg)
{
	struct kvm_sampler *ks = arg;
	struct ks_vcpu *v = &ks->vcpus[kvm_vcpu_index(vcpu)];

	for (unsigned i = 0; i < OPVM_MAX_EVENTS; i++) {
		if (v->fds[i] >= 0) {
			ioctl(v->fds[i], PERF_EVENT_IOC_DISABLE, 0);
			close(v->fds[i]);
			v->fds[i] = -1;
		}
	}
	tls_nr = 0;
}

/* Reads vCPU idx's slot from guest RAM.  The vCPU is out of KVM_RUN (we are
 * its thread), so the slot cannot change under us; an odd seq means it
 * stopped mid-update and the slot is not used. */
static void slot_read(struct kvm_vm *vm, unsigned idx, struct opvm_sample *s)
{
	uint64_t pa, off, addr;
	uint32_t nr, size;
	const volatile struct opvm_slot *sl;
	uint32_t seq;

	if (!kvm_vm_slot_info(vm, &pa, &nr, &size) || idx >= nr ||
	    __builtin_mul_overflow((uint64_t)idx, (uint64_t)size, &off) ||
	    __builtin_add_overflow(pa, off, &addr))
		return;
	sl = kvm_vm_gpa(vm, addr, sizeof(struct opvm_slot));
	if (!sl)
		return;
	seq = sl->seq;
	if (seq & 1)
		return;
	s->slot_tid = sl->pid;
	s->slot_tgid = sl->tgid;
	s->slot_cr3 = sl->cr3;
	if (sl->flags & OPVM_SLOT_KTHREAD)
		s->flags |= OPVM_SAMPLE_KTHREAD;
	if (sl->seq == seq)
		s->flags |= OPVM_SAMPLE_SLOT;
}

/*
 * The Python frames of a user sample whose address space runs CPython,
 * read while this vCPU is out of KVM_RUN (the thread whose chain it is
 * cannot change it meanwhile), as indices of lib/pynames.h into w; the
 * thread is the slot's.  The names are interned under py_lock: the vCPU
 * threads take turns as the table's producer.
 */
static void python_read(struct kvm_sampler *ks, struct ks_vcpu *v, struct opvm_sample *smp,
			uint64_t *w)
{
	struct unwind_mem um = { guestmem_view_read, v->view };
	uint64_t cr3 = opvm_cr3_normalise(smp->cr3);
	struct pyguest_stats st;
	unsigned n, k = 0;

	if (!v->pg || !ks->names || smp->cpl != 3)
		return;
	pyguest_take(v->pg);
	if (!pyguest_is_python(v->pg, cr3))
		return;
	guestmem_view_reset(v->view, cr3, PYGUEST_PAGES);
	n = pyguest_read(v->pg, &um, cr3, (smp->flags & OPVM_SAMPLE_SLOT) ? smp->slot_tid : 0,
			 v->fr, PYFRAMES_MAX_DEPTH, 0);
	pthread_mutex_lock(&ks->py_lock);
	for (; k < n; k++) {
		uint32_t idx;

		if (pynames_intern(ks->names, v->fr[k].name, v->fr[k].file, v->fr[k].first_line,
				   v->fr[k].line, &idx))
			break;	/* the table is full: its callers go too */
		w[k] = idx;
	}
	pthread_mutex_unlock(&ks->py_lock);
	if (k) {
		smp->chain = w;
		smp->nr_chain = smp->nr_py = (uint8_t)k;
		stat_inc(&v->py_kept, 1);
	}
	pyguest_get_stats(v->pg, &st);
	__atomic_store_n(&v->py_samples, st.samples, __ATOMIC_RELAXED);
	__atomic_store_n(&v->py_bytes, st.fr.bytes, __ATOMIC_RELAXED);
	__atomic_store_n(&v->py_cost_ns, st.cost_ns, __ATOMIC_RELAXED);
}

static void ks_after_run(struct kvm_vcpu *vcpu, int ret, void *arg)
{
	struct kvm_sampler *ks = arg;
	struct ks_vcpu *v;
	struct kvm_sample_regs regs;
	struct opvm_sample smp;
	uint64_t w[PYFRAMES_MAX_DEPTH];
	unsigned pending;
	uint64_t t0, elapsed;
	int have_regs = 0;

	if (!tls_pending)
		return;
	pending = (unsigned)__atomic_exchange_n(&tls_pending, 0, __ATOMIC_SEQ_CST);
	if (!pending)
		return;
	v = &ks->vcpus[kvm_vcpu_index(vcpu)];
	t0 = clk_now_ns();
	elapsed = t0 - v->last_ns;
	v->last_ns = t0;
	v->credit_ns = v->credit_ns + elapsed > BURST_NS ? BURST_NS : v->credit_ns + elapsed;
	for (unsigned i = 0; i < ks->cfg.nr_events; i++) {
		const struct kvm_sampler_event *ev = &ks->cfg.events[i];

		if (!(pending & (1u << i)))
			continue;
		stat_inc(&v->ticks, 1);
		if (v->credit_ns < ks->sample_cost_ns) {
			stat_inc(&v->throttled, 1);
			continue;
		}
		v->credit_ns -= ks->sample_cost_ns;
		if (!have_regs) {
			if (kvm_vcpu_sample_regs(vcpu, &regs))
				break;
			have_regs = 1;
		}
		if ((regs.cpl == 0 && !ev->kernel) || (regs.cpl != 0 && !ev->user)) {
			stat_inc(&v->filtered, 1);
			continue;
		}
		memset(&smp, 0, sizeof(smp));
		smp.rip = regs.rip;
		smp.cr3 = regs.cr3;
		smp.cpl = regs.cpl;
		smp.vcpu = kvm_vcpu_index(vcpu);
		smp.event = (uint8_t)i;
		slot_read(kvm_vcpu_vm(vcpu), smp.vcpu, &smp);
		python_read(ks, v, &smp, w);
		if (!ring_push(v->ring, &smp))
			stat_inc(&v->samples, 1);
	}
	stat_inc(&v->cost_ns, clk_now_ns() - t0);
}

static int ks_start(struct sampler *s, const struct sampler_sink *sink)
{
	struct kvm_sampler *ks = s->priv;
	struct kvm_vcpu_hooks hooks = {
		.thread_init = ks_thread_init,
		.after_run = ks_after_run,
		.thread_exit = ks_thread_exit,
		.arg = ks,
	};
	unsigned nr = kvm_vm_nr_vcpus(ks->cfg.vm);
	int err;

	if (ks->started)
		return -EALREADY;
	if (sink->nr_rings < nr)
		return -EINVAL;
	for (unsigned i = 0; i < nr; i++) {
		if (!sink->rings[i])
			return -EINVAL;
		ks->vcpus[i].ring = sink->rings[i];
	}
	ks->names = ks->mem ? sink->py : NULL;
	pthread_once(&sig_once, sig_install);
	err = kvm_vm_start(ks->cfg.vm, &hooks);
	if (err)
		return err;
	ks->started = 1;
	return 0;
}

static void ks_stop(struct sampler *s)
{
	struct kvm_sampler *ks = s->priv;

	/* Joins the vCPU threads: after this nothing touches the rings. */
	kvm_vm_stop(ks->cfg.vm);
}

static int ks_status(struct sampler *s)
{
	struct kvm_sampler *ks = s->priv;
	const char *e;

	switch (kvm_vm_state(ks->cfg.vm)) {
	case KVM_VM_CREATED:
	case KVM_VM_RUNNING:
		return SAMPLER_RUNNING;
	case KVM_VM_FAULT:
		e = kvm_vm_error(ks->cfg.vm);
		snprintf(ks->error, sizeof(ks->error), "%s", e ? e : "VM fault");
		return -EIO;
	default:
		return SAMPLER_TARGET_GONE;
	}
}

static const char *ks_last_error(struct sampler *s)
{
	struct kvm_sampler *ks = s->priv;
	const char *e = kvm_vm_error(ks->cfg.vm);

	if (kvm_vm_state(ks->cfg.vm) == KVM_VM_FAULT && e)
		return e;
	return ks->error[0] ? ks->error : NULL;
}

static void ks_get_stats(struct sampler *s, struct sampler_stats *out)
{
	struct kvm_sampler *ks = s->priv;

	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < kvm_vm_nr_vcpus(ks->cfg.vm); i++) {
		const struct ks_vcpu *v = &ks->vcpus[i];

		out->ticks += stat_get(&v->ticks);
		out->samples += stat_get(&v->samples);
		out->throttled += stat_get(&v->throttled);
		out->cost_ns_total += stat_get(&v->cost_ns);
		out->py_samples += stat_get(&v->py_samples);
		out->py_kept += stat_get(&v->py_kept);
		out->py_bytes += stat_get(&v->py_bytes);
		out->py_cost_ns += stat_get(&v->py_cost_ns);
	}
	out->exits = kvm_vm_exits(ks->cfg.vm);
}

uint64_t kvm_sampler_filtered(struct sampler *s)
{
	struct kvm_sampler *ks = s->priv;
	uint64_t n = 0;

	for (unsigned i = 0; i < kvm_vm_nr_vcpus(ks->cfg.vm); i++)
		n += stat_get(&ks->vcpus[i].filtered);
	return n;
}

const char *kvm_sampler_mode(const struct sampler *s)
{
	const struct kvm_sampler *ks = s->priv;

	return ks->hardware ? "kvm-pmu" : "kvm-timer";
}

static void ks_free(struct sampler *s)
{
	struct kvm_sampler *ks;

	if (!s)
		return;
	ks = s->priv;
	if (ks->started)
		kvm_vm_stop(ks->cfg.vm);
	for (unsigned i = 0; i < KVM_MAX_VCPUS; i++) {
		pyguest_free(ks->vcpus[i].pg);
		free(ks->vcpus[i].view);
		free(ks->vcpus[i].fr);
	}
	guestmem_close(ks->mem);
	pthread_mutex_destroy(&ks->py_lock);
	free(ks);
}

/* The collector's CPython processes, to each vCPU's view of them. */
static void ks_guest_python(struct sampler *s, const struct sampler_python *set)
{
	struct kvm_sampler *ks = s->priv;

	for (unsigned i = 0; i < kvm_vm_nr_vcpus(ks->cfg.vm); i++)
		if (ks->vcpus[i].pg)
			pyguest_publish(ks->vcpus[i].pg, set);
}

/* Python frame reads: the guest's RAM through this process's own mapping
 * of it, a view and a frame buffer per vCPU.  Best effort: without them
 * the samples carry no Python frames. */
static void python_setup(struct kvm_sampler *ks)
{
	struct kvm_vm *vm = ks->cfg.vm;
	uint64_t size = kvm_vm_mem_bytes(vm);
	void *ram = size ? kvm_vm_gpa(vm, 0, size) : NULL;

	if (!ram || !(ks->mem = guestmem_open(getpid())) ||
	    guestmem_add_range(ks->mem, 0, size, (uint64_t)(uintptr_t)ram) ||
	    guestmem_map_self(ks->mem) != 1)
		goto fail;
	for (unsigned i = 0; i < kvm_vm_nr_vcpus(vm) && i < KVM_MAX_VCPUS; i++) {
		struct ks_vcpu *v = &ks->vcpus[i];

		v->pg = pyguest_new();
		v->view = malloc(sizeof(*v->view));
		v->fr = calloc(PYFRAMES_MAX_DEPTH, sizeof(*v->fr));
		if (!v->pg || !v->view || !v->fr)
			goto fail;
		guestmem_view_init(v->view, ks->mem);
	}
	return;
fail:
	for (unsigned i = 0; i < KVM_MAX_VCPUS; i++) {
		pyguest_free(ks->vcpus[i].pg);
		free(ks->vcpus[i].view);
		free(ks->vcpus[i].fr);
		ks->vcpus[i].pg = NULL;
		ks->vcpus[i].view = NULL;
		ks->vcpus[i].fr = NULL;
	}
	guestmem_close(ks->mem);
	ks->mem = NULL;
}

/* The guest module's HELLO, from the collector: the vCPU threads read the
 * slots from there on, and its switch rings go in the VMM's runtime
 * descriptor, for an `opvm attach --pid` from outside. */
static void ks_guest_hello(struct sampler *s, const struct chan_hello *h)
{
	struct kvm_sampler *ks = s->priv;
	unsigned nr = kvm_vm_nr_vcpus(ks->cfg.vm);

	kvm_vm_set_slots(ks->cfg.vm, h->slot_pa, h->nr_cpus, h->slot_size);

	kvm_vm_publish_switch(ks->cfg.vm, h->switch_pa, h->switch_stride, h->switch_entries,
			      h->nr_cpus < nr ? h->nr_cpus : nr);
}

static const struct sampler_ops kvm_sampler_ops = {
	.name = "kvm",
	.start = ks_start,
	.stop = ks_stop,
	.status = ks_status,
	.last_error = ks_last_error,
	.get_stats = ks_get_stats,
	.guest_hello = ks_guest_hello,
	.guest_python = ks_guest_python,
	.free = ks_free,
};

struct sampler *kvm_sampler_new(const struct kvm_sampler_config *cfg)
{
	struct kvm_sampler *ks;

	if (!cfg->vm || !cfg->nr_events || cfg->nr_events > OPVM_MAX_EVENTS) {
		errno = EINVAL;
		return NULL;
	}
	for (unsigned i = 0; i < cfg->nr_events; i++) {
		if (!cfg->events[i].attr.sample_period) {
			errno = EINVAL;
			return NULL;
		}
	}
	ks = calloc(1, sizeof(*ks));
	if (!ks)
		return NULL;
	ks->cfg = *cfg;
	if (!ks->cfg.max_rate)
		ks->cfg.max_rate = DEFAULT_MAX_RATE;
	ks->sample_cost_ns = 1000000000ull / ks->cfg.max_rate;
	for (unsigned i = 0; i < cfg->nr_events; i++)
		if (is_hw(&cfg->events[i].attr))
			ks->hardware = 1;
	for (unsigned i = 0; i < KVM_MAX_VCPUS; i++)
		for (unsigned j = 0; j < OPVM_MAX_EVENTS; j++)
			ks->vcpus[i].fds[j] = -1;
	ks->s.ops = &kvm_sampler_ops;
	ks->s.priv = ks;
	pthread_mutex_init(&ks->py_lock, NULL);
	python_setup(ks);
	return &ks->s;
}
