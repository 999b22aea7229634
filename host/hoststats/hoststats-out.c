// SPDX-License-Identifier: MIT
/*
 * The host-stats table written out: JSON for `opvm top --once --format
 * json`, Prometheus text exposition for `opvm exporter`.  See hoststats.h;
 * docs/usage.md lists every key and metric.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/hoststats/hoststats.h"
#include "lib/array.h"
#include "lib/text.h"

/* Room for a name, path or message made UTF-8 (3 bytes a byte at most). */
#define OUT_ESC_MAX	(3 * 256 + 1)

/* Names and socket paths come from QEMU command lines (any local user's)
 * or libvirt: bytes, not text.  Made UTF-8 (text_utf8_fix()), so that JSON
 * (jansson rejects invalid UTF-8: one bad name would lose every guest) and
 * Prometheus (the whole scrape would be dropped) take them. */
static const char *out_utf8(char *buf, size_t cap, const char *s)
{
	return text_utf8_valid(s) ? s : text_utf8_fix(buf, cap, s);
}

/* ---- JSON ------------------------------------------------------------- */

static json_t *json_text(const char *s)
{
	char buf[OUT_ESC_MAX];

	return json_string(out_utf8(buf, sizeof(buf), s));
}

static json_t *json_rate(int valid, double v)
{
	return valid ? json_real(v) : json_null();
}

static json_t *vcpu_json(const struct hs_guest *g, const struct hs_vcpu *v)
{
	return json_pack("{s:i, s:i, s:f, s:f, s:f, s:o, s:f, s:f, s:I}",
			 "index", v->index, "tid", v->tid,
			 "cpu_pct", v->cpu_pct, "guest_pct", v->guest_pct,
			 "steal_pct", v->steal_pct,
			 "exits_per_s", json_rate(v->kvm.valid, v->exits_ps),
			 "cpu_s", (double)v->cpu_ns / 1e9, "wait_s", (double)v->wait_ns / 1e9,
			 "exits", (json_int_t)v->kvm.exits);
}

static json_t *reasons_json(const struct hs_guest *g)
{
	unsigned top[KVMSTAT_NR_REASONS], n = hoststats_top_reasons(g, top, KVMSTAT_NR_REASONS);
	json_t *a = json_array();

	for (unsigned i = 0; a && i < n; i++)
		json_array_append_new(a, json_pack("{s:s, s:f}", "reason",
						   kvmstat_reason_label(top[i]),
						   "per_s", g->reason_ps[top[i]]));
	return a;
}

static json_t *guest_json(const struct hs_guest *g)
{
	json_t *o, *vs = json_array();

	for (unsigned i = 0; vs && i < g->nr_vcpus; i++)
		if (g->vcpu[i].tid || !g->pid)
			json_array_append_new(vs, vcpu_json(g, &g->vcpu[i]));
	o = json_pack("{s:o, s:s, s:i, s:s, s:b, s:b, s:i, s:f, s:f, s:f, s:o, s:o, s:o}",
		      "name", json_text(g->name), "source", g->source, "pid", g->pid,
		      "accel", g->accel == PS_ACCEL_KVM ? "kvm" : "tcg",
		      "running", g->running, "first_sample", g->fresh,
		      "vcpus", (int)g->nr_vcpus,
		      "cpu_pct", g->cpu_pct, "guest_pct", g->guest_pct,
		      "steal_pct", g->steal_pct,
		      "exits_per_s", json_rate(g->has_exits, g->exits_ps),
		      "top_exit_reasons", reasons_json(g),
		      "vcpu", vs ? vs : json_array());
	if (!o)
		return NULL;
	json_object_set_new(o, "read_ok", json_boolean(!g->stale));
	if (g->stale)
		json_object_set_new(o, "read_why", json_text(g->stale_why));
	json_object_set_new(o, "exits", g->has_exits ? json_integer((json_int_t)g->kvm.exits)
						     : json_null());
	json_object_set_new(o, g->has_exits ? "exits_source" : "exits_why",
			    json_text(g->has_exits ? g->exits_src : g->exits_why));
	json_object_set_new(o, "hw_counters", g->has_hw && !g->fresh ? json_pack(
		"{s:f, s:f, s:f, s:f}", "cycles_per_s", g->hw_ps[PMC_CYCLES],
		"instructions_per_s", g->hw_ps[PMC_INSTRUCTIONS], "ipc", g->ipc,
		"llc_misses_per_s", g->hw_ps[PMC_LLC_MISSES]) : json_null());
	if (!g->has_hw)
		json_object_set_new(o, "hw_why", json_text(g->hw_why ? g->hw_why : ""));
	json_object_set_new(o, "block_read_bps", json_rate(g->has_io, g->rd_bps));
	json_object_set_new(o, "block_write_bps", json_rate(g->has_io, g->wr_bps));
	json_object_set_new(o, "net_rx_bps", json_rate(g->has_io, g->rx_bps));
	json_object_set_new(o, "net_tx_bps", json_rate(g->has_io, g->tx_bps));
	json_object_set_new(o, "cpu_s", json_real((double)g->cpu_ns / 1e9));
	json_object_set_new(o, "wait_s", json_real((double)g->wait_ns / 1e9));
	if (g->qmp[0])
		json_object_set_new(o, "qmp", json_text(g->qmp));
	if (g->channel[0])
		json_object_set_new(o, "channel", json_text(g->channel));
	return o;
}

