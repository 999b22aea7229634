// SPDX-License-Identifier: MIT
/*
 * The "perf" attach backend (vmm/backend.h): samples a KVM guest that runs
 * in another process through host perf on its vCPU threads, never stopping
 * it (vmm/perf/perf-sampler.h).  The guest is a QEMU reached through QMP (vCPU
 * threads, guest RAM for the task-switch rings), a libvirt domain (vCPU
 * threads and guest RAM through the monitor passthrough), or an `opvm run
 * --vmm=kvm` process (its runtime descriptor).
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "events/events.h"
#include "lib/errbuf.h"
#include "lib/text.h"
#include "vmm/backend.h"
#include "vmm/guest/monitor.h"
#include "vmm/perf/perf-sampler.h"
#include "vmm/sampler.h"

#define PERF_DEFAULT_HZ	1000

struct pattach {
	struct perf_sampler_config pc;	/* the event; per guest, a copy */
	struct backend_setup setup;
};

/* Per guest. */
struct pattach_guest {
	char desc_path[4096];		/* a VMM process's runtime descriptor */
};

static void *pattach_new(void)
{
	return calloc(1, sizeof(struct pattach));
}

/* The event: -e, else the family's cycles where the host has a PMU, else
 * cpu-clock at -F (said once). */
static int pick_spec(struct events_db *db, const struct backend_common *c,
		     struct opvm_event_spec *spec, struct backend_setup *out,
		     char *err, size_t errlen)
{
	int has_pmu = events_host_has_pmu();
	unsigned rate = c->rate;
	char clock[64];

	if (rate > 10000) {
		errbuf_set(err, errlen, "-F wants 1..10000 samples per second per vCPU");
		return -EINVAL;
	}
	if (c->nr_event_specs) {
		if (events_parse_spec(db, c->event_specs[c->nr_event_specs - 1], spec, err,
				      errlen))
			return -EINVAL;
		if (!events_usable(spec->event, has_pmu)) {
			errbuf_set(err, errlen, "%s counts on a hardware PMU, and this host has "
				    "none that perf can use (nested or PMU-less KVM, "
				    "kvm.enable_pmu=N): use -e cpu-clock", spec->event->name);
			return -EINVAL;
		}
		return 0;
	}
	if (has_pmu && !events_default(db, 1, spec))
		return 0;	/* the family's cycles event with its default count */
	snprintf(clock, sizeof(clock), "cpu-clock:%u",
		 1000000000u / (rate ? rate : PERF_DEFAULT_HZ));
	if (events_parse_spec(db, clock, spec, err, errlen))
		return -EINVAL;
	backend_note(out->notes, sizeof(out->notes),
		     "no PMU on this host: using cpu-clock; pass -e cpu-clock to silence this");
	return 0;
}

static int pattach_prepare(void *st, const struct backend_common *c,
			   struct backend_setup *out, char *err, size_t errlen)
{
	struct pattach *pa = st;
	struct opvm_event_spec spec;
	struct events_db *db;
	char why[256] = "";
	int r;

	db = events_db_load(NULL, 0, why, sizeof(why));
	if (!db) {
		errbuf_set(err, errlen, "cannot load the events database: %s",
			    why[0] ? why : strerror(errno));
		return -ENOENT;
	}
	r = pick_spec(db, c, &spec, out, err, errlen);
	if (!r) {
		events_spec_perf_attr(&spec, &pa->pc.attr);
		pa->pc.kernel = spec.kernel;
		pa->pc.user = spec.user;
		out->nr_events = 1;
		snprintf(out->events[0].name, sizeof(out->events[0].name), "%s",
			 spec.event->name);
		out->events[0].count = spec.count;
		out->events[0].unit_mask = spec.unit_mask;
		out->mode = (spec.event->flags & OPVM_EV_HARDWARE) ? "perf-pmu" : "perf-timer";
		out->rate_hz = events_spec_rate_hz(&spec);
		pa->setup = *out;
		pa->pc.event_name = pa->setup.events[0].name;
	}
	events_db_free(db);
	return r;
}

/* guestmem_hmp_fn over a vm_monitor (libvirt's passthrough). */
static int monitor_hmp(void *arg, const char *cmd, char **out)
{
	char err[256];

	return vm_monitor_hmp(arg, cmd, out, err, sizeof(err));
}

/* The sampler for the guest behind mon: its vCPU threads, checked to be
 * its QEMU's (vm_monitor_vcpu_threads()), and its guest RAM (gpa2hva)
 * through the monitor, QMP or libvirt's passthrough. */
