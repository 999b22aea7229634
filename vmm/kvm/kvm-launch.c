// SPDX-License-Identifier: MIT
/*
 * The "kvm" launch backend (vmm/backend.h), `opvm run --vmm=kvm`: boots a
 * guest under opvm's own KVM VMM (vmm/kvm/kvm.h) and samples it with per-vCPU
 * perf-overflow sampling (vmm/kvm/kvm-sampler.h) until it powers off, resets,
 * Ctrl-C or --duration.
 *
 * The guest's serial console goes to SESSION/guests/NAME/console.log (and
 * stdout with --console); its org.opvm.0 channel (virtio console port, or
 * the synthetic guests' channel port) reaches the collector through a
 * socketpair.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "events/events.h"
#include "lib/safepath.h"
#include "lib/errbuf.h"
#include "lib/fs.h"
#include "lib/stream.h"
#include "vmm/backend.h"
#include "vmm/guest/guestmem.h"
#include "vmm/kvm/kvm-sampler.h"
#include "vmm/kvm/kvm.h"
#include "vmm/sampler.h"

#define KVM_DEFAULT_MEM_MB	512
#define KVM_CMDLINE_BASE	"console=ttyS0 earlyprintk=serial,ttyS0,115200 " \
				"virtio_mmio.device=4K@0xd0000000:5"

struct klaunch {
	/* options */
	const char *kernel, *initrd, *append, *name;
	unsigned smp, mem_mb, max_rate;
	int show_console;
	/* prepare() */
	struct kvm_sampler_config kc;
	struct backend_setup setup;
	const char *session_dir;
	/* the run */
	struct kvm_vm *vm;
	struct guestmem *imem;		/* its RAM, for introspection */
	enum kvm_vm_state state;	/* after sampling */
	int con_rd, con_wr;		/* pipe from the UART */
	int con_log;			/* console.log */
	pthread_t con_thread;
	int con_started;
};

/* The numbers' ranges are checked together in klaunch_prepare(). */
#define KL struct klaunch
static const struct opt_def klaunch_options[] = {
	{ .name = "kernel", .metavar = "FILE", .help = "Linux bzImage, or a freestanding "
	  "ELF64 test guest (tests/guests/) entered in long mode", OPT_STRING(KL, kernel) },
	{ .name = "initrd", .metavar = "FILE", .help = "initramfs (Linux only)",
	  OPT_STRING(KL, initrd) },
	{ .name = "append", .metavar = "STRING", .help = "extra kernel command line "
	  "(console=ttyS0 and earlyprintk=serial are always given)", OPT_STRING(KL, append) },
	{ .name = "smp", .metavar = "N", .help = "vCPUs (default 1)",
	  OPT_UINT(KL, smp, 0, UINT32_MAX), .want = "a decimal number" },
	{ .name = "memory", .key = 'm', .metavar = "MB", .help = "guest memory in MiB "
	  "(default 512)", OPT_UINT(KL, mem_mb, 0, UINT32_MAX), .want = "a decimal number" },
	{ .name = "mem", .metavar = "MB", .help = "the same",
	  OPT_UINT(KL, mem_mb, 0, UINT32_MAX), .want = "a decimal number" },
	{ .name = "max-rate", .metavar = "N", .help = "cap samples per second per vCPU "
	  "(default 10000); ticks above it are counted as throttled",
	  OPT_UINT(KL, max_rate, 0, UINT32_MAX), .want = "a decimal number" },
	{ .name = "name", .metavar = "NAME", .help = "the guest's name in the session "
	  "(default guest)", OPT_STRING(KL, name) },
	{ .name = "console", .help = "also copy the guest console to stdout",
	  OPT_FLAG(KL, show_console) },
	{ .name = "-e NAME[:count[:unitmask[:kernel[:user]]]]", .help = "up to 8 times; "
	  "default: cycles with a PMU, else TIMER", .flags = OPTS_POSITIONAL },
	{ 0 },
};
#undef KL

static void *klaunch_new(void)
{
	struct klaunch *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->name = "guest";
	k->smp = 1;
	k->mem_mb = KVM_DEFAULT_MEM_MB;
	k->con_rd = k->con_wr = k->con_log = -1;
	return k;
}

