// SPDX-License-Identifier: MIT
/*
 * QMP client.  See qmp.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/unixsock.h"
#include "vmm/guest/qmp.h"

#define QMP_LINE_MAX	(1u << 20)

struct qmp {
	int fd;
	int gone;
	/* qmp_open_until(): no step of any exchange on this handle goes past
	 * deadline (ms, clk_now_ms(); 0: none), and a signal that finds
	 * *cancel set ends the step at once (-EINTR). */
	int64_t deadline;
	const volatile sig_atomic_t *cancel;
	unsigned events;
	size_t len, cap;
	char *buf;
};

/* Reads more bytes, waiting at most wait_ms (0: do not wait).  Returns 1
 * if bytes came, 0 on timeout, -errno. */
static int qmp_fill(struct qmp *q, long long wait_ms)
{
	struct pollfd pfd = { .fd = q->fd, .events = POLLIN };
	ssize_t n;
	int r;

	if (q->gone)
		return -EPIPE;
	if (q->cap - q->len < 4096) {
		size_t ncap = q->cap ? q->cap * 2 : 16384;
		char *nb;

		if (ncap > QMP_LINE_MAX + 4096) {
			/* A line longer than anything QEMU sends us: drop it. */
			q->len = 0;
			ncap = q->cap;
		}
		nb = realloc(q->buf, ncap);
		if (!nb)
			return -ENOMEM;
		q->buf = nb;
		q->cap = ncap;
	}
	do
		r = poll(&pfd, 1, (int)(wait_ms < 0 ? 0 : wait_ms));
	while (r < 0 && errno == EINTR && !(q->cancel && *q->cancel));
	if (r < 0)
		return -errno;
	if (r == 0)
		return 0;
	n = recv(q->fd, q->buf + q->len, q->cap - q->len, 0);
	if (n <= 0) {
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			return 1;
		q->gone = 1;
		return -EPIPE;
	}
	q->len += (size_t)n;
	return 1;
}

static void note_event(struct qmp *q, json_t *msg)
{
	const char *ev = json_string_value(json_object_get(msg, "event"));

	if (!ev)
		return;
	if (!strcmp(ev, "RESET"))
		q->events |= QMP_EV_RESET;
	else if (!strcmp(ev, "SHUTDOWN") || !strcmp(ev, "POWERDOWN"))
		q->events |= QMP_EV_SHUTDOWN;
	else if (!strcmp(ev, "STOP"))
		q->events |= QMP_EV_STOP;
	else if (!strcmp(ev, "RESUME"))
		q->events |= QMP_EV_RESUME;
	else
		q->events |= QMP_EV_OTHER;
}

/*
 * Next JSON message that is not an event, until deadline (ms, monotonic;
 * 0: do not wait).  Events met on the way are recorded.  Returns a new
 * reference, or NULL with *err set.
 */
static json_t *qmp_next(struct qmp *q, long long deadline, int *err)
{
	for (;;) {
		char *nl = q->len ? memchr(q->buf, '\n', q->len) : NULL;
		int r;

		if (nl) {
			size_t l = (size_t)(nl - q->buf) + 1;
			json_t *msg = json_loadb(q->buf, l, JSON_REJECT_DUPLICATES, NULL);

			memmove(q->buf, q->buf + l, q->len - l);
			q->len -= l;
			if (!json_is_object(msg)) {
				json_decref(msg);
				continue;	/* blank or broken line */
			}
			if (json_object_get(msg, "event")) {
				note_event(q, msg);
				json_decref(msg);
				continue;
			}
			return msg;
		}
		/* Checked before reading: a peer that never stops sending
		 * (junk lines, events) must not keep us past the deadline. */
		if (deadline && clk_now_ms() >= deadline) {
			*err = -ETIMEDOUT;
			return NULL;
		}
		r = qmp_fill(q, deadline ? deadline - clk_now_ms() : 0);
		if (r < 0) {
			*err = r;
			return NULL;
		}
		if (r == 0) {
			*err = -ETIMEDOUT;
			return NULL;
		}
	}
}

