// SPDX-License-Identifier: MIT
/*
 * The "gdbstub" attach backend (vmm/backend.h): profiles a QEMU guest that
 * runs already, found through its monitor (libvirt or a QMP socket,
 * vmm/guest/monitor.h), by starting QEMU's gdbstub on a socket pair at run time
 * and sampling through it (vmm/qemu/gdbstub-sampler.h).  At the end the stub is
 * removed, so the next debugger or opvm finds the monitor as it was.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/errbuf.h"
#include "vmm/backend.h"
#include "vmm/guest/guestmem.h"
#include "vmm/guest/monitor.h"
#include "vmm/qemu/gdbstub-common.h"
#include "vmm/qemu/gdbstub-sampler.h"
#include "vmm/sampler.h"

struct qattach {
	struct backend_setup setup;
};

/* Per guest. */
struct qattach_guest {
	struct vm_monitor *mon;		/* not owned */
	int gdb_on;			/* we started a gdbstub: stop it at the end */
	int cont_owed;			/* it stopped a running guest and no
					 * sampler took over: "cont" at the end */
	struct guestmem *imem;		/* introspection's view of its RAM, or NULL */
};

/*
 * The chardev opvm gives QEMU's gdbstub: one end of a socket pair, passed
 * with getfd and opened with chardev-add.  No listening socket, no path:
 * nobody else can connect.  Its fixed name marks a guest opvm profiles (a
 * second opvm finds it and stops) and lets a session after a killed opvm
 * find the one it left behind (disconnected).
 */
#define GDB_CHARDEV	"opvm-gdb"

/* What holds the gdbstub now: 0 nothing, 1 a stale opvm-gdb (its opvm is
 * gone), 2 an idle gdbstub of someone else; -EBUSY (what in err) when a
 * debugger or another opvm is connected; -errno. */
static int gdb_holder(struct vm_monitor *mon, char *err, size_t errlen)
{
	json_t *list = NULL, *c;
	size_t i;
	int r, state = 0;

	r = vm_monitor_qmp(mon, "query-chardev", NULL, -1, &list, err, errlen);
	if (r)
		return r;
	json_array_foreach(list, i, c) {
		const char *label = json_string_value(json_object_get(c, "label"));
		const char *file = json_string_value(json_object_get(c, "filename"));
		int idle = file && !strncmp(file, "disconnected:", 13);

		if (!label || (strcmp(label, GDB_CHARDEV) && strcmp(label, "gdb")))
			continue;
		if (!idle) {
			if (!strcmp(label, "gdb"))
				errbuf_set(err, errlen, "a debugger is connected to its gdbstub (%s)",
					    file ? file : "?");
			else
				errbuf_set(err, errlen, "another opvm is profiling it");
			state = -EBUSY;
			break;
		}
		if (!strcmp(label, GDB_CHARDEV))
			state = 1;
		else if (!state)
			state = 2;
	}
	json_decref(list);
	return state;
}

/* Monitor commands whose failure changes nothing for us. */
static void monitor_try(struct vm_monitor *mon, const char *cmd, const char *key,
			const char *val)
{
	json_t *args = key ? json_pack("{s:s}", key, val) : NULL;

	vm_monitor_qmp(mon, cmd, args, -1, NULL, NULL, 0);
	json_decref(args);
}

/* Makes way for our gdbstub: the holder is ours, left by an opvm that was
 * killed, or someone's idle one.  "gdbserver none" deletes the chardev the
 * stub holds. */
static void gdb_clear(struct vm_monitor *mon, int holder)
{
	char *out = NULL;

	vm_monitor_hmp(mon, "gdbserver none", &out, NULL, 0);
	free(out);
	if (holder == 1)	/* in case the stub had moved on without it */
		monitor_try(mon, "chardev-remove", "id", GDB_CHARDEV);
}

/* Hands QEMU one end of a socket pair as chardev GDB_CHARDEV and starts
 * the gdbstub on it.  0 or -errno (err set); the caller closes sv. */
