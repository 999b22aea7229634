// SPDX-License-Identifier: MIT
/*
 * Every guest on this host, measured.  See hoststats.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "host/hoststats/hoststats.h"
#include "lib/clock.h"
#include "lib/errbuf.h"
#include "lib/text.h"
#include "vmm/guest/qmp.h"
#include "host/hoststats/virt-stats.h"
#include "vmm/libvirt/virt.h"
#include "vmm/libvirt/virt-api.h"

/* The non-QEMU pid cache is dropped this often, so a QEMU that reuses the
 * pid of a process that was not one is found within that many refreshes. */
#define HS_RESCAN_EVERY		10
#define HS_VIRT_RETRY_S		5
/* libvirt's default budget for one reading (connect and statistics). */
#define HS_VIRT_BUDGET_MS	3000
/* A QMP socket that did not answer in its budget is left alone this long,
 * doubling at each further failure up to the cap. */
#define HS_QMP_BACKOFF_MS	10000
#define HS_QMP_BACKOFF_MAX_MS	300000

/* QMP sockets that did not answer, by process: when to try again. */
struct qmpback {
	int pid;
	uint64_t start_ticks;
	int64_t next_ms;	/* clk_now_ms() of the next try */
	unsigned wait_ms;	/* the current pause */
	int err;		/* what the last try gave */
};

/* vCPU thread ids a QEMU without thread names gave over QMP, kept per
 * process: asking at every refresh would hold its QMP socket for nothing. */
struct tidcache {
	int pid;
	uint64_t start_ticks;
	int n;			/* vCPUs, or -errno when QMP did not tell */
	int tids[HS_MAX_VCPUS];
};

/* An open counting group per vCPU thread, kept across refreshes. */
struct pmcache {
	int tid;
	int seen;		/* in this refresh */
	struct pmcount *pc;	/* NULL: opening failed (err) */
	int err;
};

struct hoststats {
	struct hs_config cfg;
	struct pmcache *pm;
	size_t nr_pm;
	int pmu;		/* the host has a PMU: try counting */
	char hw_err[128];
	struct tidcache *tc;
	size_t nr_tc;
	struct qmpback *qb;
	size_t nr_qb;
	struct virtstats_reader *vr;		/* libvirt, read with a deadline */
	char virt_err[384];
	const char *hw_why;

	int *other_pids;		/* sorted: pids known not to be QEMU */
	size_t nr_other;
	struct ps_qemu *qemus;		/* QEMU processes of the last scan */
	size_t nr_qemus;
	unsigned scans;

	struct hs_capped capped;	/* of the last refresh */
	struct hs_guest **guests;	/* last refresh */
	size_t nr_guests;
	double last_t, interval;
};

static void guest_free(struct hs_guest *g)
{
	if (!g)
		return;
	free(g->vcpu);
	free(g);
}

static void guests_free(struct hs_guest **gs, size_t n)
{
	for (size_t i = 0; gs && i < n; i++)
		guest_free(gs[i]);
	free(gs);
}

struct hoststats *hoststats_new(const struct hs_config *cfg)
{
	struct hoststats *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	if (cfg)
		h->cfg = *cfg;
	if (!h->cfg.qmp_timeout_ms)
		h->cfg.qmp_timeout_ms = 1000;
	if (!h->cfg.libvirt_timeout_ms)
		h->cfg.libvirt_timeout_ms = HS_VIRT_BUDGET_MS;
	/* Counting events need the core PMU; this host kind may lack it
	 * (nested or cloud VMs).  Read once: it does not come and go. */
	if (access("/sys/bus/event_source/devices/cpu", F_OK) &&
	    access("/sys/bus/event_source/devices/cpu_core", F_OK))
		h->hw_why = "no hardware PMU on this host";
	else
		h->pmu = 1;
	return h;
}

void hoststats_free(struct hoststats *h)
{
	if (!h)
		return;
	virtstats_reader_free(h->vr);
	for (size_t i = 0; i < h->nr_pm; i++)
		pmcount_close(h->pm[i].pc);
	free(h->pm);
	free(h->tc);
	free(h->qb);
	free(h->other_pids);
	free(h->qemus);
	guests_free(h->guests, h->nr_guests);
	free(h);
}

double hoststats_interval(const struct hoststats *h)
{
	return h->interval;
}

