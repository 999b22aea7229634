// SPDX-License-Identifier: MIT
/*
 * /proc readers for QEMU guests.  See procstat.h.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/hoststats/procstat.h"
#include "lib/array.h"

/* Reads up to cap-1 bytes of path into buf, NUL-terminated.  Returns the
 * length or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n, len = 0;

	if (fd < 0)
		return -errno;
	while ((size_t)len < cap - 1) {
		n = read(fd, buf + len, cap - 1 - (size_t)len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			n = -errno;
			close(fd);
			return n;
		}
		if (n == 0)
			break;
		len += n;
	}
	close(fd);
	buf[len] = '\0';
	return len;
}

static uint64_t ticks_to_ns(uint64_t ticks)
{
	static long hz;

	if (!hz) {
		hz = sysconf(_SC_CLK_TCK);
		if (hz <= 0)
			hz = 100;
	}
	return ticks * (1000000000ull / (uint64_t)hz);
}

int procstat_parse_stat(const char *buf, size_t len, struct ps_task *t)
{
	/* Fields after "(comm) ": state is field 3, utime 14, stime 15,
	 * starttime 22, guest_time 43 (1-based, as in proc(5)).  The comm may
	 * hold spaces and parentheses: the last ')' ends it. */
	const char *open = memchr(buf, '(', len), *close = NULL, *p, *end = buf + len;
	unsigned long long v[44] = { 0 };
	unsigned field = 3;
	size_t cl;

	for (const char *q = buf; q < end; q++)
		if (*q == ')')
			close = q;
	if (!open || !close || close < open || close + 2 >= end)
		return -EINVAL;
	cl = (size_t)(close - open - 1);
	if (cl >= sizeof(t->comm))
		cl = sizeof(t->comm) - 1;
	memcpy(t->comm, open + 1, cl);
	t->comm[cl] = '\0';
	p = close + 2;
	/* Field 3 is the state letter; numbers from field 4 on. */
	while (p < end && *p != ' ')
		p++;
	while (p < end && field < 43) {
		unsigned long long x = 0;
		int neg = 0, digits = 0;

		while (p < end && *p == ' ')
			p++;
		if (p < end && *p == '-') {
			neg = 1;
			p++;
		}
		while (p < end && isdigit((unsigned char)*p)) {
			x = x * 10 + (unsigned long long)(*p - '0');
			p++;
			digits++;
		}
		if (!digits)
			break;
		v[++field] = neg ? 0 : x;
	}
	if (field < 22)
		return -EINVAL;
	t->utime_ns = ticks_to_ns(v[14]);
	t->stime_ns = ticks_to_ns(v[15]);
	t->start_ticks = v[22];
	t->guest_ns = field >= 43 ? ticks_to_ns(v[43]) : 0;
	return 0;
}

int procstat_parse_schedstat(const char *buf, size_t len, struct ps_task *t)
{
	unsigned long long run, wait, slices;
	char tmp[96];

	if (len >= sizeof(tmp))
		len = sizeof(tmp) - 1;
	memcpy(tmp, buf, len);
	tmp[len] = '\0';
	if (sscanf(tmp, "%llu %llu %llu", &run, &wait, &slices) != 3)
		return -EINVAL;
	t->run_ns = run;
	t->wait_ns = wait;
	t->slices = slices;
	return 0;
}

int procstat_vcpu_of_comm(const char *comm)
{
	char *end;
	long n;

	if (strncmp(comm, "CPU ", 4) || !isdigit((unsigned char)comm[4]))
		return -1;
	n = strtol(comm + 4, &end, 10);
	if (*end != '/' || n < 0 || n > 4095)
		return -1;
	return (int)n;
}

static int read_task_at(const char *dir, struct ps_task *t)
{
	char path[96], buf[1024];
	ssize_t n;
	int err;

	snprintf(path, sizeof(path), "%s/stat", dir);
	n = read_small(path, buf, sizeof(buf));
	if (n < 0)
		return n == -ESRCH ? -ENOENT : (int)n;
	err = procstat_parse_stat(buf, (size_t)n, t);
	if (err)
		return err;
	t->vcpu = procstat_vcpu_of_comm(t->comm);
	snprintf(path, sizeof(path), "%s/schedstat", dir);
	n = read_small(path, buf, sizeof(buf));
	/* Without CONFIG_SCHED_INFO there is no schedstat: no steal figure. */
	if (n < 0 || procstat_parse_schedstat(buf, (size_t)n, t))
		t->run_ns = t->wait_ns = t->slices = 0;
	return 0;
}

int procstat_read_task(int pid, int tid, struct ps_task *t)
{
	char dir[64];

	memset(t, 0, sizeof(*t));
	t->tid = tid;
	snprintf(dir, sizeof(dir), "/proc/%d/task/%d", pid, tid);
	return read_task_at(dir, t);
}

int procstat_read_proc(int pid, struct ps_task *t)
{
	char dir[64];

	memset(t, 0, sizeof(*t));
	t->tid = pid;
	snprintf(dir, sizeof(dir), "/proc/%d", pid);
	return read_task_at(dir, t);
}

