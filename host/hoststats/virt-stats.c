// SPDX-License-Identifier: MIT
/*
 * libvirt domain statistics.  See virt-stats.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "lib/util.h"
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
	return n >= VIRT_STATS_VCPUS ? VIRT_STATS_VCPUS - 1 : (int)n;
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

static void dstat_field(struct virt_dstat *d, const virTypedParameter *p)
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

int virt_all_stats(struct virt *v, struct virt_dstat **out, char *err, size_t errlen)
{
	unsigned int want = VIR_DOMAIN_STATS_STATE | VIR_DOMAIN_STATS_CPU_TOTAL |
		VIR_DOMAIN_STATS_VCPU | VIR_DOMAIN_STATS_BLOCK |
		VIR_DOMAIN_STATS_INTERFACE | VIR_DOMAIN_STATS_VM;
	virDomainStatsRecordPtr *recs = NULL;
	struct virt_dstat *d;
	int n;

	*out = NULL;
	n = virConnectGetAllDomainStats(virt_conn(v), want, &recs,
					VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE);
	if (n < 0) {
		/* A libvirt without the VM group refuses the whole call: ask
		 * again without it. */
		want &= ~(unsigned int)VIR_DOMAIN_STATS_VM;
		n = virConnectGetAllDomainStats(virt_conn(v), want, &recs,
						VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE);
	}
	if (n < 0) {
		const char *m = virGetLastErrorMessage();

		util_seterr(err, errlen, "domain statistics: %s", m ? m : "unknown libvirt error");
		return -EIO;
	}
	d = calloc((size_t)n + 1, sizeof(*d));
	for (int i = 0; d && i < n; i++) {
		const char *name = virDomainGetName(recs[i]->dom);

		snprintf(d[i].name, sizeof(d[i].name), "%s", name ? name : "?");
		for (int j = 0; j < recs[i]->nparams; j++)
			dstat_field(&d[i], &recs[i]->params[j]);
		for (unsigned c = 0; c < VIRT_STATS_VCPUS; c++)
			kvmstat_finish(&d[i].kvm[c]);
	}
	virDomainStatsRecordListFree(recs);
	if (!d)
		return -ENOMEM;
	*out = d;
	return n;
}