static int gdb_plug(struct vm_monitor *mon, int qemu_end, char *err, size_t errlen)
{
	json_t *args = json_pack("{s:s}", "fdname", GDB_CHARDEV);
	char *out = NULL;
	int r;

	r = args ? vm_monitor_qmp(mon, "getfd", args, qemu_end, NULL, err, errlen) : -ENOMEM;
	json_decref(args);
	if (r)
		return r;
	args = json_pack("{s:s,s:{s:s,s:{s:{s:s,s:{s:s}},s:b}}}", "id", GDB_CHARDEV,
			 "backend", "type", "socket", "data", "addr", "type", "fd",
			 "data", "str", GDB_CHARDEV, "server", 0);
	r = args ? vm_monitor_qmp(mon, "chardev-add", args, -1, NULL, err, errlen) : -ENOMEM;
	json_decref(args);
	if (r) {
		monitor_try(mon, "closefd", "fdname", GDB_CHARDEV);
		return r;
	}
	r = vm_monitor_hmp(mon, "gdbserver chardev:" GDB_CHARDEV, &out, err, errlen);
	if (!r && (!out || !strstr(out, "Waiting for gdb"))) {
		errbuf_set(err, errlen, "%s", out ? out : "no answer");
		r = -EPROTO;
	}
	free(out);
	if (r)
		monitor_try(mon, "chardev-remove", "id", GDB_CHARDEV);
	return r;
}

/* Starts QEMU's gdbstub on a socket pair; *fd gets our end. */
static int gdb_start(struct qattach_guest *g, struct backend_target *t, int *fd,
		     char *err, size_t errlen)
{
	char why[512] = "";
	int sv[2] = { -1, -1 }, r;

	r = gdb_holder(g->mon, why, sizeof(why));
	if (r < 0) {
		errbuf_set(err, errlen, "cannot start a gdbstub in '%s': %s%s", t->name,
			    why[0] ? why : strerror(-r), r != -EBUSY ? "" :
			    strstr(why, "opvm") ? "; stop that opvm first" :
			    "; detach the debugger first (or monitor command 'gdbserver none')");
		return r;
	}
	if (r == 2)
		backend_note(t->notes, sizeof(t->notes), "'%s' has an idle gdbstub; opvm "
			     "replaces it with its own and removes that at the end", t->name);
	if (r)
		gdb_clear(g->mon, r);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		r = -errno;
		snprintf(why, sizeof(why), "socketpair: %s", strerror(errno));
	} else {
		r = gdb_plug(g->mon, sv[1], why, sizeof(why));
		close(sv[1]);
	}
	if (r) {
		errbuf_set(err, errlen, "cannot start a gdbstub in '%s' through its monitor: %s",
			    t->name, why[0] ? why : strerror(-r));
		if (sv[0] >= 0)
			close(sv[0]);
		return r;
	}
	g->gdb_on = 1;
	*fd = sv[0];
	return 0;
}

/* The guest's org.opvm.0 channel, if it has one we can reach. */
static int attach_channel(struct qattach_guest *g, struct backend_target *t,
			  char *err, size_t errlen)
{
	const char *path = vm_monitor_channel(g->mon);

	if (!path[0])
		return 0;
	/* path lives in the monitor, which outlives the collector; the
	 * collector reads the channel and tells the sampler each HELLO. */
	backend_connect_channel(t, path);
	return 0;
}