/* Insertion sort: /proc lists nearly in order. */
static void sort_nearly(int *v, int n)
{
	for (int i = 1; i < n; i++) {
		int x = v[i], j = i - 1;

		while (j >= 0 && v[j] > x) {
			v[j + 1] = v[j];
			j--;
		}
		v[j + 1] = x;
	}
}

/* Numeric entries of directory path, sorted; see procstat_list_pids(). */
static int list_numeric(const char *path, int **out)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int *v = NULL, n = 0;
	size_t cap = 0;

	*out = NULL;
	if (!d)
		return errno == ENOENT ? -ENOENT : -errno;
	while ((e = readdir(d))) {
		char *end;
		long x = strtol(e->d_name, &end, 10);

		if (*end || x <= 0 || x > 0x7fffffff)
			continue;
		if (ARRAY_GROW(v, cap, (size_t)n + 1, 256)) {
			free(v);
			closedir(d);
			return -ENOMEM;
		}
		v[n++] = (int)x;
	}
	closedir(d);
	sort_nearly(v, n);
	*out = v;
	return n;
}

int procstat_list_pids(int **pids)
{
	return list_numeric("/proc", pids);
}

int procstat_list_tasks(int pid, int *tids, unsigned max)
{
	char path[64];
	struct dirent *e;
	unsigned stored = 0;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((e = readdir(d)) && n < INT_MAX) {
		char *end;
		long x = strtol(e->d_name, &end, 10);

		if (*end || x <= 0 || x > 0x7fffffff)
			continue;
		n++;
		if (stored < max)
			tids[stored++] = (int)x;
	}
	closedir(d);
	sort_nearly(tids, (int)stored);
	return n;
}

/* ---- the QEMU command line ------------------------------------------- */

/*
 * Copies the value of key (e.g. "path") from a QEMU option list
 * ("socket,id=x,path=/a,,b,server=on") to out, undoing ",," escapes.
 * key NULL: the first element (the implied one, "socket" or "unix:...").
 * 0, -ENOENT, or -ENAMETOOLONG.
 */
static int opt_value(const char *opts, const char *key, char *out, size_t cap)
{
	const char *p = opts;
	size_t kl = key ? strlen(key) : 0;

	for (;;) {
		const char *v = NULL;
		size_t o = 0;

		if (!key)
			v = p;
		else if (!strncmp(p, key, kl) && p[kl] == '=')
			v = p + kl + 1;
		/* Walk to the end of this element, copying if it is the one. */
		while (*p) {
			if (*p == ',' && p[1] == ',') {
				p++;
			} else if (*p == ',') {
				break;
			}
			if (v && p >= v) {
				if (o + 1 >= cap) {
					out[0] = '\0';	/* too long: nothing, not a cut */
					return -ENAMETOOLONG;
				}
				out[o++] = *p;
			}
			p++;
		}
		if (v) {
			out[o] = '\0';
			return 0;
		}
		if (!*p) {
			if (cap)
				out[0] = '\0';
			return -ENOENT;
		}
		p++;
	}
}

#define MAX_CHARDEVS	32

struct cmdline_scan {
	char ids[MAX_CHARDEVS][64];
	char paths[MAX_CHARDEVS][PS_PATH_MAX];
	unsigned n;
	char mon_id[64];	/* -mon chardev=X,mode=control */
	char chan_id[64];	/* -device virtserialport,...,name=org.opvm.0 */
};

static void note_chardev(struct cmdline_scan *s, const char *v)
{
	char type[16];

	if (s->n >= MAX_CHARDEVS || opt_value(v, NULL, type, sizeof(type)) ||
	    strcmp(type, "socket") ||
	    opt_value(v, "id", s->ids[s->n], sizeof(s->ids[0])) ||
	    opt_value(v, "path", s->paths[s->n], sizeof(s->paths[0])))
		return;
	s->n++;
}

static void note_option(struct ps_qemu *q, struct cmdline_scan *s, const char *opt,
			const char *v)
{
	char tmp[PS_NAME_MAX + 8];

	if (!strcmp(opt, "name")) {
		q->libvirt = !strncmp(v, "guest=", 6);
		opt_value(q->libvirt ? v + 6 : v, NULL, q->name, sizeof(q->name));
	} else if (!strcmp(opt, "qmp") && !q->qmp[0] && !strncmp(v, "unix:", 5)) {
		if (opt_value(v + 5, NULL, q->qmp, sizeof(q->qmp)))
			q->qmp[0] = '\0';
	} else if (!strcmp(opt, "mon") && !s->mon_id[0]) {
		if (!opt_value(v, "mode", tmp, sizeof(tmp)) && !strcmp(tmp, "control"))
			opt_value(v, "chardev", s->mon_id, sizeof(s->mon_id));
	} else if (!strcmp(opt, "chardev")) {
		note_chardev(s, v);
	} else if (!strcmp(opt, "device")) {
		if (!opt_value(v, NULL, tmp, sizeof(tmp)) && !strcmp(tmp, "virtserialport") &&
		    !opt_value(v, "name", tmp, sizeof(tmp)) && !strcmp(tmp, "org.opvm.0"))
			opt_value(v, "chardev", s->chan_id, sizeof(s->chan_id));
	} else if (!strcmp(opt, "accel")) {
		if (!opt_value(v, NULL, tmp, sizeof(tmp)))
			q->accel = !strcmp(tmp, "kvm") ? PS_ACCEL_KVM : PS_ACCEL_TCG;
	} else if (!strcmp(opt, "machine") || !strcmp(opt, "M")) {
		if (!opt_value(v, "accel", tmp, sizeof(tmp)))
			q->accel = !strncmp(tmp, "kvm", 3) ? PS_ACCEL_KVM : PS_ACCEL_TCG;
	}
}

