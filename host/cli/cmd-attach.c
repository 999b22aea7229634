// SPDX-License-Identifier: MIT
/*
 * opvm attach: profile running guests, found by libvirt domain name (or all
 * running domains), by a QMP socket, or by the process id of an
 * `opvm run --vmm=kvm`.  --sampler picks the attach backend from the
 * registry (vmm/backend.h); without it, perf for KVM guests and gdbstub for
 * TCG ones.  The profiling itself is the session every command shares
 * (host/cli/session.h).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/cli/commands.h"
#include "host/cli/session.h"
#include "host/hoststats/virt-stats.h"
#include "lib/log.h"
#include "vmm/backend.h"
#include "vmm/guest/monitor.h"
#include "vmm/libvirt/virt.h"
#include "vmm/libvirt/virt-api.h"

/* The libvirt lookup (connect, domains, their XML, query-kvm) waits at
 * most this long: a hung libvirtd must not hang attach.  Longer than top's
 * 3 s: done once, by a daemon that may be busy starting guests. */
#define ATTACH_VIRT_BUDGET_MS	10000

/* attach's exit status when --qemu-pid refuses a guest (opvm exporter
 * answers 403 for it). */
#define ATTACH_REFUSED	3

struct attach {
	struct session_opts o;
	const char *uri, *qmp_path, *chan, *name, *sampler;
	int all;
	pid_t pid, qemu_pid;
	int refused;			/* --qemu-pid refused a guest */
	char **doms;			/* names given, then the ones to attach */
	size_t nr_doms;
	char **listed;			/* from --all (virt_list_running) */
};

#define AT struct attach
static const struct opt_def attach_options[] = {
	{ .name = "DOMAIN...", .help = "libvirt domains by name (their org.opvm.0 channel is "
	  "found in the domain XML)", .flags = OPTS_POSITIONAL },
	{ .name = "sampler", .metavar = "NAME", .help = "how to sample the guests (above)",
	  OPT_STRING(AT, sampler) },
	{ .name = "all", .help = "every running libvirt domain", OPT_FLAG(AT, all) },
	{ .name = "connect", .key = 'c', .metavar = "URI", .help = "libvirt URI (default "
	  "$LIBVIRT_DEFAULT_URI, else qemu:///system); DOMAIN is a name, ID or UUID, as in "
	  "virsh", OPT_STRING(AT, uri) },
	{ .name = "qmp", .metavar = "SOCKET", .help = "a QEMU started by hand with -qmp "
	  "unix:SOCKET,server=on", OPT_STRING(AT, qmp_path) },
	{ .name = "channel", .metavar = "SOCKET", .help = "with --qmp or one DOMAIN: the "
	  "guest's opvm port's unix socket (for a domain: instead of its org.opvm.0 "
	  "channel)", OPT_STRING(AT, chan) },
	{ .name = "name", .metavar = "NAME", .help = "with --qmp or --pid: the guest's name "
	  "in the session (default qmp, vmm-PID)", OPT_STRING(AT, name) },
	{ .name = "pid", .metavar = "PID", .help = "an `opvm run --vmm=kvm` guest, sampled "
	  "from outside with host perf (its process id)", OPT_UINT(AT, pid, 1, INT32_MAX),
	  .want = "the pid of `opvm run --vmm=kvm`" },
	{ .name = "qemu-pid", .metavar = "PID", .help = "with --qmp or one DOMAIN: the QEMU "
	  "process the guest must be (opvm exporter passes the one it found): a QMP socket "
	  "served by another process, or vCPU threads of another, are refused (exit status "
	  "3)", OPT_UINT(AT, qemu_pid, 1, INT32_MAX), .want = "the pid of the guest's QEMU" },
	{ .name = "append", .help = "add to the current samples instead of starting afresh "
	  "(also --append-samples, as for opvm run)", OPT_FLAG(AT, o.append) },
	{ 0 },
};
#undef AT

