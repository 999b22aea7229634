// SPDX-License-Identifier: MIT
/*
 * opvm exporter: opvm top's figures as Prometheus metrics over HTTP
 * (libmicrohttpd; text exposition format 0.0.4; GET /metrics).
 *
 * It listens only where the user says: ADDR:PORT (default 127.0.0.1:9864,
 * loopback) or unix:PATH (a socket file, mode 0660, in a directory no other
 * user can write: listen_unix()).  The socket is made
 * here and handed to libmicrohttpd, so both kinds go through one path.
 *
 * Any local user can connect, and can start a "QEMU" whose QMP socket
 * never answers, so:
 *  - readings are taken by one refresher thread; a scrape is served from
 *    the last reading (at most --min-interval old, else it asks for a new
 *    one and waits a little for it: EXPORTER_WAIT_MS), never from a
 *    refresh of its own, so a slow guest costs its row, not the scrape;
 *  - libmicrohttpd runs a small pool of epoll threads with a connection
 *    cap per source address (one client cannot take every slot) and a
 *    short idle timeout (a slowloris' half-sent requests are dropped).
 * The metrics are counters, so Prometheus' rate() gives the per-second
 * figures.
 *
 * Paths are served from routes[] below: one row per path.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "host/cli/commands.h"
#include "host/cli/options.h"
#include "host/cli/exporter-http.h"
#include "host/hoststats/hoststats.h"
#include "lib/array.h"
#include "lib/log.h"
#include "lib/numparse.h"
#include "lib/safepath.h"
#include "lib/clock.h"
#include "lib/errbuf.h"
#include "lib/signals.h"

#define EXPORTER_DEFAULT_LISTEN	"127.0.0.1:9864"
/* How long a scrape waits for the fresher reading it asked for before it
 * takes the last one: a refresh of healthy guests takes milliseconds. */
#define EXPORTER_WAIT_MS	500
#define EXPORTER_THREADS	2	/* libmicrohttpd's pool */
#define EXPORTER_CONNS		512	/* connections in all */
#define EXPORTER_CONNS_PER_IP	32	/* from one source address */
#define EXPORTER_IDLE_S		3	/* an idle connection is closed */
#define EXPORTER_BACKLOG	128
#define EXPORTER_MMAP_THRESHOLD	(64 * 1024)

struct exporter {
	struct hoststats *h;	/* the refresher thread's alone */
	double min_interval;

	pthread_mutex_t lock;	/* everything below */
	pthread_cond_t kick;	/* a scrape wants a reading */
	pthread_cond_t done;	/* a reading was taken */
	int want, quit;
	unsigned long readings;	/* taken (or failed) so far */
	char *text;		/* the last exposition, NULL before the first */
	double taken;		/* when it was taken (monotonic s) */
	double took;		/* how long that refresh took (s) */
	unsigned long scrapes, errors, stale_served;
	struct pprof *pprof;	/* /debug/pprof/ (host/cli/exporter-http.h) */
};

static volatile sig_atomic_t exp_stop;

static double now_s(void)
{
	return (double)clk_now_ns() / 1e9;
}

/* What exporter's own options set (the guest profiles' go to a struct
 * pprof_cfg). */
struct exporter_args {
	const char *listen_on;
	double min_interval;
	const char *uri;
	int no_libvirt;
};

#define XA struct exporter_args
static const struct opt_def exporter_options[] = {
	{ .name = "listen", .key = 'l', .metavar = "ADDR:PORT|unix:PATH", .help = "default "
	  EXPORTER_DEFAULT_LISTEN " (loopback only); [::1]:PORT for IPv6; unix:PATH a unix "
	  "socket instead (created mode 0660)", OPT_STRING(XA, listen_on) },
	{ .name = "min-interval", .metavar = "S", .help = "scrapes closer than S seconds "
	  "share one reading (default 1)", OPT_DURATION(XA, min_interval, 0, 3600, 1000),
	  .want = "seconds, 0 to 3600" },
	{ .name = "connect", .key = 'c', .metavar = "URI", .help = "libvirt URI (default "
	  "$LIBVIRT_DEFAULT_URI, else qemu:///system)", OPT_STRING(XA, uri) },
	{ .name = "no-libvirt", .help = "only QEMU processes found in /proc",
	  OPT_FLAG(XA, no_libvirt) },
	{ 0 },
};
#undef XA

