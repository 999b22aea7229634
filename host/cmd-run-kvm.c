// SPDX-License-Identifier: MIT
/*
 * opvm run --vmm=kvm: boots a guest under opvm's own KVM VMM (vmm/kvm.h) and
 * profiles it with per-vCPU perf-overflow sampling (vmm/kvm-sampler.h)
 * until it powers off, resets, Ctrl-C or --duration.
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "events/events.h"
#include "host/cmd-qemu.h"
#include "host/collector.h"
#include "host/commands.h"
#include "lib/log.h"
#include "host/store.h"
#include "lib/util.h"
#include "vmm/kvm-sampler.h"
#include "vmm/kvm.h"

#define KVM_DEFAULT_MEM_MB	512
#define KVM_CMDLINE_BASE	"console=ttyS0 earlyprintk=serial,ttyS0,115200 " \
				"virtio_mmio.device=4K@0xd0000000:5"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: opvm run --vmm=kvm --kernel FILE [options]\n"
"\n"
"Boots a guest under opvm's built-in KVM VMM and samples every vCPU with a\n"
"perf event on its own thread (a hardware event where the host has a PMU,\n"
"the task clock otherwise) until the guest powers off or Ctrl-C.\n"
"\n"
"  --kernel FILE      Linux bzImage, or a freestanding ELF64 test guest\n"
"                     (tests/guests/) entered in long mode\n"
"  --initrd FILE      initramfs (Linux only)\n"
"  --append STRING    extra kernel command line (console=ttyS0 and\n"
"                     earlyprintk=serial are always given)\n"
"  --smp N            vCPUs (default 1)\n"
"  -m, --mem MB       guest memory in MiB (default %d, at most %llu)\n"
"  -e, --event SPEC   NAME[:count[:unitmask[:kernel[:user]]]], up to %d times\n"
"                     (default: cycles with a PMU, else TIMER); see\n"
"                     'opvm list-events'\n"
"  -F, --rate HZ      timer mode: samples per second per vCPU (TIMER)\n"
"  --max-rate N       cap samples per second per vCPU (default 10000);\n"
"                     ticks above it are counted as throttled\n"
"  -d, --session-dir D  where sample trees go (default ./opvm_data)\n"
"  --separate SPEC    none, lib, kernel, thread, cpu, all (default lib)\n"
"  --name NAME        the guest's name in the session (default guest)\n"
"  --duration S       stop after S seconds\n"
"  --console          also copy the guest console to stdout\n"
"  --append-samples   add to the current samples instead of starting afresh\n",
		KVM_DEFAULT_MEM_MB, KVM_MAX_MEM >> 20, OPVM_MAX_EVENTS);
	fputs(qprof_tree_usage, f);
}

struct console {
	int rd;			/* pipe from the UART */
	int log;		/* console.log */
	int show;
	pthread_t thread;
	int started;
};

