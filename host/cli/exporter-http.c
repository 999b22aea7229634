// SPDX-License-Identifier: MIT
/*
 * The exporter's profile endpoints, the HTTP side (host/cli/exporter-http.h):
 * options, requests checked before anything starts, replies, the guest list
 * and the profiler's own metrics.  The profiles themselves are jobs
 * (host/cli/exporter-job.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/cli/exporter-job.h"
#include "host/cli/exporter-http.h"
#include "host/collect/store.h"
#include "host/report/report.h"
#include "lib/log.h"
#include "lib/numparse.h"
#include "lib/clock.h"
#include "lib/size.h"
#include "lib/text.h"

#define PPROF_MAX_PROFILES	2
#define PPROF_MAX_SECONDS	60
#define PPROF_SECONDS		30	/* without seconds=, as Go's net/http/pprof */
#define PPROF_MAX_PARAMS	32	/* query parameters of any request */

#define PC struct pprof_cfg
const struct opt_def pprof_options[] = {
	{ .name = "max-profiles", .metavar = "N", .help = "profiles at once (default 2; 0: "
	  "no profile endpoints)", OPT_UINT(PC, max_profiles, 0, 64) },
	{ .name = "max-profile-seconds", .metavar = "S", .help = "longest profile (default "
	  "60): longer requests are clipped, and the reply says so",
	  OPT_DURATION(PC, max_seconds, 1, 86400, 1000) },
	{ .name = "allow-gdbstub", .help = "profile TCG guests too: the gdbstub sampler stops "
	  "the guest at every sample (KVM guests get perf, which never stops them)",
	  OPT_FLAG(PC, allow_gdbstub) },
	{ .name = "profile-dir", .metavar = "DIR", .help = "where the private directory of "
	  "the sessions goes (default $TMPDIR, else /tmp)", OPT_STRING(PC, dir) },
	{ .name = "continuous", .help = "sample every guest all the time into a rolling "
	  "store and serve profiles from it at once (seconds=N, start=&end=)",
	  OPT_FLAG(PC, continuous) },
	{ .name = "rate", .metavar = "HZ", .help = "--continuous: samples a second a vCPU "
	  "(default 19)", OPT_UINT(PC, rate_hz, 1, 1000) },
	{ .name = "window", .metavar = "S", .help = "--continuous: the store's window "
	  "(default 10 s)", OPT_DURATION(PC, window_s, 1, 3600, 1000) },
	{ .name = "retention", .metavar = "S", .help = "--continuous: how long windows are "
	  "kept (default 3600 s; 90m, 2h also)", OPT_DURATION(PC, retention_s, 1, 30 * 86400,
							      1000),
	  .want = "seconds (90m, 2h), to 30 days" },
	{ .name = "max-store", .metavar = "SIZE", .help = "--continuous: bytes of windows "
	  "kept, all guests (default 1G); past it the oldest go first",
	  OPT_SIZE(PC, max_store, 1u << 20, UINT64_MAX), .want = "a size from 1M, e.g. 1G" },
	{ .name = "store", .metavar = "DIR", .help = "--continuous: the store (default "
	  "./opvm_store; kept across restarts)", OPT_STRING(PC, store_dir) },
	{ .name = "guests", .metavar = "GLOB", .help = "--continuous: sample only the guests "
	  "whose name matches GLOB (default all)", OPT_STRING(PC, only) },
	{ 0 },
};
#undef PC

void pprof_cfg_init(struct pprof_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->max_profiles = PPROF_MAX_PROFILES;
	cfg->max_seconds = PPROF_MAX_SECONDS;
	cfg->rate_hz = 19;
	cfg->window_s = 10;
	cfg->retention_s = 3600;
	cfg->max_store = 1ULL << 30;
	cfg->store_dir = "./opvm_store";
}

struct pprof *pprof_new(const struct pprof_cfg *cfg)
{
	const char *tmp = getenv("TMPDIR");
	const char *dir = cfg->dir ? cfg->dir : tmp && tmp[0] == '/' ? tmp : "/tmp";
	struct pprof *p = calloc(1, sizeof(*p));

