// SPDX-License-Identifier: MIT
/*
 * The "qemu" launch backend (vmm/backend.h), `opvm run --vmm=qemu`, the
 * default: boots a guest under QEMU with the opvm channel and a QMP socket
 * on unix sockets in a private directory (RUN_BASE/PID: the next run removes
 * those whose opvm is gone), a gdbstub on a socket pair, and samples it through
 * the gdbstub (vmm/qemu/gdbstub-sampler.h) until it powers off.  Its console goes to
 * SESSION/guests/NAME/console.log (and stdout with --console), QEMU's own
 * messages to qemu.log beside it.
 *
 * QEMU starts paused (-S) so that nothing the guest does, from its first
 * instruction, escapes the console log, the channel or the sampler; the
 * sampler resumes it once every socket is connected.  QEMU runs in its own
 * process group: Ctrl-C reaches opvm, which then quits QEMU through QMP.
 * QEMU dies with opvm, even after a SIGKILL (PR_SET_PDEATHSIG).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/safepath.h"
#include "lib/errbuf.h"
#include "lib/fs.h"
#include "lib/size.h"
#include "lib/stream.h"
#include "lib/unixsock.h"
#include "vmm/backend.h"
#include "vmm/qemu/disk-boot.h"
#include "vmm/qemu/gdbstub-common.h"
#include "vmm/qemu/gdbstub-sampler.h"
#include "vmm/guest/guestmem.h"
#include "vmm/guest/qmp.h"
#include "vmm/sampler.h"

#define MAX_EXTRA_ARGS	256
#define MAX_ARGS	(64 + MAX_EXTRA_ARGS)

struct qlaunch {
	/* options */
	const char *kernel, *initrd, *append, *workload, *qemu_bin, *name;
	int accel;			/* enum qlaunch_accel */
	const char *disk;
	unsigned smp, mem;		/* mem 0: 512, with --disk 1024 */
	int show_console;
	/* prepare() */
	struct backend_setup setup;
	const char *session_dir;
	char *const *extra;
	unsigned nr_extra;
	char images[PATH_MAX], kbuf[PATH_MAX + 16], ibuf[PATH_MAX + 32];
	char root[PATH_MAX + 8], map[PATH_MAX + 16], cmdline[4096];
	struct disk_boot boot;		/* --disk: the releases of its /boot */
	char disk_rel[80];		/* the one booted, for the intro */
	uint64_t boot_max;		/* --disk-boot-max */
	int disk_qcow2;
	/* the run */
	char dir[128];			/* private: sockets and QEMU's log */
	int dir_fd;			/* dir, opened */
	char qmp[PATH_MAX], chan[PATH_MAX], con[PATH_MAX];
	int gdb_fd[2];			/* [0] the sampler's, [1] QEMU's */
	char guest_dir[PATH_MAX];	/* <session>/guests/<name> */
	int guest_fd;			/* guest_dir, opened (lib/safepath.h) */
	pid_t qemu;
	int status;
	int con_fd;
	int con_out;			/* console.log */
	pthread_t con_thread;
	int con_started;
	_Atomic int panicked;		/* the console showed a kernel panic */
	char panic_why[160];		/* its reason, set before panicked */
	struct guestmem *imem;		/* the guest's RAM for introspection */
};

enum qlaunch_accel { ACCEL_TCG, ACCEL_KVM };

static const struct opt_enum accels[] = {
	{ "tcg", ACCEL_TCG }, { "kvm", ACCEL_KVM }, { 0 },
};

