// SPDX-License-Identifier: MIT
/*
 * A running guest's monitor through libvirt or a QMP socket
 * (vmm/guest/monitor.h).
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/errbuf.h"
#include "lib/procfs.h"
#include "lib/unixsock.h"
#include "vmm/guest/guestmem.h"
#include "vmm/guest/monitor.h"
#include "vmm/guest/qmp.h"
#include "vmm/libvirt/virt.h"

#define MONITOR_TIMEOUT_MS	5000

struct vm_monitor {
	struct virt_dom *dom;		/* libvirt, or */
	struct qmp *qmp;		/* QMP, open on demand */
	char *qmp_path;
	pid_t pid;			/* or a built-in VMM process */
	pid_t want_pid;			/* the QEMU it must be, or 0 */
	pid_t peer_pid;			/* who serves the QMP socket */
	char name[128];
	char chan_path[4096];
};

/*
 * The QMP connection, opened again if vm_monitor_idle() dropped it.  The
 * process that serves it (SO_PEERCRED: the one that listened) is noted each
 * time: a socket is a path its owner may point at another server between two
 * connections.  Not the QEMU set by vm_monitor_set_qemu_pid(): refused
 * (EPERM).
 */
static struct qmp *monitor_qmp(struct vm_monitor *m)
{
	pid_t peer;

	if (!m->qmp_path) {
		errno = EOPNOTSUPP;	/* libvirt goes through domain_qmp() */
		return NULL;
	}
	if (m->qmp)
		return m->qmp;
	m->qmp = qmp_open(m->qmp_path, MONITOR_TIMEOUT_MS);
	if (!m->qmp)
		return NULL;
	/* 0: not a process of this PID namespace; what needs the QEMU's pid
	 * refuses then (vm_monitor_vcpu_threads()), the gdbstub does not */
	peer = unixsock_peer_pid(qmp_fd(m->qmp));
	m->peer_pid = peer > 0 ? peer : 0;
	if (m->want_pid && peer != m->want_pid) {
		qmp_close(m->qmp);
		m->qmp = NULL;
		errno = EPERM;
	}
	return m->qmp;
}

struct vm_monitor *vm_monitor_open_domain(struct virt *v, const char *name,
					  char *err, size_t errlen)
{
	struct vm_monitor *m = calloc(1, sizeof(*m));
	char why[512] = "";
	int running;

	if (!m)
		return NULL;
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->dom = virt_dom_open(v, name, why, sizeof(why));
	if (!m->dom) {
		errbuf_set(err, errlen, "no libvirt domain '%s': %s", name, why);
		free(m);
		errno = ENOENT;
		return NULL;
	}
	/* by ID or UUID too: the guest goes under the domain's name */
	snprintf(m->name, sizeof(m->name), "%s", virt_dom_name(m->dom));
	name = m->name;
	running = virt_dom_running(m->dom);
	if (running == -ESRCH) {
		errbuf_set(err, errlen, "domain '%s' is not running; start it first "
			    "(virsh start %s)", name, name);
		vm_monitor_close(m);
		errno = ESRCH;
		return NULL;
	}
	if (virt_dom_channel_path(m->dom, "org.opvm.0", m->chan_path, sizeof(m->chan_path)))
		m->chan_path[0] = '\0';
	return m;
}

struct vm_monitor *vm_monitor_open_qmp(const char *path, const char *name,
				       const char *chan_path, char *err, size_t errlen)
{
	struct vm_monitor *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	snprintf(m->name, sizeof(m->name), "%s", name);
	if (chan_path)
		snprintf(m->chan_path, sizeof(m->chan_path), "%s", chan_path);
	m->qmp_path = strdup(path);
	if (!m->qmp_path || !monitor_qmp(m)) {
		int e = errno;

		if (!m->qmp_path)
			e = ENOMEM;
		errbuf_set(err, errlen, "cannot talk QMP on %s: %s (is QEMU running with "
			    "-qmp unix:%s,server=on,wait=off, and no other client on it?)",
			    path, strerror(e), path);
		vm_monitor_close(m);
		errno = e;
		return NULL;
	}
	return m;
}

struct vm_monitor *vm_monitor_open_pid(pid_t pid, const char *name)
{
	struct vm_monitor *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->pid = pid;
	if (name)
		snprintf(m->name, sizeof(m->name), "%s", name);
	else
		snprintf(m->name, sizeof(m->name), "vmm-%d", (int)pid);
	return m;
}

pid_t vm_monitor_pid(const struct vm_monitor *m)
{
	return m->pid;
}

void vm_monitor_close(struct vm_monitor *m)
{
	if (!m)
		return;
	virt_dom_close(m->dom);
	qmp_close(m->qmp);
	free(m->qmp_path);
	free(m);
}

const char *vm_monitor_name(const struct vm_monitor *m)
{
	return m->name;
}

