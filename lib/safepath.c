// SPDX-License-Identifier: MIT
/*
 * Directories opvm writes into outside a session's tree (lib/safepath.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/safepath.h"
#include "lib/errbuf.h"

int safepath_check_dir(int fd, const char *shown, int own_only, char *err, size_t errlen)
{
	uid_t me = geteuid();
	struct stat sb;

	if (fstat(fd, &sb))
		return -errno;
	if (!S_ISDIR(sb.st_mode)) {
		errbuf_set(err, errlen, "%s is not a directory: move it away", shown);
		return -ENOTDIR;
	}
	if (sb.st_uid != me && (own_only || sb.st_uid != 0)) {
		errbuf_set(err, errlen, "%s belongs to uid %u, not to you (uid %u)%s: opvm "
			    "does not write into another user's directory; remove it (as its "
			    "owner or root) or use another directory", shown,
			    (unsigned)sb.st_uid, (unsigned)me, own_only ? "" : " or root");
		return -EPERM;
	}
	/* Sticky (/tmp): others cannot rename or remove what opvm makes. */
	if ((sb.st_mode & (S_IWGRP | S_IWOTH)) && (own_only || !(sb.st_mode & S_ISVTX))) {
		errbuf_set(err, errlen, "%s is writable by others (mode %04o): another user "
			    "could plant links in it; run chmod go-w %s, or use another "
			    "directory", shown, (unsigned)(sb.st_mode & 07777), shown);
		return -EPERM;
	}
	return 0;
}

/* One directory below dfd, never through a link: openat2 with
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS where the kernel has it (Linux
 * 5.6), O_NOFOLLOW otherwise (the same for one component). */
static int open_dir_at(int dfd, const char *name)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	static int no_openat2;
	long fd = -1;

	if (!no_openat2) {
		fd = syscall(SYS_openat2, dfd, name, &how, sizeof(how));
		if (fd < 0 && (errno == ENOSYS || errno == EPERM))	/* seccomp */
			no_openat2 = 1;
	}
	if (no_openat2)
		fd = openat(dfd, name, (int)how.flags);
	return fd < 0 ? -errno : (int)fd;
}

/* Why name below dfd could not be opened as a directory, in err. */
static int why_not_dir(int dfd, const char *shown, const char *name, int ret, char *err,
		       size_t errlen)
{
	struct stat sb;

	if (!fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) && S_ISLNK(sb.st_mode)) {
		errbuf_set(err, errlen, "%s/%s is a symbolic link: opvm does not write "
			    "through links there; remove the link (opvm then makes a private "
			    "directory)", shown, name);
		return -ELOOP;
	}
	if (ret == -ENOTDIR || ret == -ELOOP) {
		errbuf_set(err, errlen, "%s/%s is not a directory: move it away", shown, name);
		return -ENOTDIR;
	}
	errbuf_set(err, errlen, "cannot open %s/%s: %s", shown, name, strerror(-ret));
	return ret;
}

/* name below dfd, made (mode) if missing and create: an fd or -errno. */
static int step(int dfd, const char *shown, const char *name, mode_t mode, bool create,
		char *err, size_t errlen)
{
	int fd;

	if (!strcmp(name, ".") || !strcmp(name, "..")) {
		errbuf_set(err, errlen, "%s/%s: give a path without . or ..", shown, name);
		return -EINVAL;
	}
	if (create && mkdirat(dfd, name, mode) && errno != EEXIST) {
		int ret = -errno;

		errbuf_set(err, errlen, "cannot create %s/%s: %s", shown, name, strerror(errno));
		return ret;
	}
	fd = open_dir_at(dfd, name);
	if (fd < 0)
		return why_not_dir(dfd, shown, name, fd, err, errlen);
	return fd;
}

/* Appends "/name" to shown (kept short enough: it is for messages). */
static void shown_add(char *shown, size_t len, const char *name)
{
	size_t n = strlen(shown);

	if (n == 1 && shown[0] == '/')
		n = 0;
	snprintf(shown + n, len - n, "/%s", name);
}

/* Walks rel (components separated by '/') below fd, which it owns; each
 * directory checked (own_only: opvm's own).  The last fd or -errno. */
static int walk(int fd, char *shown, size_t shownlen, const char *rel, mode_t mode,
		unsigned flags, bool own_only, char *err, size_t errlen)
{
	char buf[PATH_MAX], *save = NULL;

	if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf)) {
		close(fd);
		return -ENAMETOOLONG;
	}
	for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int nfd = step(fd, shown, c, mode, flags & SAFEPATH_CREATE, err, errlen), ret;

		close(fd);
		if (nfd < 0)
			return nfd;
		shown_add(shown, shownlen, c);
		ret = safepath_check_dir(nfd, shown, own_only, err, errlen);
		if (ret) {
			close(nfd);
			return ret;
		}
		fd = nfd;
	}
	return fd;
}