/* A DOMAIN argument. */
static int attach_argument(void *arg, const char *value)
{
	struct attach *a = arg;

	a->doms[a->nr_doms++] = (char *)value;
	return 0;
}

static const char attach_header[] =
"usage: opvm attach DOMAIN... | --all | --qmp SOCKET [--channel SOCKET] |\n"
"                   --pid PID [options]\n"
"\n"
"Profiles running guests until Ctrl-C, --duration, or the guests go away.\n"
"KVM guests are sampled with host perf on their vCPU threads and never\n"
"stopped (sampler perf); TCG guests through QEMU's gdbstub, started at run\n"
"time through the monitor (sampler gdbstub).  Without --sampler: perf if\n"
"the guests run under KVM, else gdbstub.\n";

/* Which guests: exactly one kind named, and, for --pid, a sampler that
 * can reach a built-in VMM (b: the one --sampler named, else the
 * default, which pick_backend() replaces).  0, or 2 after a usage error. */
static int check_guests(struct attach *a, const struct backend_ops *b)
{
	/* a built-in VMM always runs its guest under KVM */
	static const struct backend_guest vmm = { .kvm = 1, .qemu = 0 };
	char why[256] = "";

	if (!!a->qmp_path + !!a->all + !!a->nr_doms + !!a->pid != 1) {
		log_err("name the guests: libvirt domain names, --all, --qmp SOCKET or --pid PID "
			"(one kind)");
		return 2;
	}
	if (a->pid && a->sampler && b->probe && b->probe(&vmm, why, sizeof(why))) {
		log_err("--pid: %s (drop --sampler %s)", why, a->sampler);
		return 2;
	}
	if (a->qemu_pid && !a->qmp_path && a->nr_doms != 1) {
		log_err("--qemu-pid goes with --qmp or one DOMAIN");
		return 2;
	}
	if (a->chan && !a->qmp_path && a->nr_doms != 1) {
		log_err("--channel goes with --qmp or one DOMAIN (other domains name their "
			"org.opvm.0 channel in their XML)");
		return 2;
	}
	return 0;
}

/* --all: every running domain.  0, or 1 after printing. */
static int list_domains(struct attach *a, struct virt *v)
{
	char err[512] = "";
	int r = virt_list_running(v, &a->listed, err, sizeof(err));

	if (r < 0) {
		log_err("%s", err);
		return 1;
	}
	if (r == 0) {
		log_err("no running libvirt domains at %s", virt_default_uri(a->uri));
		return 1;
	}
	a->nr_doms = (size_t)r;
	return 0;
}

/* --qemu-pid: the guest's monitor must be that QEMU's, and the vCPU threads
 * it names that QEMU's threads, before any backend samples or reads them.
 * 0, or 1 after printing (a->refused). */
static int check_qemu(struct attach *a, struct vm_monitor *m)
{
	pid_t *tids = calloc(VM_MONITOR_MAX_VCPUS, sizeof(*tids)), pid;
	char err[1024] = "";
	int r = tids ? vm_monitor_set_qemu_pid(m, a->qemu_pid, err, sizeof(err)) : -ENOMEM;

	if (!r)
		r = vm_monitor_vcpu_threads(m, tids, VM_MONITOR_MAX_VCPUS, &pid, err, sizeof(err));
	free(tids);
	if (r != -EPERM)
		return 0;	/* other failures are the backend's to tell */
	log_err("guest '%s' refused: %s", vm_monitor_name(m), err);
	a->refused = 1;
	return 1;
}

