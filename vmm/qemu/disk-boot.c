// SPDX-License-Identifier: MIT
/*
 * The kernel and initrd of a disk image's /boot, read with debugfs
 * (vmm/qemu/disk-boot.h).  debugfs runs with an argument vector, never a
 * shell; the guest's file names only ever name files inside the image: what
 * is written on the host goes to fixed names in opvm's private directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/util.h"
#include "vmm/qemu/disk-boot.h"

#define DEBUGFS_OUT_MAX	(256 * 1024)	/* a /boot listing is a few KB */

/* Runs `debugfs -R REQUEST IMAGE`; its output (bounded) into out, NUL-ended.
 * debugfs exits 0 even when a request fails: callers check what it did. */
static int debugfs_run(const char *image, const char *request, char *out, size_t outlen)
{
	char *argv[] = { "debugfs", "-R", (char *)request, (char *)image, NULL };
	int pfd[2], status;
	size_t len = 0;
	ssize_t n;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -errno;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, STDIN_FILENO);
		dup2(pfd[1], STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	while ((n = read(pfd[0], out + len, outlen - 1 - len)) > 0 || (n < 0 && errno == EINTR))
		if (n > 0 && (len += (size_t)n) == outlen - 1)
			break;
	out[len] = '\0';
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return -ENOENT;
	return 0;
}

/* A kernel release we accept from the image: short, no path characters. */
static int release_ok(const char *s, size_t len)
{
	if (!len || len > 64)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || strchr("._+-", s[i])))
			return 0;
	return 1;
}

/* Does the `ls -p` listing hold entry NAME (a /name/ field)? */
static int listing_has(const char *list, const char *name)
{
	char pat[128];

	snprintf(pat, sizeof(pat), "/%s/", name);
	return strstr(list, pat) != NULL;
}

int disk_boot_find(const char *image, char *rel, size_t rellen, char *err, size_t errlen)
{
	char *list = malloc(DEBUGFS_OUT_MAX), *p, best[72] = "";
	int r;

	if (!list)
		return -ENOMEM;
	r = debugfs_run(image, "ls -p /boot", list, DEBUGFS_OUT_MAX);
	if (r) {
		util_seterr(err, errlen, "--disk needs debugfs (Debian package e2fsprogs) to "
			    "read the image's /boot, or give --kernel and --initrd");
		free(list);
		return r;
	}
	/* Lines: /INODE/MODE/UID/GID/NAME/SIZE/ */
	for (p = strstr(list, "/vmlinuz-"); p; p = strstr(p + 1, "/vmlinuz-")) {
		const char *s = p + strlen("/vmlinuz-");
		size_t len = strcspn(s, "/\n");
		char cand[72], initrd[96];

		if (!release_ok(s, len))
			continue;
		snprintf(cand, sizeof(cand), "%.*s", (int)len, s);
		snprintf(initrd, sizeof(initrd), "initrd.img-%s", cand);
		if (listing_has(list, initrd) && (!best[0] || strverscmp(cand, best) > 0))
			snprintf(best, sizeof(best), "%s", cand);
	}
	free(list);
	if (!best[0]) {
		util_seterr(err, errlen, "%s: no /boot/vmlinuz-RELEASE with its "
			    "initrd.img-RELEASE in it (--disk reads an ext2/3/4 file system "
			    "over the whole disk, as 'make images-disk' makes; for other "
			    "images give --kernel and --initrd)", image);
		return -ENOENT;
	}
	snprintf(rel, rellen, "%s", best);
	return 0;
}

/* Dumps the image's /boot/NAME to DIR/TO; checks a non-empty file arrived. */
static int dump_one(const char *image, const char *name, const char *dir, const char *to,
		    char *err, size_t errlen)
{
	char req[PATH_MAX + 160], path[PATH_MAX + 32], out[1024];
	struct stat st;
	int r;

	snprintf(path, sizeof(path), "%s/%s", dir, to);
	if (strchr(path, '"')) {
		util_seterr(err, errlen, "cannot use the directory %s (a '\"' in it)", dir);
		return -EINVAL;
	}
	unlink(path);
	snprintf(req, sizeof(req), "dump /boot/%s \"%s\"", name, path);
	r = debugfs_run(image, req, out, sizeof(out));
	if (!r && (stat(path, &st) || !S_ISREG(st.st_mode) || st.st_size == 0))
		r = -EIO;
	if (r)
		util_seterr(err, errlen, "cannot copy /boot/%s out of %s (debugfs)", name, image);
	else
		chmod(path, 0600);
	return r;
}

int disk_boot_extract(const char *image, const char *rel, const char *dir,
		      char *err, size_t errlen)
{
	char name[96];
	int r;

	snprintf(name, sizeof(name), "vmlinuz-%s", rel);
	r = dump_one(image, name, dir, "vmlinuz", err, errlen);
	if (r)
		return r;
	snprintf(name, sizeof(name), "initrd.img-%s", rel);
	return dump_one(image, name, dir, "initrd.img", err, errlen);
}

int disk_boot_is_qcow2(const char *image)
{
	unsigned char m[4];
	int fd = open(image, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = pread(fd, m, sizeof(m), 0);
	close(fd);
	return n == 4 && !memcmp(m, "QFI\xfb", 4);
}