static const char exporter_usage[] =
	"usage: opvm exporter [--listen ADDR:PORT | --listen unix:PATH] [options]\n"
	"\n"
	"Serves opvm top's figures for Prometheus at http://ADDR:PORT/metrics:\n"
	"opvm_guest_cpu_seconds_total, opvm_guest_vcpu_steal_seconds_total,\n"
	"opvm_guest_exits_total{reason=...} and more (docs/usage.md).\n"
	"\n";

/* ---- the refresher thread ----------------------------------------------- */

/* Takes a reading whenever a scrape asks (e->want), one at a time. */
static void *exporter_refresher(void *arg)
{
	struct exporter *e = arg;

	pthread_mutex_lock(&e->lock);
	for (;;) {
		double t0;
		char *s;
		int r;

		while (!e->want && !e->quit)
			pthread_cond_wait(&e->kick, &e->lock);
		if (e->quit)
			break;
		e->want = 0;
		pthread_mutex_unlock(&e->lock);
		t0 = now_s();
		r = hoststats_refresh(e->h);
		s = r ? NULL : hoststats_prometheus(e->h);
		/* What /proc lists is other users' to choose: a burst of
		 * processes (a thousand "QEMUs" for a minute) grows the
		 * buffers of one reading, and the freed memory would stay in
		 * the allocator's arenas, fragmented, as RSS for the life of
		 * the exporter.  Handed back after each reading, before the
		 * scrapes waiting for it are served. */
		malloc_trim(0);
		if (!s && !e->quit)
			log_warn("exporter: cannot read this host's guests: %s",
				 strerror(r ? -r : ENOMEM));
		pthread_mutex_lock(&e->lock);
		if (s) {
			free(e->text);
			e->text = s;
			e->taken = now_s();
			e->took = e->taken - t0;
		} else {
			e->errors++;
		}
		e->readings++;
		pthread_cond_broadcast(&e->done);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

/* Under e->lock: asks for a reading if the last one is older than
 * min_interval and waits for it up to EXPORTER_WAIT_MS. */
static void exporter_freshen(struct exporter *e)
{
	unsigned long seen = e->readings;
	struct timespec until;
	int64_t ns;

	if (e->text && now_s() - e->taken < e->min_interval)
		return;
	e->want = 1;
	pthread_cond_signal(&e->kick);
	clock_gettime(CLOCK_MONOTONIC, &until);
	ns = until.tv_nsec + (int64_t)EXPORTER_WAIT_MS * 1000000;
	until.tv_sec += (time_t)(ns / 1000000000);
	until.tv_nsec = (long)(ns % 1000000000);
	while (e->readings == seen &&
	       pthread_cond_timedwait(&e->done, &e->lock, &until) != ETIMEDOUT)
		;
	if (e->readings == seen)
		e->stale_served++;
}

/* ---- HTTP ------------------------------------------------------------------ */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *text,
				 const char *type)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text,
								 MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	ret = pprof_queue(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* GET /metrics: the last reading, and how old it is. */
static enum MHD_Result serve_metrics(struct exporter *e, struct MHD_Connection *c)
{
	char *body = NULL;
	int n = -1;

	pthread_mutex_lock(&e->lock);
	e->scrapes++;
	exporter_freshen(e);
	if (e->text)
		n = asprintf(&body, "%s"
			     "# HELP opvm_exporter_reading_age_seconds Age of the reading served.\n"
			     "# TYPE opvm_exporter_reading_age_seconds gauge\n"
			     "opvm_exporter_reading_age_seconds %.3f\n"
			     "# HELP opvm_exporter_refresh_seconds How long that reading took.\n"
			     "# TYPE opvm_exporter_refresh_seconds gauge\n"
			     "opvm_exporter_refresh_seconds %.3f\n",
			     e->text, now_s() - e->taken, e->took);
	pthread_mutex_unlock(&e->lock);
	if (n >= 0) {	/* and the profiler's own */
		char *all = pprof_metrics(e->pprof, body);

		free(body);
		body = all;
		n = all ? (int)strlen(all) : -1;
	}
	if (n < 0)
		return send_text(c, MHD_HTTP_SERVICE_UNAVAILABLE,
				 "opvm exporter: no reading of this host's guests yet; "
				 "retry (the exporter's log says why)\n", "text/plain");
	{
		struct MHD_Response *r = MHD_create_response_from_buffer(
			(size_t)n, body, MHD_RESPMEM_MUST_FREE);
		enum MHD_Result ret;

		if (!r) {
			free(body);
			return MHD_NO;
		}
		MHD_add_response_header(r, "Content-Type",
					"text/plain; version=0.0.4; charset=utf-8");
		ret = pprof_queue(c, MHD_HTTP_OK, r);
		MHD_destroy_response(r);
		return ret;
	}
}

static enum MHD_Result serve_index(struct exporter *e, struct MHD_Connection *c);

/*
 * What the exporter serves, one row per path (matched exactly; the query
 * string is not part of it: MHD_lookup_connection_value() reads it).
 * A new endpoint is one function and one row.  Handlers run on
 * libmicrohttpd's pool threads, several at once (shared state under
 * e->lock), and must return quickly: serve what is in memory.  Work that
 * takes seconds (a profile) must not hold a pool thread, which also serves
 * other connections: suspend the connection (MHD_suspend_connection(), the
 * daemon has MHD_ALLOW_SUSPEND_RESUME), do the work in a thread of its
 * own, then MHD_resume_connection() and queue the response on the next
 * call of on_request() for that connection (*con_cls tells it apart).
 */
static const struct exporter_route {
	const char *path;
	const char *what;	/* one line for the index */
	enum MHD_Result (*serve)(struct exporter *e, struct MHD_Connection *c);
} routes[] = {
	{ "/metrics", "Prometheus metrics of every guest on this host", serve_metrics },
	{ "/", "this list", serve_index },
};

static enum MHD_Result serve_index(struct exporter *e, struct MHD_Connection *c)
{
	char buf[1024];
	size_t off = (size_t)snprintf(buf, sizeof(buf), "opvm exporter\n\n");

	for (size_t i = 0; i < ARRAY_SIZE(routes) && off < sizeof(buf); i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "  %-24s %s\n",
					routes[i].path, routes[i].what);
	if (off < sizeof(buf))
		snprintf(buf + off, sizeof(buf) - off, "  %-24s %s\n  %-24s %s\n",
			 PPROF_PREFIX "guests", "the guests a profile can be taken of (JSON)",
			 PPROF_PREFIX "profile", "?guest=NAME&seconds=N: a guest's pprof profile");
	return send_text(c, MHD_HTTP_OK, buf, "text/plain; charset=utf-8");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *upload, size_t *upload_size, void **con_cls)
{
	struct exporter *e = cls;

	(void)upload;
	(void)upload_size;
	if (pprof_uri_marked(*con_cls))		/* too many parameters */
		return pprof_too_many(e->pprof, c);
	/* host/cli/exporter-http.h: its own methods, and suspended requests */
	if (!strncmp(url, PPROF_PREFIX, strlen(PPROF_PREFIX)))
		return pprof_request(e->pprof, c, url, method, version, con_cls);
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return send_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET /metrics\n", "text/plain");
	for (size_t i = 0; i < ARRAY_SIZE(routes); i++)
		if (!strcmp(url, routes[i].path))
			return routes[i].serve(e, c);
	return send_text(c, MHD_HTTP_NOT_FOUND,
			 "opvm exporter: the metrics are at /metrics (/ lists what is served)\n",
			 "text/plain");
}

/* The socket made by listen_unix(), so that only it is removed at exit. */
static struct stat unix_made;

/*
 * unix:PATH -> a listening socket, mode 0660, or -errno with why filled.
 * Another local user must not be able to take its place: its directory
 * (every one from "/") must be this user's or root's and writable by no
 * one else unless sticky (safepath_open_base()), or the socket could be
 * renamed away and replaced by theirs; the mode is set at creation by the
 * umask (no window with a wider mode, no chmod() of a path that may have
 * become a link meanwhile).  No thread runs yet, so the umask is ours.
 */
static int listen_unix(const char *path, char *why, size_t whylen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	char dir[sizeof(a.sun_path)];
	struct stat st;
	int fd, dfd, err = 0;
	mode_t old;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	if (!*base)
		return -EINVAL;
	snprintf(dir, sizeof(dir), "%.*s", !slash ? 1 : slash == path ? 1 : (int)(slash - path),
		 !slash ? "." : path);
	dfd = safepath_open_base(dir, 0, 0, NULL, 0, why, whylen);
	if (dfd < 0)
		return dfd;
	/* Only a stale socket of this user's is replaced. */
	if (!fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW)) {
		if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
			errbuf_set(why, whylen, "%s exists and is not a socket of this user's: "
				    "remove it or give another path", path);
			close(dfd);
			return -EEXIST;
		}
		unlinkat(dfd, base, 0);
	}
	memcpy(a.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		close(dfd);
		return err;
	}
	old = umask(0117);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)))
		err = -errno;
	umask(old);
	if (!err && fstatat(dfd, base, &unix_made, AT_SYMLINK_NOFOLLOW))
		err = -errno;
	if (!err && listen(fd, EXPORTER_BACKLOG))
		err = -errno;
	close(dfd);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

