// SPDX-License-Identifier: MIT
/*
 * A running guest's monitor through libvirt or a QMP socket
 * (vmm/guest/monitor.h).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"
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
	char name[128];
	char chan_path[4096];
};

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
		util_seterr(err, errlen, "no libvirt domain '%s': %s", name, why);
		free(m);
		errno = ENOENT;
		return NULL;
	}
	/* by ID or UUID too: the guest goes under the domain's name */
	snprintf(m->name, sizeof(m->name), "%s", virt_dom_name(m->dom));
	name = m->name;
	running = virt_dom_running(m->dom);
	if (running == -ESRCH) {
		util_seterr(err, errlen, "domain '%s' is not running; start it first "
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
	m->qmp = m->qmp_path ? qmp_open(path, MONITOR_TIMEOUT_MS) : NULL;
	if (!m->qmp) {
		int e = errno;

		util_seterr(err, errlen, "cannot talk QMP on %s: %s (is QEMU running with "
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

/* The QMP connection, opened again if vm_monitor_idle() dropped it. */
static struct qmp *monitor_qmp(struct vm_monitor *m)
{
	if (!m->qmp_path) {
		errno = EOPNOTSUPP;	/* libvirt goes through domain_qmp() */
		return NULL;
	}
	if (!m->qmp)
		m->qmp = qmp_open(m->qmp_path, MONITOR_TIMEOUT_MS);
	return m->qmp;
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

		util_seterr(err, errlen, "%s", desc ? desc : "unknown QMP error");
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
		return -errno;
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
	json_t *ret = NULL;
	struct guestmem *mem = NULL;
	pid_t pid = 0;
	int r = m->pid ? -EOPNOTSUPP : 0;

	if (!r)
		r = vm_monitor_qmp(m, "query-cpus-fast", NULL, -1, &ret, err, errlen);
	if (!r)
		pid = util_thread_tgid((pid_t)json_integer_value(
			json_object_get(json_array_get(ret, 0), "thread-id")));
	json_decref(ret);
	if (!r && pid <= 0)
		r = pid < 0 ? pid : -ESRCH;
	if (!r && !(mem = guestmem_open(pid)))
		r = -errno;
	if (!r)
		r = guestmem_add_monitor_ranges(mem, guestmem_hmp, m);
	if (!r)
		guestmem_map_shared(mem);	/* a memfd or shared file: faster */
	if (r) {
		util_seterr(err, errlen, "cannot read guest '%s''s memory from its QEMU (%s); "
			    "opvm needs the QEMU process's /proc/PID/mem (run as root)",
			    m->name, strerror(-r));
		guestmem_close(mem);
		errno = -r;
		return NULL;
	}
	return mem;
}