const struct hs_capped *hoststats_capped(const struct hoststats *h)
{
	return &h->capped;
}

const char *hoststats_libvirt_error(const struct hoststats *h)
{
	return h->virt_err;
}

/* An array cut to its n entries (NULL for none): a burst of a thousand
 * QEMUs, any local user's, would otherwise leave its room (1 KiB of thread
 * ids each in the caches) held for the life of the exporter. */
static void *cache_shrink(void *arr, size_t n, size_t size)
{
	void *p;

	if (!n) {
		free(arr);
		return NULL;
	}
	p = realloc(arr, n * size);
	return p ? p : arr;
}

/* ---- finding QEMU processes -------------------------------------------- */

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

static const struct ps_qemu *known_qemu(const struct hoststats *h, int pid)
{
	for (size_t i = 0; i < h->nr_qemus; i++)
		if (h->qemus[i].pid == pid)
			return &h->qemus[i];
	return NULL;
}

/*
 * Lists /proc and classifies only pids not seen before: reading every
 * process's stat at each refresh would cost more than all the guests.
 */
static int scan_qemus(struct hoststats *h)
{
	int *pids, n = procstat_list_pids(&pids);
	int *others = NULL;
	struct ps_qemu *qs = NULL;
	size_t no = 0, nq = 0;

	if (n < 0)
		return n;
	if (h->scans++ % HS_RESCAN_EVERY == 0)
		h->nr_other = 0;
	others = malloc(((size_t)n + 1) * sizeof(*others));
	qs = malloc(((size_t)n + 1) * sizeof(*qs));
	if (!others || !qs) {
		free(pids);
		free(others);
		free(qs);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		const struct ps_qemu *k;
		int r;

		if (nq == HS_MAX_QEMUS) {
			/* not classed: looked at again at the next scan */
			h->capped.pids_unread++;
			continue;
		}
		k = known_qemu(h, pids[i]);
		if (k) {
			h->capped.cmdlines_cut += k->cmdline_cut != 0;
			qs[nq++] = *k;
			continue;
		}
		if (h->nr_other && bsearch(&pids[i], h->other_pids, h->nr_other,
					   sizeof(int), cmp_int)) {
			others[no++] = pids[i];
			continue;
		}
		memset(&qs[nq], 0, sizeof(qs[nq]));
		r = procstat_probe(pids[i], &qs[nq]);
		if (r == 1)
			h->capped.cmdlines_cut += qs[nq++].cmdline_cut != 0;
		else if (r == 0)
			others[no++] = pids[i];
	}
	free(pids);
	free(h->other_pids);
	free(h->qemus);
	/* kept until the next scan: as large as what they hold, not as
	 * every process on the host */
	h->other_pids = cache_shrink(others, no, sizeof(*others));
	h->nr_other = no;
	h->qemus = cache_shrink(qs, nq, sizeof(*qs));
	h->nr_qemus = nq;
	return 0;
}

/* ---- libvirt ------------------------------------------------------------ */

/* A libvirtd that does not answer costs this refresh the budget once
 * (virtstats_reader_read()), and its guests come from /proc meanwhile. */
static int read_libvirt(struct hoststats *h, struct virtstats_dom **ds)
{
	int n;

	*ds = NULL;
	if (h->cfg.no_libvirt)
		return 0;
	if (!h->vr) {
		h->vr = virtstats_reader_new(h->cfg.uri, h->cfg.libvirt_timeout_ms, HS_VIRT_RETRY_S);
		if (!h->vr) {
			errbuf_set(h->virt_err, sizeof(h->virt_err),
				    "cannot start the libvirt reader: %s", strerror(errno));
			return 0;
		}
	}
	n = virtstats_reader_read(h->vr, h->cfg.stop, ds, h->virt_err, sizeof(h->virt_err));
	if (h->virt_err[0] && !virt_api(NULL, 0)) {
		/* libvirt is not installed: what still works here (the error
		 * says what to install) */
		size_t len = strlen(h->virt_err);

		snprintf(h->virt_err + len, sizeof(h->virt_err) - len, "; the QEMU processes "
			 "in /proc are still listed (--no-libvirt: only those, without "
			 "this line)");
	}
	return n < 0 ? 0 : n;
}

/* ---- one guest ------------------------------------------------------------ */

static struct hs_vcpu *vcpu_slot(struct hs_guest *g, int index)
{
	struct hs_vcpu *nv;
	unsigned n;