json_t *hoststats_json(struct hoststats *h, enum hs_sort key)
{
	struct hs_guest **gs;
	size_t n = hoststats_guests(h, key, &gs);
	json_t *arr = json_array(), *o;
	const struct hs_capped *c;

	if (!arr)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		json_t *g = guest_json(gs[i]);

		if (!g || json_array_append_new(arr, g)) {
			json_decref(arr);
			return NULL;
		}
	}
	c = hoststats_capped(h);
	o = json_pack("{s:f, s:s, s:o, s:{s:i, s:i, s:i}, s:o}", "interval_s",
		      hoststats_interval(h), "sort", hs_sort_name(key), "libvirt_error",
		      json_text(hoststats_libvirt_error(h)), "capped",
		      "pids_unread", (json_int_t)c->pids_unread,
		      "threads_unread", (json_int_t)c->threads_unread,
		      "cmdlines_cut", (json_int_t)c->cmdlines_cut, "guests", arr);
	return o;
}

/* ---- Prometheus ------------------------------------------------------ */

/* A label value as the text format wants it: UTF-8 (out_utf8()), with
 * \\, \" and \n escaped.  Guest names come from QEMU command lines, i.e.
 * from any local user. */
static void put_label(FILE *f, const char *raw)
{
	char buf[OUT_ESC_MAX];
	const char *s = out_utf8(buf, sizeof(buf), raw);

	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void put_head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void put_sample(FILE *f, const char *name, const struct hs_guest *g, int vcpu,
		       const char *reason, double v)
{
	fprintf(f, "%s{guest=\"", name);
	put_label(f, g->name);
	fputc('"', f);
	if (vcpu >= 0)
		fprintf(f, ",vcpu=\"%d\"", vcpu);
	if (reason)
		fprintf(f, ",reason=\"%s\"", reason);
	fprintf(f, "} %.9g\n", v);
}

static void prom_cpu(FILE *f, struct hs_guest **gs, size_t n)
{
	put_head(f, "opvm_guest_info", "gauge", "One per guest: source, accelerator, QEMU pid.");
	for (size_t i = 0; i < n; i++) {
		fputs("opvm_guest_info{guest=\"", f);
		put_label(f, gs[i]->name);
		fprintf(f, "\",source=\"%s\",accel=\"%s\",pid=\"%d\"} 1\n", gs[i]->source,
			gs[i]->accel == PS_ACCEL_KVM ? "kvm" : "tcg", gs[i]->pid);
	}
	put_head(f, "opvm_guest_read_ok", "gauge",
		 "0 when a source of the guest (its QMP socket) did not answer in its budget "
		 "at the last reading: its other figures are from /proc only.");
	for (size_t i = 0; i < n; i++)
		put_sample(f, "opvm_guest_read_ok", gs[i], -1, NULL, !gs[i]->stale);
	put_head(f, "opvm_guest_vcpus", "gauge", "vCPUs of the guest.");
	for (size_t i = 0; i < n; i++)
		put_sample(f, "opvm_guest_vcpus", gs[i], -1, NULL, gs[i]->nr_vcpus);
	put_head(f, "opvm_guest_cpu_seconds_total", "counter",
		 "Host CPU time of the guest's QEMU process (all threads).");
	for (size_t i = 0; i < n; i++)
		put_sample(f, "opvm_guest_cpu_seconds_total", gs[i], -1, NULL,
			   (double)gs[i]->cpu_ns / 1e9);
	put_head(f, "opvm_guest_vcpu_cpu_seconds_total", "counter",
		 "Host CPU time of one vCPU thread.");
	for (size_t i = 0; i < n; i++)
		for (unsigned v = 0; v < gs[i]->nr_vcpus; v++)
			put_sample(f, "opvm_guest_vcpu_cpu_seconds_total", gs[i], (int)v, NULL,
				   (double)gs[i]->vcpu[v].cpu_ns / 1e9);
	put_head(f, "opvm_guest_vcpu_guest_seconds_total", "counter",
		 "Time one vCPU thread ran in guest mode (KVM; 0 under TCG).");
	for (size_t i = 0; i < n; i++)
		for (unsigned v = 0; v < gs[i]->nr_vcpus; v++)
			put_sample(f, "opvm_guest_vcpu_guest_seconds_total", gs[i], (int)v, NULL,
				   (double)gs[i]->vcpu[v].guest_ns / 1e9);
	put_head(f, "opvm_guest_vcpu_steal_seconds_total", "counter",
		 "Time one vCPU thread was runnable but waited for a host CPU (schedstat).");
	for (size_t i = 0; i < n; i++)
		for (unsigned v = 0; v < gs[i]->nr_vcpus; v++)
			put_sample(f, "opvm_guest_vcpu_steal_seconds_total", gs[i], (int)v, NULL,
				   (double)gs[i]->vcpu[v].wait_ns / 1e9);
}

static void prom_exits(FILE *f, struct hs_guest **gs, size_t n)
{
	put_head(f, "opvm_guest_exits_total", "counter",
		 "KVM exits by reason (vcpu=\"all\": VM-wide, from debugfs).");
	for (size_t i = 0; i < n; i++) {
		const struct hs_guest *g = gs[i];
		int per_vcpu = 0;

		for (unsigned v = 0; v < g->nr_vcpus; v++) {
			if (!g->vcpu[v].kvm.valid)
				continue;
			per_vcpu = 1;
			for (unsigned r = 0; r < KVMSTAT_NR_REASONS; r++)
				put_sample(f, "opvm_guest_exits_total", g, (int)v,
					   kvmstat_reason_label(r), (double)g->vcpu[v].kvm.reason[r]);
		}
		if (per_vcpu || !g->has_exits)
			continue;
		for (unsigned r = 0; r < KVMSTAT_NR_REASONS; r++) {
			fprintf(f, "opvm_guest_exits_total{guest=\"");
			put_label(f, g->name);
			fprintf(f, "\",vcpu=\"all\",reason=\"%s\"} %llu\n", kvmstat_reason_label(r),
				(unsigned long long)g->kvm.reason[r]);
		}
	}
}

static void prom_hw(FILE *f, struct hs_guest **gs, size_t n)
{
	static const char *const names[PMC_NR] = {
		[PMC_CYCLES] = "opvm_guest_vcpu_cycles_total",
		[PMC_INSTRUCTIONS] = "opvm_guest_vcpu_instructions_total",
		[PMC_LLC_MISSES] = "opvm_guest_vcpu_llc_misses_total",
	};

	for (int k = 0; k < PMC_NR; k++) {
		put_head(f, names[k], "counter",
			 "Guest-mode hardware event count of one vCPU thread (hosts with a PMU).");
		for (size_t i = 0; i < n; i++)
			for (unsigned v = 0; v < gs[i]->nr_vcpus; v++)
				if (gs[i]->vcpu[v].has_hw)
					put_sample(f, names[k], gs[i], (int)v, NULL,
						   (double)gs[i]->vcpu[v].hw[k]);
	}
}

static void prom_io(FILE *f, struct hs_guest **gs, size_t n)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} io[] = {
		{ "opvm_guest_block_read_bytes_total", "Bytes read by the guest's disks (libvirt).",
		  offsetof(struct hs_guest, rd_bytes) },
		{ "opvm_guest_block_write_bytes_total", "Bytes written by the guest's disks (libvirt).",
		  offsetof(struct hs_guest, wr_bytes) },
		{ "opvm_guest_net_rx_bytes_total", "Bytes received by the guest's interfaces (libvirt).",
		  offsetof(struct hs_guest, rx_bytes) },
		{ "opvm_guest_net_tx_bytes_total", "Bytes sent by the guest's interfaces (libvirt).",
		  offsetof(struct hs_guest, tx_bytes) },
	};

	for (size_t k = 0; k < ARRAY_SIZE(io); k++) {
		put_head(f, io[k].name, "counter", io[k].help);
		for (size_t i = 0; i < n; i++)
			if (gs[i]->has_io)
				put_sample(f, io[k].name, gs[i], -1, NULL,
					   (double)*(const uint64_t *)((const char *)gs[i] + io[k].off));
	}
}