/* Removes the socket listen_unix() made, if it is still the one at path. */
static void unlink_unix(const char *path)
{
	struct stat st;

	if (!lstat(path, &st) && S_ISSOCK(st.st_mode) && st.st_dev == unix_made.st_dev &&
	    st.st_ino == unix_made.st_ino)
		unlink(path);
}

/* "ADDR:PORT" or "[V6]:PORT" -> a listening TCP socket, or -errno. */
static int listen_tcp(const char *spec, char *why, size_t whylen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST },
			*ai = NULL;
	char host[128];
	const char *colon = strrchr(spec, ':'), *h = spec;
	size_t hl;
	int fd, one = 1, r;

	if (!colon || !colon[1])
		return -EINVAL;
	hl = (size_t)(colon - spec);
	if (hl >= 2 && spec[0] == '[' && spec[hl - 1] == ']') {
		h = spec + 1;
		hl -= 2;
	}
	if (!hl || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	r = getaddrinfo(host, colon + 1, &hints, &ai);
	if (r) {
		snprintf(why, whylen, "%s", gai_strerror(r));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, EXPORTER_BACKLOG)) {
		int err = -errno;

		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return err;
	}
	freeaddrinfo(ai);
	return fd;
}

/* Parses argv; 2 usage error, 1 help, 0 run. */
static int exporter_parse(int argc, char **argv, const char **listen_on, double *min_iv,
			  struct hs_config *cfg, struct pprof_cfg *pcfg)
{
	struct exporter_args a = { *listen_on, *min_iv, cfg->uri, cfg->no_libvirt };
	const struct opt_group groups[] = {
		{ NULL, exporter_options, &a },
		{ "guest profiles (GET /debug/pprof/profile?guest=NAME&seconds=N, "
		  "docs/usage.md)", pprof_options, pcfg },
		{ 0 } };
	const struct opts_cmd cmd = { .name = "exporter", .usage = exporter_usage,
				      .groups = groups };
	int r = opts_parse(&cmd, argc, argv, NULL, NULL);