	if (!p || pipe2(p->stop_pipe, O_CLOEXEC)) {
		log_err("out of resources: %s", strerror(errno));
		free(p);
		return NULL;
	}
	p->cfg = *cfg;
	p->active = calloc(cfg->max_profiles + 1, sizeof(*p->active));
	snprintf(p->root, sizeof(p->root), "%s/opvm-exporter.XXXXXX", dir);
	if (!cfg->max_profiles) {
		p->root[0] = '\0';	/* off: no directory */
	} else if (!p->active || strlen(dir) > PATH_MAX - 64 || !mkdtemp(p->root)) {
		log_err("cannot make the profiles' directory in %s: %s; give --profile-dir DIR",
			dir, strerror(errno));
		close(p->stop_pipe[0]);
		close(p->stop_pipe[1]);
		free(p->active);
		free(p);
		return NULL;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	if (cfg->continuous && pcont_start(p)) {
		pprof_free(p);
		return NULL;
	}
	return p;
}

/* ---- replies ---------------------------------------------------------- */

/*
 * Every answer closes its connection, said in an explicit header.  Why not
 * keep-alive: a profile suspends its connection for up to a minute, and a
 * request pipelined behind it would wait as long; a kept connection holds
 * one of a source address's 32 slots while idle; and libmicrohttpd decides
 * keep-alive by heuristics of its own that changed between its versions.
 * A new connection a request costs a handshake, on a scrape interval.
 */
enum MHD_Result pprof_queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *r)
{
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	return MHD_queue_response(c, status, r);
}