/* Waits until the socket takes more bytes, at most until deadline (ms).
 * 0, -ETIMEDOUT, -EINTR (cancelled) or -errno. */
static int qmp_wait_out(struct qmp *q, long long deadline)
{
	struct pollfd pfd = { .fd = q->fd, .events = POLLOUT };
	int r;

	do
		r = poll(&pfd, 1, (int)clk_ms_left(deadline));
	while (r < 0 && errno == EINTR && !(q->cancel && *q->cancel));
	return r < 0 ? -errno : r == 0 ? -ETIMEDOUT : 0;
}

/* Sends msg by deadline (the socket is non-blocking: a QEMU that does not
 * read its monitor cannot hold us); fd >= 0 rides along with its first
 * byte (SCM_RIGHTS), which is how QEMU's getfd and add-fd receive
 * descriptors. */
static int qmp_send(struct qmp *q, json_t *msg, int fd, long long deadline)
{
	char *s = json_dumps(msg, JSON_COMPACT);
	size_t len, off = 0;
	int err = 0;

	if (!s)
		return -ENOMEM;
	len = strlen(s);
	while (off < len) {
		ssize_t n;

		if (fd >= 0 && off == 0) {
			union {
				char buf[CMSG_SPACE(sizeof(int))];
				struct cmsghdr align;
			} c;
			struct iovec iov = { .iov_base = s, .iov_len = len };
			struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
					     .msg_control = c.buf, .msg_controllen = sizeof(c.buf) };
			struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

			memset(&c, 0, sizeof(c));
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &fd, sizeof(int));
			n = sendmsg(q->fd, &mh, MSG_NOSIGNAL);
		} else {
			n = send(q->fd, s + off, len - off, MSG_NOSIGNAL);
		}
		if (n < 0 && errno == EAGAIN) {
			err = qmp_wait_out(q, deadline);
			if (err)
				break;
			continue;
		}
		if (n < 0) {
			if (errno == EINTR && !(q->cancel && *q->cancel))
				continue;
			q->gone = 1;
			err = -EPIPE;
			break;
		}
		off += (size_t)n;
	}
	free(s);
	return err;
}

int qmp_execute(struct qmp *q, const char *cmd, json_t *args, json_t **ret,
		char *errbuf, size_t errlen, unsigned timeout_ms)
{
	return qmp_execute_fd(q, cmd, args, -1, ret, errbuf, errlen, timeout_ms);
}

int qmp_execute_fd(struct qmp *q, const char *cmd, json_t *args, int fd, json_t **ret,
		   char *errbuf, size_t errlen, unsigned timeout_ms)
{
	long long deadline = clk_now_ms() + timeout_ms;
	json_t *msg, *reply, *r, *e;
	int err = 0;

	if (q->deadline && q->deadline < deadline)
		deadline = q->deadline;

	if (ret)
		*ret = NULL;
	msg = json_pack("{s:s}", "execute", cmd);
	if (!msg)
		return -ENOMEM;
	if (args && json_object_set(msg, "arguments", args)) {
		json_decref(msg);
		return -ENOMEM;
	}
	err = qmp_send(q, msg, fd, deadline);
	json_decref(msg);
	if (err)
		return err;
	reply = qmp_next(q, deadline, &err);
	if (!reply)
		return err;
	r = json_object_get(reply, "return");
	e = json_object_get(reply, "error");
	if (e) {
		const char *desc = json_string_value(json_object_get(e, "desc"));

		if (errbuf && errlen)
			snprintf(errbuf, errlen, "%s", desc ? desc : "unknown QMP error");
		err = -EREMOTEIO;
	} else if (!r) {
		err = -EPROTO;
	} else if (ret) {
		*ret = json_incref(r);
	}
	json_decref(reply);
	return err;
}

/*
 * Connect, greeting and capabilities, all by one deadline: a socket that
 * never accepts (a full queue), accepts and stays silent, or drips bytes
 * costs at most the time left, never a hang.
 */
