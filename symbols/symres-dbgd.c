// SPDX-License-Identifier: MIT
/*
 * Symbol resolution: files by build-id from debuginfod servers
 * (DEBUGINFOD_URLS), through libdebuginfod, loaded on first use.
 *
 * What a server sends is not trusted: a file whose build-id is not the one
 * asked for is refused, a file over the size cap is refused (during the
 * transfer when the server says its size, else as soon as it passes the
 * cap), and a server that stops sending for the timeout is given up for
 * the rest of the resolver's life, so that one dead server costs a report
 * one timeout, not one per image.  Each build-id and kind is asked once
 * per resolver (a report), answers or not; libdebuginfod keeps files and
 * negative answers in its cache on disk ($DEBUGINFOD_CACHE_PATH, default
 * ~/.cache/debuginfod_client; a negative answer expires after its
 * cache_miss_s, 600 s by default), so the next report asks no server again.
 * Every outcome is counted (symres_dbgd_stats()).
 *
 * Limits: DEBUGINFOD_MAXSIZE (bytes; default SYMRES_DBGD_MAX_SIZE) and
 * DEBUGINFOD_TIMEOUT (seconds without a byte; default
 * SYMRES_DBGD_TIMEOUT_S), libdebuginfod's own variables, which it applies
 * too; DEBUGINFOD_MAXTIME bounds a whole transfer (libdebuginfod alone).
 */
#include <dlfcn.h>
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/arith.h"
#include "lib/array.h"
#include "lib/clock.h"
#include "lib/fs.h"
#include "lib/hex.h"
#include "lib/size.h"
#include "symbols/symres.h"
#include "symbols/symres-priv.h"

#define SYMRES_DBGD_MAX_SIZE	(2ull << 30)	/* a kernel's vmlinux with DWARF */
#define SYMRES_DBGD_TIMEOUT_S	30
#define SYMRES_DBGD_MAX_MEMO	65536
#define SYMRES_DBGD_PROGRESS_MS	1000	/* first progress report, then each */

static struct {
	__typeof__(debuginfod_begin) *begin;
	__typeof__(debuginfod_end) *end;
	__typeof__(debuginfod_find_executable) *find_executable;
	__typeof__(debuginfod_find_debuginfo) *find_debuginfo;
	__typeof__(debuginfod_set_progressfn) *set_progressfn;
	__typeof__(debuginfod_set_user_data) *set_user_data;
	__typeof__(debuginfod_get_user_data) *get_user_data;
	__typeof__(debuginfod_set_verbose_fd) *set_verbose_fd;
} dbgd_api;
static int dbgd_loaded;
static char dbgd_err[384];	/* why not, once dbgd_load() failed */
static pthread_once_t dbgd_once = PTHREAD_ONCE_INIT;

static void dbgd_load(void)
{
	static const char *const names[] = {
		"debuginfod_begin", "debuginfod_end", "debuginfod_find_executable",
		"debuginfod_find_debuginfo", "debuginfod_set_progressfn",
		"debuginfod_set_user_data", "debuginfod_get_user_data",
		"debuginfod_set_verbose_fd",
	};
	void *h = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
	void *f[8];

	if (!h) {
		snprintf(dbgd_err, sizeof(dbgd_err), "DEBUGINFOD_URLS is set but libdebuginfod "
			 "does not load (%s): install it (Debian: apt-get install "
			 "libdebuginfod1) or unset DEBUGINFOD_URLS", dlerror());
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		f[i] = dlsym(h, names[i]);
		if (!f[i]) {
			snprintf(dbgd_err, sizeof(dbgd_err), "DEBUGINFOD_URLS is set but this "
				 "libdebuginfod lacks its client calls: upgrade it (Debian: "
				 "apt-get install libdebuginfod1) or unset DEBUGINFOD_URLS");
			return;
		}
	}
	/* POSIX: dlsym()'s data pointers convert to function pointers. */
	*(void **)&dbgd_api.begin = f[0];
	*(void **)&dbgd_api.end = f[1];
	*(void **)&dbgd_api.find_executable = f[2];
	*(void **)&dbgd_api.find_debuginfo = f[3];
	*(void **)&dbgd_api.set_progressfn = f[4];
	*(void **)&dbgd_api.set_user_data = f[5];
	*(void **)&dbgd_api.get_user_data = f[6];
	*(void **)&dbgd_api.set_verbose_fd = f[7];
	dbgd_loaded = 1;
}

void symres_dbgd_end(struct symres *r)
{
	if (r->dbgd)
		dbgd_api.end(r->dbgd);
	if (r->dbgd_null >= 0)
		close(r->dbgd_null);
}

/* A positive number of an environment variable, or dflt. */
static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	uint64_t n;

	if (!v || !*v || size_parse(v, &n) || !n)
		return dflt;
	return n;
}

/* One transfer's watch: libdebuginfod calls progress() about once a
 * second while it waits and after each chunk. */
