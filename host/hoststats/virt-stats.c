// SPDX-License-Identifier: MIT
/*
 * libvirt domain statistics.  See virt-stats.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/errbuf.h"
#include "lib/signals.h"
#include "vmm/libvirt/virt-api.h"
#include "host/hoststats/virt-stats.h"

static uint64_t param_u64(const virTypedParameter *p)
{
	switch (p->type) {
	case VIR_TYPED_PARAM_INT:	return p->value.i < 0 ? 0 : (uint64_t)p->value.i;
	case VIR_TYPED_PARAM_UINT:	return p->value.ui;
	case VIR_TYPED_PARAM_LLONG:	return p->value.l < 0 ? 0 : (uint64_t)p->value.l;
	case VIR_TYPED_PARAM_ULLONG:	return p->value.ul;
	case VIR_TYPED_PARAM_DOUBLE:	return p->value.d < 0 ? 0 : (uint64_t)p->value.d;
	case VIR_TYPED_PARAM_BOOLEAN:	return p->value.b != 0;
	default:			return 0;
	}
}

/* "vcpu.N.rest": N (capped into the last slot) and *rest, or -1. */
static int vcpu_key(const char *key, const char **rest)
{
	char *end;
	long n;

	if (strncmp(key, "vcpu.", 5) || key[5] < '0' || key[5] > '9')
		return -1;
	n = strtol(key + 5, &end, 10);
	if (*end != '.' || n < 0)
		return -1;
	*rest = end + 1;
	return n >= VIRTSTATS_VCPUS ? VIRTSTATS_VCPUS - 1 : (int)n;
}

/* KVM counters come as vcpu.N.<kvm name>.sum (cumulative) from
 * VIR_DOMAIN_STATS_VM. */
static void vcpu_kvm_field(struct kvmstat *k, const char *rest, uint64_t val)
{
	size_t l = strlen(rest);

	if (l < 5 || strcmp(rest + l - 4, ".sum"))
		return;
	if (l - 4 == 5 && !strncmp(rest, "exits", 5)) {
		k->exits += val;
		k->valid = 1;
		return;
	}
	for (unsigned r = 0; r < KVMSTAT_NR_REASONS; r++) {
		const char *n = kvmstat_reason_name(r);

		if (n && strlen(n) == l - 4 && !strncmp(rest, n, l - 4))
			k->reason[r] += val;
	}
}

static int ends_with(const char *s, const char *suffix)
{
	size_t l = strlen(s), sl = strlen(suffix);

	return l >= sl && !strcmp(s + l - sl, suffix);
}

static void dstat_field(struct virtstats_dom *d, const virTypedParameter *p)
{
	const char *k = p->field, *rest;
	uint64_t val = param_u64(p);
	int n;

	if (!strcmp(k, "state.state")) {
		d->running = val == VIR_DOMAIN_RUNNING;
	} else if (!strcmp(k, "cpu.time")) {
		d->cpu_ns = val;
	} else if (!strcmp(k, "vcpu.current")) {
		d->nr_vcpus = (unsigned)val;
	} else if ((n = vcpu_key(k, &rest)) >= 0) {
		if (!strcmp(rest, "time")) {
			d->vcpu_ns[n] += val;
		} else if (!strcmp(rest, "wait")) {
			d->vcpu_wait_ns[n] += val;
			d->has_wait = 1;
		} else {
			vcpu_kvm_field(&d->kvm[n], rest, val);
		}
	} else if (!strncmp(k, "block.", 6) && ends_with(k, ".rd.bytes")) {
		d->rd_bytes += val;
		d->has_block = 1;
	} else if (!strncmp(k, "block.", 6) && ends_with(k, ".wr.bytes")) {
		d->wr_bytes += val;
		d->has_block = 1;
	} else if (!strncmp(k, "net.", 4) && ends_with(k, ".rx.bytes")) {
		d->rx_bytes += val;
		d->has_net = 1;
	} else if (!strncmp(k, "net.", 4) && ends_with(k, ".tx.bytes")) {
		d->tx_bytes += val;
		d->has_net = 1;
	}
}