	if (r)
		return r;
	if (optind < argc) {
		log_err("unexpected argument '%s'; 'opvm exporter --help' lists the options",
			argv[optind]);
		return 2;
	}
	*listen_on = a.listen_on;
	*min_iv = a.min_interval;
	cfg->uri = a.uri;
	cfg->no_libvirt = a.no_libvirt;
	return 0;
}

static int exporter_socket(const char *listen_on)
{
	char why[512] = "";
	int fd;

	if (!strncmp(listen_on, "unix:", 5))
		fd = listen_unix(listen_on + 5, why, sizeof(why));
	else
		fd = listen_tcp(listen_on, why, sizeof(why));
	if (fd == -EINVAL)
		log_err("--listen wants ADDR:PORT (e.g. 127.0.0.1:9864, [::1]:9864) or unix:PATH, "
			"not '%s'%s%s", listen_on, why[0] ? ": " : "", why);
	else if (fd < 0 && why[0])
		log_err("cannot listen on %s: %s", listen_on, why);
	else if (fd < 0)
		log_err("cannot listen on %s: %s%s", listen_on, strerror(-fd),
			fd == -EADDRINUSE ? " (another exporter? pick another port)" : "");
	return fd;
}

/* libmicrohttpd's messages, at most one per EXPORTER_LOG_EVERY_S: a client
 * that opens connection after connection past the caps makes one each
 * ("Server reached connection limit"), and must not flood the log. */
#define EXPORTER_LOG_EVERY_S	10

static void exporter_log(void *cls, const char *fmt, va_list ap)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static double last = -EXPORTER_LOG_EVERY_S;
	static unsigned long held;
	char msg[256];
	double t = now_s();

	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	pthread_mutex_lock(&lock);
	if (t - last >= EXPORTER_LOG_EVERY_S) {
		log_warn("exporter: %s%s", msg, held ? " (and more messages, not shown)" : "");
		last = t;
		held = 0;
	} else {
		held++;
	}
	pthread_mutex_unlock(&lock);
}

