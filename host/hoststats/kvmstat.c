// SPDX-License-Identifier: MIT
/*
 * KVM exit counters.  See kvmstat.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/fs.h"
#include "host/hoststats/kvmstat.h"
#include "vmm/guest/qmp.h"

static const char *const reason_names[KVMSTAT_NR_REASONS] = {
	[KVMSTAT_HALT]		 = "halt_exits",
	[KVMSTAT_IO]		 = "io_exits",
	[KVMSTAT_MMIO]		 = "mmio_exits",
	[KVMSTAT_IRQ]		 = "irq_exits",
	[KVMSTAT_IRQ_WINDOW]	 = "irq_window_exits",
	[KVMSTAT_NMI_WINDOW]	 = "nmi_window_exits",
	[KVMSTAT_REQUEST_IRQ]	 = "request_irq_exits",
	[KVMSTAT_SIGNAL]	 = "signal_exits",
	[KVMSTAT_OTHER]		 = NULL,
};

static const char *const reason_labels[KVMSTAT_NR_REASONS] = {
	[KVMSTAT_HALT]		 = "halt",
	[KVMSTAT_IO]		 = "io",
	[KVMSTAT_MMIO]		 = "mmio",
	[KVMSTAT_IRQ]		 = "irq",
	[KVMSTAT_IRQ_WINDOW]	 = "irq_window",
	[KVMSTAT_NMI_WINDOW]	 = "nmi_window",
	[KVMSTAT_REQUEST_IRQ]	 = "request_irq",
	[KVMSTAT_SIGNAL]	 = "signal",
	[KVMSTAT_OTHER]		 = "other",
};

const char *kvmstat_reason_name(enum kvmstat_reason r)
{
	return (unsigned)r < KVMSTAT_NR_REASONS ? reason_names[r] : NULL;
}

void kvmstat_finish(struct kvmstat *v)
{
	uint64_t known = 0;

	for (unsigned r = 0; r < KVMSTAT_NR_REASONS; r++)
		if (r != KVMSTAT_OTHER)
			known += v->reason[r];
	v->reason[KVMSTAT_OTHER] = v->exits > known ? v->exits - known : 0;
}

const char *kvmstat_reason_label(enum kvmstat_reason r)
{
	return (unsigned)r < KVMSTAT_NR_REASONS ? reason_labels[r] : "?";
}

/* Stores counter name = val into v if it is one opvm keeps. */
static void kvmstat_set(struct kvmstat *v, const char *name, uint64_t val)
{
	if (!strcmp(name, "exits")) {
		v->exits = val;
		v->valid = 1;
		return;
	}
	for (unsigned r = 0; r < KVMSTAT_NR_REASONS; r++)
		if (reason_names[r] && !strcmp(name, reason_names[r]))
			v->reason[r] = val;
}

/* cpu-index of the vCPU at qom-path, from query-cpus-fast; -1 if none. */
static int cpu_index_of(json_t *cpus, const char *qom)
{
	size_t i;
	json_t *c;

	json_array_foreach(cpus, i, c) {
		const char *p = json_string_value(json_object_get(c, "qom-path"));
		json_t *idx = json_object_get(c, "cpu-index");

		if (p && !strcmp(p, qom) && json_is_integer(idx))
			return json_integer_value(idx) < 0 || json_integer_value(idx) > 4095
				? -1 : (int)json_integer_value(idx);
	}
	return -1;
}

int kvmstat_parse(json_t *stats, json_t *cpus, struct kvmstat *v, unsigned max)
{
	size_t i, j;
	json_t *e, *s;
	int n = 0;

	if (!json_is_array(stats))
		return -EPROTO;
	json_array_foreach(stats, i, e) {
		const char *prov = json_string_value(json_object_get(e, "provider"));
		const char *qom = json_string_value(json_object_get(e, "qom-path"));
		json_t *list = json_object_get(e, "stats");
		int idx;

		if (!prov || strcmp(prov, "kvm") || !qom || !json_is_array(list))
			continue;
		idx = cpu_index_of(cpus, qom);
		if (idx < 0 || (unsigned)idx >= max)
			continue;
		json_array_foreach(list, j, s) {
			const char *name = json_string_value(json_object_get(s, "name"));
			json_t *val = json_object_get(s, "value");

			if (name && json_is_integer(val) && json_integer_value(val) >= 0)
				kvmstat_set(&v[idx], name, (uint64_t)json_integer_value(val));
		}
		if (v[idx].valid) {
			kvmstat_finish(&v[idx]);
			n++;
		}
	}
	return n;
}

int kvmstat_qmp(struct qmp *q, struct kvmstat *v, unsigned max, unsigned timeout_ms)
{
	json_t *args, *stats = NULL, *cpus = NULL;
	int err;

	args = json_pack("{s:s, s:[{s:s}]}", "target", "vcpu", "providers", "provider", "kvm");
	if (!args)
		return -ENOMEM;
	err = qmp_execute(q, "query-stats", args, &stats, NULL, 0, timeout_ms);
	json_decref(args);
	if (err == -EREMOTEIO)
		err = -ENOENT;	/* no such command or provider */
	if (!err)
		err = qmp_execute(q, "query-cpus-fast", NULL, &cpus, NULL, 0, timeout_ms);
	if (!err) {
		err = kvmstat_parse(stats, cpus, v, max);
		if (err == 0)
			err = -ENOENT;	/* an empty list: TCG */
	}
	json_decref(stats);
	json_decref(cpus);
	return err;
}

static int read_u64(int dfd, const char *name, uint64_t *val)
{
	char buf[32];
	ssize_t n = fs_read_text(dfd, name, buf, sizeof(buf));

	if (n < 0)
		return (int)n;
	*val = strtoull(buf, NULL, 10);
	return 0;
}

int kvmstat_debugfs(const char *debugfs, int pid, struct kvmstat *v)
{
	char path[256], prefix[24];
	struct dirent *e;
	DIR *d;
	int vmfd = -1;
	size_t pl;

	snprintf(path, sizeof(path), "%s/kvm", debugfs ? debugfs : "/sys/kernel/debug");
	pl = (size_t)snprintf(prefix, sizeof(prefix), "%d-", pid);
	d = opendir(path);
	if (!d)
		return -ENOENT;
	/* One directory per VM, "PID-FD"; a QEMU has one VM. */
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, prefix, pl)) {
			vmfd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			break;
		}
	closedir(d);
	if (vmfd < 0)
		return -ENOENT;
	memset(v, 0, sizeof(*v));
	if (!read_u64(vmfd, "exits", &v->exits))
		v->valid = 1;
	for (unsigned r = 0; r < KVMSTAT_NR_REASONS; r++)
		if (reason_names[r])
			read_u64(vmfd, reason_names[r], &v->reason[r]);
	close(vmfd);
	kvmstat_finish(v);
	return v->valid ? 0 : -ENOENT;
}
