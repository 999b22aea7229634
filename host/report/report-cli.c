// SPDX-License-Identifier: MIT
/* Shared report/annotate/export options (host/report/report-cli.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "host/collect/stats.h"
#include "host/report/report-cli.h"
#include "lib/array.h"
#include "lib/numparse.h"
#include "lib/fs.h"

static int unsafe_byte(unsigned char c)
{
	return (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f;
}

/* Bytes of buf[0..len) before the first unsafe_byte(): sixteen (SSE2) or
 * eight at a time (a report -l writes 100 k rows through here, after its
 * rows are formatted: on the critical path), a word with a byte below 0x20
 * or a 0x7f looked at byte by byte.  With SSE2 a newline or tab does not
 * send its block there (one ends every row). */
static size_t safe_prefix(const char *buf, size_t len)
{
	const uint64_t ones = 0x0101010101010101ull, highs = ones * 0x80;
	size_t i = 0;

#ifdef __SSE2__
	const __m128i ctl = _mm_set1_epi8(0x1f), nl = _mm_set1_epi8('\n'),
		      tab = _mm_set1_epi8('\t'), rub = _mm_set1_epi8(0x7f);

	for (; i + 16 <= len; i += 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)(buf + i));
		__m128i low = _mm_cmpeq_epi8(_mm_min_epu8(x, ctl), x);	/* x <= 0x1f */
		__m128i ok = _mm_or_si128(_mm_cmpeq_epi8(x, nl), _mm_cmpeq_epi8(x, tab));
		__m128i bad = _mm_or_si128(_mm_andnot_si128(ok, low), _mm_cmpeq_epi8(x, rub));
		int m = _mm_movemask_epi8(bad);

		if (m)
			return i + (size_t)__builtin_ctz((unsigned)m);
	}
#endif
	for (; i + 8 <= len; i += 8) {
		uint64_t x, del;

		memcpy(&x, buf + i, 8);
		del = x ^ (ones * 0x7f);
		if (!(((x - ones * 0x20) & ~x & highs) | ((del - ones) & ~del & highs)))
			continue;
		for (size_t k = i; k < i + 8; k++)
			if (unsafe_byte((unsigned char)buf[k]))
				return k;
	}
	for (; i < len; i++)
		if (unsafe_byte((unsigned char)buf[i]))
			return i;
	return len;
}

static ssize_t safe_write(void *cookie, const char *buf, size_t len)
{
	FILE *f = cookie;
	char tmp[4096];
	size_t done = 0;

	/* Escaped text, nearly always: written as it is, no copy. */
	if (safe_prefix(buf, len) == len)
		return fwrite(buf, 1, len, f) == len ? (ssize_t)len : -1;
	done = 0;
	while (done < len) {
		size_t n = len - done < sizeof(tmp) ? len - done : sizeof(tmp);

		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)buf[done + i];

			tmp[i] = unsafe_byte(c) ? '?' : (char)c;
		}
		if (fwrite(tmp, 1, n, f) != n)
			return done ? (ssize_t)done : -1;
		done += n;
	}
	return (ssize_t)len;
}

static int safe_close(void *cookie)
{
	return fflush(cookie) ? -1 : 0;
}

FILE *report_cli_safe_stream(FILE *f)
{
	static const cookie_io_functions_t io = { .write = safe_write, .close = safe_close };

	return fopencookie(f, "w", io);
}

/* --guest-root [GUEST=]DIR: GUEST=DIR when '=' comes before any '/'. */
static int rc_guest_root(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	struct report_cli *c = base;
	char *eq = strchr(arg, '=');

	(void)opt;
	if (c->nr_roots >= REPORT_CLI_MAX_ROOTS) {
		snprintf(err, errlen, "at most %d --guest-root options", REPORT_CLI_MAX_ROOTS);
		return -1;
	}
	if (eq && eq > arg && !memchr(arg, '/', (size_t)(eq - arg))) {
		*eq = '\0';
		c->roots[c->nr_roots++] = (struct symres_root){ .guest = arg, .dir = eq + 1 };
	} else {
		c->roots[c->nr_roots++] = (struct symres_root){ .dir = arg };
	}
	return 0;
}

/* --separate LIST, --merge LIST: what the rows keep apart. */
static int rc_keep(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	struct report_cli *c = base;
	unsigned mask;

	if (report_parse_keep(arg, &mask)) {
		num_bad_value(err, errlen, opt, arg, "guest,lib,kernel,thread,cpu,cgroup,all,none");
		return -1;
	}
	if (!strcmp(opt, "--separate"))
		c->ro.keep |= mask;
	else
		c->ro.keep &= ~mask;
	return 0;
}

static int rc_exclude(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	struct report_cli *c = base;

	if (!report_parse_exclude(arg, &c->ro.exclude))
		return 0;
	num_bad_value(err, errlen, opt, arg, "idle, boot or idle,boot");
	return -1;
}

