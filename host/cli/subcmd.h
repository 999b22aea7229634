/* SPDX-License-Identifier: MIT */
/*
 * Another opvm command as a child process of this one: how `opvm top`'s
 * drill-down and the exporter's profiles (host/cli/exporter-http.c) run
 * `opvm attach`, `opvm report` and `opvm export` without blocking their
 * screen or their HTTP server, and without sharing their signal handlers,
 * umask or address space with a session that reads a guest's bytes.
 */
#ifndef OPVM_SUBCMD_H
#define OPVM_SUBCMD_H

#include <stddef.h>
#include <sys/types.h>

/* Runs this opvm binary (/proc/self/exe) with argv (argv[0] "opvm",
 * argv[1] the command) in a process group of its own (a terminal's Ctrl-C
 * is for the caller, which stops the child itself), with no signal
 * blocked, stdin from /dev/null, stdout to out_path and stderr to
 * err_path (created 0600; the same path for both is fine).  Safe to call
 * from any thread.  Returns the child's pid or -errno. */
pid_t subcmd_spawn(char *const argv[], const char *out_path, const char *err_path);
/* The same, and the child gets SIGTERM when the thread that spawned it
 * ends (PR_SET_PDEATHSIG): the exporter's continuous samplers, which must
 * not outlive an exporter that was killed.  Call it from a thread that
 * lives as long as the child should. */
pid_t subcmd_spawn_tied(char *const argv[], const char *out_path, const char *err_path);

/* The last message of the opvm output in the file at path, its wrapped
 * continuation lines joined ("opvm: error: cannot ..."), into buf; "" when
 * there is none. */
void subcmd_last_message(const char *path, char *buf, size_t cap);

#endif /* OPVM_SUBCMD_H */
