// SPDX-License-Identifier: MIT
/*
 * One exporter profile (host/cli/exporter-job.h): a slot, a worker thread,
 * `opvm attach` for the seconds asked and then `opvm export --format
 * pprof`, both children in the profile's own directory, which is removed
 * before the profile is sent (the worker keeps it open).
 *
 * The worker polls its client's socket for a hang-up (no byte is read,
 * libmicrohttpd owns the connection) and the exporter's stop pipe ten times
 * a second; either stops the child with SIGTERM, on which attach ends its
 * session as on Ctrl-C (a gdbstub guest is let go, never left stopped).
 * SIGKILL only after PJOB_GRACE_MS.
 *
 * A client's FIN (POLLRDHUP) is no hang-up: it may only have shut down its
 * sending half (shutdown(SHUT_WR)) and wait for its answer, and TCP does not
 * tell that from a close.  So an HTTP/1.1 client is sent one interim
 * response (PJOB_PROBE, a 1xx every HTTP/1.1 client skips): a client that
 * closed answers it with a reset (POLLERR, POLLHUP: gone, within a poll);
 * one that half-closed reads it and gets its answer after it.  HTTP/1.0 has
 * no interim responses: such a client is answered at the end of its
 * profile, or found gone when the answer is written.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/cli/exporter-job.h"
#include "host/cli/subcmd.h"
#include "host/collect/store.h"
#include "lib/clock.h"
#include "lib/fs.h"

#define PJOB_POLL_MS		100
#define PJOB_GRACE_MS		10000	/* SIGTERM, then SIGKILL */
#define PJOB_SETUP_MS		60000	/* attach's start and end beyond its --duration */
#define PJOB_EXPORT_MS		120000	/* the longest export */
#define PJOB_READY_MARGIN_MS	3000	/* an export, for Retry-After */
#define PJOB_PROBE		"HTTP/1.1 102 Processing\r\n\r\n"
#define PJOB_EXIT_REFUSED	3	/* attach's: --qemu-pid refused the guest */

/* Why a child did not end by itself. */
enum { PJOB_GONE = -1, PJOB_STOPPING = -2, PJOB_TIMEOUT = -3, PJOB_SPAWN = -4 };