static int rc_previous(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	struct report_cli *c = base;

	(void)opt, (void)arg, (void)err, (void)errlen;
	c->ro.which = "previous";
	return 0;
}

#define RC struct report_cli
const struct opt_def report_cli_options[] = {
	{ .name = "session-dir", .key = 'd', .metavar = "DIR",
	  .help = "session to read (default ./opvm_data)", OPT_STRING(RC, ro.session_dir) },
	{ .name = "guest-root", .metavar = "[GUEST=]DIR", .help = "the guest's root file "
	  "system (binaries, boot/System.map-*, lib/modules); repeatable",
	  OPT_CALLBACK(rc_guest_root) },
	{ .name = "vmlinux", .metavar = "FILE", .help = "guest kernel: a vmlinux with "
	  "symbols, or a stripped vmlinux/vmlinuz for annotate's code",
	  OPT_STRING(RC, sc.vmlinux) },
	{ .name = "system-map", .metavar = "FILE", .help = "guest System.map",
	  OPT_STRING(RC, sc.system_map) },
	{ .name = "kallsyms", .metavar = "FILE", .help = "the same from a copy of the "
	  "guest's /proc/kallsyms", OPT_STRING(RC, sc.system_map) },
	{ .name = "separate", .metavar = "LIST", .help = "keep apart: "
	  "guest,lib,kernel,thread,cpu,cgroup", OPT_CALLBACK(rc_keep) },
	{ .name = "merge", .metavar = "LIST", .help = "merge: "
	  "guest,lib,kernel,thread,cpu,cgroup,all", OPT_CALLBACK(rc_keep) },
	{ .name = "threshold", .key = 't', .metavar = "PCT", .help = "hide entries below "
	  "PCT percent", OPT_DECIMAL(RC, threshold, 0, 100),
	  .want = "a percentage, 0 to 100" },
	{ .name = "source-dir", .metavar = "DIR", .help = "where source files are "
	  "(annotate --source)", OPT_STRING(RC, sc.source_dir) },
	{ .name = "no-host-kernel", .help = "never use the host's /boot or /lib/modules",
	  OPT_FLAG(RC, sc.no_host_kernel) },
	{ .name = "previous", .help = "read samples/previous instead of current",
	  OPT_CALLBACK(rc_previous) },
	{ .name = "since", .metavar = "TIME", .help = "the windows of a windowed session "
	  "(attach --window, exporter --continuous) from TIME: Unix seconds, RFC 3339 or "
	  "HH:MM (today)", OPT_TIME(RC, ro.since_ms) },
	{ .name = "until", .metavar = "TIME", .help = "... up to TIME (default now)",
	  OPT_TIME(RC, ro.until_ms) },
	{ .name = "exclude", .metavar = "idle,boot", .help = "leave out (idle) and "
	  "(firmware/boot) samples", OPT_CALLBACK(rc_exclude) },
	{ .name = "PROFILE SPEC", .help = "guest:NAME image:PATH tgid:N tid:N cpu:N "
	  "event:NAME (globs for guest and image; comma lists)", .flags = OPTS_POSITIONAL },
	{ 0 },
};
#undef RC

void report_cli_init(struct report_cli *c)
{
	memset(c, 0, sizeof(*c));
	c->ro.session_dir = "./opvm_data";
	c->ro.which = "current";
	c->ro.keep = REPORT_KEEP_DEFAULT;
	c->ro.since_ms = c->ro.until_ms = -1;	/* not given: range_finish() */
}

int report_cli_spec(struct report_cli *c, char *arg, char *err, size_t errlen)
{
	char copy[128];

	snprintf(copy, sizeof(copy), "%s", arg);
	if (report_filter_add(&c->ro.filter, arg)) {
		snprintf(err, errlen, "'%s' is not a profile specification: use guest:NAME, "
			 "image:PATH, tgid:N, tid:N, cpu:N or event:NAME", copy);
		return -EINVAL;
	}
	return 0;
}

int report_cli_specs(struct report_cli *c, int argc, char **argv, int first,
		     char *err, size_t errlen)
{
	for (int i = first; i < argc; i++)
		if (report_cli_spec(c, argv[i], err, errlen))
			return -EINVAL;
	return 0;
}

/* A copy of s owned by c (freed by report_cli_release), or NULL when c
 * holds all it can or memory is short. */
static char *keep(struct report_cli *c, const char *s)
{
	char *p;

	if (!s || c->nr_owned >= ARRAY_SIZE(c->owned))
		return NULL;
	p = strndup(s, PATH_MAX);
	if (p)
		c->owned[c->nr_owned++] = p;
	return p;
}