const char *vm_monitor_how(const struct vm_monitor *m)
{
	if (m->pid)
		return "built-in VMM process";
	return m->dom ? "libvirt domain" : "QMP socket";
}

const char *vm_monitor_channel(const struct vm_monitor *m)
{
	return m->chan_path;
}

int vm_monitor_set_channel(struct vm_monitor *m, const char *path)
{
	if (strlen(path) >= sizeof(m->chan_path))
		return -ENAMETOOLONG;
	snprintf(m->chan_path, sizeof(m->chan_path), "%s", path);
	return 0;
}

struct qmp *vm_monitor_qmp_conn(struct vm_monitor *m)
{
	return m->dom ? NULL : monitor_qmp(m);
}

int vm_monitor_is_kvm(struct vm_monitor *m)
{
	json_t *ret = NULL;
	char err[256];
	int r;

	if (m->pid)
		return 1;
	r = vm_monitor_qmp(m, "query-kvm", NULL, -1, &ret, err, sizeof(err));
	if (!r)
		r = json_is_true(json_object_get(ret, "enabled")) ? 1 : 0;
	json_decref(ret);
	return r;
}

/* A QMP socket served by another process than the QEMU: -EPERM, err set. */
static int peer_refused(const struct vm_monitor *m, char *err, size_t errlen)
{
	errbuf_set(err, errlen, "the QMP socket %s is served by process %d, not by QEMU "
		    "process %d: refusing a monitor that is not that QEMU's own", m->qmp_path,
		    (int)m->peer_pid, (int)m->want_pid);
	return -EPERM;
}

int vm_monitor_set_qemu_pid(struct vm_monitor *m, pid_t pid, char *err, size_t errlen)
{
	m->want_pid = pid;
	if (!m->qmp || m->peer_pid == pid)
		return 0;	/* checked at the next connection */
	vm_monitor_idle(m);
	return peer_refused(m, err, errlen);
}

/* The process whose threads the vCPUs must be; 0: the first vCPU's. */
static pid_t monitor_qemu_pid(const struct vm_monitor *m)
{
	return m->pid ? m->pid : m->qmp_path ? m->peer_pid : m->want_pid;
}

/* One entry of query-cpus-fast into tids (zeroed); 0 or -errno, err set. */
static int vcpu_entry(json_t *cpu, pid_t *tids, unsigned max, pid_t *pid, char *err,
		      size_t errlen)
{
	json_t *ji = json_object_get(cpu, "cpu-index"), *jt = json_object_get(cpu, "thread-id");
	json_int_t idx = json_integer_value(ji), tid = json_integer_value(jt);
	int r;

	if (!json_is_integer(ji) || !json_is_integer(jt) || idx < 0 || idx >= (json_int_t)max ||
	    tids[idx] || tid <= 0 || tid > INT32_MAX) {
		errbuf_set(err, errlen, "query-cpus-fast gave an entry no QEMU gives "
			    "(cpu-index %lld, thread-id %lld, at most %u vCPUs)", (long long)idx,
			    (long long)tid, max);
		return idx >= (json_int_t)max ? -E2BIG : -EPROTO;
	}
	if (!*pid)
		*pid = procfs_thread_tgid((pid_t)tid);
	r = *pid > 0 ? procfs_thread_of(*pid, (pid_t)tid) : *pid;
	if (r != 1) {
		errbuf_set(err, errlen, "the monitor names thread %lld as vCPU %lld, and it is "
			    "not a thread of QEMU process %d: refusing to sample or read another "
			    "process", (long long)tid, (long long)idx, (int)*pid);
		return -EPERM;
	}
	tids[idx] = (pid_t)tid;
	return 0;
}

int vm_monitor_vcpu_threads(struct vm_monitor *m, pid_t *tids, unsigned max, pid_t *pid,
			    char *err, size_t errlen)
{
	json_t *ret = NULL, *cpu;
	size_t i;
	int r = vm_monitor_qmp(m, "query-cpus-fast", NULL, -1, &ret, err, errlen), n = 0;

	*pid = monitor_qemu_pid(m);	/* after the command: its connection's */
	if (r)
		return r;
	if (m->qmp_path && !*pid) {
		json_decref(ret);
		errbuf_set(err, errlen, "cannot tell which process serves the QMP socket %s "
			    "(one of another PID namespace?): refusing to sample or read the "
			    "threads its monitor names", m->qmp_path);
		return -EPERM;
	}
	if (!json_is_array(ret)) {
		json_decref(ret);
		errbuf_set(err, errlen, "query-cpus-fast gave no list of vCPUs");
		return -EPROTO;
	}
	memset(tids, 0, max * sizeof(*tids));
	json_array_foreach(ret, i, cpu) {
		r = vcpu_entry(cpu, tids, max, pid, err, errlen);
		if (r)
			break;
		n++;
	}
	json_decref(ret);
	for (int k = 0; !r && k < n; k++)
		if (!tids[k]) {
			errbuf_set(err, errlen, "query-cpus-fast skips vCPU %d", k);
			r = -EPROTO;
		}
	return r ? r : n;
}

