/* SPDX-License-Identifier: MIT */
/*
 * Files and directories: the running binary's directory, mkdir -p, names
 * fit for a directory, regular files opened without following a FIFO into
 * a hang, small text files read in one go, a directory's entries read
 * through a descriptor the caller keeps.
 */
#ifndef OPVM_FS_H
#define OPVM_FS_H

#include <dirent.h>
#include <stddef.h>
#include <sys/types.h>

/* The directory of the running binary (from /proc/self/exe) into
 * dir[len]: 0, or -errno (-ENAMETOOLONG if it does not fit). */
int fs_self_dir(char *dir, size_t len);

/* mkdir -p, mode 0755: creates every missing directory of path; existing
 * ones are fine.  0 or -errno (-ENAMETOOLONG from PATH_MAX on, before any
 * directory is made). */
int fs_mkdir_p(const char *path);

/* Whether s can name a guest's directory as it is: 1 to 64 of
 * [A-Za-z0-9._-], and not "." or "..".  (Names that come from a guest or
 * libvirt go through store_mangle() instead.) */
int fs_valid_name(const char *s);

/* Opens path read-only, and only a regular file (-EINVAL otherwise):
 * O_NONBLOCK (a FIFO planted where a file was expected must not hang the
 * reader), O_CLOEXEC, O_NOCTTY, plus flags (O_NOFOLLOW for files in a
 * session tree: -ELOOP for a symlink).  The returned fd is blocking again.
 * The fd, or -errno. */
int fs_open_regular(const char *path, int flags);
/* The same, path relative to the directory fd dfd (or AT_FDCWD). */
int fs_openat_regular(int dfd, const char *path, int flags);

/* The start of a small text file (proc, sysfs, debugfs) at path relative
 * to dfd (AT_FDCWD for a plain path), NUL-terminated in buf[size]: its
 * length, or -errno (-EIO: empty).  One read: what does not fit is cut. */
ssize_t fs_read_text(int dfd, const char *path, char *buf, size_t size);

/* A stream over the entries of the directory dfd, which stays open and
 * the caller's (the stream reads a duplicate of it): closedir() it.
 * NULL and errno; no descriptor is left open then. */
DIR *fs_opendir_at(int dfd);

#endif /* OPVM_FS_H */