/* One event spec (or the default) into sampler event i and setup event i. */
static int resolve_event(struct klaunch *k, struct events_db *db, const char *spec_s,
			 unsigned i, char *err, size_t errlen)
{
	struct kvm_sampler_event *ev = &k->kc.events[i];
	struct backend_event *be = &k->setup.events[i];
	int has_pmu = events_host_has_pmu();
	struct opvm_event_spec spec;

	if (spec_s) {
		if (events_parse_spec(db, spec_s, &spec, err, errlen))
			return -EINVAL;
	} else if (events_default(db, has_pmu, &spec)) {
		errbuf_set(err, errlen, "no default event in the events database; give -e TIMER");
		return -EINVAL;
	}
	if (!events_usable(spec.event, has_pmu)) {
		errbuf_set(err, errlen, "%s counts on a hardware PMU, and this host has none "
			    "(only software perf events: nested or PMU-less KVM, "
			    "kvm.enable_pmu=N); use -e TIMER for timer mode", spec.event->name);
		return -EINVAL;
	}
	memset(ev, 0, sizeof(*ev));
	events_spec_perf_attr(&spec, &ev->attr);
	ev->kernel = spec.kernel;
	ev->user = spec.user;
	if (spec.event->flags & OPVM_EV_HARDWARE)
		k->setup.mode = "kvm-pmu";
	snprintf(be->name, sizeof(be->name), "%s", spec.event->name);
	be->count = spec.count;
	be->unit_mask = spec.unit_mask;
	if (!k->setup.rate_hz)
		k->setup.rate_hz = events_spec_rate_hz(&spec);
	return 0;
}

/* The -e specs (or -F, or the default) into sampler and session events. */
static int resolve_events(struct klaunch *k, const struct backend_common *c,
			  char *err, size_t errlen)
{
	const char *const *specs = c->event_specs;
	unsigned nr = c->nr_event_specs, rate = c->rate;	/* 1..10000 or 0 */
	char timer_spec[64], why[256] = "";
	const char *dflt[1];
	struct events_db *db;
	int r = 0;

	db = events_db_load(NULL, 0, why, sizeof(why));
	if (!db) {
		errbuf_set(err, errlen, "cannot load the events database: %s",
			    why[0] ? why : strerror(errno));
		return -ENOENT;
	}
	if (!nr && rate) {
		snprintf(timer_spec, sizeof(timer_spec), "TIMER:%u", 1000000u / rate);
		dflt[0] = timer_spec;
		specs = dflt;
		nr = 1;
	}
	k->setup.mode = "kvm-timer";
	for (unsigned i = 0; i < (nr ? nr : 1) && !r; i++)
		r = resolve_event(k, db, nr ? specs[i] : NULL, i, err, errlen);
	k->kc.nr_events = nr ? nr : 1;
	k->setup.nr_events = k->kc.nr_events;
	events_db_free(db);
	return r;
}

static int klaunch_prepare(void *st, const struct backend_common *c,
			   struct backend_setup *out, char *err, size_t errlen)
{
	struct klaunch *k = st;
	char why[512] = "";
	int r;

	if (!k->kernel) {
		errbuf_set(err, errlen, "give the guest: --kernel bzImage (Linux) or --kernel "
			    "guest.elf (a test guest from tests/guests/, 'make guests')");
		return -EINVAL;
	}
	if (!k->smp || k->smp > KVM_MAX_VCPUS || k->mem_mb < 16 ||
	    (uint64_t)k->mem_mb << 20 > KVM_MAX_MEM) {
		errbuf_set(err, errlen, "--smp takes 1..%d and --mem 16..%llu (MiB)",
			    KVM_MAX_VCPUS, KVM_MAX_MEM >> 20);
		return -EINVAL;
	}
	if (!fs_valid_name(k->name)) {
		errbuf_set(err, errlen, "--name takes letters, digits, '-', '_' and '.', not "
			    "'%s'", k->name);
		return -EINVAL;
	}
	if (c->nr_extra) {
		errbuf_set(err, errlen, "unknown option '%s'; 'opvm run --vmm=kvm --help' "
			    "lists them", c->extra[0]);
		return -EINVAL;
	}
	if (access(k->kernel, R_OK) || (k->initrd && access(k->initrd, R_OK))) {
		errbuf_set(err, errlen, "cannot read %s: %s",
			    access(k->kernel, R_OK) ? k->kernel : k->initrd, strerror(errno));
		return -EINVAL;
	}
	if (kvm_probe(why, sizeof(why))) {
		errbuf_set(err, errlen, "the built-in VMM cannot use KVM here: %s; use "
			    "--vmm=qemu, which runs under QEMU's TCG without KVM", why);
		return -ENODEV;
	}
	k->kc.max_rate = k->max_rate;
	r = resolve_events(k, c, err, errlen);
	if (r)
		return r;
	k->session_dir = c->session_dir;
	*out = k->setup;
	return 0;
}

static void *console_main(void *arg)
{
	struct klaunch *k = arg;

	stream_copy(k->con_rd, k->con_log, k->show_console ? STDOUT_FILENO : -1, NULL, NULL);
	return NULL;
}