struct dbgd_watch {
	struct symres *r;
	const char *what;	/* the build-id, for progress lines */
	uint64_t max;
	int64_t start_ms, last_ms, shown_ms;
	long last_bytes;
	int why;		/* -EFBIG, -ETIMEDOUT: why progress() stopped it */
};

static int dbgd_progress(debuginfod_client *c, long a, long b)
{
	struct dbgd_watch *w = dbgd_api.get_user_data(c);
	int64_t now = clk_now_ms();

	if (!w)
		return 0;
	if ((a > 0 && (uint64_t)a > w->max) || (b > 0 && (uint64_t)b > w->max)) {
		w->why = -EFBIG;
		return 1;
	}
	if (a != w->last_bytes) {
		w->last_bytes = a;
		w->last_ms = now;
	} else if (now - w->last_ms > (int64_t)w->r->dbgd_timeout_s * 1000) {
		w->why = -ETIMEDOUT;
		return 1;
	}
	if (w->r->progress && now - w->start_ms >= SYMRES_DBGD_PROGRESS_MS &&
	    now - w->shown_ms >= SYMRES_DBGD_PROGRESS_MS) {
		w->shown_ms = now;
		w->r->progress(w->r->progress_arg, w->what, a > 0 ? (uint64_t)a : 0,
			       b > 0 ? (uint64_t)b : 0);
	}
	return 0;
}

/* The client when DEBUGINFOD_URLS asks for one and libdebuginfod loads
 * (dlopen on first use: most reports never need it, and linking it costs
 * every start its curl and TLS libraries); NULL otherwise. */
static debuginfod_client *dbgd_client(struct symres *r)
{
	const char *urls = getenv("DEBUGINFOD_URLS");

	if (r->no_debuginfod || !urls || !*urls)
		return NULL;
	if (!r->dbgd_tried) {
		r->dbgd_tried = 1;
		pthread_once(&dbgd_once, dbgd_load);
		r->dbgd = dbgd_loaded ? dbgd_api.begin() : NULL;
		r->dbgd_missing = !dbgd_loaded;
		if (r->dbgd)
			dbgd_api.set_progressfn(r->dbgd, dbgd_progress);
		/* libdebuginfod dprintf()s to its verbose fd when a transfer is
		 * cancelled, -1 unless set, and glibc 2.36's vdprintf() leaks
		 * its buffer on a bad fd: give it /dev/null (a library prints
		 * nothing) */
		r->dbgd_null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (r->dbgd && r->dbgd_null >= 0 && !getenv("DEBUGINFOD_VERBOSE"))
			dbgd_api.set_verbose_fd(r->dbgd, r->dbgd_null);
		r->dbgd_max = env_u64("DEBUGINFOD_MAXSIZE", SYMRES_DBGD_MAX_SIZE);
		r->dbgd_timeout_s = (unsigned)env_u64("DEBUGINFOD_TIMEOUT",
						      SYMRES_DBGD_TIMEOUT_S);
		if (r->dbgd_timeout_s > 3600)
			r->dbgd_timeout_s = 3600;
	}
	return r->dbgd;
}

/* The memo's entry for (bid, kind), or NULL. */
static struct dbgd_memo *memo_find(struct symres *r, const uint8_t *bid, size_t len, int kind)
{
	for (size_t i = 0; i < r->nr_dbgd_memo; i++) {
		struct dbgd_memo *m = &r->dbgd_memo[i];

		if (m->kind == kind && m->len == len && !memcmp(m->bid, bid, len))
			return m;
	}
	return NULL;
}

static void memo_add(struct symres *r, const uint8_t *bid, size_t len, int kind, int err,
		     const char *path)
{
	struct dbgd_memo *m;

	if (r->nr_dbgd_memo >= SYMRES_DBGD_MAX_MEMO ||
	    array_grow(&r->dbgd_memo, &r->dbgd_memo_cap, r->nr_dbgd_memo + 1,
		      sizeof(*r->dbgd_memo), 16))
		return;
	m = &r->dbgd_memo[r->nr_dbgd_memo];
	*m = (struct dbgd_memo){ .len = (uint8_t)len, .kind = (uint8_t)kind, .err = err };
	memcpy(m->bid, bid, len);
	m->path = path ? strdup(path) : NULL;
	if (path && !m->path)
		return;
	r->nr_dbgd_memo++;
}

/* A file the server sent, checked: fd kept, or closed and -errno. */
static int dbgd_check(struct symres *r, int fd, const uint8_t *bid, size_t len)
{
	uint8_t have[64];
	size_t hlen = 0;
	struct stat st;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if ((uint64_t)st.st_size > r->dbgd_max) {
		close(fd);
		return -EFBIG;
	}
	if (elfimage_peek_build_id(fd, have, sizeof(have), &hlen) || hlen != len ||
	    memcmp(have, bid, len)) {
		close(fd);
		return -ESTALE;
	}
	r->dbgd_stats.bytes = arith_sat_add(r->dbgd_stats.bytes, (uint64_t)st.st_size);
	return fd;
}