int vm_monitor_running(struct vm_monitor *m)
{
	if (m->pid)
		return 1;
	if (m->dom)
		return virt_dom_running(m->dom);
	if (!monitor_qmp(m))
		return -errno;
	return qmp_running(m->qmp, MONITOR_TIMEOUT_MS);
}

int vm_monitor_hmp(struct vm_monitor *m, const char *cmd, char **out,
		   char *err, size_t errlen)
{
	if (m->dom)
		return virt_dom_monitor(m->dom, cmd, 1, out, err, errlen);
	if (out)
		*out = NULL;
	if (!monitor_qmp(m))
		return -errno;
	return qmp_hmp(m->qmp, cmd, out, MONITOR_TIMEOUT_MS);
}

/* Through libvirt's passthrough, which takes and gives JSON text. */
static int domain_qmp(struct vm_monitor *m, const char *cmd, json_t *args, int fd,
		      json_t **ret, char *err, size_t errlen)
{
	json_t *msg, *reply, *e;
	char *text, *out = NULL;
	int r;

	msg = json_pack("{s:s}", "execute", cmd);
	if (!msg || (args && json_object_set(msg, "arguments", args))) {
		json_decref(msg);
		return -ENOMEM;
	}
	text = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	if (!text)
		return -ENOMEM;
	r = fd >= 0 ? virt_dom_monitor_fd(m->dom, text, fd, &out, err, errlen) :
		      virt_dom_monitor(m->dom, text, 0, &out, err, errlen);
	free(text);
	if (r)
		return r;
	reply = json_loads(out, 0, NULL);
	free(out);
	e = json_object_get(reply, "error");
	if (e) {
		const char *desc = json_string_value(json_object_get(e, "desc"));

		errbuf_set(err, errlen, "%s", desc ? desc : "unknown QMP error");
		r = -EREMOTEIO;
	} else if (!json_object_get(reply, "return")) {
		r = -EPROTO;
	} else if (ret) {
		*ret = json_incref(json_object_get(reply, "return"));
	}
	json_decref(reply);
	return r;
}

int vm_monitor_qmp(struct vm_monitor *m, const char *cmd, json_t *args, int fd,
		   json_t **ret, char *err, size_t errlen)
{
	if (ret)
		*ret = NULL;
	if (m->dom)
		return domain_qmp(m, cmd, args, fd, ret, err, errlen);
	if (!monitor_qmp(m))
		return errno == EPERM ? peer_refused(m, err, errlen) : -errno;
	return qmp_execute_fd(m->qmp, cmd, args, fd, ret, err, errlen, MONITOR_TIMEOUT_MS);
}

void vm_monitor_idle(struct vm_monitor *m)
{
	if (m) {
		qmp_close(m->qmp);
		m->qmp = NULL;
	}
}

/* guestmem_hmp_fn over a monitor. */
static int guestmem_hmp(void *arg, const char *cmd, char **out)
{
	char err[256];

	return vm_monitor_hmp(arg, cmd, out, err, sizeof(err));
}

struct guestmem *vm_monitor_guestmem(struct vm_monitor *m, char *err, size_t errlen)
{
	pid_t *tids = calloc(VM_MONITOR_MAX_VCPUS, sizeof(*tids));
	struct guestmem *mem = NULL;
	char why[512] = "";
	pid_t pid = 0;
	int r = m->pid ? -EOPNOTSUPP : !tids ? -ENOMEM : 0;

	/* QEMU's own process, checked: never the memory of another that a
	 * lying monitor names */
	if (!r)
		r = vm_monitor_vcpu_threads(m, tids, VM_MONITOR_MAX_VCPUS, &pid, why, sizeof(why));
	free(tids);
	if (r == -EPERM) {
		errbuf_set(err, errlen, "guest '%s': %s", m->name, why);
		errno = EPERM;
		return NULL;
	}
	r = r < 0 ? r : !r || pid <= 0 ? -ESRCH : 0;
	if (!r && !(mem = guestmem_open(pid)))
		r = -errno;
	if (!r)
		r = guestmem_add_monitor_ranges(mem, guestmem_hmp, m);
	if (!r)
		guestmem_map_shared(mem);	/* a memfd or shared file: faster */
	if (r) {
		errbuf_set(err, errlen, "cannot read guest '%s''s memory from its QEMU (%s); "
			    "opvm needs the QEMU process's /proc/PID/mem (run as root)",
			    m->name, strerror(-r));
		guestmem_close(mem);
		errno = -r;
		return NULL;
	}
	return mem;
}
