// SPDX-License-Identifier: MIT
/*
 * opvm top's drill-down: profile one guest for a few seconds with
 * `opvm attach` (a child process, so the screen keeps refreshing), then read
 * its top symbols from `opvm report -l --format json`.  The session stays in
 * its directory for `opvm report` / `annotate` afterwards.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "host/cli/subcmd.h"
#include "host/cli/top.h"
#include "lib/clock.h"
#include "lib/fs.h"

int top_profile_start(struct top_profile *p, const struct top_opts *o,
		      const struct hs_guest *g)
{
	char secs[16], sess[300], log[300], out[300];
	const char *argv[24];
	int a = 0;
	pid_t pid;

	memset(p, 0, sizeof(*p));
	snprintf(p->guest, sizeof(p->guest), "%s", g->name);
	if (strcmp(g->source, "libvirt") && !g->qmp[0]) {
		snprintf(p->msg, sizeof(p->msg), "%s has no QMP socket: start QEMU with "
			 "-qmp unix:PATH,server=on,wait=off to profile it", g->name);
		p->stage = -1;
		return -ENOENT;
	}
	snprintf(p->dir, sizeof(p->dir), "%s/opvm-top.XXXXXX", o->session_base);
	if (!mkdtemp(p->dir)) {
		snprintf(p->msg, sizeof(p->msg), "cannot make a directory in %s: %s",
			 o->session_base, strerror(errno));
		p->stage = -1;
		return -errno;
	}
	snprintf(secs, sizeof(secs), "%u", o->profile_s);
	snprintf(sess, sizeof(sess), "%s/session", p->dir);
	snprintf(log, sizeof(log), "%s/attach.log", p->dir);
	snprintf(out, sizeof(out), "%s/attach.out", p->dir);
	argv[a++] = "opvm";
	argv[a++] = "attach";
	if (!strcmp(g->source, "libvirt")) {
		argv[a++] = g->name;
		if (o->uri) {
			argv[a++] = "-c";
			argv[a++] = o->uri;
		}
	} else {
		argv[a++] = "--qmp";
		argv[a++] = g->qmp;
		argv[a++] = "--name";
		argv[a++] = fs_valid_name(g->name) ? g->name : "guest";
		if (g->channel[0]) {
			argv[a++] = "--channel";
			argv[a++] = g->channel;
		}
	}
	argv[a++] = "--duration";
	argv[a++] = secs;
	argv[a++] = "-d";
	argv[a++] = sess;
	argv[a] = NULL;
	pid = subcmd_spawn((char *const *)argv, out, log);
	if (pid < 0) {
		snprintf(p->msg, sizeof(p->msg), "cannot start opvm attach: %s", strerror((int)-pid));
		p->stage = -1;
		return (int)pid;
	}
	p->child = pid;
	p->stage = 1;
	p->started = ((double)clk_now_ns() / 1e9);
	p->seconds = o->profile_s;
	return 0;
}

static int start_report(struct top_profile *p, const struct top_opts *o)
{
	char sess[300], log[300], out[300];
	const char *argv[16];
	int a = 0;
	pid_t pid;

	snprintf(sess, sizeof(sess), "%s/session", p->dir);
	snprintf(log, sizeof(log), "%s/report.log", p->dir);
	snprintf(out, sizeof(out), "%s/report.json", p->dir);
	argv[a++] = "opvm";
	argv[a++] = "report";
	argv[a++] = "-l";
	argv[a++] = "--format";
	argv[a++] = "json";
	argv[a++] = "--session-dir";
	argv[a++] = sess;
	if (o->guest_root) {
		argv[a++] = "--guest-root";
		argv[a++] = o->guest_root;
	}
	if (o->system_map) {
		argv[a++] = "--system-map";
		argv[a++] = o->system_map;
	}
	argv[a] = NULL;
	pid = subcmd_spawn((char *const *)argv, out, log);
	if (pid < 0)
		return (int)pid;
	p->child = pid;
	p->stage = 2;
	return 0;
}

static int cmp_rows(const void *a, const void *b)
{
	json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "samples"));
	json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "samples"));

	return (x < y) - (x > y);
}

/* The top symbols of report.json into p.  0 or -errno. */
static int read_symbols(struct top_profile *p)
{
	char path[300];
	json_t *root, *rows, **v;
	size_t n;

	snprintf(path, sizeof(path), "%s/report.json", p->dir);
	root = json_load_file(path, 0, NULL);
	rows = json_object_get(root, "symbols");
	n = json_array_size(rows);
	v = calloc(n + 1, sizeof(*v));
	if (!root || !json_is_array(rows) || !v) {
		free(v);
		json_decref(root);
		return -EPROTO;
	}
	p->samples = 0;
	for (size_t i = 0; i < n; i++) {
		v[i] = json_array_get(rows, i);
		p->samples += (unsigned long long)json_integer_value(json_object_get(v[i], "samples"));
	}
	qsort(v, n, sizeof(*v), cmp_rows);
	for (p->nr_syms = 0; p->nr_syms < n && p->nr_syms < TOP_SYMS; p->nr_syms++) {
		struct top_sym *s = &p->syms[p->nr_syms];
		const char *sym = json_string_value(json_object_get(v[p->nr_syms], "symbol"));
		const char *img = json_string_value(json_object_get(v[p->nr_syms], "image"));
		const char *base = img ? strrchr(img, '/') : NULL;
		json_int_t c = json_integer_value(json_object_get(v[p->nr_syms], "samples"));

		snprintf(s->symbol, sizeof(s->symbol), "%s", sym ? sym : "(no symbol)");
		snprintf(s->image, sizeof(s->image), "%s", base ? base + 1 : img ? img : "?");
		s->percent = p->samples ? 100.0 * (double)c / (double)p->samples : 0;
	}
	free(v);
	json_decref(root);
	return 0;
}