static double tv_s(const struct timeval *tv)
{
	return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

/* 1 if the client hung up, 2 if the exporter stops, 0 neither (after up
 * to PJOB_POLL_MS).  POLLRDHUP is asked for until the client's FIN came
 * (then the probe goes, once: see above); POLLERR and POLLHUP always come. */
static int watch(struct pjob *j)
{
	struct pollfd f[2] = {
		{ .fd = j->p->stop_pipe[0], .events = POLLIN },
		{ .fd = j->client_fd, .events = j->probed ? 0 : POLLRDHUP },
	};

	if (poll(f, j->client_fd >= 0 ? 2 : 1, PJOB_POLL_MS) <= 0)
		return 0;
	if (f[0].revents)
		return 2;
	if (f[1].revents & (POLLHUP | POLLERR | POLLNVAL))
		return 1;
	if ((f[1].revents & POLLRDHUP) && !j->probed) {
		j->probed = 1;
		if (j->http11 && send(j->client_fd, PJOB_PROBE, strlen(PJOB_PROBE),
				      MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			return 1;
	}
	return 0;
}

/* Stops child pid (SIGTERM, SIGKILL after the grace) and reaps it. */
static void child_stop(pid_t pid, struct rusage *ru)
{
	int64_t until = clk_now_ms() + PJOB_GRACE_MS;
	int st;

	kill(pid, SIGTERM);
	while (wait4(pid, &st, WNOHANG, ru) == 0) {
		if (clk_now_ms() > until) {
			kill(pid, SIGKILL);
			wait4(pid, &st, 0, ru);
			return;
		}
		usleep(20 * 1000);
	}
}

/* Runs argv with its output in log until it exits (its wait status), or
 * until the client goes, the exporter stops or max_ms pass (PJOB_*: it was
 * stopped).  *cpu_s += its CPU time. */
static int child_run(struct pjob *j, char **argv, const char *log, int64_t max_ms,
		     double *cpu_s)
{
	struct rusage ru = { 0 };
	int64_t until = clk_now_ms() + max_ms;
	pid_t pid = subcmd_spawn(argv, log, log);
	int st, why = 0;

	if (pid < 0)
		return PJOB_SPAWN;
	for (;;) {
		pid_t r = wait4(pid, &st, WNOHANG, &ru);

		if (r == pid || (r < 0 && errno != EINTR))
			break;
		why = watch(j);
		if (why || clk_now_ms() > until) {
			why = why == 1 ? PJOB_GONE : why == 2 ? PJOB_STOPPING : PJOB_TIMEOUT;
			child_stop(pid, &ru);
			break;
		}
	}
	pthread_mutex_lock(&j->p->lock);
	*cpu_s += tv_s(&ru.ru_utime) + tv_s(&ru.ru_stime);
	pthread_mutex_unlock(&j->p->lock);
	return why ? why : st;
}

int pguest_attach_argv(const struct pprof *p, const struct pguest *g, char **argv,
		       char buf[2][32])
{
	const struct ps_qemu *q = &g->q;
	int a = 0;

	snprintf(buf[0], 32, "qemu-%d", q->pid);
	snprintf(buf[1], 32, "%d", q->pid);
	argv[a++] = "opvm";
	argv[a++] = "attach";
	/* the QEMU found here, which the monitor's answers must describe */
	argv[a++] = "--qemu-pid";
	argv[a++] = buf[1];
	if (q->libvirt) {
		argv[a++] = (char *)q->name;
		if (p->cfg.uri) {
			argv[a++] = "-c";
			argv[a++] = (char *)p->cfg.uri;
		}
	} else {
		argv[a++] = "--qmp";
		argv[a++] = (char *)q->qmp;
		argv[a++] = "--name";
		argv[a++] = fs_valid_name(q->name) ? (char *)q->name : buf[0];
		if (q->channel[0]) {
			argv[a++] = "--channel";
			argv[a++] = (char *)q->channel;
		}
	}
	argv[a++] = "--sampler";	/* never a default that could stop a KVM guest */
	argv[a++] = (char *)g->sampler->name;
	return a;
}

/* The attach command line for j (strings in buf, kept while argv is). */
static void attach_argv(const struct pjob *j, char **argv, char buf[4][PATH_MAX + 32])
{
	char pid[2][32];
	int a;

	snprintf(buf[0], sizeof(buf[0]), "%u", j->seconds);
	snprintf(buf[1], sizeof(buf[1]), "%s/session", j->dir);
	a = pguest_attach_argv(j->p, &j->g, argv, pid);
	memcpy(buf[2], pid[0], sizeof(pid[0]));
	memcpy(buf[3], pid[1], sizeof(pid[1]));
	for (int i = 0; i < a; i++)	/* argv's pid strings into buf, which lives on */
		argv[i] = argv[i] == pid[0] ? buf[2] : argv[i] == pid[1] ? buf[3] : argv[i];
	argv[a++] = "--duration";
	argv[a++] = buf[0];
	argv[a++] = "-d";
	argv[a++] = buf[1];
	if (j->event[0]) {
		argv[a++] = "-e";
		argv[a++] = (char *)j->event;
	}
	if (j->callgraph[0]) {
		argv[a++] = "--call-graph";
		argv[a++] = (char *)j->callgraph;
	}
	argv[a] = NULL;
}

/* The outcome of a child that did not succeed, into j. */
static void child_failed(struct pjob *j, const char *what, const char *log, int r)
{
	char line[400];

	subcmd_last_message(log, line, sizeof(line));
	if (r == PJOB_STOPPING) {
		j->status = MHD_HTTP_SERVICE_UNAVAILABLE;
		snprintf(j->msg, sizeof(j->msg), "the exporter is stopping");
		return;
	}
	/* attach's usage errors (an event this sampler does not take) come
	 * before it touches the guest, and so does its refusal of a monitor
	 * that describes another process than the QEMU found here */
	j->status = r >= 0 && WIFEXITED(r) && WEXITSTATUS(r) == 2 ? MHD_HTTP_BAD_REQUEST :
		    r >= 0 && WIFEXITED(r) && WEXITSTATUS(r) == PJOB_EXIT_REFUSED ?
		    MHD_HTTP_FORBIDDEN : MHD_HTTP_INTERNAL_SERVER_ERROR;
	if (j->status == MHD_HTTP_FORBIDDEN) {	/* attach's line says which guest */
		const char *why = !strncmp(line, "opvm: error: ", 13) ? line + 13 : line;

		snprintf(j->msg, sizeof(j->msg), "%s", why[0] ? why : "the guest's monitor "
			 "does not describe its QEMU: refused");
		return;
	}
	snprintf(j->msg, sizeof(j->msg), "%s of guest '%s' %s%s%s", what, j->g.q.name,
		 r == PJOB_TIMEOUT ? "took too long" : r == PJOB_SPAWN ? "could not start" :
		 "failed", line[0] ? ": " : "", line);
}

/* Unix ms as the seconds --since/--until take. */
static void unix_s(char *buf, size_t len, int64_t ms)
{
	snprintf(buf, len, "%lld.%03lld", (long long)(ms / 1000), (long long)(ms % 1000));
}

/* export, of the session in dir (the windows of j's range if from_store);
 * the profile's fd into j. */
static void job_export(struct pjob *j, const char *dir)
{
	char log[PATH_MAX + 32], out[PATH_MAX + 32], since[32], until[32];
	char *argv[16];
	struct stat st;
	int r, a = 0;

	snprintf(out, sizeof(out), "%s/profile.pb.gz", j->dir);
	snprintf(log, sizeof(log), "%s/export.log", j->dir);
	argv[a++] = "opvm";
	argv[a++] = "export";
	argv[a++] = "--format";
	argv[a++] = "pprof";
	argv[a++] = "-o";
	argv[a++] = out;
	argv[a++] = "--session-dir";
	argv[a++] = (char *)dir;
	argv[a++] = "--empty-ok";	/* a guest that ran no code is no error */
	if (j->from_store) {
		unix_s(since, sizeof(since), j->since_ms);
		unix_s(until, sizeof(until), j->until_ms);
		argv[a++] = "--since";
		argv[a++] = since;
		argv[a++] = "--until";
		argv[a++] = until;
	}
	argv[a] = NULL;
	r = child_run(j, argv, log, PJOB_EXPORT_MS, &j->p->cpu_export);
	if (r == PJOB_GONE)
		return;
	if (r) {
		child_failed(j, "the export of the profile", log, r);
		return;
	}
	j->fd = open(out, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (j->fd < 0 || fstat(j->fd, &st) || !S_ISREG(st.st_mode)) {
		j->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
		snprintf(j->msg, sizeof(j->msg), "cannot read the profile of guest '%s': %s",
			 j->g.q.name, strerror(errno));
		return;
	}
	j->size = (uint64_t)st.st_size;
	j->status = MHD_HTTP_OK;
}

/* attach, then export; the profile's fd into j.  The client gone: 0 and
 * nothing more (no one to answer). */
static void job_work(struct pjob *j)
{
	char buf[4][PATH_MAX + 32], log[PATH_MAX + 32];
	char *argv[32];
	int64_t t0 = clk_now_ms();
	int r;

	if (j->from_store) {	/* the windows are there already */
		job_export(j, j->store);
		return;
	}
	attach_argv(j, argv, buf);
	snprintf(log, sizeof(log), "%s/attach.log", j->dir);
	r = child_run(j, argv, log, (int64_t)j->seconds * 1000 + PJOB_SETUP_MS,
		      &j->p->cpu_attach);
	pthread_mutex_lock(&j->p->lock);
	j->p->seconds += (double)(clk_now_ms() - t0) / 1000.0;
	pthread_mutex_unlock(&j->p->lock);
	if (r == PJOB_GONE)
		return;
	if (r) {
		child_failed(j, "profiling", log, r);
		return;
	}
	job_export(j, buf[1]);
}

/* The worker's end: the directory removed, the slot freed, the outcome
 * counted, the connection resumed (the last touch of j: MHD may free it
 * from then on). */
static void job_end(struct pjob *j, int client_gone)
{
	struct pprof *p = j->p;
	struct MHD_Connection *c = j->c;
	int resume;

	if (j->dir[0])
		store_remove_tree(j->dir);
	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < p->cfg.max_profiles; i++)
		if (p->active[i] == j)
			p->active[i] = NULL;
	p->nr_active--;
	if (client_gone)
		p->aborted++;
	else if (j->status == MHD_HTTP_BAD_REQUEST)	/* attach's usage error */
		p->refused[PREF_BAD_REQUEST]++;
	else if (j->status == MHD_HTTP_FORBIDDEN)	/* attach's refusal */
		p->refused[PREF_NOT_ITS_QEMU]++;
	else if (j->status != MHD_HTTP_OK && j->status != MHD_HTTP_SERVICE_UNAVAILABLE)
		p->errors++;
	resume = j->suspended;
	j->done = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	if (!resume)
		return;
	MHD_resume_connection(c);
	pthread_mutex_lock(&p->lock);
	p->suspended--;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

static void *job_main(void *arg)
{
	struct pjob *j = arg;
	sigset_t all;

	/* the exporter's stop signals are for its main thread */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	j->status = 0;
	job_work(j);
	job_end(j, j->status == 0);
	return NULL;
}

/* Seconds until slot holder j should be done, at least 1. */
static unsigned retry_in(const struct pjob *j)
{
	int64_t left = j->ready_ms - clk_now_ms();

	return left > 1000 ? (unsigned)((left + 999) / 1000) : 1;
}

/* Under p->lock: 0 and a slot for j, or the refusal. */
static unsigned take_slot(struct pprof *p, struct pjob *j, unsigned *retry_after)
{
	unsigned free_at = p->cfg.max_profiles;

	*retry_after = 0;
	if (p->stopping) {
		snprintf(j->msg, sizeof(j->msg), "the exporter is stopping");
		return MHD_HTTP_SERVICE_UNAVAILABLE;
	}
	for (unsigned i = 0; i < p->cfg.max_profiles; i++) {
		struct pjob *o = p->active[i];

		if (!o) {
			free_at = i;
			continue;
		}
		/* windows of one guest may be read by many at once */
		if (!j->from_store && o->g.q.pid == j->g.q.pid &&
		    o->g.q.start_ticks == j->g.q.start_ticks) {
			p->refused[PREF_GUEST_BUSY]++;
			*retry_after = retry_in(o);
			snprintf(j->msg, sizeof(j->msg), "guest '%s' is being profiled; retry "
				 "in %u s", o->g.q.name, *retry_after);
			return MHD_HTTP_TOO_MANY_REQUESTS;
		}
		if (!*retry_after || retry_in(o) < *retry_after)
			*retry_after = retry_in(o);
	}
	if (free_at == p->cfg.max_profiles) {
		p->refused[PREF_BUSY]++;
		snprintf(j->msg, sizeof(j->msg), "%u profiles are running, as many as this "
			 "exporter takes at once (--max-profiles); retry in %u s",
			 p->cfg.max_profiles, *retry_after);
		return MHD_HTTP_TOO_MANY_REQUESTS;
	}
	p->active[free_at] = j;
	p->nr_active++;
	*retry_after = 0;
	return 0;
}

unsigned pjob_start(struct pjob *j, int suspend, unsigned *retry_after)
{
	struct pprof *p = j->p;
	unsigned st;

	j->fd = -1;
	j->ready_ms = clk_now_ms() + (j->from_store ? 0 : (int64_t)j->seconds * 1000) +
		      PJOB_READY_MARGIN_MS;
	pthread_mutex_lock(&p->lock);
	st = take_slot(p, j, retry_after);
	if (!st && suspend) {
		j->suspended = 1;
		p->suspended++;
	}
	pthread_mutex_unlock(&p->lock);
	if (st)
		return st;
	/* suspended before the worker starts: it may end at once, and
	 * resumes the connection when it does */
	if (suspend)
		MHD_suspend_connection(j->c);
	if ((size_t)snprintf(j->dir, sizeof(j->dir), "%s/profile.XXXXXX", p->root) >=
	    sizeof(j->dir) || !mkdtemp(j->dir)) {
		j->dir[0] = '\0';
	} else if (!pthread_create(&j->thread, NULL, job_main, j)) {
		j->thread_started = 1;
		return 0;
	}
	j->status = MHD_HTTP_SERVICE_UNAVAILABLE;
	snprintf(j->msg, sizeof(j->msg), "cannot start a profile: %s", strerror(errno));
	job_end(j, 0);
	return 0;
}

void pjob_wait(struct pjob *j)
{
	pthread_mutex_lock(&j->p->lock);
	while (!j->done)
		pthread_cond_wait(&j->p->cond, &j->p->lock);
	pthread_mutex_unlock(&j->p->lock);
}

void pjob_free(struct pjob *j)
{
	if (!j)
		return;
	if (j->thread_started)
		pthread_join(j->thread, NULL);
	if (j->fd >= 0)
		close(j->fd);
	free(j);
}
