// SPDX-License-Identifier: MIT
/*
 * opvm run (--vmm=qemu, the default): boots a guest under QEMU with the opvm
 * channel, a QMP socket and a gdbstub on unix sockets in a private
 * directory, profiles it through the gdbstub until it powers off (or
 * Ctrl-C), keeps its console in the session, and prints a summary.
 *
 * QEMU starts paused (-S) so that nothing the guest does, from its first
 * instruction, escapes the console log, the channel or the sampler; the
 * sampler resumes it once every socket is connected.  QEMU runs in its own
 * process group: Ctrl-C reaches opvm, which then quits QEMU through QMP.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "host/cmd-qemu.h"
#include "host/commands.h"
#include "lib/log.h"
#include "host/store.h"
#include "lib/util.h"
#include "vmm/qemu-sampler.h"
#include "vmm/qmp.h"
#include "vmm/sampler.h"

#define MAX_EXTRA_ARGS	256

struct run {
	char dir[128];			/* private: sockets and QEMU's log */
	char qmp[PATH_MAX], gdb[PATH_MAX + 8], chan[PATH_MAX], con[PATH_MAX];
	char log[PATH_MAX];
	char guest_dir[PATH_MAX];	/* <session>/guests/<name> */
	pid_t qemu;
	int con_fd;
	int con_out;			/* console.log */
	int show_console;
	pthread_t con_thread;
	int con_started;
};

static void run_usage(FILE *f)
{
	fprintf(f,
"usage: opvm run [--vmm=qemu] [options] [-- QEMU-ARGS...]\n"
"\n"
"Boots a guest under QEMU and profiles it through QEMU's gdbstub until it\n"
"powers off (or Ctrl-C).  Without --kernel, the test image that `make images`\n"
"builds (build/images) is used.\n"
"\n"
"  --kernel FILE      guest kernel (bzImage)\n"
"  --initrd FILE      initramfs\n"
"  --append STRING    extra kernel command line (console=ttyS0 is always given)\n"
"  --workload NAME    test image: run workload NAME (adds opvm.workload=NAME)\n"
"  --smp N            vCPUs (default 2)\n"
"  -m, --memory MB    guest memory (default 512)\n"
"  --accel tcg|kvm    QEMU accelerator (default tcg)\n"
"  --name NAME        the guest's name in the session (default guest)\n"
"  --console          also copy the guest console to stdout (it is always\n"
"                     saved to SESSION/guests/NAME/console.log)\n"
"  --qemu BINARY      QEMU to run (default qemu-system-x86_64)\n"
"  -F, --rate HZ      samples per second per vCPU (default %d)\n"
"  -e, --event SPEC   TIMER[:period_us] (the gdbstub samples on a timer)\n"
"  -d, --session-dir D  where sample trees go (default ./opvm_data)\n"
"  --separate SPEC    none, lib, kernel, thread, cpu, all (default lib)\n"
"  --duration S       stop (and quit the guest) after S seconds\n"
"  --append-samples   add to the current samples instead of starting afresh\n"
"  -- ARGS            passed to QEMU as they are\n",
		QEMU_SAMPLER_DEFAULT_HZ);
	fputs(qprof_tree_usage, f);
}

static int file_exists(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0;
}

/* build/images next to the opvm binary, or under the current directory. */
static int default_images(char *dir, size_t len)
{
	char exe[PATH_MAX - 16], p[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		char *slash;

		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(p, sizeof(p), "%s/images/vmlinuz", exe);
			if (file_exists(p)) {
				snprintf(dir, len, "%s/images", exe);
				return 0;
			}
		}
	}
	if (file_exists("build/images/vmlinuz")) {
		snprintf(dir, len, "build/images");
		return 0;
	}
	return -ENOENT;
}

static void *console_main(void *arg)
{
	struct run *r = arg;

	util_copy_stream(r->con_fd, r->con_out, r->show_console ? STDOUT_FILENO : -1);
	return NULL;
}