/* What the reading left out at its caps (hoststats_capped()). */
static void prom_capped(FILE *f, const struct hs_capped *c)
{
	put_head(f, "opvm_proc_capped", "gauge",
		 "What the last reading left unread at a cap: pids (a cap of QEMU "
		 "processes was reached), threads (past the cap per QEMU), "
		 "cmdlines (QEMU command lines cut).");
	fprintf(f, "opvm_proc_capped{what=\"pids\"} %u\n", c->pids_unread);
	fprintf(f, "opvm_proc_capped{what=\"threads\"} %u\n", c->threads_unread);
	fprintf(f, "opvm_proc_capped{what=\"cmdlines\"} %u\n", c->cmdlines_cut);
}

char *hoststats_prometheus(struct hoststats *h)
{
	struct hs_guest **gs;
	size_t n = hoststats_guests(h, HS_SORT_NAME, &gs), len = 0;
	char *buf = NULL;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	prom_cpu(f, gs, n);
	prom_exits(f, gs, n);
	prom_io(f, gs, n);
	prom_hw(f, gs, n);
	put_head(f, "opvm_libvirt_up", "gauge", "1 if libvirt answered at this scrape.");
	fprintf(f, "opvm_libvirt_up %d\n", hoststats_libvirt_error(h)[0] ? 0 : 1);
	prom_capped(f, hoststats_capped(h));
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}
