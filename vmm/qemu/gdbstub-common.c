// SPDX-License-Identifier: MIT
/*
 * Shared by the gdbstub backends (vmm/qemu/gdbstub-common.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "events/events.h"
#include "lib/errbuf.h"
#include "lib/text.h"
#include "vmm/guest/callgraph.h"
#include "vmm/qemu/gdbstub-common.h"
#include "vmm/qemu/gdbstub-sampler.h"
#include "vmm/sampler.h"

/* -e TIMER[:period_us]: the rate it asks for.  Any other event is refused:
 * the gdbstub sees no counters. */
static int event_rate(const char *event, unsigned *rate_hz, char *err, size_t errlen)
{
	struct events_db *db;
	struct opvm_event_spec spec;
	char why[256] = "";
	int ret = -EINVAL;

	db = events_db_load(NULL, 0, why, sizeof(why));
	if (!db) {
		errbuf_set(err, errlen, "cannot load the events database: %s",
			    why[0] ? why : strerror(errno));
		return -ENOENT;
	}
	if (events_parse_spec(db, event, &spec, why, sizeof(why))) {
		errbuf_set(err, errlen, "%s", why);
	} else if (!(spec.event->flags & OPVM_EV_TIMER)) {
		errbuf_set(err, errlen, "the QEMU gdbstub backend samples on a timer only: use "
			    "-e TIMER[:period_us] or -F HZ (counter events like %s need the "
			    "built-in VMM: opvm run --vmm=kvm)", spec.event->name);
	} else {
		*rate_hz = events_spec_rate_hz(&spec);
		ret = 0;
	}
	events_db_free(db);
	return ret;
}

int qemu_backend_setup(const struct backend_common *c, struct backend_setup *setup,
		       char *err, size_t errlen)
{
	unsigned rate = c->rate;
	int r;

	if (rate > 1000) {
		errbuf_set(err, errlen, "-F wants a rate between 1 and 1000 samples per "
			    "second per vCPU, not %u", rate);
		return -EINVAL;
	}
	if (c->nr_event_specs) {
		const char *ev = c->event_specs[c->nr_event_specs - 1];

		if (rate)
			backend_note(setup->notes, sizeof(setup->notes),
				     "-e %s sets the rate; -F %u ignored", ev, rate);
		r = event_rate(ev, &rate, err, errlen);
		if (r)
			return r;
		if (rate > 1000) {
			errbuf_set(err, errlen, "TIMER period below 1000 us: the gdbstub sampler "
				    "stops the guest at most 1000 times a second");
			return -EINVAL;
		}
	}
	if (!rate)
		rate = QEMU_SAMPLER_DEFAULT_HZ;
	setup->mode = "gdbstub-timer";
	setup->rate_hz = rate;
	setup->nr_events = 1;
	snprintf(setup->events[0].name, sizeof(setup->events[0].name), "TIMER");
	setup->events[0].count = 1000000 / rate;
	return 0;
}

/* The stale-int3 guard (vmm/guest/int3loop.h): what it found and did. */
static void summary_int3(const struct qemu_sampler_info *qi, FILE *out)
{
	if (qi->tb_flushes)
		text_fprintf_wrapped(out, 4, "  QEMU's translated code dropped %llu time%s (%.1f ms "
			"each)%s", (unsigned long long)qi->tb_flushes,
			qi->tb_flushes == 1 ? "" : "s", qi->step_ns / 1e6 / qi->tb_flushes,
			qi->int3_loops ? ": a vCPU looped on a stale int3 (QEMU TCG)" :
			", forced for a test (OPVM_TEST_TB_FLUSH)");
	if (qi->int3_loops > qi->tb_flushes)
		text_fprintf_wrapped(out, 4, "  a vCPU looped on int3 in %llu windows of 2 s "
			"(at most one drop of QEMU's translated code per 10 s)",
			(unsigned long long)qi->int3_loops);
	if (qi->steps_late)
		text_fprintf_wrapped(out, 4, "  %llu single steps were answered late",
			(unsigned long long)qi->steps_late);
}