	if (index < 0 || index >= HS_MAX_VCPUS)
		return NULL;
	if ((unsigned)index < g->nr_vcpus)
		return &g->vcpu[index];
	n = (unsigned)index + 1;
	nv = realloc(g->vcpu, n * sizeof(*nv));
	if (!nv)
		return NULL;
	memset(nv + g->nr_vcpus, 0, (n - g->nr_vcpus) * sizeof(*nv));
	for (unsigned i = g->nr_vcpus; i < n; i++)
		nv[i].index = (int)i;
	g->vcpu = nv;
	g->nr_vcpus = n;
	return &g->vcpu[index];
}

/* Per-thread figures of a local QEMU.  vCPU threads are named "CPU N/KVM"
 * by QEMU's debug-threads (libvirt sets it); without names, every thread
 * counts towards the guest's run-queue delay. */
static int read_threads(struct hoststats *h, struct hs_guest *g)
{
	int tids[HS_MAX_THREADS], n = procstat_list_tasks(g->pid, tids, HS_MAX_THREADS);
	uint64_t all_wait = 0;

	if (n < 0)
		return n;
	if (n > HS_MAX_THREADS)
		h->capped.threads_unread += (unsigned)n - HS_MAX_THREADS;
	for (int i = 0; i < n && i < HS_MAX_THREADS; i++) {
		struct ps_task t;
		struct hs_vcpu *v;

		if (procstat_read_task(g->pid, tids[i], &t))
			continue;	/* the thread ended meanwhile */
		all_wait += t.wait_ns;
		v = t.vcpu >= 0 ? vcpu_slot(g, t.vcpu) : NULL;
		if (!v)
			continue;
		v->tid = t.tid;
		v->cpu_ns = t.utime_ns + t.stime_ns;
		v->guest_ns = t.guest_ns;
		v->wait_ns = t.wait_ns;
		g->guest_ns += t.guest_ns;
		g->wait_ns += t.wait_ns;
	}
	if (!g->nr_vcpus)
		g->wait_ns = all_wait;
	return 0;
}

/* ---- QMP, within each guest's budget -------------------------------------- */

static struct qmpback *qmp_backoff(struct hoststats *h, const struct hs_guest *g)
{
	for (size_t i = 0; i < h->nr_qb; i++)
		if (h->qb[i].pid == g->pid && h->qb[i].start_ticks == g->start_ticks)
			return &h->qb[i];
	return NULL;
}

/* g's QMP socket made us wait in vain (err): mark its row, and leave it
 * alone for a pause that doubles at each failure in a row. */
static void qmp_pause(struct hoststats *h, struct hs_guest *g, int err)
{
	struct qmpback *b = qmp_backoff(h, g), *nb;

	if (!b && (nb = realloc(h->qb, (h->nr_qb + 1) * sizeof(*nb)))) {
		h->qb = nb;
		b = &h->qb[h->nr_qb++];
		memset(b, 0, sizeof(*b));
		b->pid = g->pid;
		b->start_ticks = g->start_ticks;
	}
	if (b) {
		b->wait_ms = !b->wait_ms ? HS_QMP_BACKOFF_MS
			     : b->wait_ms >= HS_QMP_BACKOFF_MAX_MS / 2 ? HS_QMP_BACKOFF_MAX_MS
			     : b->wait_ms * 2;
		b->next_ms = clk_now_ms() + b->wait_ms;
		b->err = err;
	}
	g->stale = 1;
	snprintf(g->stale_why, sizeof(g->stale_why), "its QMP socket did not answer in %u ms "
		 "(%s); next try in %u s", h->cfg.qmp_timeout_ms, strerror(-err),
		 b ? b->wait_ms / 1000 : 0);
}

/* A wait that ended without an answer, as opposed to a plain refusal. */
static int qmp_no_answer(int err)
{
	return err == -ETIMEDOUT || err == -EAGAIN;
}

/* g's QMP socket, opened by g's deadline (one budget for the guest's whole
 * exchange), or NULL + errno.  A socket in its pause is not tried: the row
 * says so. */
static struct qmp *guest_qmp(struct hoststats *h, struct hs_guest *g, int64_t deadline)
{
	struct qmpback *b = qmp_backoff(h, g);
	int64_t now = clk_now_ms();
	struct qmp *q;
	int err;