/* The numbers' ranges are checked together in qlaunch_prepare(). */
#define QL struct qlaunch
static const struct opt_def qlaunch_options[] = {
	{ .name = "kernel", .metavar = "FILE", .help = "guest kernel (bzImage); without it, "
	  "the test image that `make images` builds (build/images)", OPT_STRING(QL, kernel) },
	{ .name = "disk", .metavar = "IMAGE", .help = "boot a disk image (its root file "
	  "system is /dev/vda) with the kernel and initrd in its own /boot, unless --kernel "
	  "is given; writes go to a temporary overlay, the image is not changed (default "
	  "memory 1024 MB)", OPT_STRING(QL, disk) },
	{ .name = "disk-boot-max", .metavar = "SIZE", .help = "--disk: the largest kernel or "
	  "initrd copied out of the image's /boot (default 256M, at most 16G); a release "
	  "with a larger one is skipped for the next",
	  OPT_SIZE(QL, boot_max, 1u << 20, DISK_BOOT_MAX_LIMIT), .want = "a size, 1M to 16G" },
	{ .name = "initrd", .metavar = "FILE", .help = "initramfs", OPT_STRING(QL, initrd) },
	{ .name = "append", .metavar = "STRING", .help = "extra kernel command line "
	  "(console=ttyS0 is always given)", OPT_STRING(QL, append) },
	{ .name = "workload", .metavar = "NAME", .help = "test image or disk: run workload "
	  "NAME (adds opvm.workload=NAME); the image is $OPVM_IMAGES, else build/images "
	  "beside the binary or in the current directory", OPT_STRING(QL, workload) },
	{ .name = "smp", .metavar = "N", .help = "vCPUs (default 2)",
	  OPT_UINT(QL, smp, 0, UINT32_MAX), .want = "a decimal number" },
	{ .name = "memory", .key = 'm', .metavar = "MB", .help = "guest memory (default 512)",
	  OPT_UINT(QL, mem, 1, UINT32_MAX), .want = "a decimal number" },
	{ .name = "accel", .metavar = "tcg|kvm", .help = "QEMU accelerator (default tcg)",
	  OPT_ENUM(QL, accel, accels) },
	{ .name = "name", .metavar = "NAME", .help = "the guest's name in the session "
	  "(default guest)", OPT_STRING(QL, name) },
	{ .name = "console", .help = "also copy the guest console to stdout (it is always "
	  "saved to SESSION/guests/NAME/console.log)", OPT_FLAG(QL, show_console) },
	{ .name = "qemu", .metavar = "BINARY", .help = "QEMU to run (default "
	  "qemu-system-x86_64)", OPT_STRING(QL, qemu_bin) },
	{ .name = "-- ARGS", .help = "passed to QEMU as they are", .flags = OPTS_POSITIONAL },
	{ 0 },
};
#undef QL

static void *qlaunch_new(void)
{
	struct qlaunch *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->qemu_bin = "qemu-system-x86_64";
	q->name = "guest";
	q->smp = 2;
	q->boot_max = DISK_BOOT_MAX_DEFAULT;
	q->con_fd = q->con_out = q->dir_fd = q->guest_fd = -1;
	q->gdb_fd[0] = q->gdb_fd[1] = -1;
	return q;
}

static int file_exists(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0;
}

/* $OPVM_IMAGES, build/images next to the opvm binary, or under the
 * current directory. */
static int default_images(char *dir, size_t len)
{
	char exe[PATH_MAX - 16], p[PATH_MAX + 32];
	const char *env = getenv("OPVM_IMAGES");

	if (env && *env) {
		snprintf(p, sizeof(p), "%s/vmlinuz", env);
		if (!file_exists(p))
			return -ENOENT;
		snprintf(dir, len, "%s", env);
		return 0;
	}
	if (!fs_self_dir(exe, sizeof(exe))) {
		snprintf(p, sizeof(p), "%s/images/vmlinuz", exe);
		if (file_exists(p)) {
			snprintf(dir, len, "%s/images", exe);
			return 0;
		}
	}
	if (file_exists("build/images/vmlinuz")) {
		snprintf(dir, len, "build/images");
		return 0;
	}
	return -ENOENT;
}

/* No --kernel: the test image `make images` builds. */
static int use_test_image(struct qlaunch *q, char *err, size_t errlen)
{
	if (default_images(q->images, sizeof(q->images))) {
		const char *env = getenv("OPVM_IMAGES");

		if (env && *env)
			errbuf_set(err, errlen, "OPVM_IMAGES=%s holds no vmlinuz: point it at "
				    "the directory 'make images' fills (build/images)", env);
		else
			errbuf_set(err, errlen, "no guest kernel: give --kernel FILE (and "
				    "--initrd FILE), build the test image with 'make images', or "
				    "set OPVM_IMAGES=DIR to a build/images directory");
		return -EINVAL;
	}
	snprintf(q->kbuf, sizeof(q->kbuf), "%s/vmlinuz", q->images);
	q->kernel = q->kbuf;
	if (!q->initrd) {
		snprintf(q->ibuf, sizeof(q->ibuf), "%s/initramfs.cpio.gz", q->images);
		q->initrd = q->ibuf;
	}
	snprintf(q->root, sizeof(q->root), "%s/root", q->images);
	snprintf(q->map, sizeof(q->map), "%s/System.map", q->images);
	q->setup.guest_root = q->root;
	q->setup.workload = q->workload;
	q->setup.system_map = q->map;
	q->setup.vmlinux = q->kbuf;
	return 0;
}