static const char *chardev_path(const struct cmdline_scan *s, const char *id)
{
	for (unsigned i = 0; id[0] && i < s->n; i++)
		if (!strcmp(s->ids[i], id))
			return s->paths[i];
	return NULL;
}

int procstat_parse_cmdline(const char *buf, size_t len, struct ps_qemu *q)
{
	struct cmdline_scan *s = calloc(1, sizeof(*s));
	const char *p = buf, *end = buf + len, *prog, *path;

	if (!s)
		return -ENOMEM;
	q->accel = PS_ACCEL_TCG;
	q->libvirt = 0;
	q->name[0] = q->qmp[0] = q->channel[0] = '\0';
	prog = memchr(buf, '\0', len) ? buf : NULL;
	if (!prog || !strstr(prog, "qemu")) {
		free(s);
		return -EINVAL;
	}
	while (p < end) {
		const char *a = p, *nl = memchr(p, '\0', (size_t)(end - p)), *v;

		if (!nl)
			break;		/* cut mid-argument: ignore the tail */
		p = nl + 1;
		if (a[0] != '-')
			continue;
		a += a[1] == '-' ? 2 : 1;	/* QEMU takes -opt and --opt */
		if (!strcmp(a, "enable-kvm")) {
			q->accel = PS_ACCEL_KVM;
			continue;
		}
		if (p >= end || !memchr(p, '\0', (size_t)(end - p)))
			break;
		v = p;
		note_option(q, s, a, v);
	}
	if (!q->qmp[0] && (path = chardev_path(s, s->mon_id)))
		snprintf(q->qmp, sizeof(q->qmp), "%s", path);
	if ((path = chardev_path(s, s->chan_id)))
		snprintf(q->channel, sizeof(q->channel), "%s", path);
	free(s);
	return 0;
}

/* A relative socket path on a QEMU command line is relative to that QEMU's
 * working directory: make it absolute (or drop it if it does not fit). */
static void absolute_paths(int pid, struct ps_qemu *q)
{
	char link[64], cwd[PS_PATH_MAX], tmp[2 * PS_PATH_MAX + 2];
	char *paths[2] = { q->qmp, q->channel };
	ssize_t n;

	if ((!q->qmp[0] || q->qmp[0] == '/') && (!q->channel[0] || q->channel[0] == '/'))
		return;
	snprintf(link, sizeof(link), "/proc/%d/cwd", pid);
	n = readlink(link, cwd, sizeof(cwd) - 1);
	cwd[n > 0 ? n : 0] = '\0';
	for (int i = 0; i < 2; i++) {
		if (!paths[i][0] || paths[i][0] == '/')
			continue;
		snprintf(tmp, sizeof(tmp), "%s/%s", cwd, paths[i]);
		if (n <= 0 || strlen(tmp) >= PS_PATH_MAX)
			paths[i][0] = '\0';
		else
			memcpy(paths[i], tmp, strlen(tmp) + 1);
	}
}

int procstat_probe(int pid, struct ps_qemu *q)
{
	char path[64], *buf;
	struct ps_task t;
	ssize_t n;
	int err;

	err = procstat_read_proc(pid, &t);
	if (err)
		return err;
	q->start_ticks = t.start_ticks;
	if (strncmp(t.comm, "qemu-system-", 12) && strcmp(t.comm, "qemu-kvm"))
		return 0;
	buf = malloc(PS_CMDLINE_MAX);
	if (!buf)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	n = read_small(path, buf, PS_CMDLINE_MAX);
	if (n <= 0) {
		free(buf);
		return n < 0 ? (int)n : 0;	/* a zombie has no command line */
	}
	err = procstat_parse_cmdline(buf, (size_t)n, q);
	free(buf);
	if (err)
		return err == -EINVAL ? 0 : err;
	q->pid = pid;
	q->start_ticks = t.start_ticks;
	q->cmdline_cut = n >= PS_CMDLINE_MAX - 1;
	absolute_paths(pid, q);
	if (!q->name[0])
		snprintf(q->name, sizeof(q->name), "qemu-%d", pid);
	return 1;
}