static void dbgd_count(struct symres *r, int err)
{
	struct symres_dbgd_stats *s = &r->dbgd_stats;

	switch (err) {
	case 0:
		s->found++;
		break;
	case -ENOENT:
		s->not_found++;
		break;
	case -ESTALE:
		s->wrong_build++;
		break;
	case -EFBIG:
		s->too_big++;
		break;
	case -ETIMEDOUT:
		s->timed_out++;
		r->dbgd_down = 1;	/* one dead server costs one timeout */
		break;
	default:
		s->failed++;
		r->dbgd_last_err = err;
		break;
	}
}

/* Asks the servers for real: fd or -errno, *path set when found. */
static int dbgd_ask(struct symres *r, debuginfod_client *c, const uint8_t *bid, size_t len,
		    int kind, char **path)
{
	char hex[129];
	struct dbgd_watch w = { .r = r, .what = hex, .max = r->dbgd_max };
	int fd;

	hex_encode(bid, len, hex);
	w.start_ms = w.last_ms = w.shown_ms = clk_now_ms();
	r->dbgd_stats.asked++;
	dbgd_api.set_user_data(c, &w);
	if (kind == SYMRES_DBGD_DEBUGINFO)
		fd = dbgd_api.find_debuginfo(c, bid, (int)len, path);
	else
		fd = dbgd_api.find_executable(c, bid, (int)len, path);
	dbgd_api.set_user_data(c, NULL);
	if (w.why && fd >= 0) {
		close(fd);
		fd = w.why;
	} else if (w.why) {
		fd = w.why;
	} else if (fd == -ETIME) {
		fd = -ETIMEDOUT;	/* libdebuginfod's own DEBUGINFOD_TIMEOUT */
	}
	if (fd >= 0)
		fd = dbgd_check(r, fd, bid, len);
	return fd;
}

int symres_dbgd_find(struct symres *r, const uint8_t *bid, size_t len, int kind, char **path)
{
	debuginfod_client *c;
	struct dbgd_memo *m;
	int fd;

	*path = NULL;
	if (!len || len > sizeof(m->bid) || !(c = dbgd_client(r)))
		return -ENOENT;
	m = memo_find(r, bid, len, kind);
	if (m) {
		if (m->err || !m->path)
			return m->err ? m->err : -ENOENT;
		fd = fs_open_regular(m->path, 0);
		if (fd >= 0 && !(*path = strdup(m->path))) {
			close(fd);
			return -ENOMEM;
		}
		return fd;
	}
	if (r->dbgd_down) {
		r->dbgd_stats.skipped++;
		return -ETIMEDOUT;
	}
	fd = dbgd_ask(r, c, bid, len, kind, path);
	if (fd < 0) {
		free(*path);
		*path = NULL;
	}
	dbgd_count(r, fd < 0 ? fd : 0);
	memo_add(r, bid, len, kind, fd < 0 ? fd : 0, fd >= 0 ? *path : NULL);
	return fd;
}

const struct symres_dbgd_stats *symres_dbgd_stats(const struct symres *r)
{
	return &r->dbgd_stats;
}

/* What went wrong with the servers, as one sentence, or NULL. */
static const char *dbgd_problems(struct symres *r)
{
	const struct symres_dbgd_stats *s = &r->dbgd_stats;
	uint64_t refused = s->wrong_build + s->too_big;
	int n = 0;

	if (!refused && !s->timed_out && !s->failed)
		return NULL;
	n = snprintf(r->dbgd_warn, sizeof(r->dbgd_warn), "debuginfod:");
	if (refused)
		n += snprintf(r->dbgd_warn + n, sizeof(r->dbgd_warn) - (size_t)n,
			      " %llu file%s refused (%llu of another build, %llu over "
			      "%llu MB: DEBUGINFOD_MAXSIZE)%s", (unsigned long long)refused,
			      refused == 1 ? "" : "s", (unsigned long long)s->wrong_build,
			      (unsigned long long)s->too_big,
			      (unsigned long long)(r->dbgd_max >> 20),
			      s->timed_out || s->failed ? ";" : "");
	if (s->timed_out && n > 0 && (size_t)n < sizeof(r->dbgd_warn))
		n += snprintf(r->dbgd_warn + n, sizeof(r->dbgd_warn) - (size_t)n,
			      " no answer for %u s, %llu more request%s not made "
			      "(DEBUGINFOD_TIMEOUT)%s", r->dbgd_timeout_s,
			      (unsigned long long)s->skipped, s->skipped == 1 ? "" : "s",
			      s->failed ? ";" : "");
	if (s->failed && n > 0 && (size_t)n < sizeof(r->dbgd_warn))
		snprintf(r->dbgd_warn + n, sizeof(r->dbgd_warn) - (size_t)n,
			 " %llu request%s failed (%s)", (unsigned long long)s->failed,
			 s->failed == 1 ? "" : "s", strerror(-r->dbgd_last_err));
	return r->dbgd_warn;
}

const char *symres_warning(struct symres *r)
{
	if (!r)
		return NULL;
	if (r->dbgd_missing)
		return dbgd_err;
	return dbgd_problems(r);
}