static int qattach_open(void *st, struct vm_monitor *mon, struct backend_target *t,
			char *err, size_t errlen)
{
	struct qattach *qa = st;
	struct qattach_guest *g = calloc(1, sizeof(*g));
	/* tcg: the accelerator is not known here; under KVM the detector
	 * finds no loop, and a step would only cost a debug round trip */
	struct qemu_sampler_config qc = { .rate_hz = qa->setup.rate_hz, .tcg = 1 };
	char why[512] = "";
	int running, r;

	if (!g || !mon) {
		free(g);
		return -ENOMEM;
	}
	g->mon = mon;
	t->priv = g;
	running = vm_monitor_running(mon);
	if (running < 0) {
		errbuf_set(err, errlen, "cannot tell whether '%s' runs: %s", t->name,
			    strerror(-running));
		return running;
	}
	qc.resume = running;
	if (t->callgraph) {
		/* before the gdbstub: it stops the guest as it opens */
		qc.cg = *t->callgraph;
		qc.mem = vm_monitor_guestmem(mon, err, errlen);
		if (!qc.mem)
			return -errno;
	} else {
		/* for the current task's name (guest_current) */
		qc.mem = vm_monitor_guestmem(mon, why, sizeof(why));
	}
	/* introspection's own view of the guest's RAM (docs/introspection.md);
	 * without it the guest is profiled as before */
	g->imem = vm_monitor_guestmem(mon, why, sizeof(why));
	t->mem = g->imem;
	r = gdb_start(g, t, &qc.gdb_fd, err, errlen);
	if (r) {
		guestmem_close(qc.mem);
		return r;
	}
	/* The gdbstub stopped the guest as it opened; the sampler resumes it
	 * (start, or free if never started) once it has the connection. */
	t->sampler = qemu_sampler_new(&qc, why, sizeof(why));
	g->cont_owed = running && !t->sampler;
	if (!t->sampler) {
		errbuf_set(err, errlen, "guest '%s': %s", t->name, why);
		return -errno;
	}
	t->nr_vcpus = qemu_sampler_nr_vcpus(t->sampler);
	vm_monitor_idle(mon);
	return attach_channel(g, t, err, errlen);
}

static void qattach_close(void *st, struct backend_target *t)
{
	struct qattach_guest *g = t->priv;

	if (t->sampler) {
		t->sampler->ops->free(t->sampler);
		t->sampler = NULL;
	}
	if (!g)
		return;
	guestmem_close(g->imem);
	t->mem = NULL;
	if (g->gdb_on) {
		char *out = NULL;

		/* Our connection is closed and the guest runs: remove the stub so
		 * the next debugger or opvm finds the monitor as it was. */
		vm_monitor_hmp(g->mon, "gdbserver none", &out, NULL, 0);
		free(out);
	}
	if (g->cont_owed)
		monitor_try(g->mon, "cont", NULL, NULL);
	vm_monitor_idle(g->mon);
	free(g);
	t->priv = NULL;
}

static void *qattach_new(void)
{
	return calloc(1, sizeof(struct qattach));
}

static int qattach_prepare(void *st, const struct backend_common *c,
			   struct backend_setup *out, char *err, size_t errlen)
{
	struct qattach *qa = st;
	int r = qemu_backend_setup(c, out, err, errlen);

	if (!r)
		qa->setup = *out;
	return r;
}

static int qattach_finish(void *st, struct backend_target *t, char *err, size_t errlen)
{
	return 0;
}

static void qattach_summary(void *st, const struct backend_target *t,
			    const struct backend_totals *tot, FILE *out)
{
	qemu_backend_summary(t, ((struct qattach *)st)->setup.rate_hz, tot, out);
}

/* The gdbstub is started through QEMU's monitor: a built-in VMM process
 * has neither. */
static int qattach_probe(const struct backend_guest *g, char *err, size_t errlen)
{
	if (g->qemu)
		return 0;
	errbuf_set(err, errlen, "a built-in VMM (opvm run --vmm=kvm) has no gdbstub: it is "
		    "sampled from outside with host perf");
	return -ENOTSUP;
}

const struct backend_ops gdbstub_backend = {
	.name = "gdbstub",
	.kind = BACKEND_ATTACH,
	.flags = BACKEND_STOPS_GUEST,
	.probe = qattach_probe,
	.callgraph = 1,
	.help = "QEMU's gdbstub, started through the monitor",
	.options = NULL,
	.new = qattach_new,
	.prepare = qattach_prepare,
	.open = qattach_open,
	.finish = qattach_finish,
	.summary = qattach_summary,
	.close = qattach_close,
	.free = free,
};