static int is_elf(const char *path)
{
	unsigned char m[4] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ok;

	if (fd < 0)
		return 0;
	ok = read(fd, m, 4) == 4 && !memcmp(m, "\177ELF", 4);
	close(fd);
	return ok;
}

/* console.log, the UART pipe and its thread; the channel socket pair
 * (sv[0] for the VM, sv[1] for the collector). */
static int make_pipes(struct klaunch *k, int sv[2], char *err, size_t errlen)
{
	int pfd[2], sz = 1 << 20, gfd;

	gfd = safepath_open_guest(k->session_dir, k->name, err, errlen);
	if (gfd < 0)
		return gfd;
	/* in the session tree: never through a link, never blocked by a FIFO */
	k->con_log = safepath_create_file(gfd, "console.log", 0644, 0);
	close(gfd);
	if (pipe2(pfd, O_CLOEXEC) || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		errbuf_set(err, errlen, "cannot create the console pipe or channel socket: %s",
			    strerror(errno));
		return -errno;
	}
	k->con_rd = pfd[0];
	k->con_wr = pfd[1];
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (pthread_create(&k->con_thread, NULL, console_main, k)) {
		errbuf_set(err, errlen, "cannot start the console thread");
		return -EAGAIN;
	}
	k->con_started = 1;
	return 0;
}

/* Creates the VM (it takes chan_fd) and loads the kernel. */
static int build_vm(struct klaunch *k, struct backend_target *t, int chan_fd,
		    char *err, size_t errlen)
{
	struct kvm_vm_config vc = {
		.mem_bytes = (uint64_t)k->mem_mb << 20,
		.nr_vcpus = k->smp,
		.console_fd = k->con_wr,
		.channel_fd = chan_fd,
	};
	char why[512] = "", cmdline[4096];
	int r;

	k->vm = kvm_vm_new(&vc, why, sizeof(why));
	if (!k->vm) {
		errbuf_set(err, errlen, "cannot create the VM: %s; use --vmm=qemu if KVM is "
			    "not usable here", why);
		return -ENODEV;
	}
	if (is_elf(k->kernel)) {
		if (k->initrd || k->append)
			backend_note(t->notes, sizeof(t->notes), "%s is an ELF test guest: "
				     "--initrd and --append are ignored", k->kernel);
		r = kvm_vm_load_elf(k->vm, k->kernel, why, sizeof(why));
	} else {
		snprintf(cmdline, sizeof(cmdline), "%s%s%s", KVM_CMDLINE_BASE,
			 k->append ? " " : "", k->append ? k->append : "");
		r = kvm_vm_load_bzimage(k->vm, k->kernel, k->initrd, cmdline, why, sizeof(why));
	}
	if (r)
		errbuf_set(err, errlen, "%s", why);
	return r;
}

/* The VM's RAM (one range from 0) read through our own /proc/self/mem,
 * for introspection: kernel symbols and processes with no opvm.ko.  NULL
 * if it cannot be read: the guest is then profiled without it. */
static struct guestmem *vm_guestmem(struct kvm_vm *vm)
{
	uint64_t len = kvm_vm_mem_bytes(vm);
	void *ram = kvm_vm_gpa(vm, 0, len);
	struct guestmem *m = ram ? guestmem_open(getpid()) : NULL;

	if (m && guestmem_add_range(m, 0, len, (uint64_t)(uintptr_t)ram)) {
		guestmem_close(m);
		m = NULL;
	}
	return m;
}

static int klaunch_open(void *st, struct vm_monitor *mon, struct backend_target *t,
			char *err, size_t errlen)
{
	struct klaunch *k = st;
	int sv[2] = { -1, -1 }, r;

	snprintf(t->name, sizeof(t->name), "%s", k->name);
	t->how = "booted by the built-in KVM VMM";
	t->priv = k;
	r = make_pipes(k, sv, err, errlen);
	if (!r) {
		r = build_vm(k, t, sv[0], err, errlen);
		sv[0] = -1;		/* the VM owns it now, or closed it */
	}
	if (!r) {
		k->kc.vm = k->vm;
		t->sampler = kvm_sampler_new(&k->kc);
		if (!t->sampler) {
			r = -errno;
			errbuf_set(err, errlen, "cannot set up the sampler: %s", strerror(errno));
		}
	}
	if (r) {
		if (sv[1] >= 0)
			close(sv[1]);
		return r;
	}
	t->nr_vcpus = k->smp;
	t->chan_fd = sv[1];
	t->mem = k->imem = vm_guestmem(k->vm);
	errbuf_set(t->intro, sizeof(t->intro), "booting %s under the built-in KVM VMM (%u "
		 "vCPU%s, %u MiB, %s); console in %s/guests/%s/console.log; Ctrl-C stops",
		 k->kernel, k->smp, k->smp == 1 ? "" : "s", k->mem_mb, k->setup.mode,
		 k->session_dir, k->name);
	return 0;
}