	if (b && now < b->next_ms) {
		g->stale = 1;
		snprintf(g->stale_why, sizeof(g->stale_why), "its QMP socket did not answer "
			 "in %u ms (%s); next try in %.0f s", h->cfg.qmp_timeout_ms,
			 strerror(-b->err), (double)(b->next_ms - now) / 1e3);
		errno = EAGAIN;
		return NULL;
	}
	if (h->cfg.stop && *h->cfg.stop) {
		errno = EINTR;
		return NULL;
	}
	q = qmp_open_until(g->qmp, deadline, h->cfg.stop);
	err = q ? 0 : -errno;
	if (qmp_no_answer(err))
		qmp_pause(h, g, err);
	else if (b)		/* it answers again (or refuses at once): no pause */
		*b = h->qb[--h->nr_qb];
	errno = -err;
	return q;
}

static const struct tidcache *tids_from_qmp(struct hoststats *h, struct hs_guest *g,
					    int64_t deadline)
{
	int tids[HS_MAX_VCPUS] = { 0 }, n;
	struct tidcache *tc;
	struct qmp *q;

	for (size_t i = 0; i < h->nr_tc; i++)
		if (h->tc[i].pid == g->pid && h->tc[i].start_ticks == g->start_ticks)
			return &h->tc[i];
	tc = realloc(h->tc, (h->nr_tc + 1) * sizeof(*tc));
	if (!tc)
		return NULL;
	h->tc = tc;
	q = guest_qmp(h, g, deadline);
	n = q ? qmp_vcpu_threads(q, tids, HS_MAX_VCPUS, clk_ms_left(deadline)) : -errno;
	qmp_close(q);
	if (qmp_no_answer(n) && q)
		qmp_pause(h, g, n);
	if (qmp_no_answer(n) || n == -EINTR)
		return NULL;	/* no answer is not "no vCPUs": ask after the pause */
	tc = &h->tc[h->nr_tc++];
	memset(tc, 0, sizeof(*tc));
	tc->pid = g->pid;
	tc->start_ticks = g->start_ticks;
	tc->n = n;
	memcpy(tc->tids, tids, sizeof(tids));
	return tc;
}

/* A QEMU without named threads: its vCPU threads from QMP (once). */
static void read_qmp_vcpus(struct hoststats *h, struct hs_guest *g, int64_t deadline)
{
	const struct tidcache *tc = tids_from_qmp(h, g, deadline);
	uint64_t wait = 0;
	int found = 0;

	for (int i = 0; tc && i < tc->n && i < HS_MAX_VCPUS; i++) {
		struct ps_task t;
		struct hs_vcpu *v;

		if (procstat_read_task(g->pid, tc->tids[i], &t) || !(v = vcpu_slot(g, i)))
			continue;
		v->tid = t.tid;
		v->cpu_ns = t.utime_ns + t.stime_ns;
		v->guest_ns = t.guest_ns;
		v->wait_ns = t.wait_ns;
		g->guest_ns += t.guest_ns;
		wait += t.wait_ns;
		found = 1;
	}
	if (found)
		g->wait_ns = wait;
}

static struct pmcache *pm_for(struct hoststats *h, int tid)
{
	struct pmcache *c;

	for (size_t i = 0; i < h->nr_pm; i++)
		if (h->pm[i].tid == tid)
			return &h->pm[i];
	c = realloc(h->pm, (h->nr_pm + 1) * sizeof(*c));
	if (!c)
		return NULL;
	h->pm = c;
	c = &h->pm[h->nr_pm++];
	c->tid = tid;
	c->pc = pmcount_open(tid, PMC_HARDWARE);
	c->err = c->pc ? 0 : errno;
	return c;
}

/* Guest-mode counts of a KVM guest's vCPU threads, on a host with a PMU. */
static void read_hw(struct hoststats *h, struct hs_guest *g)
{
	for (unsigned i = 0; i < g->nr_vcpus; i++) {
		struct hs_vcpu *v = &g->vcpu[i];
		struct pmcache *c = v->tid ? pm_for(h, v->tid) : NULL;

		if (!c)
			continue;
		c->seen = 1;
		if (!c->pc) {
			snprintf(h->hw_err, sizeof(h->hw_err), "cannot count on vCPU threads: %s",
				 strerror(c->err));
			g->hw_why = h->hw_err;
			continue;
		}
		if (pmcount_read(c->pc, v->hw))
			continue;
		v->has_hw = g->has_hw = 1;
		for (int k = 0; k < PMC_NR; k++)
			g->hw[k] += v->hw[k];
	}
}