/* One line of text with status; retry_after > 0 adds Retry-After. */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, unsigned retry_after,
			     const char *fmt, ...)
{
	char text[768], ra[16];
	struct MHD_Response *r;
	enum MHD_Result ret;
	va_list ap;
	int n;

	memcpy(text, "opvm exporter: ", 15);
	va_start(ap, fmt);
	n = vsnprintf(text + 15, sizeof(text) - 16, fmt, ap);
	va_end(ap);
	n = n < 0 ? 15 : n + 15 > (int)sizeof(text) - 2 ? (int)sizeof(text) - 2 : n + 15;
	text[n++] = '\n';
	text[n] = '\0';
	r = MHD_create_response_from_buffer((size_t)n, text, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
	if (retry_after) {
		snprintf(ra, sizeof(ra), "%u", retry_after);
		MHD_add_response_header(r, "Retry-After", ra);
	}
	ret = pprof_queue(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static void count_refusal(struct pprof *p, enum pprof_refusal why)
{
	pthread_mutex_lock(&p->lock);
	p->refused[why]++;
	pthread_mutex_unlock(&p->lock);
}

/* A worker's outcome: the profile (its fd handed to MHD) or its line. */
static enum MHD_Result job_reply(struct pprof *p, struct MHD_Connection *c, struct pjob *j)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	char v[32], clip[160];

	if (!j->status)		/* the client went away: no one to answer */
		return MHD_NO;
	if (j->status != MHD_HTTP_OK)
		return reply(c, j->status, 0, "%s", j->msg);
	r = MHD_create_response_from_fd64(j->size, j->fd);
	if (!r)
		return MHD_NO;
	j->fd = -1;	/* the response's now */
	MHD_add_response_header(r, "Content-Type", "application/octet-stream");
	MHD_add_response_header(r, "Content-Disposition", "attachment; filename=\"profile\"");
	if (j->g.sampler)
		MHD_add_response_header(r, "X-Opvm-Sampler", j->g.sampler->name);
	snprintf(v, sizeof(v), "%u", j->seconds);
	MHD_add_response_header(r, "X-Opvm-Seconds", v);
	if (j->from_store) {	/* the windows asked: [since, until) in Unix ms */
		snprintf(clip, sizeof(clip), "%lld-%lld", (long long)j->since_ms,
			 (long long)j->until_ms);
		MHD_add_response_header(r, "X-Opvm-Range", clip);
		snprintf(v, sizeof(v), "%u", j->windows);
		MHD_add_response_header(r, "X-Opvm-Windows", v);
	}
	if (j->asked > j->seconds) {
		snprintf(clip, sizeof(clip), "seconds=%u clipped to %u (this exporter's %s)",
			 j->asked, j->seconds, j->from_store ? "--retention" :
			 "--max-profile-seconds");
		MHD_add_response_header(r, "X-Opvm-Clipped", clip);
	}
	ret = pprof_queue(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	if (ret == MHD_YES) {
		pthread_mutex_lock(&p->lock);
		p->served++;
		pthread_mutex_unlock(&p->lock);
	}
	return ret;
}

/* ---- /debug/pprof/profile --------------------------------------------- */

struct args {
	const char *guest, *seconds, *event, *callgraph, *owner, *start, *end;
	char bad[160];		/* the first bad parameter, escaped */
};

/* One parameter; its size given, so that a NUL inside it (%00) is seen:
 * "guest=victim%00x" must not become guest=victim. */
static enum MHD_Result one_arg(void *cls, enum MHD_ValueKind kind, const char *key,
			       size_t key_size, const char *value, size_t value_size)
{
	struct args *a = cls;
	const char **slot = !strcmp(key, "guest") ? &a->guest :
			    !strcmp(key, "seconds") ? &a->seconds :
			    !strcmp(key, "event") ? &a->event :
			    !strcmp(key, "callgraph") ? &a->callgraph :
			    !strcmp(key, "owner") ? &a->owner :
			    !strcmp(key, "start") ? &a->start :
			    !strcmp(key, "end") ? &a->end : NULL;
	char esc[64];

	(void)kind;
	if (a->bad[0])
		return MHD_NO;
	text_escape(esc, sizeof(esc), key);
	if (strlen(key) != key_size || (value && strlen(value) != value_size))
		snprintf(a->bad, sizeof(a->bad), "parameter '%s' holds a NUL byte", esc);
	else if (!slot)
		snprintf(a->bad, sizeof(a->bad), "unknown parameter '%s' (guest, seconds, "
			 "start, end, event, callgraph and owner are known)", esc);
	else if (*slot)
		snprintf(a->bad, sizeof(a->bad), "parameter '%s' given twice", esc);
	else
		*slot = value ? value : "";
	return a->bad[0] ? MHD_NO : MHD_YES;
}

/* seconds=: decimal digits only (no sign, no spaces, no 0x), at least 1;
 * past 1000000 it is 1000000 (clipped anyway).  0 or -EINVAL. */
static int parse_seconds(const char *v, unsigned long *s)
{
	size_t n = strlen(v);

	if (!n || strspn(v, "0123456789") != n)
		return -EINVAL;
	while (n > 1 && *v == '0') {	/* leading zeros: still decimal */
		v++;
		n--;
	}
	*s = n > 7 ? 1000000 : strtoul(v, NULL, 10);
	return *s ? 0 : -EINVAL;
}

/* Characters of an event spec (opvm list-events): checked here so that
 * nothing else reaches attach's command line. */
static int event_ok(const char *e)
{
	size_t n = strlen(e);

	return n && n < 65 && strspn(e, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				     "0123456789_:.,=-") == n;
}

/* --continuous: the range a request asks of the store into j, or why not
 * into bad.  Every window [s, e) with e > since and s < until is in. */
static void store_range(const struct pprof *p, const struct args *a, struct pjob *j,
			unsigned long secs, char *bad, size_t len)
{
	int64_t now = clk_wall_ms(), keep = (int64_t)p->cfg.retention_s * 1000;
	int64_t slack = (int64_t)p->cfg.window_s * 1000;

	if (a->event || a->callgraph) {
		snprintf(bad, len, "event= and callgraph= are not taken here: the store keeps "
			 "what the continuous samplers take (--rate)");
	} else if (!a->start && a->end) {
		snprintf(bad, len, "end= wants start= too");
	} else if (!a->start) {
		j->asked = secs > 1000000 ? 1000000 : (unsigned)secs;
		j->seconds = j->asked > p->cfg.retention_s ? p->cfg.retention_s : j->asked;
		j->since_ms = now - (int64_t)j->seconds * 1000;
		j->until_ms = now;
	} else if (a->seconds) {
		snprintf(bad, len, "give seconds= or start=&end=, not both");
	} else if (num_parse_time(a->start, &j->since_ms) ||
		   (a->end && num_parse_time(a->end, &j->until_ms))) {
		snprintf(bad, len, "start= and end= want Unix seconds or RFC 3339 times "
			 "(2026-12-02T03:10:00Z)");
	} else {
		if (!a->end)
			j->until_ms = now;
		if (j->since_ms > now)
			snprintf(bad, len, "start= is in the future");
		else if (j->until_ms <= j->since_ms)
			snprintf(bad, len, "end= is not after start=");
		else if (j->until_ms - j->since_ms > keep + slack)
			snprintf(bad, len, "the range is longer than this exporter keeps "
				 "(--retention %u s)", p->cfg.retention_s);
		else if (j->until_ms < now - keep - slack)
			snprintf(bad, len, "nothing is kept from then: windows go after "
				 "--retention %u s", p->cfg.retention_s);
		j->asked = j->seconds = (unsigned)((j->until_ms - j->since_ms + 999) / 1000);
	}
	j->from_store = 1;
}

/* The parameters into j; 0, or -1 after the 400 reply (*ret). */
static int parse_args(struct pprof *p, struct MHD_Connection *c, struct pjob *j,
		      enum MHD_Result *ret)
{
	struct args a = { 0 };
	unsigned long s = PPROF_SECONDS;

	MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, one_arg, &a);
	if (!a.bad[0] && (!a.guest || !a.guest[0]))
		snprintf(a.bad, sizeof(a.bad), "say which guest: ?guest=NAME&seconds=N "
			 "(/debug/pprof/guests lists them)");
	if (!a.bad[0] && a.seconds && parse_seconds(a.seconds, &s))
		snprintf(a.bad, sizeof(a.bad), "seconds wants a whole number of seconds from 1, "
			 "in decimal digits");
	if (!a.bad[0] && a.owner && (!a.owner[0] || strlen(a.owner) >= sizeof(j->owner)))
		snprintf(a.bad, sizeof(a.bad), "owner wants a user name or uid");
	if (!a.bad[0] && a.event && !event_ok(a.event))
		snprintf(a.bad, sizeof(a.bad), "event wants an event spec such as "
			 "cpu-clock or TIMER:5000 (opvm list-events)");
	if (!a.bad[0] && a.callgraph && strcmp(a.callgraph, "fp") && strcmp(a.callgraph, "dwarf"))
		snprintf(a.bad, sizeof(a.bad), "callgraph takes fp or dwarf");
	if (!a.bad[0] && p->cont)
		store_range(p, &a, j, s, a.bad, sizeof(a.bad));
	else if (!a.bad[0] && (a.start || a.end))
		snprintf(a.bad, sizeof(a.bad), "start= and end= are for an exporter with "
			 "--continuous");
	if (a.bad[0]) {
		count_refusal(p, PREF_BAD_REQUEST);
		*ret = reply(c, MHD_HTTP_BAD_REQUEST, 0, "%s", a.bad);
		return -1;
	}
	if (!j->from_store) {
		j->asked = s > 1000000 ? 1000000 : (unsigned)s;
		j->seconds = j->asked > p->cfg.max_seconds ? p->cfg.max_seconds : j->asked;
	}
	snprintf(j->event, sizeof(j->event), "%s", a.event ? a.event : "");
	snprintf(j->callgraph, sizeof(j->callgraph), "%s", a.callgraph ? a.callgraph : "");
	snprintf(j->owner, sizeof(j->owner), "%s", a.owner ? a.owner : "");
	snprintf(j->g.q.name, sizeof(j->g.q.name), "%s", a.guest);
	return 0;
}

/* --continuous: the windows j's answer merges into j->windows; past what
 * an export reads, or the store unreadable: -1 after one line.  An answer
 * reads at most the windows of --retention, each under its cap
 * (pcont_window_cap()): at most --max-store together. */
static int count_windows(struct pprof *p, struct MHD_Connection *c, struct pjob *j,
			 enum MHD_Result *ret)
{
	char one[1][STORE_WINDOW_NAME_MAX];
	int n = store_windows(j->store, j->since_ms, j->until_ms, one, 1);

	if (n == -ENOENT)	/* no window yet */
		n = 0;
	if (n >= 0 && n <= REPORT_MAX_WINDOWS) {
		j->windows = (unsigned)n;
		return 0;
	}
	count_refusal(p, PREF_BAD_REQUEST);
	if (n > 0)
		*ret = reply(c, MHD_HTTP_BAD_REQUEST, 0, "the range holds %d windows, more than "
			     "the %d an answer merges: ask a shorter one", n, REPORT_MAX_WINDOWS);
	else
		*ret = reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, 0, "cannot read the store: %s",
			     strerror(-n));
	return -1;
}

/* --continuous: the store's directory of the guest j asks for (hit: the
 * live guest's index, or pguest_match()'s error) into j->store; 0, or -1
 * after the reply. */
static int find_stored(struct pprof *p, struct MHD_Connection *c, struct pjob *j, int hit,
		       enum MHD_Result *ret)
{
	const struct pguest *live = hit >= 0 && !j->g.why[0] ? &j->g : NULL;
	char esc[160];
	int r = pcont_find(p, live, j->g.q.name, j->owner[0] ? j->owner : NULL, j->store,
			   sizeof(j->store));

	text_escape(esc, sizeof(esc), j->g.q.name);
	if (!r) {
		if (!live) {	/* gone (or not sampled now): its windows only */
			j->g.sampler = NULL;
			j->g.q.pid = 0;
		}
		return count_windows(p, c, j, ret);
	}
	if (r == -EEXIST) {
		count_refusal(p, PREF_BAD_REQUEST);
		*ret = reply(c, MHD_HTTP_CONFLICT, 0, "the store holds guests named '%s' of "
			     "several users: add owner=USER", esc);
	} else if (hit >= 0 && j->g.why[0]) {
		count_refusal(p, PREF_STOPS_GUEST);
		*ret = reply(c, MHD_HTTP_FORBIDDEN, 0, "guest '%s' is not profiled: %s", esc,
			     j->g.why);
	} else {
		count_refusal(p, PREF_UNKNOWN_GUEST);
		*ret = reply(c, MHD_HTTP_NOT_FOUND, 0, "no guest '%s' on this host or in its "
			     "store (/debug/pprof/guests lists them)", esc);
	}
	return -1;
}

/* The guest j asks for into j->g; 0, or -1 after the reply. */
static int find_guest(struct pprof *p, struct MHD_Connection *c, struct pjob *j,
		      enum MHD_Result *ret)
{
	struct pguest *gs;
	int n = pguest_scan(&p->cfg, NULL, &gs), hit;
	char esc[160], owners[256], oesc[160];

	text_escape(esc, sizeof(esc), j->g.q.name);
	text_escape(oesc, sizeof(oesc), j->owner);
	if (n < 0) {
		*ret = reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, 0, "cannot read /proc: %s",
			     strerror(-n));
		return -1;
	}
	hit = pguest_match(gs, n, j->g.q.name, j->owner[0] ? j->owner : NULL, owners,
			   sizeof(owners));
	if (hit >= 0)
		j->g = gs[hit];
	free(gs);
	if (p->cont && hit != -EEXIST)
		return find_stored(p, c, j, hit, ret);
	if (hit == -ENOENT || hit == -EINVAL) {
		count_refusal(p, PREF_UNKNOWN_GUEST);
		*ret = reply(c, MHD_HTTP_NOT_FOUND, 0, "no guest '%s'%s%s%s on this host "
			     "(/debug/pprof/guests lists them)", esc, j->owner[0] ? " of user '" :
			     "", oesc, j->owner[0] ? "'" : "");
	} else if (hit < 0) {
		count_refusal(p, PREF_BAD_REQUEST);
		*ret = reply(c, MHD_HTTP_CONFLICT, 0, "several QEMU processes are named '%s', "
			     "of users %s: add owner=USER, or give them distinct -name values",
			     esc, owners);
	} else if (j->g.why[0]) {
		count_refusal(p, PREF_STOPS_GUEST);
		*ret = reply(c, MHD_HTTP_FORBIDDEN, 0, "guest '%s' is not profiled: %s", esc,
			     j->g.why);
	} else if (j->callgraph[0] && !j->g.sampler->callgraph) {
		count_refusal(p, PREF_BAD_REQUEST);
		*ret = reply(c, MHD_HTTP_BAD_REQUEST, 0, "callgraph: guest '%s' is sampled by "
			     "%s, which never stops it and cannot read its stacks", esc,
			     j->g.sampler->name);
	} else {
		return 0;
	}
	return -1;
}

