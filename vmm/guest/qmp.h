/* SPDX-License-Identifier: MIT */
/*
 * QMP client (QEMU Machine Protocol) over a unix socket, with jansson.
 *
 * opvm uses it to find a guest's vCPUs (query-cpus-fast), to start a
 * gdbstub at run time (human-monitor-command "gdbserver ..."), to ask
 * whether the guest runs (query-status), to notice resets and shutdowns
 * (events), and to quit a QEMU it started.
 *
 * Asynchronous events that arrive while waiting for a reply are recorded in
 * a bit mask (qmp_take_events()).  Replies are bounded (1 MiB a line) and
 * parsed with jansson; nothing from QEMU is trusted to be well formed.
 * Errors: 0 or -errno; -EPIPE when QEMU went away, -EREMOTEIO when QEMU
 * answered with an error (its "desc" goes to err).  Not thread-safe.
 */
#ifndef OPVM_QMP_H
#define OPVM_QMP_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

struct qmp;

enum qmp_event {
	QMP_EV_RESET	= 1u << 0,	/* guest reset (reboot) */
	QMP_EV_SHUTDOWN	= 1u << 1,	/* guest powered off / QEMU quitting */
	QMP_EV_STOP	= 1u << 2,	/* VM paused */
	QMP_EV_RESUME	= 1u << 3,	/* VM resumed */
	QMP_EV_OTHER	= 1u << 4,
};

/* Connects, reads the greeting, negotiates capabilities, all within
 * timeout_ms (a socket that never accepts or never greets costs that, no
 * more).  NULL + errno (ETIMEDOUT). */
struct qmp *qmp_open(const char *path, unsigned timeout_ms);

/* The same for a short exchange: every step of the open and of every
 * command on the handle ends by deadline_ms (clk_now_ms() clock), whatever
 * timeout a command is given.  cancel (may be NULL): a signal arriving
 * while *cancel is set ends the waiting step with -EINTR (the stop flag of
 * signals_stop_on(), so Ctrl-C is not held by a silent socket). */
struct qmp *qmp_open_until(const char *path, int64_t deadline_ms,
			   const volatile sig_atomic_t *cancel);
void qmp_close(struct qmp *q);		/* NULL-safe */
int qmp_fd(const struct qmp *q);

/*
 * Runs cmd with args (may be NULL; borrowed).  *ret (if ret is non-NULL)
 * receives a new reference to the "return" member.  On a QMP error, copies
 * its description to err and returns -EREMOTEIO.
 */
int qmp_execute(struct qmp *q, const char *cmd, json_t *args, json_t **ret,
		char *err, size_t errlen, unsigned timeout_ms);

/* Same, passing fd (>= 0; the caller keeps its copy) with the command, for
 * getfd: QEMU files it under a name in this monitor connection only. */
int qmp_execute_fd(struct qmp *q, const char *cmd, json_t *args, int fd, json_t **ret,
		   char *err, size_t errlen, unsigned timeout_ms);

/* HMP command through human-monitor-command; *out (may be NULL) gets a
 * malloc'd copy of its output. */
int qmp_hmp(struct qmp *q, const char *cmdline, char **out, unsigned timeout_ms);

/* vCPU host thread ids in cpu-index order (query-cpus-fast).  Returns the
 * number of vCPUs (may exceed max; only max are stored) or -errno. */
int qmp_vcpu_threads(struct qmp *q, int *tids, unsigned max, unsigned timeout_ms);

/* 1 if the VM runs, 0 if not (query-status), or -errno. */
int qmp_running(struct qmp *q, unsigned timeout_ms);

/* Reads pending input without blocking; returns and clears the event mask
 * (enum qmp_event) gathered so far, or -EPIPE once QEMU has gone. */
int qmp_take_events(struct qmp *q);

#endif /* OPVM_QMP_H */