/* The monitors of the guests to profile; 0, or 1 after printing. */
static int open_monitors(struct attach *a, struct virt *v, struct vm_monitor **mons)
{
	char err[1024] = "";
	char **names = a->listed ? a->listed : a->doms;

	for (size_t i = 0; i < a->nr_doms; i++) {
		if (a->pid)
			mons[i] = vm_monitor_open_pid(a->pid, a->name);
		else if (a->qmp_path)
			mons[i] = vm_monitor_open_qmp(a->qmp_path, a->name ? a->name : "qmp",
						      a->chan, err, sizeof(err));
		else
			mons[i] = vm_monitor_open_domain(v, names[i], err, sizeof(err));
		if (!mons[i]) {
			log_err("%s", err[0] ? err : strerror(errno));
			return 1;
		}
		if (a->qemu_pid && check_qemu(a, mons[i]))
			return 1;
		if (a->chan && !a->qmp_path && vm_monitor_set_channel(mons[i], a->chan)) {
			log_err("--channel %s: path too long", a->chan);
			return 1;
		}
		if (!a->qmp_path && !vm_monitor_channel(mons[i])[0])
			log_warn("domain '%s' has no <channel type='unix'> with target name "
				 "org.opvm.0: profiling without process names (docs/usage.md "
				 "shows the XML to add)", vm_monitor_name(mons[i]));
	}
	return 0;
}

/* Without --sampler: the backend each guest's probe chooses (perf for KVM
 * guests, gdbstub for TCG); one session takes one sampler.  kvm[i]: what
 * vm_monitor_is_kvm() said of mons[i] (asked here if kvm is NULL).
 * Replaces *b and *bst when it picks another.  0, or -1 after printing. */
static int pick_backend(struct attach *a, struct vm_monitor **mons, const int *kvm_of,
			const struct backend_ops **b, void **bst)
{
	const struct backend_ops *pick = NULL, *k;
	const char *first = NULL;
	char why[512];

	if (a->sampler)
		return 0;
	for (size_t i = 0; i < a->nr_doms; i++) {
		int kvm = kvm_of ? kvm_of[i] : vm_monitor_is_kvm(mons[i]);

		if (kvm < 0) {
			log_err("cannot ask '%s' whether it runs under KVM (query-kvm: %s); "
				"choose with --sampler perf|gdbstub", vm_monitor_name(mons[i]),
				strerror(-kvm));
			return -1;
		}
		k = backend_pick(BACKEND_ATTACH, &(struct backend_guest){
					.kvm = kvm, .qemu = !vm_monitor_pid(mons[i]) },
				 why, sizeof(why));
		if (!k) {
			log_err("no sampler can profile '%s': %s", vm_monitor_name(mons[i]), why);
			return -1;
		}
		if (pick && k != pick) {
			log_err("'%s' would be sampled by %s and '%s' by %s: one session takes "
				"one sampler; choose with --sampler or attach them separately",
				vm_monitor_name(mons[i]), k->name, first, pick->name);
			return -1;
		}
		pick = k;
		first = vm_monitor_name(mons[i]);
	}
	if (!pick || pick == *b)
		return 0;
	(*b)->free(*bst);
	*b = pick;
	*bst = pick->new();
	if (!*bst) {
		log_err("out of memory");
		return -1;
	}
	return 0;
}

/* The libvirt side of finding the guests, run in the libvirt reader's
 * worker (virtstats_reader_run()): whatever libvirt call hangs, attach waits
 * only ATTACH_VIRT_BUDGET_MS for it. */
struct lookup {
	struct attach *a;
	struct vm_monitor **mons;	/* a->nr_doms entries */
	int *kvm;			/* without --sampler: each one's query-kvm */
};

