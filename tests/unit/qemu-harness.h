/* SPDX-License-Identifier: MIT */
/*
 * A real QEMU for unit tests: TCG, no disk and no kernel (the BIOS runs),
 * 32 MiB, two vCPUs, stopped (-S), with one unix-socket chardev (-gdb or
 * -qmp) in a private directory under /tmp.  Shared by test-gdbstub and
 * test-qmp; header-only, so each test binary stays one .c file.
 */
#ifndef OPVM_TEST_QEMU_HARNESS_H
#define OPVM_TEST_QEMU_HARNESS_H

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/guest/qmp.h"

struct qemu {
	pid_t pid;
	char dir[128];
	char sock[200];		/* the -gdb or -qmp socket */
};

static inline int qemu_available(void)
{
	return system("command -v qemu-system-x86_64 >/dev/null 2>&1") == 0;
}

/* Starts QEMU with "opt unix:DIR/gdb.sock,server=on,wait=off" (opt "-gdb";
 * "-qmp": qmp.sock), DIR /tmp/opvm-test-TEST.XXXXXX, and waits up to 5 s
 * for the socket.  0 or -1. */
/* Whether the unix socket at path listens (/proc/net/unix, flags
 * 00010000). */
static inline int qemu_sock_listening(const char *path)
{
	FILE *f = fopen("/proc/net/unix", "re");
	char line[4096];
	size_t plen = strlen(path);
	int found = 0;

	if (!f)
		return 1;	/* cannot tell: take the file's presence */
	while (!found && fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\n");
		unsigned long flags;

		line[n] = '\0';
		if (n < plen || strcmp(line + n - plen, path) ||
		    sscanf(line, "%*s %*s %*s %lx", &flags) != 1)
			continue;
		found = (flags & 0x10000) != 0;
	}
	fclose(f);
	return found;
}

static inline int qemu_start_with(struct qemu *q, const char *test, const char *opt)
{
	char chardev[256];
	struct stat st;

	snprintf(q->dir, sizeof(q->dir), "/tmp/opvm-test-%s.XXXXXX", test);
	if (!mkdtemp(q->dir))
		return -1;
	snprintf(q->sock, sizeof(q->sock), "%s/%s.sock", q->dir, opt + 1);
	snprintf(chardev, sizeof(chardev), "unix:%s,server=on,wait=off", q->sock);
	q->pid = fork();
	if (q->pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		dup2(null, 0);
		dup2(null, 1);
		execlp("qemu-system-x86_64", "qemu-system-x86_64", "-accel", "tcg",
		       "-nodefaults", "-nographic", "-m", "32", "-smp", "2", "-S",
		       opt, chardev, (char *)NULL);
		_exit(127);
	}
	/* The socket's file appears at bind(), before QEMU listens: a
	 * connect in between is refused (seen on a loaded machine).  Wait
	 * for it to listen: __SO_ACCEPTCON in /proc/net/unix. */
	for (int i = 0; i < 3000; i++) {
		if (!stat(q->sock, &st) && qemu_sock_listening(q->sock))
			return 0;
		usleep(10000);
	}
	return -1;
}

/* Kills QEMU if it still runs (q->pid 0: already reaped) and removes the
 * socket and the directory. */
static inline void qemu_stop(struct qemu *q)
{
	if (q->pid > 0) {
		kill(q->pid, SIGKILL);
		waitpid(q->pid, NULL, 0);
		q->pid = 0;
	}
	unlink(q->sock);
	rmdir(q->dir);
}

/*
 * Boots the test image (IMG/vmlinuz, IMG/initramfs.cpio.gz) under TCG,
 * 256 MiB, two vCPUs, with its gdbstub at DIR/gdb, QMP at DIR/qmp and its
 * console in DIR/console, kernel command line "console=ttyS0 quiet APPEND".
 * Returns QEMU's pid (the caller waits for what it needs and kills it).
 */
static inline pid_t qemu_boot_image(const char *dir, const char *img, const char *append)
{
	char kernel[512], initrd[512], gdb[300], qmp[300], con[300], cmdline[512];
	pid_t pid;

	snprintf(kernel, sizeof(kernel), "%s/vmlinuz", img);
	snprintf(initrd, sizeof(initrd), "%s/initramfs.cpio.gz", img);
	snprintf(gdb, sizeof(gdb), "unix:%s/gdb,server=on,wait=off", dir);
	snprintf(qmp, sizeof(qmp), "unix:%s/qmp,server=on,wait=off", dir);
	snprintf(con, sizeof(con), "file:%s/console", dir);
	snprintf(cmdline, sizeof(cmdline), "console=ttyS0 quiet %s", append);
	pid = fork();
	if (pid == 0) {
		execlp("qemu-system-x86_64", "qemu-system-x86_64", "-accel", "tcg", "-m", "256",
		       "-smp", "2", "-nodefaults", "-display", "none", "-serial", con,
		       "-gdb", gdb, "-qmp", qmp, "-kernel", kernel, "-initrd", initrd,
		       "-append", cmdline, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* The n bytes QEMU's monitor reads at addr: cmd "xp" (guest-physical) or
 * "x" (guest-virtual, through the monitor's current vCPU).  0 or -1.  Used
 * to check opvm's own guest-memory reads against QEMU's. */
static inline int qemu_hmp_bytes(struct qmp *q, const char *cmd, uint64_t addr,
				 uint8_t *out, unsigned n)
{
	char line[64], *txt = NULL, *s;
	unsigned got = 0;

	snprintf(line, sizeof(line), "%s /%uxb 0x%" PRIx64, cmd, n, addr);
	if (qmp_hmp(q, line, &txt, 5000) || !txt)
		return -1;
	for (s = txt; got < n && (s = strstr(s, "0x")); s += 2) {
		unsigned v;
		char *end;

		/* Address columns end in ':', byte values do not. */
		v = (unsigned)strtoul(s, &end, 16);
		if (*end == ':')
			continue;
		out[got++] = (uint8_t)v;
	}
	free(txt);
	return got == n ? 0 : -1;
}

#endif /* OPVM_TEST_QEMU_HARNESS_H */