static struct sampler *make_sampler(struct pattach *pa, struct pattach_guest *g,
				    struct vm_monitor *mon, struct backend_target *t,
				    struct perf_sampler_config *pc, char *err, size_t errlen)
{
	pid_t tids[PERF_SAMPLER_MAX_VCPUS], pid = 0;
	char why[512] = "";
	int n;

	(void)pa;
	if (vm_monitor_pid(mon))
		return perf_target_vmm(pc, vm_monitor_pid(mon), g->desc_path,
				       sizeof(g->desc_path), &t->chan_fd, err, errlen);
	n = vm_monitor_vcpu_threads(mon, tids, PERF_SAMPLER_MAX_VCPUS, &pid, why, sizeof(why));
	if (n <= 0) {
		errbuf_set(err, errlen, "query-cpus-fast: %s", n ? (why[0] ? why :
			    strerror(-n)) : "no vCPU threads");
		errno = n ? -n : EPROTO;
		return NULL;
	}
	return perf_target_monitor(pc, pid, tids, (unsigned)n, monitor_hmp, mon, err, errlen);
}

static int pattach_open(void *st, struct vm_monitor *mon, struct backend_target *t,
			char *err, size_t errlen)
{
	struct pattach *pa = st;
	struct pattach_guest *g = calloc(1, sizeof(*g));
	struct perf_sampler_config pc = pa->pc;
	char why[512] = "";
	const char *path;

	if (!g)
		return -ENOMEM;
	t->priv = g;
	if (!vm_monitor_pid(mon) && vm_monitor_is_kvm(mon) == 0)
		backend_note(t->notes, sizeof(t->notes), "'%s' runs under TCG: host perf sees "
			     "QEMU's own code there, not the guest's; --sampler gdbstub samples "
			     "TCG guests", t->name);
	t->sampler = make_sampler(pa, g, mon, t, &pc, why, sizeof(why));
	if (!t->sampler) {
		errbuf_set(err, errlen, "guest '%s': %s", t->name, why);
		return errno ? -errno : -EIO;
	}
	t->nr_vcpus = pc.nr_vcpus;
	/* introspection reads the guest through the sampler's reader (the
	 * collector is freed before close() frees the sampler): kernel
	 * symbols, processes and mappings with no opvm.ko, and user samples
	 * by mapping since a perf sample has no CR3 */
	t->mem = perf_sampler_guestmem(t->sampler);
	vm_monitor_idle(mon);
	path = vm_monitor_channel(mon);
	if (t->chan_fd >= 0 || !path[0])
		return 0;
	backend_connect_channel(t, path);	/* path lives in the monitor */
	return 0;
}

static int pattach_finish(void *st, struct backend_target *t, char *err, size_t errlen)
{
	return 0;
}

static void pattach_summary(void *st, const struct backend_target *t,
			    const struct backend_totals *tot, FILE *out)
{
	struct pattach *pa = st;
	char d[2048] = "";

	if (!t->sampler)
		return;
	if (t->sampler->ops->describe)
		t->sampler->ops->describe(t->sampler, d, sizeof(d));
	text_fprintf_wrapped(out, 4, "guest %s (%s): %u vCPU%s (mode %s)\n%s", t->name, t->how,
		t->nr_vcpus, t->nr_vcpus == 1 ? "" : "s", pa->setup.mode, d);
	text_fprintf_wrapped(out, 4, "  samples: %llu in files (kernel %s, user %s); lost %s (ring full)",
		(unsigned long long)tot->samples, tot->kernel.s, tot->user.s,
		tot->lost_overflow.s);
}

static void pattach_close(void *st, struct backend_target *t)
{
	t->mem = NULL;		/* the sampler's */
	if (t->sampler)
		t->sampler->ops->free(t->sampler);
	t->sampler = NULL;
	free(t->priv);
	t->priv = NULL;
}

/* Host perf samples vCPU threads while they run guest code in KVM: a TCG
 * guest's vCPUs never enter KVM, so perf would see QEMU's translator. */
static int pattach_probe(const struct backend_guest *g, char *err, size_t errlen)
{
	if (g->kvm)
		return 0;
	errbuf_set(err, errlen, "host perf samples KVM guests only, and this one runs "
		    "under TCG");
	return -ENOTSUP;
}

const struct backend_ops perf_backend = {
	.name = "perf",
	.kind = BACKEND_ATTACH,
	.probe = pattach_probe,
	.help = "host perf on a KVM guest's vCPU threads, never stopped",
	.options = NULL,
	.new = pattach_new,
	.prepare = pattach_prepare,
	.open = pattach_open,
	.finish = pattach_finish,
	.summary = pattach_summary,
	.close = pattach_close,
	.free = free,
};