/* Closes the groups of threads no refresh saw this time. */
static void pm_sweep(struct hoststats *h)
{
	for (size_t i = 0; i < h->nr_pm;) {
		if (h->pm[i].seen) {
			h->pm[i++].seen = 0;
			continue;
		}
		pmcount_close(h->pm[i].pc);
		h->pm[i] = h->pm[--h->nr_pm];
	}
}

static void sum_kvm(struct hs_guest *g, const char *src)
{
	memset(&g->kvm, 0, sizeof(g->kvm));
	for (unsigned i = 0; i < g->nr_vcpus; i++) {
		if (!g->vcpu[i].kvm.valid)
			continue;
		g->kvm.valid = 1;
		g->kvm.exits += g->vcpu[i].kvm.exits;
		for (unsigned r = 0; r < KVMSTAT_NR_REASONS; r++)
			g->kvm.reason[r] += g->vcpu[i].kvm.reason[r];
	}
	g->has_exits = g->kvm.valid;
	g->exits_src = src;
}

/* Exit counters of a local KVM guest not known to libvirt: its QMP socket
 * (held only for these two queries), else debugfs. */
static void read_exits_local(struct hoststats *h, struct hs_guest *g, int64_t deadline)
{
	struct kvmstat v[HS_MAX_VCPUS];
	struct qmp *q = NULL;
	int n = -ENOENT;

	if (g->qmp[0]) {
		q = guest_qmp(h, g, deadline);
		if (q) {
			memset(v, 0, sizeof(v));
			n = kvmstat_qmp(q, v, HS_MAX_VCPUS, clk_ms_left(deadline));
			qmp_close(q);
			if (qmp_no_answer(n))
				qmp_pause(h, g, n);
		}
		for (int i = 0; i < n; i++) {
			struct hs_vcpu *s = v[i].valid ? vcpu_slot(g, i) : NULL;

			if (s)
				s->kvm = v[i];
		}
		if (n > 0) {
			sum_kvm(g, "qmp");
			return;
		}
	}
	if (!kvmstat_debugfs(h->cfg.debugfs, g->pid, &g->kvm)) {
		g->has_exits = 1;
		g->exits_src = "debugfs";
		return;
	}
	snprintf(g->exits_why, sizeof(g->exits_why), "%s",
		 g->qmp[0] && !q ? "its QMP socket does not answer (busy?), no debugfs"
		 : g->qmp[0] ? "no kvm stats from QMP, no debugfs"
		 : "no QMP socket; debugfs is not mounted");
}

static void merge_dstat(struct hs_guest *g, const struct virtstats_dom *d)
{
	g->source = "libvirt";
	g->running = d->running;
	g->has_io = d->has_block || d->has_net;
	g->rd_bytes = d->rd_bytes;
	g->wr_bytes = d->wr_bytes;
	g->rx_bytes = d->rx_bytes;
	g->tx_bytes = d->tx_bytes;
	if (!g->pid) {
		/* No local process (remote URI): libvirt's own figures. */
		g->cpu_ns = d->cpu_ns;
		for (unsigned i = 0; i < d->nr_vcpus && i < VIRTSTATS_VCPUS; i++) {
			struct hs_vcpu *v = vcpu_slot(g, (int)i);

			if (!v)
				break;
			v->cpu_ns = d->vcpu_ns[i];
			v->wait_ns = d->vcpu_wait_ns[i];
			g->wait_ns += v->wait_ns;
		}
	}
	for (unsigned i = 0; i < g->nr_vcpus && i < VIRTSTATS_VCPUS; i++)
		g->vcpu[i].kvm = d->kvm[i];
	sum_kvm(g, "libvirt");
}

static struct hs_guest *guest_new(const char *name)
{
	struct hs_guest *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	/* A name is any local user's bytes: UTF-8 from here on (invalid bytes
	 * as U+FFFD), so that every output, and the check that two guests do
	 * not share a name, see the same string.  Text output escapes it. */
	text_utf8_fix(g->name, sizeof(g->name), name);
	g->source = "qemu";
	g->running = 1;
	g->fresh = 1;
	return g;
}