/* The client's socket, watched for a hang-up; -1 if MHD does not tell. */
static int client_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci ? ci->connect_fd : -1;
}

/* A daemon with a thread per connection cannot suspend one: its request
 * waits in its own thread instead. */
static int can_suspend(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_DAEMON);
	const union MHD_DaemonInfo *di =
		ci ? MHD_get_daemon_info(ci->daemon, MHD_DAEMON_INFO_FLAGS) : NULL;

	return di && !(di->flags & MHD_USE_THREAD_PER_CONNECTION);
}

static enum MHD_Result profile_request(struct pprof *p, struct MHD_Connection *c,
				       const char *version, void **con_cls)
{
	struct pjob *j = calloc(1, sizeof(*j));
	enum MHD_Result ret;
	unsigned st, retry;
	int suspend = can_suspend(c);

	if (!j)
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, 0, "out of memory");
	j->p = p;
	j->c = c;
	j->client_fd = client_fd(c);
	j->http11 = !strcmp(version, MHD_HTTP_VERSION_1_1);
	if (parse_args(p, c, j, &ret) || find_guest(p, c, j, &ret)) {
		free(j);
		return ret;
	}
	st = pjob_start(j, suspend, &retry);
	if (st) {
		ret = reply(c, st, retry, "%s", j->msg);
	} else {
		*con_cls = j;
		if (suspend)
			return MHD_YES;	/* the worker resumes c */
		pjob_wait(j);
		return job_reply(p, c, j);
	}
	free(j);
	return ret;
}

