// SPDX-License-Identifier: MIT
/*
 * Symbol resolution, the helpers every part uses: checks on names from the
 * guest, opening a file inside a guest root (openat2 RESOLVE_IN_ROOT).
 * The rules for guest names are in symbols/symres.c; debuginfod is in
 * symbols/symres-dbgd.c.
 */
#include <dirent.h>
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/fs.h"
#include "symbols/ksyms.h"
#include "symbols/symres.h"
#include "symbols/symres-priv.h"

/* ---- small helpers ---------------------------------------------------------- */

/* A kernel release from a guest: [A-Za-z0-9._+-], 1..64 bytes, no "..". */
int symres_release_ok(const char *rel)
{
	size_t n = 0;

	if (!rel || !*rel || strstr(rel, ".."))
		return 0;
	for (const char *p = rel; *p; p++, n++) {
		if (n >= 64)
			return 0;
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
		      *p == '+' || *p == '-'))
			return 0;
	}
	return 1;
}

int symres_root_matches(const struct symres_root *root, const char *guest)
{
	return !root->guest || (guest && !strcmp(root->guest, guest));
}

/* Cleared when the kernel has no openat2() (before Linux 5.6).  Tests set
 * OPVM_NO_OPENAT2=1 to exercise the fallback. */
static int have_openat2 = 1;

/*
 * Without openat2: one component at a time below rootfd, each opened with
 * O_NOFOLLOW, and ".." refused.  Stricter than RESOLVE_IN_ROOT (a symlink
 * anywhere on the way fails with ELOOP instead of being resolved inside the
 * root), never wider.
 */
static int open_walk(int rootfd, const char *path, int flags)
{
	char comp[256];
	int dfd = rootfd, fd;

	for (;;) {
		size_t n = strcspn(path, "/");
		const char *next = path + n;

		while (*next == '/')
			next++;
		if (n >= sizeof(comp) || (n == 2 && !strncmp(path, "..", 2))) {
			fd = -(n >= sizeof(comp) ? ENAMETOOLONG : EXDEV);
			break;
		}
		memcpy(comp, path, n);
		comp[n] = '\0';
		if (!*next) {
			fd = openat(dfd, comp, flags | O_NOFOLLOW);
			fd = fd < 0 ? -errno : fd;
			break;
		}
		fd = openat(dfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			fd = -errno;
			break;
		}
		if (dfd != rootfd)
			close(dfd);
		dfd = fd;
		path = next;
	}
	if (dfd != rootfd)
		close(dfd);
	return fd;
}

/* Opens path inside the root directory fd: absolute symlinks and ".." stay
 * inside the root (openat2 RESOLVE_IN_ROOT, else open_walk()).  Regular
 * files only (a FIFO would block).  The fd, or -errno. */
int symres_open_in_root(int rootfd, const char *path, int dir)
{
	int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (dir ? O_DIRECTORY : 0);
	struct open_how how = {
		.flags = (uint64_t)flags,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	const char *no2 = getenv("OPVM_NO_OPENAT2");
	struct stat st;
	int fd = -ENOSYS;

	while (*path == '/')
		path++;
	if (!*path)
		path = ".";
	if (have_openat2 && !(no2 && *no2 == '1')) {
		fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
		if (fd < 0)
			fd = -errno;
		if (fd == -ENOSYS)
			have_openat2 = 0;
	}
	if (fd == -ENOSYS)
		fd = open_walk(rootfd, path, flags);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))) {
		close(fd);
		return -EINVAL;
	}
	if (!dir) {
		int fl = fcntl(fd, F_GETFL);

		if (fl >= 0)
			fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	}
	return fd;
}

int symres_open_host_file(const char *path)
{
	return fs_open_regular(path, 0);
}

/* guest names a directory the store made: one component, not . or .. */
int symres_guest_component(const char *guest)
{
	return guest && *guest && !strchr(guest, '/') && strcmp(guest, ".") &&
	       strcmp(guest, "..");
}
