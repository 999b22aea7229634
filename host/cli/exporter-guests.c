// SPDX-License-Identifier: MIT
/*
 * The guests the exporter can profile (host/cli/exporter-job.h): the QEMU
 * processes in /proc (host/hoststats/procstat.h reads their command lines),
 * judged by what profiling them would take.  A command line is its owner's
 * input: the QMP and channel sockets it names are used only if they are
 * sockets owned by the QEMU process's own user, so another local user
 * cannot point the exporter at a monitor that is not theirs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "host/cli/exporter-job.h"

/* Whether path is a socket of pid's user. */
static int socket_of(const char *path, int pid)
{
	char proc[32];
	struct stat ps, ss;

	snprintf(proc, sizeof(proc), "/proc/%d", pid);
	if (stat(proc, &ps) || stat(path, &ss))
		return 0;
	return S_ISSOCK(ss.st_mode) && ss.st_uid == ps.st_uid;
}

static void judge(const struct pprof_cfg *cfg, struct pguest *g)
{
	struct ps_qemu *q = &g->q;

	g->sampler = q->accel == PS_ACCEL_KVM ? "perf" : "gdbstub";
	g->why[0] = '\0';
	if (q->channel[0] && !socket_of(q->channel, q->pid))
		q->channel[0] = '\0';	/* profiled without process names */
	if (q->libvirt && cfg->no_libvirt)
		snprintf(g->why, sizeof(g->why), "it is a libvirt domain and this exporter "
			 "runs with --no-libvirt");
	else if (!q->libvirt && !q->qmp[0])
		snprintf(g->why, sizeof(g->why), "it has no QMP socket: start QEMU with "
			 "-qmp unix:PATH,server=on,wait=off");
	else if (!q->libvirt && !socket_of(q->qmp, q->pid))
		snprintf(g->why, sizeof(g->why), "its QMP socket is not a socket of the "
			 "QEMU process's user");
	else if (q->accel != PS_ACCEL_KVM && !cfg->allow_gdbstub)
		snprintf(g->why, sizeof(g->why), "it runs under TCG: only the gdbstub sampler "
			 "can profile it, and that stops the guest at every sample; start the "
			 "exporter with --allow-gdbstub to allow it");
}

int pguest_scan(const struct pprof_cfg *cfg, struct pguest **out)
{
	struct pguest *gs = NULL;
	int *pids = NULL, n, nr = 0;

	*out = NULL;
	n = procstat_list_pids(&pids);
	if (n < 0)
		return n;
	gs = calloc((size_t)n + 1, sizeof(*gs));
	if (!gs) {
		free(pids);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		struct pguest *g = &gs[nr];

		if (procstat_probe(pids[i], &g->q) != 1)
			continue;
		judge(cfg, g);
		nr++;
	}
	free(pids);
	*out = gs;
	return nr;
}