static void *console_main(void *arg)
{
	struct console *c = arg;

	util_copy_stream(c->rd, c->log, c->show ? STDOUT_FILENO : -1);
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

/* Turns the -e specs (or the default) into sampler events and the
 * collector's event table.  Prints and returns -1 on a user error. */
static int resolve_events(const char **specs, unsigned nr, unsigned rate_hz,
			  struct kvm_sampler_config *kc, struct collector_config *cc,
			  int *hardware)
{
	struct events_db *db;
	char err[256] = "";
	int has_pmu = events_host_has_pmu(), ret = -1;
	char timer_spec[64];
	const char *dflt[1];

	db = events_db_load(NULL, 0, err, sizeof(err));
	if (!db) {
		pr_err("cannot load the events database: %s", err[0] ? err : strerror(errno));
		return -1;
	}
	if (!nr && rate_hz) {
		snprintf(timer_spec, sizeof(timer_spec), "TIMER:%u", 1000000u / rate_hz);
		dflt[0] = timer_spec;
		specs = dflt;
		nr = 1;
	}
	*hardware = 0;
	for (unsigned i = 0; i < (nr ? nr : 1); i++) {
		struct opvm_event_spec spec;
		struct kvm_sampler_event *ev = &kc->events[i];

		if (nr) {
			if (events_parse_spec(db, specs[i], &spec, err, sizeof(err))) {
				pr_err("%s", err);
				goto out;
			}
		} else if (events_default(db, has_pmu, &spec)) {
			pr_err("no default event in the events database; give -e TIMER");
			goto out;
		}
		if (!events_usable(spec.event, has_pmu)) {
			pr_err("%s counts on a hardware PMU, and this host has none (only "
			       "software perf events: nested or PMU-less KVM, kvm.enable_pmu=N); "
			       "use -e TIMER for timer mode", spec.event->name);
			goto out;
		}
		memset(ev, 0, sizeof(*ev));
		events_spec_perf_attr(&spec, &ev->attr);
		ev->kernel = spec.kernel;
		ev->user = spec.user;
		if (spec.event->flags & OPVM_EV_HARDWARE)
			*hardware = 1;
		snprintf(cc->events[i].name, sizeof(cc->events[i].name), "%s", spec.event->name);
		cc->events[i].count = spec.count;
		cc->events[i].unit_mask = spec.unit_mask;
		if (!cc->rate_hz)
			cc->rate_hz = events_spec_rate_hz(&spec);
	}
	kc->nr_events = nr ? nr : 1;
	cc->nr_events = kc->nr_events;
	ret = 0;
out:
	events_db_free(db);
	return ret;
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

int cmd_run_kvm(int argc, char **argv)
{
	const char *kernel = NULL, *initrd = NULL, *append = NULL, *name = "guest";
	const char *session = "./opvm_data", *specs[OPVM_MAX_EVENTS];
	unsigned nr_specs = 0, smp = 1, mem_mb = KVM_DEFAULT_MEM_MB, rate_hz = 0, max_rate = 0;
	unsigned separate = OPVM_SEP_LIB;
	uint64_t duration_ms = 0, t0, t1;
	int append_samples = 0, hardware = 0, ret = 1, err, sv[2] = { -1, -1 }, pfd[2] = { -1, -1 };
	struct kvm_sampler_config kc = { 0 };
	struct collector_config cc = { 0 };
	struct qprof_opts tree = { 0 };
	struct console con = { .rd = -1, .log = -1 };
	struct kvm_vm *vm = NULL;
	struct sampler *s = NULL;
	struct collector *c = NULL;
	struct cguest *g;
	struct sampler_stats ss;
	struct sampler_sink sink;
	struct sigaction sa;
	char why[512] = "", path[PATH_MAX], cmdline[4096];
	enum kvm_vm_state st;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int r = qprof_parse_tree_opt(&tree, argc, argv, &i);

		if (r < 0)
			return 2;
		if (r)
			continue;
#define ARG(opt) (!strcmp(a, opt) && i + 1 < argc)
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--vmm=kvm")) {
			continue;
		} else if (ARG("--vmm")) {
			i++;
		} else if (ARG("--kernel")) {
			kernel = argv[++i];
		} else if (ARG("--initrd")) {
			initrd = argv[++i];
		} else if (ARG("--append")) {
			append = argv[++i];
		} else if (ARG("--smp")) {
			smp = (unsigned)strtoul(argv[++i], NULL, 10);
		} else if (ARG("-m") || ARG("--mem") || ARG("--memory")) {
			mem_mb = (unsigned)strtoul(argv[++i], NULL, 10);
		} else if (ARG("-e") || ARG("--event")) {
			if (nr_specs >= OPVM_MAX_EVENTS) {
				pr_err("at most %d events at once", OPVM_MAX_EVENTS);
				return 2;
			}
			specs[nr_specs++] = argv[++i];
		} else if (ARG("-F") || ARG("--rate")) {
			rate_hz = (unsigned)strtoul(argv[++i], NULL, 10);
			if (!rate_hz || rate_hz > 10000) {
				pr_err("-F wants 1..10000 samples per second per vCPU");
				return 2;
			}
		} else if (ARG("--max-rate")) {
			max_rate = (unsigned)strtoul(argv[++i], NULL, 10);
		} else if (ARG("-d") || ARG("--session-dir")) {
			session = argv[++i];
		} else if (ARG("--separate")) {
			if (store_parse_separate(argv[++i], &separate)) {
				pr_err("--separate takes none, lib, kernel, thread, cpu or all "
				       "(comma-separated), not '%s'", argv[i]);
				return 2;
			}
		} else if (ARG("--name")) {
			name = argv[++i];
		} else if (ARG("--duration")) {
			double d = strtod(argv[++i], NULL);

			if (d <= 0 || d > 1e7) {
				pr_err("--duration wants seconds, e.g. --duration 30");
				return 2;
			}
			duration_ms = (uint64_t)(d * 1000);
		} else if (!strcmp(a, "--console")) {
			con.show = 1;
		} else if (!strcmp(a, "--append-samples")) {
			append_samples = 1;
		} else {
			pr_err("unknown option '%s'; 'opvm run --vmm=kvm --help' lists them", a);
			return 2;
		}
#undef ARG
	}
	if (!kernel) {
		pr_err("give the guest: --kernel bzImage (Linux) or --kernel guest.elf (a test "
		       "guest from tests/guests/, 'make guests')");
		return 2;
	}
	if (!smp || smp > KVM_MAX_VCPUS || mem_mb < 16 || (uint64_t)mem_mb << 20 > KVM_MAX_MEM) {
		pr_err("--smp takes 1..%d and --mem 16..%llu (MiB)", KVM_MAX_VCPUS,
		       KVM_MAX_MEM >> 20);
		return 2;
	}
	if (!util_valid_name(name)) {
		pr_err("--name takes letters, digits, '-', '_' and '.', not '%s'", name);
		return 2;
	}
	if (access(kernel, R_OK) || (initrd && access(initrd, R_OK))) {
		pr_err("cannot read %s: %s", access(kernel, R_OK) ? kernel : initrd,
		       strerror(errno));
		return 2;
	}
	if (kvm_probe(why, sizeof(why))) {
		pr_err("the built-in VMM cannot use KVM here: %s; use --vmm=qemu, which "
		       "runs under QEMU's TCG without KVM", why);
		return 1;
	}
	kc.max_rate = max_rate;
	if (resolve_events(specs, nr_specs, rate_hz, &kc, &cc, &hardware))
		return 2;
	qprof_apply_umask(&tree);
	cc.store_limits = tree.limits;
	cc.public_tree = tree.umask_set;
	cc.model_max_bytes = (size_t)tree.model_max_bytes;

	snprintf(path, sizeof(path), "%s/guests/%s", session, name);
	if (util_mkdir_p(path)) {
		pr_err("cannot create %s: %s", path, strerror(errno));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/guests/%s/console.log", session, name);
	con.log = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (pipe2(pfd, O_CLOEXEC) || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		pr_err("cannot create the console pipe or channel socket: %s", strerror(errno));
		goto out;
	}
	{
		int sz = 1 << 20;

		setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
	con.rd = pfd[0];
	if (pthread_create(&con.thread, NULL, console_main, &con)) {
		pr_err("cannot start the console thread");
		goto out;
	}
	con.started = 1;

	{
		struct kvm_vm_config vc = {
			.mem_bytes = (uint64_t)mem_mb << 20,
			.nr_vcpus = smp,
			.console_fd = pfd[1],
			.channel_fd = sv[0],
		};

		vm = kvm_vm_new(&vc, why, sizeof(why));
		sv[0] = -1;			/* the VM owns it now */
	}
	if (!vm) {
		pr_err("cannot create the VM: %s; use --vmm=qemu if KVM is not usable here", why);
		goto out;
	}
	if (is_elf(kernel)) {
		if (initrd || append)
			pr_warn("%s is an ELF test guest: --initrd and --append are ignored", kernel);
		err = kvm_vm_load_elf(vm, kernel, why, sizeof(why));
	} else {
		snprintf(cmdline, sizeof(cmdline), "%s%s%s", KVM_CMDLINE_BASE,
			 append ? " " : "", append ? append : "");
		err = kvm_vm_load_bzimage(vm, kernel, initrd, cmdline, why, sizeof(why));
	}
	if (err) {
		pr_err("%s", why);
		goto out;
	}
	kc.vm = vm;
	s = kvm_sampler_new(&kc);
	if (!s) {
		pr_err("cannot set up the sampler: %s", strerror(errno));
		goto out;
	}

	cc.session_dir = session;
	cc.separate = separate;
	cc.append = append_samples;
	cc.sync_ms = 1000;
	cc.hold_ms = 2000;
	cc.mode = kvm_sampler_mode(s);
	cc.status_line = isatty(STDERR_FILENO);
	c = collector_new(&cc);
	if (!c) {
		pr_err("cannot set up the session in %s: %s", session, strerror(errno));
		goto out;
	}
	g = collector_add_guest(c, name, smp);
	if (!g) {
		pr_err("cannot add guest '%s' to the session: %s", name, strerror(errno));
		goto out;
	}
	err = cguest_set_channel(g, sv[1], NULL, NULL);
	sv[1] = -1;
	if (err) {
		pr_err("cannot read the guest channel: %s", strerror(-err));
		goto out;
	}
	cguest_set_sampler(g, s);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (isatty(STDERR_FILENO))
		pr_info("booting %s under the built-in KVM VMM (%u vCPU%s, %u MiB, %s); "
			"console in %s/guests/%s/console.log; Ctrl-C stops", kernel, smp,
			smp == 1 ? "" : "s", mem_mb, kvm_sampler_mode(s), session, name);
	t0 = util_now_ns();
	sink = cguest_sink(g);
	err = s->ops->start(s, &sink);
	if (err) {
		pr_err("cannot start the guest: %s%s%s", strerror(-err),
		       kvm_vm_error(vm) ? ": " : "", kvm_vm_error(vm) ? kvm_vm_error(vm) : "");
		goto out;
	}
	err = collector_run(c, &stop_flag, duration_ms);
	s->ops->stop(s);
	t1 = util_now_ns();
	st = kvm_vm_state(vm);
	collector_free(c);
	c = NULL;

	s->ops->get_stats(s, &ss);
	printf("guest %s: %s after %.1f s", name, state_name(st), (t1 - t0) / 1e9);
	if (st == KVM_VM_POWEROFF && kvm_vm_exit_code(vm) > 0)
		printf(" (exit code %d)", kvm_vm_exit_code(vm));
	if (kvm_vm_error(vm))
		printf(": %s", kvm_vm_error(vm));
	if (kvm_vm_error(vm) && strstr(kvm_vm_error(vm), "sampler setup failed"))
		printf("\n  (perf_event_open refused: run as root or lower "
		       "/proc/sys/kernel/perf_event_paranoid)");
	printf("\n  mode %s: %u vCPU%s, %llu ticks, %llu samples, %llu throttled, "
	       "%llu filtered by CPL\n", kvm_sampler_mode(s), smp, smp == 1 ? "" : "s",
	       (unsigned long long)ss.ticks, (unsigned long long)ss.samples,
	       (unsigned long long)ss.throttled, (unsigned long long)kvm_sampler_filtered(s));
	printf("  host cost %.0f ns per sample; %.0f VM exits/s; channel %llu bytes "
	       "(%llu dropped)\n", ss.ticks ? (double)ss.cost_ns_total / ss.ticks : 0.0,
	       t1 > t0 ? ss.exits * 1e9 / (t1 - t0) : 0.0,
	       (unsigned long long)kvm_vm_chan_bytes(vm),
	       (unsigned long long)kvm_vm_chan_dropped(vm));
	printf("session: %s\nnext: opvm report --session-dir %s\n", session, session);
	ret = 0;
	if (err) {
		pr_err("profiling stopped early: %s; the samples taken so far are kept",
		       strerror(-err));
		ret = 1;
	}
	if (st == KVM_VM_FAULT || (st == KVM_VM_POWEROFF && kvm_vm_exit_code(vm) > 0))
		ret = 1;
out:
	collector_free(c);
	if (s)
		s->ops->free(s);
	kvm_vm_free(vm);		/* the UART pipe end stays ours */
	if (pfd[1] >= 0)
		close(pfd[1]);
	if (con.started)
		pthread_join(con.thread, NULL);
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (con.log >= 0)
		close(con.log);
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	return ret;
}