int virtstats_all(struct virt *v, struct virtstats_dom **out, char *err, size_t errlen)
{
	unsigned int want = VIR_DOMAIN_STATS_STATE | VIR_DOMAIN_STATS_CPU_TOTAL |
		VIR_DOMAIN_STATS_VCPU | VIR_DOMAIN_STATS_BLOCK |
		VIR_DOMAIN_STATS_INTERFACE | VIR_DOMAIN_STATS_VM;
	virDomainStatsRecordPtr *recs = NULL;
	const struct virt_api *V = virt_api(err, errlen);	/* loaded: v is open */
	struct virtstats_dom *d;
	int n;

	*out = NULL;
	if (!V)
		return -ENOENT;
	n = V->ConnectGetAllDomainStats(virt_conn(v), want, &recs,
					VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE);
	if (n < 0) {
		/* A libvirt without the VM group refuses the whole call: ask
		 * again without it. */
		want &= ~(unsigned int)VIR_DOMAIN_STATS_VM;
		n = V->ConnectGetAllDomainStats(virt_conn(v), want, &recs,
						VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE);
	}
	if (n < 0) {
		const char *m = V->GetLastErrorMessage();

		errbuf_set(err, errlen, "domain statistics: %s", m ? m : "unknown libvirt error");
		return -EIO;
	}
	d = calloc((size_t)n + 1, sizeof(*d));
	for (int i = 0; d && i < n; i++) {
		const char *name = V->DomainGetName(recs[i]->dom);

		snprintf(d[i].name, sizeof(d[i].name), "%s", name ? name : "?");
		for (int j = 0; j < recs[i]->nparams; j++)
			dstat_field(&d[i], &recs[i]->params[j]);
		for (unsigned c = 0; c < VIRTSTATS_VCPUS; c++)
			kvmstat_finish(&d[i].kvm[c]);
	}
	V->DomainStatsRecordListFree(recs);
	if (!d)
		return -ENOMEM;
	*out = d;
	return n;
}

/* ---- the reader with a deadline ------------------------------------------ */

struct virtstats_reader {
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* CLOCK_MONOTONIC, as clk_now_ms() */
	pthread_t th;
	char uri[512];
	unsigned budget_ms, retry_s;
	/* under mu */
	int asked;			/* the caller wants a reading */
	int busy;			/* the worker is in libvirt */
	int done;			/* res, n, err: the last call's reading */
	int quit;			/* the owner is gone: the worker frees all */
	int64_t since_ms;		/* when the pending reading was asked for */
	virtstats_job_fn *fn;		/* the call asked for; NULL: the statistics */
	void *arg;
	struct virtstats_dom *res;
	int n;
	char err[256];
	/* the worker's own */
	struct virt *virt;
	int64_t next_open_ms;
	char open_err[256];
};

static void reader_destroy(struct virtstats_reader *r)
{
	virt_close(r->virt);
	free(r->res);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

/* One call, in the worker: connects first if need be (not more often
 * than every retry_s); the statistics drop the connection when they fail.
 * Without a connection: 0 for the statistics, -ENOTCONN for a job, with
 * libvirt's message in err. */
static int reader_call(struct virtstats_reader *r, virtstats_job_fn *fn, void *arg,
		       struct virtstats_dom **out, char *err, size_t errlen)
{
	int64_t now = clk_now_ms();
	int n;

	if (!r->virt) {
		if (now < r->next_open_ms) {
			errbuf_set(err, errlen, "%s", r->open_err);
			return fn ? -ENOTCONN : 0;
		}
		r->virt = virt_open(r->uri, r->open_err, sizeof(r->open_err));
		if (!r->virt) {
			r->next_open_ms = now + (int64_t)r->retry_s * 1000;
			errbuf_set(err, errlen, "%s", r->open_err);
			return fn ? -ENOTCONN : 0;
		}
	}
	if (fn) {
		err[0] = '\0';
		return fn(r->virt, arg, err, errlen);
	}
	n = virtstats_all(r->virt, out, err, errlen);
	if (n < 0) {
		/* The daemon went away: reconnect later, keep /proc figures. */
		if (n == -ENOMEM)
			errbuf_set(err, errlen, "domain statistics: out of memory");
		snprintf(r->open_err, sizeof(r->open_err), "%s", err);
		virt_close(r->virt);
		r->virt = NULL;
		r->next_open_ms = now + (int64_t)r->retry_s * 1000;
		return 0;
	}
	err[0] = '\0';
	return n;
}

static void *reader_main(void *arg)
{
	struct virtstats_reader *r = arg;

	pthread_mutex_lock(&r->mu);
	for (;;) {
		struct virtstats_dom *res = NULL;
		char err[sizeof(r->err)];
		virtstats_job_fn *fn;
		void *job_arg;
		int n;

		while (!r->asked && !r->quit)
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->quit)
			break;
		r->asked = 0;
		r->busy = 1;
		fn = r->fn;
		job_arg = r->arg;
		pthread_mutex_unlock(&r->mu);
		n = reader_call(r, fn, job_arg, &res, err, sizeof(err));
		pthread_mutex_lock(&r->mu);
		r->busy = 0;
		free(r->res);
		r->res = res;
		r->n = n;
		memcpy(r->err, err, sizeof(err));
		r->done = 1;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
	reader_destroy(r);
	return NULL;
}

struct virtstats_reader *virtstats_reader_new(const char *uri, unsigned budget_ms, unsigned retry_s)
{
	struct virtstats_reader *r = calloc(1, sizeof(*r));
	pthread_condattr_t ca;
	int err;

	if (!r)
		return NULL;
	snprintf(r->uri, sizeof(r->uri), "%s", virt_default_uri(uri));
	r->budget_ms = budget_ms;
	r->retry_s = retry_s;
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	/* libvirt's global state is set up once, before a second thread
	 * uses it (its documented rule). */
	if (virt_api(NULL, 0))	/* else virt_open() says what is missing */
		virt_api(NULL, 0)->Initialize();
	/* The stop signals must reach the caller's thread, whose blocking
	 * calls they interrupt (signals_stop_on()), never the worker. */
	err = signals_thread_start(&r->th, reader_main, r);
	if (err) {
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->mu);
		free(r);
		errno = err;
		return NULL;
	}
	return r;
}

