// SPDX-License-Identifier: MIT
/*
 * Threads and processes in /proc (lib/procfs.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/procfs.h"
#include "lib/fs.h"

/* The process a thread belongs to (its Tgid), or -errno. */
pid_t procfs_thread_tgid(pid_t tid)
{
	char path[64], buf[512], *t;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	n = fs_read_text(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0)
		return (pid_t)n;
	t = strstr(buf, "\nTgid:");
	return t ? (pid_t)strtol(t + 6, NULL, 10) : -EPROTO;
}

int procfs_thread_of(pid_t pid, pid_t tid)
{
	char path[64];
	struct stat st;

	if (pid <= 0 || tid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid, (int)tid);
	if (!stat(path, &st))
		return 1;
	if (errno != ENOENT)
		return -errno;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	return stat(path, &st) ? -errno : 0;
}