static int lookup_guests(struct virt *v, void *arg, char *err, size_t errlen)
{
	struct lookup *lk = arg;
	struct attach *a = lk->a;

	(void)err;
	(void)errlen;
	if (a->all && list_domains(a, v))
		return -ENOENT;
	lk->mons = calloc(a->nr_doms, sizeof(*lk->mons));
	if (!lk->mons) {
		log_err("out of memory");
		return -ENOMEM;
	}
	if (open_monitors(a, v, lk->mons))
		return -EINVAL;
	if (a->sampler)
		return 0;
	lk->kvm = calloc(a->nr_doms, sizeof(*lk->kvm));
	if (!lk->kvm) {
		log_err("out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < a->nr_doms; i++)
		lk->kvm[i] = vm_monitor_is_kvm(lk->mons[i]);
	return 0;
}

/* Finds libvirt's guests; 0, or 1 after printing.  On a timeout the worker
 * may still be in libvirt with lk: it is left to it (attach ends). */
static int attach_lookup(struct attach *a, struct virtstats_reader **vr, struct lookup *lk)
{
	char err[512] = "";
	int r;

	*vr = virtstats_reader_new(a->uri, ATTACH_VIRT_BUDGET_MS, 0);
	if (!*vr) {
		log_err("cannot start the libvirt reader: %s", strerror(errno));
		return 1;
	}
	r = virtstats_reader_run(*vr, lookup_guests, lk, NULL, err, sizeof(err));
	if (r == -ETIMEDOUT) {
		log_err("%s: check libvirtd (systemctl status libvirtd), or name the guest "
			"without libvirt: --qmp SOCKET [--channel SOCKET]", err);
		virtstats_reader_free(*vr);	/* detached: the worker ends it */
		*vr = NULL;
		return 2;
	}
	if (r == -ENOTCONN && !virt_api(NULL, 0))
		/* libvirt is not installed: what to install, and attach's way
		 * around it */
		log_err("%s, or attach without libvirt: --qmp SOCKET [--channel SOCKET] "
			"or --pid PID", err);
	else if (r == -ENOTCONN)
		log_err("cannot reach libvirt: %s (is libvirtd running? try -c URI)", err);
	return r ? 1 : 0;
}

/* Finds the guests and profiles them; frees bst. */
static int attach_run(struct attach *a, const struct backend_ops *b, void *bst)
{
	struct lookup lk = { .a = a };
	struct virtstats_reader *vr = NULL;
	int ret = 1;

	if (a->qmp_path || a->pid) {
		a->nr_doms = 1;
		lk.mons = calloc(a->nr_doms, sizeof(*lk.mons));
		ret = !lk.mons || open_monitors(a, NULL, lk.mons);
	} else {
		ret = attach_lookup(a, &vr, &lk);
		if (ret == 2) {		/* lk is the stuck worker's */
			b->free(bst);
			return 1;
		}
	}
	if (!ret && !pick_backend(a, lk.mons, lk.kvm, &b, &bst))
		ret = session_run(b, bst, &a->o, lk.mons, a->nr_doms);
	else
		ret = 1;
	b->free(bst);
	for (size_t i = 0; lk.mons && i < a->nr_doms; i++)
		vm_monitor_close(lk.mons[i]);
	free(lk.mons);
	free(lk.kvm);
	virt_free_names(a->listed);
	virtstats_reader_free(vr);
	return a->refused ? ATTACH_REFUSED : ret;
}

int cmd_attach(int argc, char **argv)
{
	struct attach a = { 0 };
	struct session_cli cli = {
		.command = "attach",
		.kind = BACKEND_ATTACH,
		.select = "sampler",
		.header = attach_header,
		.options = attach_options,
		.argument = attach_argument,
		.arg = &a,
	};
	const struct backend_ops *b = NULL;
	void *bst = NULL;
	int ret;

	session_opts_init(&a.o);
	a.doms = calloc((size_t)argc + 1, sizeof(*a.doms));
	if (!a.doms)
		return 1;
	ret = session_parse_argv(&cli, argc, argv, &a.o, &b, &bst);
	for (unsigned i = 0; !ret && i < a.o.common.nr_extra; i++)
		a.doms[a.nr_doms++] = a.o.common.extra[i];
	a.o.common.nr_extra = 0;
	if (ret == 1) {
		ret = 0;
	} else if (ret == 0) {
		ret = check_guests(&a, b);
		if (ret)
			session_usage_print(stderr, &cli);
		else
			ret = attach_run(&a, b, bst);
		bst = NULL;
	}
	if (b && bst)
		b->free(bst);
	free(a.doms);
	return ret;
}