void virtstats_reader_free(struct virtstats_reader *r)
{
	pthread_t th;
	int busy;

	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	r->quit = 1;
	busy = r->busy;
	th = r->th;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	/* An idle worker ends at once; one stuck in libvirt ends (and frees
	 * r) when its call returns, or with the process. */
	if (busy)
		pthread_detach(th);
	else
		pthread_join(th, NULL);
}

/* Waits for the worker's reading until deadline_ms or *stop. */
static void reader_wait(struct virtstats_reader *r, int64_t deadline_ms,
			const volatile sig_atomic_t *stop)
{
	int64_t now = clk_now_ms();

	while (!r->done && now < deadline_ms && !(stop && *stop)) {
		/* slices of 100 ms: a stop signal is seen within one */
		int64_t until = deadline_ms < now + 100 ? deadline_ms : now + 100;
		struct timespec ts = {
			.tv_sec = until / 1000, .tv_nsec = (until % 1000) * 1000000,
		};

		pthread_cond_timedwait(&r->cv, &r->mu, &ts);
		now = clk_now_ms();
	}
}

int virtstats_reader_read(struct virtstats_reader *r, const volatile sig_atomic_t *stop,
			  struct virtstats_dom **out, char *err, size_t errlen)
{
	int64_t now = clk_now_ms();
	int n;

	*out = NULL;
	pthread_mutex_lock(&r->mu);
	if (r->asked || r->busy) {
		/* asked for by an earlier reading that gave up on it */
		if (now - r->since_ms >= r->budget_ms) {
			pthread_mutex_unlock(&r->mu);
			errbuf_set(err, errlen, "libvirt at %s did not answer for %.0f s "
				    "(is libvirtd hung?); its guests are listed from /proc",
				    r->uri, (double)(now - r->since_ms) / 1000);
			return 0;
		}
	} else {
		/* a reading that came after its caller gave up is stale */
		free(r->res);
		r->res = NULL;
		r->done = 0;
		r->asked = 1;
		r->fn = NULL;
		r->since_ms = now;
		pthread_cond_broadcast(&r->cv);
	}
	reader_wait(r, r->since_ms + r->budget_ms, stop);
	if (!r->done) {
		pthread_mutex_unlock(&r->mu);
		errbuf_set(err, errlen, "libvirt at %s did not answer within %.1f s "
			    "(is libvirtd hung?); its guests are listed from /proc",
			    r->uri, (double)r->budget_ms / 1000);
		return 0;
	}
	*out = r->res;
	n = r->n;
	errbuf_set(err, errlen, "%s", r->err);
	r->res = NULL;
	r->done = 0;
	pthread_mutex_unlock(&r->mu);
	return n;
}

int virtstats_reader_run(struct virtstats_reader *r, virtstats_job_fn *fn, void *arg,
			 const volatile sig_atomic_t *stop, char *err, size_t errlen)
{
	int n;

	pthread_mutex_lock(&r->mu);
	if (r->asked || r->busy) {
		pthread_mutex_unlock(&r->mu);
		errbuf_set(err, errlen, "libvirt at %s has not answered an earlier call "
			    "(is libvirtd hung?)", r->uri);
		return -ETIMEDOUT;
	}
	free(r->res);
	r->res = NULL;
	r->done = 0;
	r->asked = 1;
	r->fn = fn;
	r->arg = arg;
	r->since_ms = clk_now_ms();
	pthread_cond_broadcast(&r->cv);
	reader_wait(r, r->since_ms + r->budget_ms, stop);
	if (!r->done) {
		pthread_mutex_unlock(&r->mu);
		errbuf_set(err, errlen, "libvirt at %s did not answer within %g s "
			    "(is libvirtd hung?)", r->uri, (double)r->budget_ms / 1000);
		return stop && *stop ? -EINTR : -ETIMEDOUT;
	}
	n = r->n;
	errbuf_set(err, errlen, "%s", r->err);
	r->done = 0;
	pthread_mutex_unlock(&r->mu);
	return n;
}