static int have_root(const struct report_cli *c, const char *dir)
{
	for (size_t i = 0; i < c->nr_roots; i++)
		if (!strcmp(c->roots[i].dir, dir))
			return 1;
	return 0;
}

/* One guest's session.json "symbols": roots unless the command line gave
 * some, System.map and vmlinux unless given. */
static void take_symbols(struct report_cli *c, json_t *sym, int user_roots)
{
	json_t *roots = json_object_get(sym, "guest_roots"), *v;
	const char *map = json_string_value(json_object_get(sym, "system_map"));
	const char *vml = json_string_value(json_object_get(sym, "vmlinux"));
	const char *fc = json_string_value(json_object_get(sym, "fetch_cache"));
	size_t i;

	json_array_foreach(roots, i, v) {
		const char *s = json_string_value(v), *eq;
		char *dir;

		if (user_roots || !s || c->nr_roots >= REPORT_CLI_MAX_ROOTS || have_root(c, s))
			continue;
		dir = keep(c, s);
		if (!dir)
			return;
		/* GUEST=DIR as run/attach wrote it: absolute DIR after the '=' */
		eq = strchr(dir, '=');
		if (eq && !memchr(dir, '/', (size_t)(eq - dir))) {
			dir[eq - dir] = '\0';
			c->roots[c->nr_roots++] = (struct symres_root){ .guest = dir, .dir = eq + 1 };
		} else {
			c->roots[c->nr_roots++] = (struct symres_root){ .dir = dir };
		}
	}
	if (!c->sc.system_map && map && map[0] == '/')
		c->sc.system_map = keep(c, map);
	if (!c->sc.vmlinux && vml && vml[0] == '/')
		c->sc.vmlinux = keep(c, vml);
	if (!c->sc.fetch_cache && fc && fc[0] == '/')
		c->sc.fetch_cache = keep(c, fc);	/* what run/attach fetched */
}

/* Every guest's <session>/guests/G/samples/<which>/session.json; the
 * first guest naming a System.map or vmlinux gives it. */
static void session_symbols(struct report_cli *c)
{
	int user_roots = c->nr_roots > 0;
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	if (snprintf(path, sizeof(path), "%s/guests", c->ro.session_dir) >= (int)sizeof(path))
		return;
	d = opendir(path);
	if (!d)
		return;		/* the report says what is wrong with the session */
	while ((de = readdir(d))) {
		json_error_t jerr;
		json_t *root;
		int fd;

		if (de->d_name[0] == '.' ||
		    snprintf(path, sizeof(path), "%s/guests/%s/samples/%s/session.json",
			     c->ro.session_dir, de->d_name, c->ro.which) >= (int)sizeof(path))
			continue;
		fd = fs_open_regular(path, O_NOFOLLOW);
		if (fd < 0)
			continue;
		root = stats_json_loadfd(fd, JSON_DECODE_INT_AS_REAL, &jerr);
		close(fd);
		if (json_is_object(json_object_get(root, "symbols")))
			take_symbols(c, json_object_get(root, "symbols"), user_roots);
		json_decref(root);
	}
	closedir(d);
}

void report_cli_release(struct report_cli *c)
{
	for (size_t i = 0; i < c->nr_owned; i++)
		free(c->owned[i]);
	c->nr_owned = 0;
	free(c->range_which);
	c->range_which = NULL;
}

/* --since alone: until now; --until alone: from the first window. */
static void range_finish(struct report_cli *c)
{
	struct timespec ts;

	c->ro.range = (c->ro.since_ms >= 0 ? 1 : 0) | (c->ro.until_ms >= 0 ? 2 : 0);
	if (!c->ro.range)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (!(c->ro.range & 2))
		c->ro.until_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + 1;
	if (!(c->ro.range & 1))
		c->ro.since_ms = 0;
	c->ro.range = 1;
}

/* A range's symbols: the last window's session.json says them. */
static void range_symbols(struct report_cli *c)
{
	char (*names)[STORE_WINDOW_NAME_MAX] = calloc(REPORT_MAX_WINDOWS, sizeof(*names));
	int n = names ? store_windows(c->ro.session_dir, c->ro.since_ms, c->ro.until_ms,
				      names, REPORT_MAX_WINDOWS) : -ENOMEM;

	if (n > REPORT_MAX_WINDOWS)
		n = REPORT_MAX_WINDOWS;
	if (n > 0 && (c->range_which = strdup(names[n - 1]))) {
		c->ro.which = c->range_which;
		session_symbols(c);
		c->ro.which = "current";
	}
	free(names);
}

void report_cli_finish(struct report_cli *c)
{
	range_finish(c);
	if (c->ro.range)
		range_symbols(c);
	session_symbols(c);
	c->sc.session_dir = c->ro.session_dir;
	c->sc.roots = c->roots;
	c->sc.nr_roots = c->nr_roots;
}