/* The longest existing prefix of path, resolved, into real; *rest points
 * into path at what is missing ("" if nothing).  0 or -errno. */
static int split_existing(const char *path, char *real, const char **rest, bool create)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (!n || n >= sizeof(buf))
		return n ? -ENAMETOOLONG : -EINVAL;
	memcpy(buf, path, n + 1);
	for (;;) {
		char *slash;

		if (realpath(n ? buf : ".", real)) {
			*rest = path + n + (path[n] == '/');
			return 0;
		}
		if (errno != ENOENT || !create)
			return -errno;
		while (n > 1 && buf[n - 1] == '/')	/* "a//b" */
			buf[--n] = '\0';
		slash = strrchr(buf, '/');
		if (!slash)
			n = 0;
		else
			n = slash == buf ? 1 : (size_t)(slash - buf);
		buf[n] = '\0';
		while (n > 1 && buf[n - 1] == '/')
			buf[--n] = '\0';
	}
}

int safepath_open_base(const char *path, mode_t mode, unsigned flags, char *real,
		       size_t reallen, char *err, size_t errlen)
{
	char res[PATH_MAX], shown[PATH_MAX] = "/";
	const char *rest = "";
	int fd, ret;

	ret = split_existing(path, res, &rest, flags & SAFEPATH_CREATE);
	if (ret) {
		errbuf_set(err, errlen, "cannot use %s: %s", path, strerror(-ret));
		return ret;
	}
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = safepath_check_dir(fd, "/", 0, err, errlen);
	if (ret) {
		close(fd);
		return ret;
	}
	/* res has no links left: one appearing now is someone's doing */
	fd = walk(fd, shown, sizeof(shown), res, mode, 0, false, err, errlen);
	if (fd < 0 || !*rest)
		goto out;
	fd = walk(fd, shown, sizeof(shown), rest, mode, SAFEPATH_CREATE, false, err, errlen);
out:
	if (fd >= 0 && real && snprintf(real, reallen, "%s", shown) >= (int)reallen) {
		close(fd);
		return -ENAMETOOLONG;
	}
	return fd;
}

int safepath_open_sub(int dfd, const char *shown, const char *rel, mode_t mode,
		      unsigned flags, char *err, size_t errlen)
{
	char sh[PATH_MAX];
	struct stat sb;
	int fd = dup(dfd);

	if (fd < 0)
		return -errno;
	if (rel[0] == '/') {
		close(fd);
		return -EINVAL;
	}
	snprintf(sh, sizeof(sh), "%s", shown);
	fd = walk(fd, sh, sizeof(sh), rel, mode, flags, true, err, errlen);
	if (fd >= 0 && (flags & SAFEPATH_PRIVATE) && !fstat(fd, &sb) &&
	    (sb.st_mode & 07777) != mode && fchmod(fd, mode)) {
		int ret = -errno;

		errbuf_set(err, errlen, "cannot make %s private: %s", sh, strerror(errno));
		close(fd);
		return ret;
	}
	return fd;
}

int safepath_open_session(const char *path, mode_t mode, unsigned flags, char *err,
			  size_t errlen)
{
	char real[PATH_MAX];
	int fd, ret;

	fd = safepath_open_base(path, mode, flags & SAFEPATH_CREATE, real, sizeof(real), err,
				errlen);
	if (fd < 0)
		return fd;
	ret = safepath_check_dir(fd, real, 1, err, errlen);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

int safepath_create_file(int dfd, const char *name, mode_t mode, int flags)
{
	struct stat sb;
	int fd, fl, ret = 0;

	if (strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	/* no O_TRUNC yet: what is there is looked at first */
	fd = openat(dfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
		    O_CLOEXEC | flags, mode);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb))
		ret = -errno;
	else if (!S_ISREG(sb.st_mode))
		ret = -EINVAL;
	else if (sb.st_nlink != 1)
		ret = -EMLINK;
	else if (sb.st_size && ftruncate(fd, 0))
		ret = -errno;
	fl = ret ? -1 : fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

int safepath_open_guest(const char *session, const char *name, char *err, size_t errlen)
{
	char rel[PATH_MAX];
	int sfd, fd;

	if (!*name || strchr(name, '/') ||
	    snprintf(rel, sizeof(rel), "guests/%s", name) >= (int)sizeof(rel))
		return -EINVAL;
	sfd = safepath_open_session(session, 0755, SAFEPATH_CREATE, err, errlen);
	if (sfd < 0)
		return sfd;
	fd = safepath_open_sub(sfd, session, rel, 0755, SAFEPATH_CREATE, err, errlen);
	close(sfd);
	return fd;
}