/* What the sampler saw of the guest module and of other people's pauses. */
static void summary_guest_notes(const struct qemu_sampler_info *qi, FILE *out)
{
	if (!qi->hellos)
		text_fprintf_wrapped(out, 4, "  note: the guest module (opvm.ko) never said HELLO on the "
			"channel, so samples are grouped by address space ({anon-cr3:...}) "
			"and the kernel's KASLR offset is unknown: give `opvm report` a copy "
			"of the guest's /proc/kallsyms (--kallsyms FILE) to name kernel code");
	else if (qi->hellos > 1 || qi->resets)
		text_fprintf_wrapped(out, 4, "  the guest restarted during the session: %llu HELLOs, %llu "
			"resets seen", (unsigned long long)qi->hellos,
			(unsigned long long)qi->resets);
	if (qi->paused_ticks)
		text_fprintf_wrapped(out, 4, "  the guest was paused by someone else for %llu ticks (not "
			"sampled)", (unsigned long long)qi->paused_ticks);
	if (qi->restores)
		text_fprintf_wrapped(out, 4, "  %llu of those pauses landed mid-tick; opvm kept them",
			(unsigned long long)qi->restores);
	if (qi->late_stops)
		text_fprintf_wrapped(out, 4, "  a stop of opvm's was answered after sampling: guest resumed");
	summary_int3(qi, out);
}

/* --call-graph: what the walks found and cost. */
static void summary_callgraph(struct sampler *s, FILE *out)
{
	struct callgraph_stats cs;

	qemu_sampler_callgraph_stats(s, &cs);
	if (!cs.walks)
		return;
	text_fprintf_wrapped(out, 4, "  call graphs: %llu stacks walked, %.1f callers and "
		"%.1f guest pages each, %.1f us each (guest stopped meanwhile)",
		(unsigned long long)cs.walks, (double)cs.frames / cs.walks,
		(double)cs.pages / cs.walks, cs.cost_ns / 1e3 / cs.walks);
	if (cs.kernel_walks)
		text_fprintf_wrapped(out, 4, "  kernel stacks: %llu, %llu of them on into the "
			"user task; %s", (unsigned long long)cs.kernel_walks,
			(unsigned long long)cs.kernel_to_user,
			!cs.orc_entries ? cs.orc_error : cs.orc_from_kallsyms ?
			"by the kernel's ORC tables, located by its kallsyms" :
			"by the kernel's ORC tables");
}

/* --call-graph in CPython processes: the Python frames read. */
static void summary_python(struct sampler *s, FILE *out)
{
	char buf[1024];	/* pyguest_describe(): seven lines */

	qemu_sampler_python_describe(s, buf, sizeof(buf));
	if (buf[0])
		fprintf(out, "  %s", buf);
}

void qemu_backend_summary(const struct backend_target *t, unsigned rate_hz,
			  const struct backend_totals *tot, FILE *out)
{
	struct sampler_stats ss = { 0 };
	struct qemu_sampler_info qi = { 0 };

	if (!t->sampler)
		return;
	t->sampler->ops->get_stats(t->sampler, &ss);
	qemu_sampler_get_info(t->sampler, &qi);
	text_fprintf_wrapped(out, 4, "guest %s (%s): %u vCPU%s sampled through QEMU's "
		"gdbstub, timer %u Hz "
		"(mode gdbstub-timer)", t->name, t->how, t->nr_vcpus,
		t->nr_vcpus == 1 ? "" : "s", rate_hz);
	text_fprintf_wrapped(out, 4, "  samples: %llu in files (kernel %s, user %s); lost %s "
		"(ring full); throttled %llu; guest stopped %llu times, "
		"%.0f us each on average",
		(unsigned long long)tot->samples, tot->kernel.s, tot->user.s,
		tot->lost_overflow.s, (unsigned long long)ss.throttled,
		(unsigned long long)ss.exits,
		ss.exits ? ss.cost_ns_total / 1e3 / ss.exits : 0.0);
	if (tot->guest_lost.n)
		text_fprintf_wrapped(out, 4, "  the guest module dropped %s channel records (its buffer was "
			"full)", tot->guest_lost.s);
	if (tot->lost_no_process.n || tot->lost_no_mapping.n)
		text_fprintf_wrapped(out, 4, "  late guest state: %s samples without a known process, %s "
			"without a known mapping (filed under {anon...})",
			tot->lost_no_process.s, tot->lost_no_mapping.s);
	summary_guest_notes(&qi, out);
	summary_callgraph(t->sampler, out);
	summary_python(t->sampler, out);
}