/* Room for EXPORTER_CONNS connections: the soft limit on open files up to
 * the hard one (often 1024 by default, which the cap would exceed). */
static unsigned exporter_conn_limit(void)
{
	struct rlimit rl;
	rlim_t want = EXPORTER_CONNS + 64;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 256;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur >= want ? EXPORTER_CONNS
	       : rl.rlim_cur > 128 ? (unsigned)rl.rlim_cur - 64 : 64;
}

static void exporter_stop_refresher(struct exporter *e, pthread_t t)
{
	pthread_mutex_lock(&e->lock);
	e->quit = 1;
	pthread_cond_signal(&e->kick);
	pthread_mutex_unlock(&e->lock);
	pthread_join(t, NULL);
}

/* Waits for the refresher's first reading (connections made meanwhile wait
 * in the listen queue), so that every scrape has a reading to serve.  It
 * costs at most the QMP budget of each guest whose socket does not answer;
 * Ctrl-C ends the wait. */
static void exporter_first_reading(struct exporter *e)
{
	pthread_mutex_lock(&e->lock);
	while (!e->readings && !exp_stop) {
		struct timespec until;

		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += 100000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&e->done, &e->lock, &until);
	}
	pthread_mutex_unlock(&e->lock);
}

/* Blocks (how SIG_BLOCK) or restores (SIG_SETMASK) SIGINT and SIGTERM in
 * this thread: threads started in between inherit the mask, so the main
 * thread's pause() is the one that sees them. */
static void exporter_mask(int how, sigset_t *old)
{
	sigset_t stop;

	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(how, how == SIG_BLOCK ? &stop : old, how == SIG_BLOCK ? old : NULL);
}

/* The refresher, its first reading, then libmicrohttpd.  NULL on failure
 * (nothing left running). */
static struct MHD_Daemon *exporter_start(struct exporter *e, int fd, pthread_t *refresher)
{
	unsigned conns = exporter_conn_limit();
	struct MHD_Daemon *d = NULL;
	int fl = fcntl(fd, F_GETFL), r;
	sigset_t old;

	/* Several pool threads accept on it. */
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK))
		return NULL;
	/* A fixed threshold: a reading's text (140 KB for 300 guests) and
	 * its copies get pages of their own, unmapped when freed, instead of
	 * raising glibc's dynamic threshold and staying in an arena. */
	mallopt(M_MMAP_THRESHOLD, EXPORTER_MMAP_THRESHOLD);
	exporter_mask(SIG_BLOCK, &old);
	r = pthread_create(refresher, NULL, exporter_refresher, e);
	exporter_mask(SIG_SETMASK, &old);
	if (r)
		return NULL;
	exporter_first_reading(e);
	exporter_mask(SIG_BLOCK, &old);
	if (!exp_stop)
		d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
				     PPROF_MHD_FLAGS | MHD_USE_ERROR_LOG, 0, NULL, NULL,
				     on_request, e,
				     MHD_OPTION_EXTERNAL_LOGGER, exporter_log, NULL,
				     MHD_OPTION_LISTEN_SOCKET, fd,
				     MHD_OPTION_THREAD_POOL_SIZE, (unsigned)EXPORTER_THREADS,
				     MHD_OPTION_CONNECTION_LIMIT, conns,
				     MHD_OPTION_PER_IP_CONNECTION_LIMIT,
				     (unsigned)EXPORTER_CONNS_PER_IP,
				     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)EXPORTER_IDLE_S,
				     MHD_OPTION_NOTIFY_COMPLETED, pprof_completed, e->pprof,
				     MHD_OPTION_URI_LOG_CALLBACK, pprof_uri_check, NULL,
				     MHD_OPTION_END);
	exporter_mask(SIG_SETMASK, &old);
	if (!d)
		exporter_stop_refresher(e, *refresher);
	return d;
}

/*
 * glibc's per-thread cache of freed chunks (tcache) keeps them out of the
 * arenas' free lists, where they would be merged and trimmed: under the
 * exporter's churn (each scrape and each reading allocates and frees) its
 * arenas grew by ~230 B a scrape for good (3,000 scrapes of this host's 10
 * guests: +712 KB; without the cache: +28 KB), which `make soak` caught.
 * The cache can only be turned off before the process starts
 * (GLIBC_TUNABLES), so the exporter runs itself again once with it off;
 * the variable is put back as it was for the profiles' children.
 */