/* ---- /debug/pprof/guests ---------------------------------------------- */

static json_t *guest_json(const struct pprof *p, const struct pguest *g)
{
	char who[64];
	int busy = 0;

	for (unsigned i = 0; i < p->cfg.max_profiles; i++)
		busy |= p->active[i] && p->active[i]->g.q.pid == g->q.pid;
	/* sampler null: no backend can sample it (why says so) */
	return json_pack("{s:s, s:i, s:s, s:s, s:s, s:s?, s:b, s:s?, s:b}",
			 "name", g->q.name, "pid", g->q.pid,
			 "owner", pguest_owner_name(g, who, sizeof(who)),
			 "source", g->q.libvirt ? "libvirt" : "qemu",
			 "accel", g->q.accel == PS_ACCEL_KVM ? "kvm" : "tcg",
			 "sampler", g->sampler ? g->sampler->name : NULL, "profile", !g->why[0],
			 "why", g->why[0] ? g->why : NULL, "busy", busy);
}

static enum MHD_Result guests_request(struct pprof *p, struct MHD_Connection *c)
{
	struct pguest *gs;
	int n = pguest_scan(&p->cfg, NULL, &gs);
	json_t *root, *arr = json_array();
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *s;

	if (n < 0) {
		json_decref(arr);
		return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, 0, "cannot read /proc: %s",
			     strerror(-n));
	}
	pthread_mutex_lock(&p->lock);
	for (int i = 0; arr && i < n; i++)
		json_array_append_new(arr, guest_json(p, &gs[i]));
	root = json_pack("{s:o, s:i, s:i, s:i, s:b}", "guests", arr,
			 "max_profiles", (int)p->cfg.max_profiles,
			 "active", (int)p->nr_active, "max_seconds", (int)p->cfg.max_seconds,
			 "gdbstub_allowed", p->cfg.allow_gdbstub);
	if (root && p->cont)	/* the store's sizes and what its caps refused */
		json_object_set_new(root, "store", pcont_json(p));
	pthread_mutex_unlock(&p->lock);
	free(gs);
	s = root ? json_dumps(root, JSON_INDENT(2)) : NULL;
	json_decref(root);
	if (!s)
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, 0, "out of memory");
	r = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(s);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "application/json");
	ret = pprof_queue(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* ---- dispatch --------------------------------------------------------- */

/* The mark of a request with too many parameters (its *con_cls). */
static char too_many;

void *pprof_uri_check(void *cls, const char *uri, struct MHD_Connection *c)
{
	char *q = strchr(uri, '?');
	unsigned n = 1;

	(void)cls;
	(void)c;
	for (const char *s = q; s && *s; s++)
		n += *s == '&';
	if (!q || n <= PPROF_MAX_PARAMS)
		return NULL;
	/* libmicrohttpd would parse every one into the connection's memory
	 * pool, run out and close the connection unanswered: it parses
	 * none.  The URI is its own buffer, which it parses next. */
	q[1] = '\0';
	return &too_many;
}

int pprof_uri_marked(const void *con_cls)
{
	return con_cls == &too_many;
}

enum MHD_Result pprof_too_many(struct pprof *p, struct MHD_Connection *c)
{
	if (p)
		count_refusal(p, PREF_BAD_REQUEST);
	return reply(c, MHD_HTTP_BAD_REQUEST, 0, "more than %d query parameters",
		     PPROF_MAX_PARAMS);
}

enum MHD_Result pprof_request(struct pprof *p, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, void **con_cls)
{
	const char *page = url + strlen(PPROF_PREFIX);
	int get = !strcmp(method, "GET"), head = !strcmp(method, "HEAD");

	if (*con_cls)	/* resumed: the worker is done */
		return job_reply(p, c, *con_cls);
	if (!p || !p->cfg.max_profiles)
		return reply(c, MHD_HTTP_NOT_FOUND, 0, "guest profiles are off here "
			     "(--max-profiles 0)");
	if (strcmp(page, "profile") && strcmp(page, "guests")) {
		count_refusal(p, PREF_BAD_REQUEST);
		return reply(c, MHD_HTTP_NOT_FOUND, 0, "no such page: profiles are at "
			     PPROF_PREFIX "profile?guest=NAME&seconds=N, the guests at "
			     PPROF_PREFIX "guests");
	}
	if (!get && !(head && !strcmp(page, "guests"))) {
		count_refusal(p, PREF_BAD_REQUEST);
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, 0, "%s wants GET", url);
	}
	if (!strcmp(page, "guests"))
		return guests_request(p, c);
	return profile_request(p, c, version, con_cls);
}

