// SPDX-License-Identifier: MIT
/*
 * The guests the exporter can profile (host/cli/exporter-job.h): the QEMU
 * processes in /proc (host/hoststats/procstat.h reads their command lines),
 * judged by what profiling them would take.  A command line is its owner's
 * input: the QMP and channel sockets it names are used only if they are
 * sockets owned by the QEMU process's own user, so another local user
 * cannot point the exporter at a monitor that is not theirs; and the name
 * is any user's to give, so a request's name is matched with its owner
 * (pguest_match()).  What the monitor then answers is checked by the
 * attach child against the QEMU found here (attach --qemu-pid).
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
	/* every guest found in /proc is a QEMU */
	const struct backend_guest bg = { .kvm = q->accel == PS_ACCEL_KVM, .qemu = 1 };

	g->sampler = backend_pick(BACKEND_ATTACH, &bg, g->why, sizeof(g->why));
	if (!g->sampler)
		return;		/* g->why says what no backend could do */
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
	else if ((g->sampler->flags & BACKEND_STOPS_GUEST) && !cfg->allow_gdbstub)
		snprintf(g->why, sizeof(g->why), "%sonly the %s sampler can profile it, and "
			 "that stops the guest at every sample; start the exporter with "
			 "--allow-gdbstub to allow it", bg.kvm ? "" : "it runs under TCG: ",
			 g->sampler->name);
}

/* How often struct pguest_seen forgets, in scans, and the age in seconds
 * of a process it may keep. */
#define PGUEST_RESCAN		10
#define PGUEST_SETTLED_S	5

void pguest_seen_free(struct pguest_seen *seen)
{
	if (!seen)
		return;
	free(seen->pids);
	seen->pids = NULL;
	seen->nr = 0;
}

static int cmp_pid(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* The host's boot time in clock ticks, less PGUEST_SETTLED_S: a process
 * that started before it is settled. */
static uint64_t settled_before(void)
{
	struct timespec ts;
	long hz = sysconf(_SC_CLK_TCK);

	if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts) || ts.tv_sec < PGUEST_SETTLED_S)
		return 0;
	return (uint64_t)(ts.tv_sec - PGUEST_SETTLED_S) * (uint64_t)hz;
}

/* Whether pid is QEMU: 1 (g filled), 0, or -errno; a settled process
 * that is not QEMU goes into others (when there is one). */
static int probe_one(const struct pprof_cfg *cfg, int pid, const struct pguest_seen *seen,
		     int *others, size_t *no, uint64_t settled, struct pguest *g)
{
	char proc[32];
	struct stat st;
	int r;

	if (seen && seen->nr && bsearch(&pid, seen->pids, seen->nr, sizeof(int), cmp_pid)) {
		others[(*no)++] = pid;
		return 0;
	}
	r = procstat_probe(pid, &g->q);
	if (r == 0 && others && g->q.start_ticks < settled)
		others[(*no)++] = pid;
	snprintf(proc, sizeof(proc), "/proc/%d", pid);
	if (r != 1 || stat(proc, &st))
		return r == 1 ? -ENOENT : r;
	g->owner = st.st_uid;
	judge(cfg, g);
	return 1;
}

int pguest_scan(const struct pprof_cfg *cfg, struct pguest_seen *seen, struct pguest **out)
{
	struct pguest *gs = NULL;
	int *pids = NULL, *others = NULL, n, nr = 0;
	uint64_t settled = settled_before();
	size_t no = 0;

	*out = NULL;
	n = procstat_list_pids(&pids);
	if (n < 0)
		return n;
	if (seen && seen->scans++ % PGUEST_RESCAN == 0)
		seen->nr = 0;
	gs = calloc((size_t)n + 1, sizeof(*gs));
	if (seen)
		others = malloc(((size_t)n + 1) * sizeof(*others));
	if (!gs || (seen && !others)) {
		free(pids);
		free(gs);
		free(others);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++)	/* pids sorted: so is others */
		if (probe_one(cfg, pids[i], seen, others, &no, settled, &gs[nr]) == 1)
			nr++;
	free(pids);
	if (seen) {
		free(seen->pids);
		seen->pids = others;
		seen->nr = no;
	}
	*out = gs;
	return nr;
}

const char *pguest_owner_name(const struct pguest *g, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];

	if (!getpwuid_r(g->owner, &pw, tmp, sizeof(tmp), &res) && res)
		snprintf(buf, len, "%s", pw.pw_name);
	else
		snprintf(buf, len, "%u", (unsigned)g->owner);
	return buf;
}

/* owner= as a uid: a user name, or its number.  0 or -EINVAL. */
int pguest_owner_uid(const char *owner, uid_t *uid)
{
	struct passwd pw, *res = NULL;
	size_t n = strlen(owner);
	char tmp[1024];
	unsigned long v;

	if (!getpwnam_r(owner, &pw, tmp, sizeof(tmp), &res) && res) {
		*uid = pw.pw_uid;
		return 0;
	}
	if (!n || n > 10 || strspn(owner, "0123456789") != n)
		return -EINVAL;
	v = strtoul(owner, NULL, 10);
	if (v > 0xfffffffeul)
		return -EINVAL;
	*uid = (uid_t)v;
	return 0;
}

int pguest_match(const struct pguest *gs, int n, const char *name, const char *owner,
		 char *owners, size_t ownlen)
{
	uid_t want = 0;
	int pick = -ENOENT, hits = 0, trusted = 0;
	size_t off = 0;

	if (owner && pguest_owner_uid(owner, &want))
		return -EINVAL;
	/* root's and the exporter's own guests first */
	for (int i = 0; !owner && i < n; i++)
		trusted |= !strcmp(gs[i].q.name, name) &&
			   (gs[i].owner == 0 || gs[i].owner == geteuid());
	owners[0] = '\0';
	for (int i = 0; i < n; i++) {
		char who[64];

		if (strcmp(gs[i].q.name, name) || (owner && gs[i].owner != want) ||
		    (trusted && gs[i].owner != 0 && gs[i].owner != geteuid()))
			continue;
		if (!hits++)
			pick = i;
		if (off < ownlen)
			off += (size_t)snprintf(owners + off, ownlen - off, "%s%s",
						off ? ", " : "",
						pguest_owner_name(&gs[i], who, sizeof(who)));
	}
	return hits > 1 ? -EEXIST : pick;
}
