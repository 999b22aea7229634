// SPDX-License-Identifier: MIT
/*
 * Files and directories (lib/fs.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fs.h"

int fs_self_dir(char *dir, size_t len)
{
	char *slash;
	ssize_t n;

	if (!len)
		return -ENAMETOOLONG;
	n = readlink("/proc/self/exe", dir, len);
	if (n < 0)
		return -errno;
	if ((size_t)n >= len)
		return -ENAMETOOLONG;
	dir[n] = '\0';
	slash = strrchr(dir, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	return 0;
}

int fs_mkdir_p(const char *path)
{
	char tmp[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, len + 1);
	for (char *p = tmp; *p; p++) {
		if (*p != '/' || p == tmp)	/* no "" directory to make */
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

int fs_valid_name(const char *s)
{
	if (!*s || strlen(s) > 64 || !strcmp(s, ".") || !strcmp(s, ".."))
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
			return 0;
	return 1;
}

int fs_open_regular(const char *path, int flags)
{
	return fs_openat_regular(AT_FDCWD, path, flags);
}

int fs_openat_regular(int dfd, const char *path, int flags)
{
	struct stat st;
	int fd = openat(dfd, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | flags);
	int fl;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

ssize_t fs_read_text(int dfd, const char *path, char *buf, size_t size)
{
	int fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	return n;
}

DIR *fs_opendir_at(int dfd)
{
	int fd = dup(dfd);
	DIR *d;

	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (!d) {
		int err = errno;

		close(fd);
		errno = err;
	}
	return d;
}