#define EXPORTER_TUNABLE	"glibc.malloc.tcache_count=0"
#define EXPORTER_REEXEC_ENV	"OPVM_EXPORTER_TUNABLES"	/* "=" + the old value */

static void exporter_tune_malloc(int argc, char **argv)
{
	const char *old = getenv(EXPORTER_REEXEC_ENV), *tun;
	char **nargv, *val, *mark;

	if (old) {		/* the second start: put the variable back */
		if (old[1])
			setenv("GLIBC_TUNABLES", old + 1, 1);
		else
			unsetenv("GLIBC_TUNABLES");
		unsetenv(EXPORTER_REEXEC_ENV);
		return;
	}
	tun = getenv("GLIBC_TUNABLES");
	nargv = calloc((size_t)argc + 2, sizeof(*nargv));
	if (!nargv || asprintf(&mark, "=%s", tun ? tun : "") < 0) {
		free(nargv);
		return;
	}
	if (asprintf(&val, "%s%s" EXPORTER_TUNABLE, tun ? tun : "", tun && tun[0] ? ":" : "") < 0) {
		free(mark);
		free(nargv);
		return;
	}
	nargv[0] = program_invocation_name;	/* as it was started: ps shows the same */
	memcpy(nargv + 1, argv, (size_t)argc * sizeof(*argv));
	setenv(EXPORTER_REEXEC_ENV, mark, 1);
	setenv("GLIBC_TUNABLES", val, 1);
	execv("/proc/self/exe", nargv);
	/* not run again: go on with the cache, and the variables as they were */
	if (tun)
		setenv("GLIBC_TUNABLES", tun, 1);
	else
		unsetenv("GLIBC_TUNABLES");
	unsetenv(EXPORTER_REEXEC_ENV);
	free(val);
	free(mark);
	free(nargv);
}

int cmd_exporter(int argc, char **argv)
{
	const char *listen_on = EXPORTER_DEFAULT_LISTEN;
	struct exporter e = { .min_interval = 1, .want = 1,	/* a first reading now */
			      .lock = PTHREAD_MUTEX_INITIALIZER,
			      .kick = PTHREAD_COND_INITIALIZER };
	pthread_condattr_t ca;
	struct hs_config cfg = { 0 };
	struct pprof_cfg pcfg;
	struct MHD_Daemon *d = NULL;
	pthread_t refresher;
	int r, fd, ret = 1;

	exporter_tune_malloc(argc, argv);

	/* exporter_freshen() waits by the monotonic clock */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e.done, &ca);
	pthread_condattr_destroy(&ca);
	pprof_cfg_init(&pcfg);
	r = exporter_parse(argc, argv, &listen_on, &e.min_interval, &cfg, &pcfg);
	if (r)
		return r == 1 ? 0 : 2;
	fd = exporter_socket(listen_on);
	if (fd < 0)
		return fd == -EINVAL ? 2 : 1;
	signals_stop_on(&exp_stop);
	signal(SIGPIPE, SIG_IGN);	/* a client that hangs up is not a reason to stop */
	cfg.stop = &exp_stop;		/* the refresher gives up a reading on Ctrl-C */
	e.h = hoststats_new(&cfg);
	pcfg.uri = cfg.uri;
	pcfg.no_libvirt = cfg.no_libvirt;
	e.pprof = e.h ? pprof_new(&pcfg) : NULL;
	if (e.pprof)
		d = exporter_start(&e, fd, &refresher);
	if (!d) {
		if (!exp_stop)
			log_err("cannot start the HTTP server on %s", listen_on);
		close(fd);
		ret = exp_stop ? 0 : 1;
		goto out;
	}
	log_info("exporter: serving http://%s/metrics (Ctrl-C stops)", listen_on);
	while (!exp_stop)
		pause();
	pprof_stop(e.pprof);	/* no suspended connection left for MHD */
	MHD_stop_daemon(d);
	exporter_stop_refresher(&e, refresher);
	log_info("exporter: %lu scrapes, %lu failed readings, %lu served a reading older than "
		 "asked for (a slow guest)", e.scrapes, e.errors, e.stale_served);
	ret = 0;
out:
	if (!strncmp(listen_on, "unix:", 5))
		unlink_unix(listen_on + 5);
	hoststats_free(e.h);
	pprof_free(e.pprof);
	free(e.text);
	return ret;
}