static void make_cmdline(struct qlaunch *q)
{
	size_t sz = sizeof(q->cmdline);

	snprintf(q->cmdline, sz, "console=ttyS0%s%s%s%s%s",
		 q->disk ? " root=/dev/vda rw" : "",
		 q->workload ? " opvm.workload=" : "", q->workload ? q->workload : "",
		 q->append ? " " : "", q->append ? q->append : "");
	if (!q->append)
		strncat(q->cmdline, " quiet", sz - strlen(q->cmdline) - 1);
	/* The test image keeps time with the TSC: under TCG with several
	 * vCPUs Linux picks the HPET, whose every read is an MMIO exit taken
	 * under QEMU's big lock, and a gdbstub stop has to wait for that lock:
	 * code right after a clock read is then hardly ever sampled
	 * (docs/usage.md, "Limitations").  The same for a disk guest under TCG. */
	if (q->images[0] || (q->disk && q->accel == ACCEL_TCG))
		strncat(q->cmdline, " tsc=reliable clocksource=tsc",
			sz - strlen(q->cmdline) - 1);
	/* Under TCG on a loaded host the kernel's boot-time check that the
	 * IO-APIC timer ticks can miss its ticks and panic ("IO-APIC + timer
	 * doesn't work!"); KVM guests skip that check too. */
	if (q->accel == ACCEL_TCG && !(q->append && strstr(q->append, "no_timer_check")))
		strncat(q->cmdline, " no_timer_check", sz - strlen(q->cmdline) - 1);
}

/* --disk IMAGE: its format, and without --kernel the release whose kernel
 * and initrd open() copies out of its /boot.  A disk guest has more to run
 * than the test image: 1 GB unless -m says otherwise. */
static int disk_prepare(struct qlaunch *q, char *err, size_t errlen)
{
	int r = disk_boot_probe(q->disk, err, errlen);

	if (r < 0)
		return r;
	q->disk_qcow2 = r;
	if (strchr(q->disk, ',')) {
		errbuf_set(err, errlen, "--disk %s: QEMU cannot take a ',' in the path; "
			    "rename or link the image", q->disk);
		return -EINVAL;
	}
	q->setup.workload = q->workload;
	if (q->kernel)
		return 0;
	if (q->disk_qcow2) {
		errbuf_set(err, errlen, "--disk %s is qcow2: its /boot cannot be read "
			    "here; give --kernel and --initrd", q->disk);
		return -EINVAL;
	}
	return disk_boot_find(q->disk, q->boot_max, &q->boot, q->setup.notes,
			      sizeof(q->setup.notes), err, errlen);
}

static int qlaunch_prepare(void *st, const struct backend_common *c,
			   struct backend_setup *out, char *err, size_t errlen)
{
	struct qlaunch *q = st;
	int r;

	if (!q->mem)
		q->mem = q->disk ? 1024 : 512;
	if (!q->smp || q->smp > 64 || q->mem < 64 || q->mem > 1024 * 1024) {
		errbuf_set(err, errlen, "--smp takes 1..64 and --memory at least 64 (MB)");
		return -EINVAL;
	}
	if (q->accel == ACCEL_KVM && access("/dev/kvm", R_OK | W_OK)) {
		errbuf_set(err, errlen, "--accel kvm: /dev/kvm is not usable here (%s); use "
			    "--accel tcg", strerror(errno));
		return -EINVAL;
	}
	if (!fs_valid_name(q->name)) {
		errbuf_set(err, errlen, "--name takes letters, digits, '-', '_' and '.', not "
			    "'%s'", q->name);
		return -EINVAL;
	}
	r = qemu_backend_setup(c, &q->setup, err, errlen);
	if (r)
		return r;
	if (q->disk && (r = disk_prepare(q, err, errlen)))
		return r;
	if (!q->kernel && !q->disk && (r = use_test_image(q, err, errlen)))
		return r;
	if ((q->kernel && !file_exists(q->kernel)) || (q->initrd && !file_exists(q->initrd))) {
		errbuf_set(err, errlen, "cannot find %s",
			    !file_exists(q->kernel) ? q->kernel : q->initrd);
		return -EINVAL;
	}
	if (c->nr_extra > MAX_EXTRA_ARGS) {
		errbuf_set(err, errlen, "more than %d QEMU arguments after --", MAX_EXTRA_ARGS);
		return -EINVAL;
	}
	make_cmdline(q);
	q->session_dir = c->session_dir;
	q->extra = c->extra;
	q->nr_extra = c->nr_extra;
	*out = q->setup;
	return 0;
}

