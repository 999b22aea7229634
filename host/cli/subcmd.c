// SPDX-License-Identifier: MIT
/*
 * Another opvm command as a child process (host/cli/subcmd.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "host/cli/subcmd.h"

static pid_t spawn(char *const argv[], const char *out_path, const char *err_path, int tied)
{
	pid_t parent = getpid(), pid = fork();
	sigset_t none;

	if (pid != 0)
		return pid < 0 ? -errno : pid;
	/* The child of a threaded caller: only async-signal-safe calls until
	 * execv(). */
	{
		int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
		int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		int err = strcmp(out_path, err_path) ?
			  open(err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : out;

		if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 ||
		    dup2(err, 2) < 0)
			_exit(127);
		setpgid(0, 0);
		/* the parent may have died before the prctl: then ours is
		 * another process already */
		if (tied && (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent))
			_exit(127);
		/* the mask is inherited across exec: the caller's thread may
		 * block the signals that stop a session */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
}

pid_t subcmd_spawn(char *const argv[], const char *out_path, const char *err_path)
{
	return spawn(argv, out_path, err_path, 0);
}

pid_t subcmd_spawn_tied(char *const argv[], const char *out_path, const char *err_path)
{
	return spawn(argv, out_path, err_path, 1);
}

void subcmd_last_message(const char *path, char *buf, size_t cap)
{
	char line[512];
	FILE *f = fopen(path, "re");
	size_t used = 0;

	buf[0] = '\0';
	if (!f || !cap)
		goto out;
	while (fgets(line, sizeof(line), f)) {
		char *p = line;

		line[strcspn(line, "\n")] = '\0';
		if (!*p)
			continue;
		if (*p == ' ' && used) {	/* a wrapped message goes on */
			while (*p == ' ')
				p++;
			used += (size_t)snprintf(buf + used, cap - used, " %s", p);
		} else {
			used = (size_t)snprintf(buf, cap, "%s", p);
		}
		if (used >= cap)
			used = cap - 1;
	}
out:
	if (f)
		fclose(f);
}