/* A local QEMU process; NULL if it is gone or was replaced. */
static struct hs_guest *guest_read_local(struct hoststats *h, const struct ps_qemu *q,
					 const struct virtstats_dom *d)
{
	/* One budget for all of this guest's QMP exchanges in this refresh. */
	int64_t deadline = clk_now_ms() + h->cfg.qmp_timeout_ms;
	struct hs_guest *g;
	struct ps_task t;

	if (procstat_read_proc(q->pid, &t) || t.start_ticks != q->start_ticks)
		return NULL;
	g = guest_new(q->name);
	if (!g)
		return NULL;
	g->pid = q->pid;
	g->start_ticks = q->start_ticks;
	g->accel = q->accel;
	memcpy(g->qmp, q->qmp, sizeof(g->qmp));
	memcpy(g->channel, q->channel, sizeof(g->channel));
	g->cpu_ns = t.utime_ns + t.stime_ns;
	g->hw_why = h->hw_why;
	read_threads(h, g);
	if (!g->nr_vcpus && g->qmp[0])
		read_qmp_vcpus(h, g, deadline);
	g->t_proc = g->t_kvm = (double)clk_now_ns() / 1e9;
	if (d)
		merge_dstat(g, d);
	if (g->accel == PS_ACCEL_KVM && h->pmu)
		read_hw(h, g);
	else if (h->pmu)
		g->hw_why = "TCG: no guest mode to count";
	if (g->accel != PS_ACCEL_KVM)
		snprintf(g->exits_why, sizeof(g->exits_why),
			 "TCG: QEMU emulates the CPU, no VM exits");
	else if (!g->has_exits)
		read_exits_local(h, g, deadline);
	if (!d)
		g->t_kvm = (double)clk_now_ns() / 1e9;
	return g;
}

/* ---- rates ---------------------------------------------------------------- */

static double rate(uint64_t now, uint64_t before, double dt)
{
	return now > before && dt > 0 ? (double)(now - before) / dt : 0;
}

static void vcpu_rates(struct hs_vcpu *v, const struct hs_vcpu *o, double dt, double dk)
{
	v->cpu_pct = rate(v->cpu_ns, o->cpu_ns, dt) / 1e7;
	v->guest_pct = rate(v->guest_ns, o->guest_ns, dt) / 1e7;
	v->steal_pct = rate(v->wait_ns, o->wait_ns, dt) / 1e7;
	for (int k = 0; v->has_hw && o->has_hw && k < PMC_NR; k++)
		v->hw_ps[k] = rate(v->hw[k], o->hw[k], dt);
	if (v->kvm.valid && o->kvm.valid) {
		v->exits_ps = rate(v->kvm.exits, o->kvm.exits, dk);
		for (unsigned r = 0; r < KVMSTAT_NR_REASONS; r++)
			v->reason_ps[r] = rate(v->kvm.reason[r], o->kvm.reason[r], dk);
	}
}

static void guest_rates(struct hs_guest *g, const struct hs_guest *o)
{
	unsigned nv = g->nr_vcpus ? g->nr_vcpus : 1;
	double dt = g->t_proc - o->t_proc, dk = g->t_kvm - o->t_kvm;

	g->fresh = 0;
	g->cpu_pct = rate(g->cpu_ns, o->cpu_ns, dt) / 1e7;
	g->guest_pct = rate(g->guest_ns, o->guest_ns, dt) / 1e7;
	g->steal_pct = rate(g->wait_ns, o->wait_ns, dt) / 1e7 / nv;
	if (g->has_exits && o->has_exits) {
		g->exits_ps = rate(g->kvm.exits, o->kvm.exits, dk);
		for (unsigned r = 0; r < KVMSTAT_NR_REASONS; r++)
			g->reason_ps[r] = rate(g->kvm.reason[r], o->kvm.reason[r], dk);
	}
	/* libvirt's counters are read before the /proc ones: same interval. */
	g->rd_bps = rate(g->rd_bytes, o->rd_bytes, dt);
	g->wr_bps = rate(g->wr_bytes, o->wr_bytes, dt);
	g->rx_bps = rate(g->rx_bytes, o->rx_bytes, dt);
	g->tx_bps = rate(g->tx_bytes, o->tx_bytes, dt);
	if (g->has_hw && o->has_hw) {
		for (int k = 0; k < PMC_NR; k++)
			g->hw_ps[k] = rate(g->hw[k], o->hw[k], dt);
		g->ipc = g->hw_ps[PMC_CYCLES] > 0 ? g->hw_ps[PMC_INSTRUCTIONS] / g->hw_ps[PMC_CYCLES] : 0;
	}
	for (unsigned i = 0; i < g->nr_vcpus && i < o->nr_vcpus; i++)
		vcpu_rates(&g->vcpu[i], &o->vcpu[i], dt, dk);
}