/* QEMU's command line; the strings it points to live in q and buf. */
struct qemu_args {
	char *v[MAX_ARGS + 1];
	char smp[16], mem[16], qmp[PATH_MAX + 64], gdb[PATH_MAX + 64];
	char chan[PATH_MAX + 64], con[PATH_MAX + 64], ram[64];
	char drive[PATH_MAX + 96];
};

/* ram_shared: the guest's RAM in a memfd QEMU shares, so that opvm maps it
 * too (guestmem_map_shared()) and reads stacks without system calls. */
static void qemu_args(struct qlaunch *q, struct qemu_args *a, int ram_shared)
{
	int n = 0;

	snprintf(a->smp, sizeof(a->smp), "%u", q->smp);
	snprintf(a->mem, sizeof(a->mem), "%u", q->mem);
	snprintf(a->qmp, sizeof(a->qmp), "unix:%s,server=on,wait=off", q->qmp);
	snprintf(a->gdb, sizeof(a->gdb), "socket,id=opvm-gdb,fd=%d", q->gdb_fd[1]);
	snprintf(a->chan, sizeof(a->chan), "socket,id=opvm0,path=%s,server=on,wait=off", q->chan);
	snprintf(a->con, sizeof(a->con), "socket,id=con0,path=%s,server=on,wait=off", q->con);
#define A(x) (a->v[n++] = (char *)(x))
	A(q->qemu_bin); A("-accel"); A(accels[q->accel].name);
	A("-m"); A(a->mem); A("-smp"); A(a->smp);
	A("-nodefaults"); A("-no-user-config"); A("-display"); A("none"); A("-S");
	A("-qmp"); A(a->qmp); A("-chardev"); A(a->gdb); A("-gdb"); A("chardev:opvm-gdb");
	A("-chardev"); A(a->con); A("-serial"); A("chardev:con0");
	A("-device"); A("virtio-serial-pci,id=opvmser");
	A("-chardev"); A(a->chan);
	A("-device"); A("virtserialport,bus=opvmser.0,chardev=opvm0,name=org.opvm.0");
	A("-kernel"); A(q->kernel);
	if (q->initrd) {
		A("-initrd"); A(q->initrd);
	}
	A("-append"); A(q->cmdline);
	if (q->disk) {
		/* snapshot=on: the guest's writes go to a temporary overlay,
		 * the image stays as it was (a CI job's image is reused). */
		snprintf(a->drive, sizeof(a->drive), "file=%s,if=virtio,format=%s,snapshot=on",
			 q->disk, q->disk_qcow2 ? "qcow2" : "raw");
		A("-drive"); A(a->drive);
	}
	if (ram_shared) {
		snprintf(a->ram, sizeof(a->ram), "memory-backend-memfd,id=opvm-ram,size=%uM,"
			 "share=on", q->mem);
		A("-object"); A(a->ram); A("-machine"); A("memory-backend=opvm-ram");
	}
#undef A
	for (unsigned i = 0; i < q->nr_extra; i++)
		a->v[n++] = q->extra[i];
	a->v[n] = NULL;
}