/* The child of the current stage ended with status st. */
static void stage_done(struct top_profile *p, const struct top_opts *o, int st)
{
	char path[300], line[200];

	p->child = 0;
	if (p->stage == 1) {
		snprintf(path, sizeof(path), "%s/attach.log", p->dir);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			subcmd_last_message(path, line, sizeof(line));
			snprintf(p->msg, sizeof(p->msg), "opvm attach failed: %s (log: %s)", line, path);
			p->stage = -1;
		} else if (start_report(p, o)) {
			snprintf(p->msg, sizeof(p->msg), "cannot start opvm report");
			p->stage = -1;
		}
		return;
	}
	snprintf(path, sizeof(path), "%s/report.log", p->dir);
	if (!WIFEXITED(st) || WEXITSTATUS(st) || read_symbols(p)) {
		subcmd_last_message(path, line, sizeof(line));
		snprintf(p->msg, sizeof(p->msg), "opvm report failed: %s (log: %s)", line, path);
		p->stage = -1;
		return;
	}
	snprintf(p->msg, sizeof(p->msg), "%llu samples; session: %s/session", p->samples, p->dir);
	p->stage = 3;
}

int top_profile_poll(struct top_profile *p, const struct top_opts *o)
{
	int st;
	pid_t r;

	if (p->stage != 1 && p->stage != 2)
		return 0;
	r = waitpid(p->child, &st, WNOHANG);
	if (r == 0)
		return 0;
	if (r < 0) {
		snprintf(p->msg, sizeof(p->msg), "lost the profiling child: %s", strerror(errno));
		p->child = 0;
		p->stage = -1;
		return 1;
	}
	stage_done(p, o, st);
	return 1;
}

void top_profile_cancel(struct top_profile *p)
{
	int st;

	if (p->child <= 0)
		return;
	kill(p->child, SIGINT);
	waitpid(p->child, &st, 0);
	p->child = 0;
	p->stage = -1;
	snprintf(p->msg, sizeof(p->msg), "profiling stopped");
}