static pid_t start_qemu(struct run *r, char **args)
{
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		int log = open(r->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		/* Own process group: a Ctrl-C is for opvm, which quits QEMU. */
		setpgid(0, 0);
		dup2(null, STDIN_FILENO);
		dup2(log >= 0 ? log : null, STDOUT_FILENO);
		dup2(log >= 0 ? log : null, STDERR_FILENO);
		execvp(args[0], args);
		dprintf(STDERR_FILENO, "cannot run %s: %s\n", args[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

/* Waits for QEMU's sockets; 0, or -1 if QEMU died or took too long. */
static int wait_sockets(struct run *r, int *status)
{
	for (int i = 0; i < 3000; i++) {
		if (waitpid(r->qemu, status, WNOHANG) == r->qemu) {
			r->qemu = 0;
			return -1;
		}
		if (file_exists(r->qmp) && file_exists(r->gdb + 5) && file_exists(r->chan) &&
		    file_exists(r->con))
			return 0;
		usleep(10000);
	}
	return -1;
}

static void print_log_tail(const char *path)
{
	char buf[2048];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	off_t size;

	if (fd < 0)
		return;
	size = lseek(fd, 0, SEEK_END);
	lseek(fd, size > (off_t)sizeof(buf) - 1 ? size - (off_t)sizeof(buf) + 1 : 0, SEEK_SET);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		buf[n] = '\0';
		fprintf(stderr, "--- QEMU said:\n%s%s---\n", buf, buf[n - 1] == '\n' ? "" : "\n");
	}
}

/* Waits up to ms for QEMU to exit; returns 1 and its status if it did. */
static int reap_qemu(struct run *r, int *status, int ms)
{
	for (int i = 0; i <= ms / 10; i++) {
		if (waitpid(r->qemu, status, WNOHANG) == r->qemu) {
			r->qemu = 0;
			return 1;
		}
		if (ms)
			usleep(10000);
	}
	return 0;
}

static void copy_file(const char *from, const char *to)
{
	char buf[8192];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	if (in < 0)
		return;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	while (out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			break;
	if (out >= 0)
		close(out);
	close(in);
}

int cmd_run_qemu(int argc, char **argv)
{
	struct qprof_opts o = { 0 };
	struct qprof_target t = { .chan_fd = -1, .how = "booted by opvm run" };
	struct run r = { .con_fd = -1, .con_out = -1 };
	const char *kernel = NULL, *initrd = NULL, *append = NULL, *workload = NULL;
	const char *accel = "tcg", *qemu_bin = "qemu-system-x86_64", *name = "guest";
	char images[PATH_MAX] = "", kbuf[PATH_MAX + 16], ibuf[PATH_MAX + 32];
	char cmdline[4096], smp_s[16], mem_s[16], chardev[PATH_MAX + 64];
	char chan_dev[PATH_MAX + 64], con_dev[PATH_MAX + 64], qmp_dev[PATH_MAX + 64];
	char gdb_dev[PATH_MAX + 64], hint[2 * PATH_MAX + 64] = "", err[512] = "";
	char *args[64 + MAX_EXTRA_ARGS];
	struct qemu_sampler_config qc = { 0 };
	struct qmp *qmp = NULL;
	static volatile sig_atomic_t stop;
	unsigned smp = 2, mem = 512;
	int nargs = 0, nextra = 0, extra_at = argc, status = 0, ret = 1, rc;
	const char *tmp = getenv("TMPDIR");

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--")) {
			extra_at = i + 1;
			break;
		}
		rc = qprof_parse_opt(&o, argc, argv, &i);
		if (rc < 0)
			return 2;
		if (rc)
			continue;
#define ARG(opt) (!strcmp(a, opt) && i + 1 < argc)
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			run_usage(stdout);
			return 0;
		} else if (!strcmp(a, "--vmm=qemu")) {
			continue;
		} else if (ARG("--vmm")) {
			i++;
		} else if (ARG("--kernel")) {
			kernel = argv[++i];
		} else if (ARG("--initrd")) {
			initrd = argv[++i];
		} else if (ARG("--append")) {
			append = argv[++i];
		} else if (ARG("--workload")) {
			workload = argv[++i];
		} else if (ARG("--smp")) {
			smp = (unsigned)atoi(argv[++i]);
		} else if (ARG("-m") || ARG("--memory")) {
			mem = (unsigned)atoi(argv[++i]);
		} else if (ARG("--accel")) {
			accel = argv[++i];
		} else if (ARG("--name")) {
			name = argv[++i];
		} else if (ARG("--qemu")) {
			qemu_bin = argv[++i];
		} else if (!strcmp(a, "--console")) {
			r.show_console = 1;
		} else {
			pr_err("unknown option '%s'; 'opvm run --help' lists them", a);
			return 2;
		}
#undef ARG
	}
	if (!smp || smp > 64 || mem < 64 || mem > 1024 * 1024) {
		pr_err("--smp takes 1..64 and --memory at least 64 (MB)");
		return 2;
	}
	if (strcmp(accel, "tcg") && strcmp(accel, "kvm")) {
		pr_err("--accel takes tcg or kvm, not '%s'", accel);
		return 2;
	}
	if (!strcmp(accel, "kvm") && access("/dev/kvm", R_OK | W_OK)) {
		pr_err("--accel kvm: /dev/kvm is not usable here (%s); use --accel tcg", strerror(errno));
		return 2;
	}
	if (!util_valid_name(name)) {
		pr_err("--name takes letters, digits, '-', '_' and '.', not '%s'", name);
		return 2;
	}
	if (qprof_resolve_rate(&o))
		return 2;
	qprof_apply_umask(&o);
	if (!kernel) {
		if (default_images(images, sizeof(images))) {
			pr_err("no guest kernel: give --kernel FILE (and --initrd FILE), or build "
			       "the test image with 'make images'");
			return 2;
		}
		snprintf(kbuf, sizeof(kbuf), "%s/vmlinuz", images);
		kernel = kbuf;
		if (!initrd) {
			snprintf(ibuf, sizeof(ibuf), "%s/initramfs.cpio.gz", images);
			initrd = ibuf;
		}
		snprintf(hint, sizeof(hint), "--guest-root %s/root --system-map %s/System.map",
			 images, images);
	}
	if (!file_exists(kernel) || (initrd && !file_exists(initrd))) {
		pr_err("cannot find %s", !file_exists(kernel) ? kernel : initrd);
		return 2;
	}
	snprintf(cmdline, sizeof(cmdline), "console=ttyS0%s%s%s%s",
		 workload ? " opvm.workload=" : "", workload ? workload : "",
		 append ? " " : "", append ? append : "");
	if (!append)
		strncat(cmdline, " quiet", sizeof(cmdline) - strlen(cmdline) - 1);
	/* The test image keeps time with the TSC: under TCG with several
	 * vCPUs Linux picks the HPET, whose every read is an MMIO exit taken
	 * under QEMU's big lock, and a gdbstub stop has to wait for that lock:
	 * code right after a clock read is then hardly ever sampled
	 * (docs/usage.md, "Limitations"). */
	if (images[0])
		strncat(cmdline, " tsc=reliable clocksource=tsc",
			sizeof(cmdline) - strlen(cmdline) - 1);

	/* Private directory for the sockets: short path (sun_path is 108). */
	snprintf(r.dir, sizeof(r.dir), "%s/opvm-run.XXXXXX", tmp && strlen(tmp) < 60 ? tmp : "/tmp");
	if (!mkdtemp(r.dir)) {
		pr_err("cannot create a private directory in %s: %s", tmp ? tmp : "/tmp",
		       strerror(errno));
		return 1;
	}
	snprintf(r.qmp, sizeof(r.qmp), "%s/qmp", r.dir);
	snprintf(r.gdb, sizeof(r.gdb), "unix:%s/gdb", r.dir);
	snprintf(r.chan, sizeof(r.chan), "%s/chan", r.dir);
	snprintf(r.con, sizeof(r.con), "%s/con", r.dir);
	snprintf(r.log, sizeof(r.log), "%s/qemu.log", r.dir);

	snprintf(smp_s, sizeof(smp_s), "%u", smp);
	snprintf(mem_s, sizeof(mem_s), "%u", mem);
	snprintf(qmp_dev, sizeof(qmp_dev), "unix:%s,server=on,wait=off", r.qmp);
	snprintf(gdb_dev, sizeof(gdb_dev), "%s,server=on,wait=off", r.gdb);
	snprintf(chan_dev, sizeof(chan_dev), "socket,id=opvm0,path=%s,server=on,wait=off", r.chan);
	snprintf(con_dev, sizeof(con_dev), "socket,id=con0,path=%s,server=on,wait=off", r.con);
	snprintf(chardev, sizeof(chardev), "%s", kernel);
#define A(x) (args[nargs++] = (char *)(x))
	A(qemu_bin); A("-accel"); A(accel); A("-m"); A(mem_s); A("-smp"); A(smp_s);
	A("-nodefaults"); A("-no-user-config"); A("-display"); A("none"); A("-S");
	A("-qmp"); A(qmp_dev); A("-gdb"); A(gdb_dev);
	A("-chardev"); A(con_dev); A("-serial"); A("chardev:con0");
	A("-device"); A("virtio-serial-pci,id=opvmser");
	A("-chardev"); A(chan_dev);
	A("-device"); A("virtserialport,bus=opvmser.0,chardev=opvm0,name=org.opvm.0");
	A("-kernel"); A(kernel);
	if (initrd) {
		A("-initrd"); A(initrd);
	}
	A("-append"); A(cmdline);
#undef A
	for (int i = extra_at; i < argc; i++) {
		if (nextra++ >= MAX_EXTRA_ARGS) {
			pr_err("more than %d QEMU arguments after --", MAX_EXTRA_ARGS);
			goto out;
		}
		args[nargs++] = argv[i];
	}
	args[nargs] = NULL;

	snprintf(t.name, sizeof(t.name), "%s", name);
	snprintf(r.guest_dir, sizeof(r.guest_dir), "%s/guests/%s",
		 o.session_dir ? o.session_dir : "./opvm_data", name);
	if (util_mkdir_p(r.guest_dir)) {
		pr_err("cannot create %s: %s", r.guest_dir, strerror(errno));
		goto out;
	}
	qprof_signals(&stop);
	r.qemu = start_qemu(&r, args);
	if (r.qemu < 0) {
		pr_err("cannot start QEMU: %s", strerror(errno));
		r.qemu = 0;
		goto out;
	}
	if (wait_sockets(&r, &status)) {
		pr_err("QEMU (%s) did not start: see below, or run it by hand", qemu_bin);
		print_log_tail(r.log);
		goto out;
	}
	/* Connect everything before the guest runs its first instruction. */
	snprintf(chardev, sizeof(chardev), "%s/console.log", r.guest_dir);
	r.con_out = open(chardev, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	r.con_fd = util_connect_unix(r.con);
	if (r.con_fd < 0 || pthread_create(&r.con_thread, NULL, console_main, &r)) {
		pr_err("cannot read the guest console from QEMU");
		goto out;
	}
	r.con_started = 1;
	qmp = qmp_open(r.qmp, 10000);
	if (!qmp) {
		pr_err("cannot talk QMP to QEMU: %s", strerror(errno));
		goto out;
	}
	/* Not kept open: QEMU sends a STOP and a RESUME event for every
	 * sample taken, and an unread monitor would hoard them. */
	qmp_close(qmp);
	qmp = NULL;
	t.chan_fd = util_connect_unix(r.chan);
	if (t.chan_fd < 0) {
		pr_err("cannot connect to the guest's opvm channel: %s", strerror(-t.chan_fd));
		t.chan_fd = -1;
		goto out;
	}
	t.reconnect = qprof_reconnect_unix;
	t.reconnect_arg = r.chan;
	qc.gdb_addr = r.gdb;
	qc.rate_hz = o.rate_hz;
	qc.resume = 1;
	t.sampler = qemu_sampler_new(&qc, err, sizeof(err));
	if (!t.sampler) {
		pr_err("%s", err);
		goto out;
	}
	t.nr_vcpus = qemu_sampler_nr_vcpus(t.sampler);
	if (isatty(STDERR_FILENO))
		pr_info("booting %s (%u vCPUs, %s); console in %s/console.log; Ctrl-C stops",
			kernel, t.nr_vcpus, accel, r.guest_dir);

	rc = qprof_collect(&o, &t, 1, &stop);
	ret = rc ? 1 : 0;

	if (r.qemu && !reap_qemu(&r, &status, 0)) {
		/* Ctrl-C or --duration: the guest is still up; quit it. */
		qmp = qmp_open(r.qmp, 2000);
		if (qmp)
			qmp_execute(qmp, "quit", NULL, NULL, NULL, 0, 2000);
		else
			kill(r.qemu, SIGTERM);
		if (!reap_qemu(&r, &status, 5000)) {
			kill(r.qemu, SIGKILL);
			reap_qemu(&r, &status, 5000);
		}
		status = 0;
	}
	if (WIFSIGNALED(status)) {
		pr_err("QEMU was killed by signal %d (%s) during the session; the samples "
		       "taken until then are kept and 'opvm report' reads them",
		       WTERMSIG(status), strsignal(WTERMSIG(status)));
		ret = 1;
	} else if (WIFEXITED(status) && WEXITSTATUS(status)) {
		pr_err("QEMU exited with status %d; its messages are in %s/qemu.log",
		       WEXITSTATUS(status), r.guest_dir);
		ret = 1;
	}
	qprof_summary(&o, &t, 1, hint[0] ? hint : NULL);
out:
	if (r.qemu > 0) {
		kill(r.qemu, SIGKILL);
		reap_qemu(&r, &status, 5000);
	}
	if (t.sampler)
		t.sampler->ops->free(t.sampler);
	if (t.chan_fd >= 0)
		close(t.chan_fd);
	qmp_close(qmp);
	if (r.con_started) {
		shutdown(r.con_fd, SHUT_RDWR);
		pthread_join(r.con_thread, NULL);
	}
	if (r.con_fd >= 0)
		close(r.con_fd);
	if (r.con_out >= 0)
		close(r.con_out);
	if (r.guest_dir[0]) {
		snprintf(chardev, sizeof(chardev), "%s/qemu.log", r.guest_dir);
		copy_file(r.log, chardev);
	}
	unlink(r.qmp);
	unlink(r.gdb + 5);
	unlink(r.chan);
	unlink(r.con);
	unlink(r.log);
	rmdir(r.dir);
	return ret;
}