void pprof_completed(void *cls, struct MHD_Connection *c, void **con_cls,
		     enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)c;
	(void)toe;
	if (*con_cls != &too_many)
		pjob_free(*con_cls);
	*con_cls = NULL;
}

/* ---- metrics, stop ---------------------------------------------------- */

static void metric(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

char *pprof_metrics(struct pprof *p, const char *s)
{
	static const char *const why[PREF_NR] = { "busy", "guest_busy", "stops_guest",
						  "unknown_guest", "bad_request",
						  "not_its_qemu" };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fputs(s ? s : "", f);
	pthread_mutex_lock(&p->lock);
	metric(f, "opvm_profiles_served_total", "counter", "Guest profiles served.");
	fprintf(f, "opvm_profiles_served_total %llu\n", (unsigned long long)p->served);
	metric(f, "opvm_profiles_refused_total", "counter", "Profile requests refused, by why.");
	for (int i = 0; i < PREF_NR; i++)
		fprintf(f, "opvm_profiles_refused_total{reason=\"%s\"} %llu\n", why[i],
			(unsigned long long)p->refused[i]);
	metric(f, "opvm_profile_errors_total", "counter",
	       "Profiles whose sampling or export failed.");
	fprintf(f, "opvm_profile_errors_total %llu\n", (unsigned long long)p->errors);
	metric(f, "opvm_profiles_aborted_total", "counter",
	       "Profiles ended early because their client went away.");
	fprintf(f, "opvm_profiles_aborted_total %llu\n", (unsigned long long)p->aborted);
	metric(f, "opvm_profile_seconds_total", "counter", "Seconds guests were profiled.");
	fprintf(f, "opvm_profile_seconds_total %.3f\n", p->seconds);
	metric(f, "opvm_profile_cpu_seconds_total", "counter",
	       "CPU time of the profiles' children: attach (sampling), export.");
	fprintf(f, "opvm_profile_cpu_seconds_total{step=\"attach\"} %.3f\n", p->cpu_attach);
	fprintf(f, "opvm_profile_cpu_seconds_total{step=\"export\"} %.3f\n", p->cpu_export);
	metric(f, "opvm_profiles_active", "gauge", "Profiles running now.");
	fprintf(f, "opvm_profiles_active %u\n", p->nr_active);
	pcont_metrics(p, f);
	pthread_mutex_unlock(&p->lock);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

void pprof_stop(struct pprof *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = 1;
	if (write(p->stop_pipe[1], "x", 1) < 0)
		p->stopping = 1;	/* a full pipe is readable too */
	while (p->nr_active || p->suspended)
		pthread_cond_wait(&p->cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
	pcont_stop(p);	/* its thread saw the stop pipe: its samplers end */
}

void pprof_free(struct pprof *p)
{
	if (!p)
		return;
	if (p->root[0])
		store_remove_tree(p->root);
	close(p->stop_pipe[0]);
	close(p->stop_pipe[1]);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p->active);
	free(p);
}