static pid_t start_qemu(struct qlaunch *q, char **args)
{
	pid_t parent = getpid();
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		/* a name in the run's fresh private directory */
		int log = openat(q->dir_fd, "qemu.log", O_WRONLY | O_CREAT | O_EXCL |
				 O_NOFOLLOW | O_CLOEXEC, 0600);

		/* QEMU dies with opvm, even by SIGKILL: nobody else would quit
		 * it.  A parent gone before prctl() is seen by getppid(). */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
			_exit(127);
		/* Own process group: a Ctrl-C is for opvm, which quits QEMU. */
		setpgid(0, 0);
		dup2(null, STDIN_FILENO);
		dup2(log >= 0 ? log : null, STDOUT_FILENO);
		dup2(log >= 0 ? log : null, STDERR_FILENO);
		/* QEMU's end of the gdbstub socket pair crosses exec. */
		fcntl(q->gdb_fd[1], F_SETFD, 0);
		execvp(args[0], args);
		dprintf(STDERR_FILENO, "cannot run %s: %s\n", args[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

/* Waits for QEMU's sockets; 0, or -1 if QEMU died or took too long. */
static int wait_sockets(struct qlaunch *q)
{
	for (int i = 0; i < 3000; i++) {
		if (waitpid(q->qemu, &q->status, WNOHANG) == q->qemu) {
			q->qemu = 0;
			return -1;
		}
		if (file_exists(q->qmp) && file_exists(q->chan) && file_exists(q->con))
			return 0;
		usleep(10000);
	}
	return -1;
}

/* The end of QEMU's log, for an error message. */
static void log_tail(int dfd, char *out, size_t len)
{
	char buf[2048];
	int fd = fs_openat_regular(dfd, "qemu.log", O_NOFOLLOW);
	ssize_t n = -1;
	off_t size;

	if (fd >= 0) {
		size = lseek(fd, 0, SEEK_END);
		lseek(fd, size > (off_t)sizeof(buf) - 1 ? size - (off_t)sizeof(buf) + 1 : 0,
		      SEEK_SET);
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n <= 0) {
		out[0] = '\0';
		return;
	}
	buf[n] = '\0';
	snprintf(out, len, "\n--- QEMU said:\n%s%s---", buf, buf[n - 1] == '\n' ? "" : "\n");
}

/* Waits up to ms for QEMU to exit; returns 1 (status in q) if it did. */
static int reap_qemu(struct qlaunch *q, int ms)
{
	for (int i = 0; i <= ms / 10; i++) {
		if (waitpid(q->qemu, &q->status, WNOHANG) == q->qemu) {
			q->qemu = 0;
			return 1;
		}
		if (ms)
			usleep(10000);
	}
	return 0;
}

/* QEMU's log from the run directory into the guest's, both opened: the
 * copy never goes through a link (lib/safepath.h). */
static void copy_log(int from_dfd, int to_dfd)
{
	char buf[8192];
	int in = fs_openat_regular(from_dfd, "qemu.log", O_NOFOLLOW), out;
	ssize_t n;

	if (in < 0)
		return;
	out = safepath_create_file(to_dfd, "qemu.log", 0644, 0);
	while (out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			break;
	if (out >= 0)
		close(out);
	close(in);
}

/*
 * One console line: a kernel panic ends the session.  A panicked kernel
 * never powers off, so the run would otherwise wait for a guest that is
 * gone (a loaded host's TCG guest can fail the kernel's IO-APIC timer check
 * at boot).  QEMU is stopped once the panic's end line is out, so
 * console.log holds its whole report.
 */
static void console_line(void *arg, const char *line)
{
	struct qlaunch *q = arg;
	static const char tag[] = "Kernel panic - not syncing: ";
	const char *p = strstr(line, tag);

	if (!p)
		return;
	if (!q->panic_why[0])
		snprintf(q->panic_why, sizeof(q->panic_why), "%s", p + sizeof(tag) - 1);
	if (strstr(line, "---[ end Kernel panic") && !q->panicked) {
		q->panicked = 1;
		kill(q->qemu, SIGTERM);
	}
}

static void *console_main(void *arg)
{
	struct qlaunch *q = arg;

	stream_copy(q->con_fd, q->con_out, q->show_console ? STDOUT_FILENO : -1,
			 console_line, q);
	return NULL;
}

/* Removes run directory dir (the sockets and log it holds, nothing deeper). */
static void run_dir_remove(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (d) {
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				unlinkat(dirfd(d), e->d_name, 0);
		closedir(d);
	}
	rmdir(dir);
}

/* Removes the directories of runs whose opvm is gone (SIGKILL leaves
 * them) from base (a checked private directory): their name is their
 * owner's pid. */
static void run_dirs_stale(int bfd, const char *base)
{
	int fd = dup(bfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d))) {
		char *end, stale[96 + 256];
		long pid = strtol(e->d_name, &end, 10);

		if (*end || pid <= 0 || pid == getpid() ||
		    !(kill((pid_t)pid, 0) && errno == ESRCH))
			continue;
		snprintf(stale, sizeof(stale), "%s/%s", base, e->d_name);
		run_dir_remove(stale);
	}
	closedir(d);
}

/*
 * The run's private directory, BASE/PID, under BASE = $TMPDIR/opvm-run-UID
 * (short: sun_path is 108), walked as lib/safepath.h does: $TMPDIR's
 * directories owned by this user or root and writable by no one else
 * unless sticky, BASE this user's and 0700, no link followed where opvm
 * names the component; the kernel and initrd of --disk are written from
 * the fd of BASE/PID (q->dir_fd).
 */
static int run_dir_create(struct qlaunch *q, char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	char base[96], name[32];
	int tfd, bfd;

	tmp = tmp && tmp[0] == '/' && strlen(tmp) < 60 ? tmp : "/tmp";
	snprintf(name, sizeof(name), "opvm-run-%u", (unsigned)geteuid());
	snprintf(base, sizeof(base), "%s/%s", tmp, name);
	tfd = safepath_open_base(tmp, 0700, 0, NULL, 0, err, errlen);
	if (tfd < 0)
		return tfd;
	bfd = safepath_open_sub(tfd, tmp, name, 0700, SAFEPATH_CREATE | SAFEPATH_PRIVATE,
				err, errlen);
	close(tfd);
	if (bfd < 0)
		return bfd;
	run_dirs_stale(bfd, base);
	snprintf(q->dir, sizeof(q->dir), "%s/%ld", base, (long)getpid());
	snprintf(name, sizeof(name), "%ld", (long)getpid());
	run_dir_remove(q->dir);	/* a stale one with our pid */
	if (mkdirat(bfd, name, 0700) ||
	    (q->dir_fd = openat(bfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		int ret = -errno;

		errbuf_set(err, errlen, "cannot create %s: %s", q->dir, strerror(errno));
		close(bfd);
		return ret;
	}
	close(bfd);
	return 0;
}

/* The run's private directory, the gdbstub's socket pair, and the guest's
 * directory in the session. */
static int make_dirs(struct qlaunch *q, char *err, size_t errlen)
{
	int r;

	q->guest_fd = safepath_open_guest(q->session_dir, q->name, err, errlen);
	if (q->guest_fd < 0)
		return q->guest_fd;
	r = run_dir_create(q, err, errlen);
	if (r) {
		q->dir[0] = '\0';
		return r;
	}
	/* The gdbstub is a socket pair: no socket anyone else could reach. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, q->gdb_fd)) {
		errbuf_set(err, errlen, "cannot create a socket pair: %s", strerror(errno));
		return -errno;
	}
	snprintf(q->qmp, sizeof(q->qmp), "%s/qmp", q->dir);
	snprintf(q->chan, sizeof(q->chan), "%s/chan", q->dir);
	snprintf(q->con, sizeof(q->con), "%s/con", q->dir);
	snprintf(q->guest_dir, sizeof(q->guest_dir), "%s/guests/%s", q->session_dir, q->name);
	return 0;
}

/* QEMU runs (paused) with its sockets up: console thread and a QMP check. */
static int connect_console(struct qlaunch *q, char *err, size_t errlen)
{
	struct qmp *qmp;

	/* in the session tree: never through a link, never blocked by a FIFO */
	q->con_out = safepath_create_file(q->guest_fd, "console.log", 0644, 0);
	q->con_fd = unixsock_connect(q->con, 10000);
	if (q->con_fd < 0 || pthread_create(&q->con_thread, NULL, console_main, q)) {
		errbuf_set(err, errlen, "cannot read the guest console from QEMU");
		return -EIO;
	}
	q->con_started = 1;
	qmp = qmp_open(q->qmp, 10000);
	if (!qmp) {
		errbuf_set(err, errlen, "cannot talk QMP to QEMU: %s", strerror(errno));
		return -errno;
	}
	/* Not kept open: QEMU sends a STOP and a RESUME event for every
	 * sample taken, and an unread monitor would hoard them. */
	qmp_close(qmp);
	return 0;
}

/* Our QEMU's RAM, for call graphs: its /proc/PID/mem at the addresses its
 * monitor gives. */
static struct guestmem *qemu_guestmem(struct qlaunch *q, char *err, size_t errlen)
{
	struct guestmem *mem = guestmem_open(q->qemu);
	struct qmp *qmp = mem ? qmp_open(q->qmp, 10000) : NULL;
	int r = !mem ? -errno : !qmp ? -errno : guestmem_add_qemu_ranges(mem, qmp);

	qmp_close(qmp);
	if (!r)
		guestmem_map_shared(mem);	/* else pread, slower */
	if (r) {
		errbuf_set(err, errlen, "call graphs: cannot read the guest's RAM in QEMU "
			    "(%s)", strerror(-r));
		guestmem_close(mem);
		errno = -r;
		return NULL;
	}
	return mem;
}

/* Connects everything before the guest runs its first instruction. */
static int connect_guest(struct qlaunch *q, struct backend_target *t, char *err, size_t errlen)
{
	struct qemu_sampler_config qc = { .gdb_fd = q->gdb_fd[0], .rate_hz = q->setup.rate_hz,
					  .resume = 1, .tcg = q->accel == ACCEL_TCG };
	char why[512] = "";
	int r = connect_console(q, err, errlen), chan;

	if (r)
		return r;
	chan = unixsock_connect(q->chan, 10000);
	if (chan < 0) {
		errbuf_set(err, errlen, "cannot connect to the guest's opvm channel: %s",
			    strerror(-chan));
		return chan;
	}
	if (t->callgraph) {
		qc.cg = *t->callgraph;
		qc.mem = qemu_guestmem(q, err, errlen);
		if (!qc.mem) {
			close(chan);
			return -errno;
		}
	} else {
		/* for the current task's name (guest_current); without it,
		 * samples are taken as before */
		qc.mem = qemu_guestmem(q, why, sizeof(why));
	}
	q->gdb_fd[0] = -1;	/* the sampler's now */
	t->sampler = qemu_sampler_new(&qc, why, sizeof(why));
	if (!t->sampler) {
		errbuf_set(err, errlen, "%s", why);
		close(chan);
		return -errno;
	}
	t->nr_vcpus = qemu_sampler_nr_vcpus(t->sampler);
	/* introspection reads the guest's RAM on its own: without it, the
	 * guest is profiled as before (its kernel then needs a System.map) */
	q->imem = qemu_guestmem(q, why, sizeof(why));
	t->mem = q->imem;
	/* the collector reads it and tells the sampler each HELLO */
	t->chan_fd = chan;
	t->reconnect = backend_reconnect_unix;
	t->reconnect_arg = q->chan;
	return 0;
}

static int qlaunch_open(void *st, struct vm_monitor *mon, struct backend_target *t,
			char *err, size_t errlen)
{
	struct qlaunch *q = st;
	struct qemu_args *a;
	char tail[2200];
	int r;

	snprintf(t->name, sizeof(t->name), "%s", q->name);
	t->how = "booted by opvm run";
	t->priv = q;
	r = make_dirs(q, err, errlen);
	if (r)
		return r;
	if (q->boot.n) {
		r = disk_boot_extract(q->disk, &q->boot, q->dir_fd, t->notes, sizeof(t->notes),
				      err, errlen);
		if (r < 0)
			return r;
		snprintf(q->disk_rel, sizeof(q->disk_rel), ", kernel %s", q->boot.r[r].rel);
		snprintf(q->kbuf, sizeof(q->kbuf), "%s/vmlinuz", q->dir);
		snprintf(q->ibuf, sizeof(q->ibuf), "%s/initrd.img", q->dir);
		q->kernel = q->kbuf;
		q->initrd = q->ibuf;
	}
	a = malloc(sizeof(*a));
	if (!a)
		return -ENOMEM;
	qemu_args(q, a, t->callgraph != NULL);
	q->qemu = start_qemu(q, a->v);
	free(a);
	close(q->gdb_fd[1]);	/* QEMU has its copy: its exit gives us EOF */
	q->gdb_fd[1] = -1;
	if (q->qemu < 0) {
		errbuf_set(err, errlen, "cannot start QEMU: %s", strerror(errno));
		q->qemu = 0;
		return -errno;
	}
	if (wait_sockets(q)) {
		log_tail(q->dir_fd, tail, sizeof(tail));
		errbuf_set(err, errlen, "QEMU (%s) did not start: see below, or run it by "
			    "hand%s", q->qemu_bin, tail);
		return -ECHILD;
	}
	r = connect_guest(q, t, err, errlen);
	if (!r)
		errbuf_set(t->intro, sizeof(t->intro), "booting %s (%u vCPUs, %s%s); console "
			    "in %s/console.log; Ctrl-C stops", q->disk ? q->disk : q->kernel,
			    t->nr_vcpus, accels[q->accel].name, q->disk_rel, q->guest_dir);
	return r;
}

static int qlaunch_finish(void *st, struct backend_target *t, char *err, size_t errlen)
{
	struct qlaunch *q = st;
	struct qmp *qmp;

	if (q->qemu && !reap_qemu(q, 0)) {
		/* Ctrl-C or --duration: the guest is still up; quit it. */
		int sent = 0;

		qmp = qmp_open(q->qmp, 2000);
		if (qmp) {
			qmp_execute(qmp, "quit", NULL, NULL, NULL, 0, 2000);
		} else {
			kill(q->qemu, SIGTERM);
			sent = SIGTERM;
		}
		qmp_close(qmp);
		if (!reap_qemu(q, 5000)) {
			kill(q->qemu, SIGKILL);
			sent = SIGKILL;
			reap_qemu(q, 5000);
		}
		/* Ended by our quit or our signal: no fault.  A QEMU killed by
		 * someone else is not reaped at once while the kernel tears
		 * down its memory (seconds on a loaded host): its own signal
		 * is kept, so that the session says it was killed. */
		if (!WIFSIGNALED(q->status) || WTERMSIG(q->status) == sent)
			q->status = 0;
	}
	if (q->panicked) {
		errbuf_set(err, errlen, "the guest kernel panicked (%s); its report is in "
			    "%s/console.log; the samples taken until then are kept",
			    q->panic_why, q->guest_dir);
		return -ECHILD;
	}
	if (WIFSIGNALED(q->status)) {
		errbuf_set(err, errlen, "QEMU was killed by signal %d (%s) during the session; "
			    "the samples taken until then are kept and 'opvm report' reads them",
			    WTERMSIG(q->status), strsignal(WTERMSIG(q->status)));
		return -ECHILD;
	}
	if (WIFEXITED(q->status) && WEXITSTATUS(q->status)) {
		errbuf_set(err, errlen, "QEMU exited with status %d; its messages are in "
			    "%s/qemu.log", WEXITSTATUS(q->status), q->guest_dir);
		return -ECHILD;
	}
	return 0;
}

static void qlaunch_summary(void *st, const struct backend_target *t,
			    const struct backend_totals *tot, FILE *out)
{
	qemu_backend_summary(t, ((struct qlaunch *)st)->setup.rate_hz, tot, out);
}

static void qlaunch_close(void *st, struct backend_target *t)
{
	struct qlaunch *q = st;

	if (q->qemu > 0) {
		kill(q->qemu, SIGKILL);
		reap_qemu(q, 5000);
	}
	if (t->sampler)
		t->sampler->ops->free(t->sampler);
	t->sampler = NULL;
	guestmem_close(q->imem);
	q->imem = NULL;
	t->mem = NULL;
	if (q->con_started) {
		shutdown(q->con_fd, SHUT_RDWR);
		pthread_join(q->con_thread, NULL);
		q->con_started = 0;
	}
	if (q->con_fd >= 0)
		close(q->con_fd);
	if (q->con_out >= 0)
		close(q->con_out);
	q->con_fd = q->con_out = -1;
	if (q->guest_fd >= 0 && q->dir_fd >= 0)
		copy_log(q->dir_fd, q->guest_fd);
	if (q->guest_fd >= 0)
		close(q->guest_fd);
	if (q->dir_fd >= 0)
		close(q->dir_fd);
	q->guest_fd = q->dir_fd = -1;
	for (int i = 0; i < 2; i++) {
		if (q->gdb_fd[i] >= 0)
			close(q->gdb_fd[i]);
		q->gdb_fd[i] = -1;
	}
	if (!q->dir[0])
		return;
	run_dir_remove(q->dir);
	q->dir[0] = '\0';
}

const struct backend_ops qemu_backend = {
	.name = "qemu",
	.kind = BACKEND_LAUNCH,
	.callgraph = 1,
	.help = "boot under QEMU (TCG or KVM), sample via its gdbstub",
	.options = qlaunch_options,
	.new = qlaunch_new,
	.prepare = qlaunch_prepare,
	.open = qlaunch_open,
	.finish = qlaunch_finish,
	.summary = qlaunch_summary,
	.close = qlaunch_close,
	.free = free,
};