static int klaunch_finish(void *st, struct backend_target *t, char *err, size_t errlen)
{
	struct klaunch *k = st;

	if (!k->vm)
		return 0;
	k->state = kvm_vm_state(k->vm);
	/* The summary says how it ended. */
	if (k->state == KVM_VM_FAULT ||
	    (k->state == KVM_VM_POWEROFF && kvm_vm_exit_code(k->vm) > 0))
		return -EIO;
	return 0;
}

static const char *state_name(enum kvm_vm_state st)
{
	switch (st) {
	case KVM_VM_POWEROFF: return "powered off";
	case KVM_VM_RESET: return "reset";
	case KVM_VM_STOPPED: return "stopped";
	case KVM_VM_FAULT: return "failed";
	case KVM_VM_RUNNING: return "running";
	default: return "not started";
	}
}

static void klaunch_summary(void *st, const struct backend_target *t,
			    const struct backend_totals *tot, FILE *out)
{
	struct klaunch *k = st;
	struct sampler_stats ss = { 0 };
	const char *e;

	if (!k->vm || !t->sampler)
		return;
	e = kvm_vm_error(k->vm);
	t->sampler->ops->get_stats(t->sampler, &ss);
	fprintf(out, "guest %s: %s after %.1f s", t->name, state_name(k->state),
		tot->elapsed_ns / 1e9);
	if (k->state == KVM_VM_POWEROFF && kvm_vm_exit_code(k->vm) > 0)
		fprintf(out, " (exit code %d)", kvm_vm_exit_code(k->vm));
	if (e)
		fprintf(out, ": %s", e);
	if (e && strstr(e, "sampler setup failed"))
		fprintf(out, "\n  (perf_event_open refused: run as root or lower "
			"/proc/sys/kernel/perf_event_paranoid)");
	fprintf(out, "\n  mode %s: %u vCPU%s, %llu ticks, %llu samples, %llu throttled, "
		"%llu filtered by CPL\n", kvm_sampler_mode(t->sampler), k->smp,
		k->smp == 1 ? "" : "s", (unsigned long long)ss.ticks,
		(unsigned long long)ss.samples, (unsigned long long)ss.throttled,
		(unsigned long long)kvm_sampler_filtered(t->sampler));
	fprintf(out, "  host cost %.0f ns per sample; %.0f VM exits/s; channel %llu bytes "
		"(%llu dropped)\n", ss.ticks ? (double)ss.cost_ns_total / ss.ticks : 0.0,
		tot->elapsed_ns ? ss.exits * 1e9 / tot->elapsed_ns : 0.0,
		(unsigned long long)kvm_vm_chan_bytes(k->vm),
		(unsigned long long)kvm_vm_chan_dropped(k->vm));
	if (ss.py_samples)
		fprintf(out, "  python: %llu of %llu user samples in CPython processes filed with "
			"Python frames\n  (read in the sample's stop, %.0f B each)\n",
			(unsigned long long)ss.py_kept, (unsigned long long)ss.py_samples,
			(double)ss.py_bytes / (double)ss.py_samples);
}

static void klaunch_close(void *st, struct backend_target *t)
{
	struct klaunch *k = st;

	if (t->sampler)
		t->sampler->ops->free(t->sampler);
	t->sampler = NULL;
	guestmem_close(k->imem);	/* the collector is gone */
	k->imem = NULL;
	t->mem = NULL;
	kvm_vm_free(k->vm);		/* the UART pipe end stays ours */
	k->vm = NULL;
	if (k->con_wr >= 0)
		close(k->con_wr);
	if (k->con_started)
		pthread_join(k->con_thread, NULL);
	if (k->con_rd >= 0)
		close(k->con_rd);
	if (k->con_log >= 0)
		close(k->con_log);
	k->con_wr = k->con_rd = k->con_log = -1;
	k->con_started = 0;
}

const struct backend_ops kvm_backend = {
	.name = "kvm",
	.kind = BACKEND_LAUNCH,
	.help = "boot under the built-in KVM VMM, perf event per vCPU",
	.options = klaunch_options,
	.new = klaunch_new,
	.prepare = klaunch_prepare,
	.open = klaunch_open,
	.finish = klaunch_finish,
	.summary = klaunch_summary,
	.close = klaunch_close,
	.free = free,
};