struct qmp *qmp_open_until(const char *path, int64_t deadline_ms,
			   const volatile sig_atomic_t *cancel)
{
	struct qmp *q;
	json_t *greeting;
	int err, fl;

	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->deadline = deadline_ms;
	q->cancel = cancel;
	q->fd = unixsock_connect(path, clk_ms_left(deadline_ms));
	if (q->fd < 0) {
		err = q->fd;
		q->fd = -1;
		goto fail;
	}
	fl = fcntl(q->fd, F_GETFL);
	if (fl < 0 || fcntl(q->fd, F_SETFL, fl | O_NONBLOCK)) {
		err = -errno;
		goto fail;
	}
	/* The greeting is the first non-event message. */
	greeting = qmp_next(q, deadline_ms, &err);
	if (!greeting)
		goto fail;
	err = json_object_get(greeting, "QMP") ? 0 : -EPROTO;
	json_decref(greeting);
	if (err)
		goto fail;
	err = qmp_execute(q, "qmp_capabilities", NULL, NULL, NULL, 0,
			  clk_ms_left(deadline_ms));
	if (err)
		goto fail;
	return q;

fail:
	qmp_close(q);
	errno = -err;
	return NULL;
}

struct qmp *qmp_open(const char *path, unsigned timeout_ms)
{
	struct qmp *q = qmp_open_until(path, clk_now_ms() + timeout_ms, NULL);

	if (q)
		q->deadline = 0;	/* a handle kept open: each command its own */
	return q;
}

void qmp_close(struct qmp *q)
{
	if (!q)
		return;
	if (q->fd >= 0)
		close(q->fd);
	free(q->buf);
	free(q);
}

int qmp_fd(const struct qmp *q)
{
	return q->fd;
}

int qmp_hmp(struct qmp *q, const char *cmdline, char **out, unsigned timeout_ms)
{
	json_t *args = json_pack("{s:s}", "command-line", cmdline);
	json_t *ret = NULL;
	int err;

	if (out)
		*out = NULL;
	if (!args)
		return -ENOMEM;
	err = qmp_execute(q, "human-monitor-command", args, &ret, NULL, 0, timeout_ms);
	json_decref(args);
	if (!err && out) {
		const char *s = json_string_value(ret);

		*out = strdup(s ? s : "");
		if (!*out)
			err = -ENOMEM;
	}
	json_decref(ret);
	return err;
}

int qmp_vcpu_threads(struct qmp *q, int *tids, unsigned max, unsigned timeout_ms)
{
	json_t *ret = NULL, *cpu;
	size_t i;
	int err, n = 0;

	err = qmp_execute(q, "query-cpus-fast", NULL, &ret, NULL, 0, timeout_ms);
	if (err)
		return err;
	if (!json_is_array(ret)) {
		json_decref(ret);
		return -EPROTO;
	}
	json_array_foreach(ret, i, cpu) {
		json_int_t idx = json_integer_value(json_object_get(cpu, "cpu-index"));
		json_int_t tid = json_integer_value(json_object_get(cpu, "thread-id"));

		if (idx >= 0 && (size_t)idx < max && tids)
			tids[idx] = (int)tid;
		n++;
	}
	json_decref(ret);
	return n;
}

int qmp_running(struct qmp *q, unsigned timeout_ms)
{
	json_t *ret = NULL, *running;
	int err;

	err = qmp_execute(q, "query-status", NULL, &ret, NULL, 0, timeout_ms);
	if (err)
		return err;
	running = json_object_get(ret, "running");
	err = json_is_boolean(running) ? json_is_true(running) : -EPROTO;
	json_decref(ret);
	return err;
}

int qmp_take_events(struct qmp *q)
{
	unsigned ev;
	int err = 0;

	for (;;) {
		json_t *msg = qmp_next(q, 0, &err);

		if (!msg)
			break;
		json_decref(msg);	/* a stray reply: nothing waits for it */
	}
	ev = q->events;
	q->events = 0;
	if (err == -ETIMEDOUT || ev)
		return (int)ev;
	return err;
}