/* The same guest in the previous refresh: same process (pid and start
 * time), or for a remote domain the same name. */
static const struct hs_guest *find_prev(const struct hoststats *h, const struct hs_guest *g)
{
	for (size_t i = 0; i < h->nr_guests; i++) {
		const struct hs_guest *o = h->guests[i];

		if (g->pid ? (o->pid == g->pid && o->start_ticks == g->start_ticks)
			   : (!o->pid && !strcmp(o->name, g->name)))
			return o;
	}
	return NULL;
}

/* ---- refresh ------------------------------------------------------------- */

static const struct virtstats_dom *dstat_for(const struct virtstats_dom *ds, int nd,
					  const char *name, char *used)
{
	for (int i = 0; i < nd; i++)
		if (!used[i] && !strcmp(ds[i].name, name)) {
			used[i] = 1;
			return &ds[i];
		}
	return NULL;
}

static int wanted(const struct hoststats *h, const char *name)
{
	const char *f = h->cfg.filter ? *h->cfg.filter : NULL;

	return !f || !f[0] || strstr(name, f);
}

/* Builds the new guest table into gs (capacity cap); returns its size. */
static size_t build_table(struct hoststats *h, struct hs_guest **gs, size_t cap,
			  const struct virtstats_dom *ds, int nd, char *used)
{
	size_t n = 0;

	for (size_t i = 0; i < h->nr_qemus && n < cap; i++) {
		const struct ps_qemu *q = &h->qemus[i];
		const struct virtstats_dom *d;
		struct hs_guest *g;

		if (h->cfg.stop && *h->cfg.stop)
			break;		/* the caller drops this table */
		d = q->libvirt ? dstat_for(ds, nd, q->name, used) : NULL;
		g = wanted(h, q->name) ? guest_read_local(h, q, d) : NULL;

		if (g)
			gs[n++] = g;
	}
	for (int i = 0; i < nd && n < cap; i++) {
		struct hs_guest *g;

		if (used[i] || !wanted(h, ds[i].name))
			continue;
		g = guest_new(ds[i].name);
		if (!g)
			continue;
		g->t_proc = g->t_kvm = (double)clk_now_ns() / 1e9;
		g->hw_why = "the domain runs on another host";
		snprintf(g->exits_why, sizeof(g->exits_why), "libvirt gives no kvm stats");
		merge_dstat(g, &ds[i]);
		gs[n++] = g;
	}
	return n;
}

/* Two QEMUs may carry the same -name: the later ones become "NAME@PID", so
 * every row (and every Prometheus series) stays one guest. */
static void unique_names(struct hs_guest **gs, size_t n)
{
	for (size_t i = 1; i < n; i++)
		for (size_t j = 0; j < i; j++)
			if (!strcmp(gs[i]->name, gs[j]->name)) {
				char tmp[PS_NAME_MAX];
				int keep = 100;

				/* cut at a character's start: the name stays UTF-8 */
				while (keep > 0 && (gs[i]->name[keep] & 0xc0) == 0x80)
					keep--;
				snprintf(tmp, sizeof(tmp), "%.*s@%d", keep, gs[i]->name, gs[i]->pid);
				memcpy(gs[i]->name, tmp, sizeof(tmp));
				break;
			}
}

int hoststats_refresh(struct hoststats *h)
{
	struct virtstats_dom *ds = NULL;
	struct hs_guest **gs;
	char *used;
	double t;
	size_t n;
	int nd, err;

	memset(&h->capped, 0, sizeof(h->capped));
	err = scan_qemus(h);
	if (err)
		return err;
	for (size_t i = 0; i < h->nr_tc;) {	/* forget QEMUs that are gone */
		const struct ps_qemu *q = known_qemu(h, h->tc[i].pid);

		if (q && q->start_ticks == h->tc[i].start_ticks)
			i++;
		else
			h->tc[i] = h->tc[--h->nr_tc];
	}
	for (size_t i = 0; i < h->nr_qb;) {	/* likewise their pauses */
		const struct ps_qemu *q = known_qemu(h, h->qb[i].pid);

		if (q && q->start_ticks == h->qb[i].start_ticks)
			i++;
		else
			h->qb[i] = h->qb[--h->nr_qb];
	}
	h->tc = cache_shrink(h->tc, h->nr_tc, sizeof(*h->tc));
	h->qb = cache_shrink(h->qb, h->nr_qb, sizeof(*h->qb));
	nd = read_libvirt(h, &ds);
	used = calloc((size_t)nd + 1, 1);
	gs = calloc(h->nr_qemus + (size_t)nd + 1, sizeof(*gs));
	if (!used || !gs) {
		free(used);
		free(gs);
		free(ds);
		return -ENOMEM;
	}
	n = build_table(h, gs, h->nr_qemus + (size_t)nd, ds, nd, used);
	if (h->cfg.stop && *h->cfg.stop) {
		guests_free(gs, n);
		free(used);
		free(ds);
		return -EINTR;
	}
	unique_names(gs, n);
	pm_sweep(h);
	free(used);
	free(ds);
	t = ((double)clk_now_ns() / 1e9);
	h->interval = h->last_t ? t - h->last_t : 0;
	for (size_t i = 0; i < n; i++) {
		const struct hs_guest *o = find_prev(h, gs[i]);

		if (o)
			guest_rates(gs[i], o);
	}
	guests_free(h->guests, h->nr_guests);
	h->guests = gs;
	h->nr_guests = n;
	h->last_t = t;
	return 0;
}

/* ---- sorting and views --------------------------------------------------- */

static const char *const sort_names[HS_SORT_NR] = {
	[HS_SORT_CPU] = "cpu", [HS_SORT_STEAL] = "steal", [HS_SORT_EXITS] = "exits",
	[HS_SORT_IO] = "io", [HS_SORT_NAME] = "name",
};

int hs_sort_parse(const char *s)
{
	for (int i = 0; i < HS_SORT_NR; i++)
		if (!strcmp(s, sort_names[i]))
			return i;
	return -1;
}

const char *hs_sort_name(enum hs_sort key)
{
	return (unsigned)key < HS_SORT_NR ? sort_names[key] : "?";
}

static double sort_value(const struct hs_guest *g, enum hs_sort key)
{
	switch (key) {
	case HS_SORT_CPU:	return g->cpu_pct;
	case HS_SORT_STEAL:	return g->steal_pct;
	case HS_SORT_EXITS:	return g->exits_ps;
	case HS_SORT_IO:	return g->rd_bps + g->wr_bps + g->rx_bps + g->tx_bps;
	default:		return 0;
	}
}

static enum hs_sort sort_key;

static int cmp_guest(const void *a, const void *b)
{
	const struct hs_guest *x = *(struct hs_guest *const *)a;
	const struct hs_guest *y = *(struct hs_guest *const *)b;
	double vx = sort_value(x, sort_key), vy = sort_value(y, sort_key);

	if (sort_key != HS_SORT_NAME && vx != vy)
		return vx < vy ? 1 : -1;
	return strcmp(x->name, y->name);
}

size_t hoststats_guests(struct hoststats *h, enum hs_sort key, struct hs_guest ***out)
{
	sort_key = key;		/* qsort has no argument; not thread-safe */
	if (h->nr_guests)
		qsort(h->guests, h->nr_guests, sizeof(*h->guests), cmp_guest);
	*out = h->guests;
	return h->nr_guests;
}

unsigned hoststats_top_reasons(const struct hs_guest *g, unsigned *out, unsigned max)
{
	unsigned all[KVMSTAT_NR_REASONS], n = 0;

	for (unsigned r = 0; r < KVMSTAT_NR_REASONS; r++)
		if (g->reason_ps[r] > 0)
			all[n++] = r;
	for (unsigned i = 1; i < n; i++)	/* a handful: insertion sort */
		for (unsigned j = i; j > 0 && g->reason_ps[all[j]] > g->reason_ps[all[j - 1]]; j--) {
			unsigned x = all[j];

			all[j] = all[j - 1];
			all[j - 1] = x;
		}
	if (n > max)
		n = max;
	memcpy(out, all, n * sizeof(*out));
	return n;
}
