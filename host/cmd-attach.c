// SPDX-License-Identifier: MIT
/*
 * opvm attach: profile running QEMU guests through their gdbstub, found by
 * libvirt domain name (or all running domains), or by a QMP socket.
 *
 * Also the profiling session shared with `opvm run` (host/cmd-qemu.h):
 * options, collector set-up, summary.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "events/events.h"
#include "host/cmd-qemu.h"
#include "host/collector.h"
#include "host/commands.h"
#include "host/stats.h"
#include "lib/log.h"
#include "host/store.h"
#include "lib/util.h"
#include "vmm/qemu-sampler.h"
#include "vmm/qmp.h"
#include "vmm/sampler.h"
#include "vmm/virt.h"

/* ---- shared with opvm run ---------------------------------------------- */

static volatile sig_atomic_t *sig_flag;

static void on_signal(int sig)
{
	(void)sig;
	if (sig_flag)
		*sig_flag = 1;
}

void qprof_signals(volatile sig_atomic_t *flag)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sig_flag = flag;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* "-s V", "--long V" or "--long=V": 1 and *val set, 0 not this option,
 * -1 value missing. */
static int opt_arg(int argc, char **argv, int *i, const char *s, const char *l,
		   const char **val)
{
	const char *a = argv[*i];
	size_t ll = strlen(l);

	if ((s && !strcmp(a, s)) || !strcmp(a, l)) {
		if (*i + 1 >= argc)
			return -1;
		*val = argv[++*i];
		return 1;
	}
	if (!strncmp(a, l, ll) && a[ll] == '=') {
		*val = a + ll + 1;
		return 1;
	}
	return 0;
}

const char qprof_tree_usage[] =
"  --max-files N      sample files per guest (default 16384); past a cap\n"
"  --max-dirs N       directories per guest (default 65536); samples go\n"
"  --max-disk SIZE    bytes per guest, e.g. 2G (default 1G); to the\n"
"                     {overflow} bucket, counted in the summary\n"
"  --max-mapped N     sample files mapped at once per guest (default 256)\n"
"  --max-model-mem SIZE  memory for one guest's processes, mappings and\n"
"                     file names (default 64M; all guests together 512M)\n"
"  --umask MASK       session tree modes from MASK, e.g. 022 (default:\n"
"                     private, directories 0700 and files 0600)\n";

int qprof_parse_tree_opt(struct qprof_opts *o, int argc, char **argv, int *i)
{
	static const struct {
		const char *name;
		size_t off;
		int size;	/* units allowed */
	} caps[] = {
		{ "--max-files", offsetof(struct store_limits, max_files), 0 },
		{ "--max-dirs", offsetof(struct store_limits, max_dirs), 0 },
		{ "--max-mapped", offsetof(struct store_limits, max_mapped), 0 },
		{ "--max-disk", offsetof(struct store_limits, max_disk), 1 },
	};
	const char *val = NULL;
	char *end;
	int r;

	for (size_t k = 0; k < sizeof(caps) / sizeof(caps[0]); k++) {
		uint64_t v;

		r = opt_arg(argc, argv, i, NULL, caps[k].name, &val);
		if (!r)
			continue;
		if (r < 0) {
			pr_err("option %s needs a value", caps[k].name);
			return -1;
		}
		/* counts take units too: --max-files 64k */
		if (util_parse_size(val, &v) || v == 0) {
			pr_err("%s wants a positive %s, not '%s'", caps[k].name,
			       caps[k].size ? "size (bytes, or with k, M, G)" : "number", val);
			return -1;
		}
		*(uint64_t *)((char *)&o->limits + caps[k].off) = v;
		return 1;
	}
	r = opt_arg(argc, argv, i, NULL, "--max-model-mem", &val);
	if (r) {
		if (r < 0 || util_parse_size(val, &o->model_max_bytes) ||
		    o->model_max_bytes < (1u << 20)) {
			pr_err("--max-model-mem wants a size of at least 1M, e.g. 128M%s%s%s",
			       r > 0 ? ", not '" : "", r > 0 ? val : "", r > 0 ? "'" : "");
			return -1;
		}
		return 1;
	}
	r = opt_arg(argc, argv, i, NULL, "--umask", &val);
	if (r < 0) {
		pr_err("option --umask needs a value, e.g. --umask 022");
		return -1;
	}
	if (r) {
		unsigned long m = strtoul(val, &end, 8);

		if (!*val || *end || m > 0777) {
			pr_err("--umask wants an octal mask such as 022 or 077, not '%s'", val);
			return -1;
		}
		o->umask = (unsigned)m;
		o->umask_set = 1;
		return 1;
	}
	return 0;
}

void qprof_apply_umask(const struct qprof_opts *o)
{
	umask(o->umask_set ? (mode_t)o->umask : 077);
}

int qprof_parse_opt(struct qprof_opts *o, int argc, char **argv, int *i)
{
	const char *a = argv[*i], *val = NULL;
	char *end;
	int r;

	r = qprof_parse_tree_opt(o, argc, argv, i);
	if (r)
		return r;

#define OPT_WITH_ARG(short_, long_) opt_arg(argc, argv, i, short_, long_, &val)

	if ((r = OPT_WITH_ARG("-F", "--rate")) != 0) {
		if (r < 0)
			goto missing;
		o->rate_hz = (unsigned)strtoul(val, &end, 10);
		if (*end || !o->rate_hz || o->rate_hz > 1000) {
			pr_err("-F wants a rate between 1 and 1000 samples per second per vCPU, not '%s'", val);
			return -1;
		}
		return 1;
	}
	if ((r = OPT_WITH_ARG("-e", "--event")) != 0) {
		if (r < 0)
			goto missing;
		o->event = val;
		return 1;
	}
	if ((r = OPT_WITH_ARG("-d", "--session-dir")) != 0) {
		if (r < 0)
			goto missing;
		o->session_dir = val;
		return 1;
	}
	if ((r = OPT_WITH_ARG(NULL, "--separate")) != 0) {
		if (r < 0)
			goto missing;
		if (store_parse_separate(val, &o->separate)) {
			pr_err("--separate takes none, lib, kernel, thread, cpu or all (comma-separated), not '%s'", val);
			return -1;
		}
		o->separate_set = 1;
		return 1;
	}
	if ((r = OPT_WITH_ARG(NULL, "--duration")) != 0) {
		double s;

		if (r < 0)
			goto missing;
		s = strtod(val, &end);
		if (*end || s <= 0 || s > 1e7) {
			pr_err("--duration wants seconds, e.g. --duration 30, not '%s'", val);
			return -1;
		}
		o->duration_ms = (uint64_t)(s * 1000);
		return 1;
	}
	if (!strcmp(a, "--append-samples")) {
		o->append = 1;
		return 1;
	}
	return 0;
#undef OPT_WITH_ARG
missing:
	pr_err("option %s needs a value", a);
	return -1;
}

int qprof_resolve_rate(struct qprof_opts *o)
{
	struct events_db *db;
	struct opvm_event_spec spec;
	char err[256] = "";

	if (!o->event) {
		if (!o->rate_hz)
			o->rate_hz = QEMU_SAMPLER_DEFAULT_HZ;
		return 0;
	}
	db = events_db_load(NULL, 0, err, sizeof(err));
	if (!db) {
		pr_err("cannot load the events database: %s", err[0] ? err : strerror(errno));
		return -1;
	}
	if (events_parse_spec(db, o->event, &spec, err, sizeof(err))) {
		pr_err("%s", err);
		events_db_free(db);
		return -1;
	}
	if (!(spec.event->flags & OPVM_EV_TIMER)) {
		pr_err("the QEMU gdbstub backend samples on a timer only: use -e TIMER[:period_us] "
		       "or -F HZ (counter events like %s need the built-in VMM: opvm run --vmm=kvm)",
		       spec.event->name);
		events_db_free(db);
		return -1;
	}
	if (o->rate_hz)
		pr_warn("-e %s sets the rate; -F %u ignored", o->event, o->rate_hz);
	o->rate_hz = events_spec_rate_hz(&spec);
	events_db_free(db);
	if (o->rate_hz > 1000) {
		pr_err("TIMER period below 1000 us: the gdbstub sampler stops the guest at most 1000 times a second");
		return -1;
	}
	return 0;
}

int qprof_collect(const struct qprof_opts *o, struct qprof_target *t, size_t n,
		  volatile sig_atomic_t *stop)
{
	struct collector_config cfg = {
		.session_dir = o->session_dir ? o->session_dir : "./opvm_data",
		.separate = o->separate_set ? o->separate : OPVM_SEP_LIB,
		.append = o->append,
		.nr_events = 1,
		.sync_ms = o->sync_ms ? o->sync_ms : 1000,
		.hold_ms = 2000,
		.mode = "gdbstub-timer",
		.rate_hz = o->rate_hz,
		.status_line = isatty(STDERR_FILENO),
		.store_limits = o->limits,
		.public_tree = o->umask_set,
		.model_max_bytes = (size_t)o->model_max_bytes,
	};
	struct collector *c;
	struct cguest **gs = calloc(n ? n : 1, sizeof(*gs));
	int err, ret = -1;

	snprintf(cfg.events[0].name, sizeof(cfg.events[0].name), "TIMER");
	cfg.events[0].count = 1000000 / (o->rate_hz ? o->rate_hz : QEMU_SAMPLER_DEFAULT_HZ);
	c = gs ? collector_new(&cfg) : NULL;
	if (!c) {
		pr_err("cannot set up the session in %s: %s", cfg.session_dir, strerror(errno));
		goto out_fds;
	}
	for (size_t i = 0; i < n; i++) {
		gs[i] = collector_add_guest(c, t[i].name, t[i].nr_vcpus);
		if (!gs[i]) {
			pr_err("cannot add guest '%s' to the session: %s", t[i].name, strerror(errno));
			goto out;
		}
		if (t[i].chan_fd >= 0) {
			/* the collector reads the channel and tells the
			 * sampler each HELLO (cguest_set_sampler()) */
			err = cguest_set_channel(gs[i], t[i].chan_fd, t[i].reconnect,
						 t[i].reconnect_arg);
			t[i].chan_fd = -1;
			if (err < 0) {
				pr_err("cannot read the channel of '%s': %s", t[i].name, strerror(-err));
				goto out;
			}
		}
		cguest_set_sampler(gs[i], t[i].sampler);
	}
	/* Start only once every guest is registered: a sampler pushes into
	 * rings the collector must already own. */
	for (size_t i = 0; i < n; i++) {
		struct sampler_sink sink = cguest_sink(gs[i]);

		err = t[i].sampler->ops->start(t[i].sampler, &sink);
		if (err) {
			pr_err("cannot start sampling '%s': %s", t[i].name, strerror(-err));
			goto out;
		}
	}
	err = collector_run(c, stop, o->duration_ms);
	ret = 0;
	if (err) {
		pr_err("profiling stopped early: %s; the samples taken so far are kept", strerror(-err));
		ret = -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct sampler *s = t[i].sampler;
		const char *why = s->ops->last_error(s);
		int st = s->ops->status(s);

		if (st < 0) {
			pr_err("guest '%s': %s; the samples taken so far are kept",
			       t[i].name, why ? why : strerror(-st));
			ret = -1;
		}
	}
out:
	/* Stop the samplers before the collector frees their rings. */
	for (size_t i = 0; i < n; i++)
		t[i].sampler->ops->stop(t[i].sampler);
	collector_free(c);
out_fds:
	for (size_t i = 0; i < n; i++) {
		if (t[i].chan_fd >= 0) {
			close(t[i].chan_fd);
			t[i].chan_fd = -1;
		}
	}
	free(gs);
	return ret;
}

struct app_sum {
	size_t target;
	char app[512];
	uint64_t samples;
};

struct sum_ctx {
	struct qprof_target *t;
	size_t n;
	struct app_sum *apps;
	size_t nr, cap;
	uint64_t *totals;
	size_t bad;
};

static int sum_file(const struct store_entry *e, void *arg)
{
	struct sum_ctx *sc = arg;
	struct sfile_reader *r;
	const struct sfile_info *info;
	size_t ti, k;

	for (ti = 0; ti < sc->n; ti++)
		if (e->guest && !strcmp(e->guest, sc->t[ti].name))
			break;
	if (ti == sc->n)
		return 0;
	r = sfile_reader_open(e->path, NULL, 0);
	if (!r) {
		sc->bad++;
		return 0;
	}
	info = sfile_reader_info(r);
	for (k = 0; k < sc->nr; k++)
		if (sc->apps[k].target == ti && !strcmp(sc->apps[k].app, e->app ? e->app : "?"))
			break;
	if (k == sc->nr) {
		if (sc->nr == sc->cap) {
			size_t ncap = sc->cap ? sc->cap * 2 : 64;
			struct app_sum *na = realloc(sc->apps, ncap * sizeof(*na));

			if (!na) {
				sfile_reader_close(r);
				return -ENOMEM;
			}
			sc->apps = na;
			sc->cap = ncap;
		}
		sc->apps[k].target = ti;
		snprintf(sc->apps[k].app, sizeof(sc->apps[k].app), "%s", e->app ? e->app : "?");
		sc->apps[k].samples = 0;
		sc->nr++;
	}
	sc->apps[k].samples += info->total;
	sc->totals[ti] += info->total;
	sfile_reader_close(r);
	return 0;
}

static int cmp_app(const void *a, const void *b)
{
	const struct app_sum *x = a, *y = b;

	if (x->samples != y->samples)
		return x->samples < y->samples ? 1 : -1;
	return strcmp(x->app, y->app);
}

/* The "stats" object of a guest's session.json, or NULL. */
static json_t *load_session(const char *session_dir, const char *guest)
{
	char mangled[OPVM_MANGLE_MAX], path[4096];

	store_mangle(guest, strlen(guest), mangled);
	snprintf(path, sizeof(path), "%s/guests/%s/samples/current/session.json",
		 session_dir, mangled);
	return json_load_file(path, 0, NULL);
}

/* What the store did, when it is worth a line: caps reached, samples that
 * could not be filed. */
static void store_summary(json_t *root)
{
	json_t *so = json_object_get(root, "store"), *lim = json_object_get(so, "limits");
	uint64_t ovf = stats_json_get(so, "overflow_samples");
	uint64_t errs = stats_json_get(root, "store_errors");
	char a[OPVM_COUNT_BUF], b[OPVM_COUNT_BUF], c[OPVM_COUNT_BUF];

	if (!so)
		return;
	printf("  store: %s files, %s directories, %.1f MB on disk, at most %llu mapped at once\n",
	       stats_fmt_count(stats_json_get(so, "files"), a),
	       stats_fmt_count(stats_json_get(so, "dirs"), b),
	       stats_json_get(so, "disk_bytes") / 1e6,
	       (unsigned long long)stats_json_get(so, "mapped_peak"));
	if (ovf)
		printf("  %s samples went to the {overflow} bucket: the guest named more files than "
		       "the caps allow (files %llu, directories %llu, disk %.0f MB; raise them with "
		       "--max-files, --max-dirs, --max-disk)\n", stats_fmt_count(ovf, c),
		       (unsigned long long)stats_json_get(lim, "max_files"),
		       (unsigned long long)stats_json_get(lim, "max_dirs"),
		       stats_json_get(lim, "max_disk") / 1e6);
	if (errs)
		printf("  %s samples could not be filed (out of memory or disk); they are counted, "
		       "not in the files\n", stats_fmt_count(errs, c));
}

static const char *jcount(json_t *o, const char *key, char *buf)
{
	return stats_fmt_count(stats_json_get(o, key), buf);
}

void qprof_summary(const struct qprof_opts *o, struct qprof_target *t, size_t n,
		   const char *report_hint)
{
	const char *dir = o->session_dir ? o->session_dir : "./opvm_data";
	struct sum_ctx sc = { .t = t, .n = n };

	sc.totals = calloc(n ? n : 1, sizeof(*sc.totals));
	if (!sc.totals)
		return;
	store_walk(dir, "current", sum_file, &sc, NULL);
	qsort(sc.apps, sc.nr, sizeof(*sc.apps), cmp_app);
	for (size_t i = 0; i < n; i++) {
		struct sampler_stats ss = { 0 };
		struct qemu_sampler_info qi = { 0 };
		json_t *root = load_session(dir, t[i].name);
		json_t *st = json_object_get(root, "stats");
		char c1[OPVM_COUNT_BUF], c2[OPVM_COUNT_BUF], c3[OPVM_COUNT_BUF];
		int shown = 0;

		t[i].sampler->ops->get_stats(t[i].sampler, &ss);
		qemu_sampler_get_info(t[i].sampler, &qi);
		printf("guest %s (%s): %u vCPU%s sampled through QEMU's gdbstub, timer %u Hz "
		       "(mode gdbstub-timer)\n", t[i].name, t[i].how, t[i].nr_vcpus,
		       t[i].nr_vcpus == 1 ? "" : "s", o->rate_hz);
		printf("  samples: %llu in files (kernel %s, user %s); lost %s "
		       "(ring full); throttled %llu; guest stopped %llu times, "
		       "%.0f us each on average\n",
		       (unsigned long long)sc.totals[i], jcount(st, "kernel", c1),
		       jcount(st, "user", c2), jcount(st, "lost_overflow", c3),
		       (unsigned long long)ss.throttled, (unsigned long long)ss.exits,
		       ss.exits ? ss.cost_ns_total / 1e3 / ss.exits : 0.0);
		if (stats_json_get(st, "guest_lost"))
			printf("  the guest module dropped %s channel records (its buffer was full)\n",
			       jcount(st, "guest_lost", c1));
		if (stats_json_get(st, "lost_no_process") || stats_json_get(st, "lost_no_mapping"))
			printf("  late guest state: %s samples without a known process, %s "
			       "without a known mapping (filed under {anon...})\n",
			       jcount(st, "lost_no_process", c1), jcount(st, "lost_no_mapping", c2));
		store_summary(root);
		if (!qi.hellos)
			printf("  note: the guest module (opvm.ko) never said HELLO on the channel, so "
			       "samples are grouped by address space ({anon-cr3:...}) and the "
			       "kernel's KASLR offset is unknown: give `opvm report` a copy of the "
			       "guest's /proc/kallsyms (--kallsyms FILE) to name kernel code\n");
		else if (qi.hellos > 1 || qi.resets)
			printf("  the guest restarted during the session: %llu HELLOs, %llu resets seen\n",
			       (unsigned long long)qi.hellos, (unsigned long long)qi.resets);
		if (qi.paused_ticks)
			printf("  the guest was paused by someone else for %llu ticks (not sampled)\n",
			       (unsigned long long)qi.paused_ticks);
		for (size_t k = 0; k < sc.nr && shown < 8; k++) {
			if (sc.apps[k].target != i || !sc.totals[i])
				continue;
			if (!shown++)
				printf("  top applications:\n");
			printf("    %6.2f%%  %8llu  %s\n", 100.0 * sc.apps[k].samples / sc.totals[i],
			       (unsigned long long)sc.apps[k].samples, sc.apps[k].app);
		}
		json_decref(root);
	}
	if (sc.bad)
		printf("(%zu sample files could not be read)\n", sc.bad);
	printf("session: %s\nnext: opvm report --session-dir %s%s%s\n", dir, dir,
	       report_hint ? " " : "", report_hint ? report_hint : "");
	free(sc.apps);
	free(sc.totals);
}

/* ---- opvm attach ---------------------------------------------------------- */

static void attach_usage(FILE *f)
{
	fprintf(f,
"usage: opvm attach DOMAIN... | --all | --qmp SOCKET [--channel SOCKET] [options]\n"
"\n"
"Profiles running QEMU guests through QEMU's gdbstub (started at run time\n"
"through the monitor), until Ctrl-C, --duration, or the guests go away.\n"
"\n"
"  DOMAIN...          libvirt domains by name (their org.opvm.0 channel is\n"
"                     found in the domain XML)\n"
"  --all              every running libvirt domain\n"
"  -c, --connect URI  libvirt URI (default qemu:///system)\n"
"  --qmp SOCKET       a QEMU started by hand with -qmp unix:SOCKET,server=on\n"
"  --channel SOCKET   with --qmp: the org.opvm.0 port's unix socket\n"
"  --name NAME        with --qmp: the guest's name in the session (default qmp)\n"
"  --duration S       stop after S seconds\n"
"  -F, --rate HZ      samples per second per vCPU (default %d)\n"
"  -e, --event SPEC   TIMER[:period_us] (the gdbstub samples on a timer)\n"
"  -d, --session-dir D  where sample trees go (default ./opvm_data)\n"
"  --separate SPEC    none, lib, kernel, thread, cpu, all (default lib)\n"
"  --append           add to the current samples instead of starting afresh\n"
"                     (also --append-samples, as for opvm run)\n",
		QEMU_SAMPLER_DEFAULT_HZ);
	fputs(qprof_tree_usage, f);
}

int qprof_reconnect_unix(void *arg)
{
	int fd = util_connect_unix(arg);

	return fd < 0 ? -1 : fd;
}

struct attach_guest {
	struct virt_dom *dom;		/* libvirt, or */
	struct qmp *qmp;		/* QMP, open only while setting up: QEMU
					 * sends STOP/RESUME events for every
					 * sample, which nobody would read */
	const char *qmp_path;
	int gdb_on;			/* we started a gdbstub: stop it at the end */
	int cont_owed;			/* it stopped a running guest and no
					 * sampler took over: "cont" at the end */
	char chan_path[4096];
};

/* Runs an HMP command through libvirt or QMP; prints nothing. */
static int guest_hmp(struct attach_guest *ag, const char *cmd, char **out, char *err, size_t errlen)
{
	if (ag->dom)
		return virt_dom_monitor(ag->dom, cmd, 1, out, err, errlen);
	if (!ag->qmp)
		ag->qmp = qmp_open(ag->qmp_path, 5000);
	if (!ag->qmp)
		return -errno;
	return qmp_hmp(ag->qmp, cmd, out, 5000);
}

/* A QMP command through libvirt or QMP; fd (>= 0) goes along with it
 * (getfd).  *ret (may be NULL) gets a reference to the "return" member. */
static int guest_qmp(struct attach_guest *ag, const char *cmd, json_t *args, int fd,
		     json_t **ret, char *err, size_t errlen)
{
	json_t *msg, *reply, *e;
	char *text, *out = NULL;
	int r;

	if (ret)
		*ret = NULL;
	if (!ag->dom) {
		if (!ag->qmp)
			ag->qmp = qmp_open(ag->qmp_path, 5000);
		if (!ag->qmp)
			return -errno;
		return qmp_execute_fd(ag->qmp, cmd, args, fd, ret, err, errlen, 5000);
	}
	msg = json_pack("{s:s}", "execute", cmd);
	if (!msg || (args && json_object_set(msg, "arguments", args))) {
		json_decref(msg);
		return -ENOMEM;
	}
	text = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	if (!text)
		return -ENOMEM;
	r = fd >= 0 ? virt_dom_monitor_fd(ag->dom, text, fd, &out, err, errlen) :
		      virt_dom_monitor(ag->dom, text, 0, &out, err, errlen);
	free(text);
	if (r)
		return r;
	reply = json_loads(out, 0, NULL);
	free(out);
	e = json_object_get(reply, "error");
	if (e) {
		const char *desc = json_string_value(json_object_get(e, "desc"));

		util_seterr(err, errlen, "%s", desc ? desc : "unknown QMP error");
		r = -EREMOTEIO;
	} else if (!json_object_get(reply, "return")) {
		r = -EPROTO;
	} else if (ret) {
		*ret = json_incref(json_object_get(reply, "return"));
	}
	json_decref(reply);
	return r;
}

/*
 * The chardev opvm gives QEMU's gdbstub: one end of a socket pair, passed
 * with getfd and opened with chardev-add.  No listening socket, no path:
 * nobody else can connect.  Its fixed name marks a guest opvm profiles (a
 * second opvm finds it and stops) and lets a session after a killed opvm
 * find the one it left behind (disconnected).
 */
#define GDB_CHARDEV	"opvm-gdb"

/* What holds the gdbstub now: 0 nothing, 1 a stale opvm-gdb (its opvm is
 * gone), 2 an idle gdbstub of someone else; -EBUSY (what in err) when a
 * debugger or another opvm is connected; -errno. */
static int gdb_holder(struct attach_guest *ag, char *err, size_t errlen)
{
	json_t *list = NULL, *c;
	size_t i;
	int r, state = 0;

	r = guest_qmp(ag, "query-chardev", NULL, -1, &list, err, errlen);
	if (r)
		return r;
	json_array_foreach(list, i, c) {
		const char *label = json_string_value(json_object_get(c, "label"));
		const char *file = json_string_value(json_object_get(c, "filename"));
		int idle = file && !strncmp(file, "disconnected:", 13);

		if (!label || (strcmp(label, GDB_CHARDEV) && strcmp(label, "gdb")))
			continue;
		if (!idle) {
			util_seterr(err, errlen, !strcmp(label, "gdb") ?
				    "a debugger is connected to its gdbstub (%s)" :
				    "another opvm is profiling it (%s)", file ? file : "?");
			state = -EBUSY;
			break;
		}
		if (!strcmp(label, GDB_CHARDEV))
			state = 1;
		else if (!state)
			state = 2;
	}
	json_decref(list);
	return state;
}

/* Starts QEMU's gdbstub on a socket pair; *fd gets our end.  Prints. */
static int gdb_start(struct attach_guest *ag, const char *name, int *fd)
{
	char err[512] = "", *out = NULL;
	json_t *args = NULL;
	int sv[2] = { -1, -1 }, r;

	r = gdb_holder(ag, err, sizeof(err));
	if (r < 0) {
		pr_err("cannot start a gdbstub in '%s': %s%s", name, err[0] ? err : strerror(-r),
		       r == -EBUSY ? "; detach it first (monitor command 'gdbserver none')" : "");
		return -1;
	}
	if (r == 2)
		pr_warn("'%s' has an idle gdbstub; opvm replaces it with its own and removes "
			"that at the end", name);
	if (r) {
		/* Ours, left by an opvm that was killed, or someone's idle one:
		 * "gdbserver none" deletes the chardev the stub holds. */
		guest_hmp(ag, "gdbserver none", &out, NULL, 0);
		free(out);
		out = NULL;
		if (r == 1) {	/* in case the stub had moved on without it */
			args = json_pack("{s:s}", "id", GDB_CHARDEV);
			guest_qmp(ag, "chardev-remove", args, -1, NULL, NULL, 0);
			json_decref(args);
		}
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		r = -errno;
		snprintf(err, sizeof(err), "socketpair: %s", strerror(errno));
		goto fail;
	}
	args = json_pack("{s:s}", "fdname", GDB_CHARDEV);
	r = args ? guest_qmp(ag, "getfd", args, sv[1], NULL, err, sizeof(err)) : -ENOMEM;
	json_decref(args);
	if (r)
		goto fail;
	args = json_pack("{s:s,s:{s:s,s:{s:{s:s,s:{s:s}},s:b}}}", "id", GDB_CHARDEV,
			 "backend", "type", "socket", "data", "addr", "type", "fd",
			 "data", "str", GDB_CHARDEV, "server", 0);
	r = args ? guest_qmp(ag, "chardev-add", args, -1, NULL, err, sizeof(err)) : -ENOMEM;
	json_decref(args);
	if (r) {
		args = json_pack("{s:s}", "fdname", GDB_CHARDEV);
		guest_qmp(ag, "closefd", args, -1, NULL, NULL, 0);
		json_decref(args);
		goto fail;
	}
	r = guest_hmp(ag, "gdbserver chardev:" GDB_CHARDEV, &out, err, sizeof(err));
	if (!r && (!out || !strstr(out, "Waiting for gdb"))) {
		snprintf(err, sizeof(err), "%s", out ? out : "no answer");
		r = -EPROTO;
	}
	free(out);
	if (r) {
		args = json_pack("{s:s}", "id", GDB_CHARDEV);
		guest_qmp(ag, "chardev-remove", args, -1, NULL, NULL, 0);
		json_decref(args);
		goto fail;
	}
	ag->gdb_on = 1;
	close(sv[1]);
	*fd = sv[0];
	return 0;
fail:
	pr_err("cannot start a gdbstub in '%s' through its monitor: %s", name,
	       err[0] ? err : strerror(-r));
	if (sv[0] >= 0) {
		close(sv[0]);
		close(sv[1]);
	}
	return -1;
}

/* Starts a gdbstub on a socket pair and connects the sampler. */
static int attach_one(struct attach_guest *ag, struct qprof_target *t, const struct qprof_opts *o,
		      int running)
{
	struct qemu_sampler_config qc = { .rate_hz = o->rate_hz, .resume = running };
	char err[512] = "";

	if (gdb_start(ag, t->name, &qc.gdb_fd))
		return -1;
	/* The gdbstub stopped the guest as it opened; the sampler resumes it
	 * (start, or free if never started) once it has the connection. */
	t->sampler = qemu_sampler_new(&qc, err, sizeof(err));
	ag->cont_owed = running && !t->sampler;
	if (!t->sampler) {
		pr_err("guest '%s': %s", t->name, err);
		return -1;
	}
	t->nr_vcpus = qemu_sampler_nr_vcpus(t->sampler);
	qmp_close(ag->qmp);
	ag->qmp = NULL;
	t->chan_fd = -1;
	if (ag->chan_path[0]) {
		t->chan_fd = util_connect_unix(ag->chan_path);
		if (t->chan_fd < 0) {
			pr_warn("guest '%s': cannot connect to its opvm channel %s (%s); profiling "
				"without process names (is another opvm attached?)",
				t->name, ag->chan_path, strerror(-t->chan_fd));
			t->chan_fd = -1;
		} else {
			t->reconnect = qprof_reconnect_unix;
			t->reconnect_arg = ag->chan_path;
		}
	}
	return 0;
}

static void detach_one(struct attach_guest *ag, struct qprof_target *t)
{
	if (t->sampler) {
		t->sampler->ops->free(t->sampler);
		t->sampler = NULL;
	}
	if (ag->gdb_on) {
		char *out = NULL;

		/* Our connection is closed and the guest runs: remove the stub so
		 * the next debugger or opvm finds the monitor as it was. */
		guest_hmp(ag, "gdbserver none", &out, NULL, 0);
		free(out);
		ag->gdb_on = 0;
	}
	if (ag->cont_owed) {
		guest_qmp(ag, "cont", NULL, -1, NULL, NULL, 0);
		ag->cont_owed = 0;
	}
	virt_dom_close(ag->dom);
	ag->dom = NULL;
	qmp_close(ag->qmp);
	ag->qmp = NULL;
}

int cmd_attach(int argc, char **argv)
{
	struct qprof_opts o = { 0 };
	const char *uri = NULL, *qmp_path = NULL, *chan = NULL, *name = "qmp";
	char **names = NULL, **doms = NULL, err[512] = "";
	size_t nr_doms = 0, n = 0;
	struct attach_guest *ag = NULL;
	struct qprof_target *t = NULL;
	struct virt *v = NULL;
	static volatile sig_atomic_t stop;
	int all = 0, ret = 1, r;

	doms = calloc((size_t)argc + 1, sizeof(*doms));
	if (!doms)
		return 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		r = qprof_parse_opt(&o, argc, argv, &i);
		if (r < 0) {
			ret = 2;
			goto out;
		}
		if (r)
			continue;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			attach_usage(stdout);
			ret = 0;
			goto out;
		} else if (!strcmp(a, "--append")) {
			o.append = 1;
		} else if (!strcmp(a, "--all")) {
			all = 1;
		} else if ((!strcmp(a, "-c") || !strcmp(a, "--connect")) && i + 1 < argc) {
			uri = argv[++i];
		} else if (!strcmp(a, "--qmp") && i + 1 < argc) {
			qmp_path = argv[++i];
		} else if (!strcmp(a, "--channel") && i + 1 < argc) {
			chan = argv[++i];
		} else if (!strcmp(a, "--name") && i + 1 < argc) {
			name = argv[++i];
		} else if (a[0] == '-') {
			pr_err("unknown option '%s'; 'opvm attach --help' lists them", a);
			ret = 2;
			goto out;
		} else {
			doms[nr_doms++] = argv[i];
		}
	}
	if (!!qmp_path + !!all + !!nr_doms != 1) {
		pr_err("name the guests: libvirt domain names, --all, or --qmp SOCKET (one kind)");
		attach_usage(stderr);
		ret = 2;
		goto out;
	}
	if (chan && !qmp_path) {
		pr_err("--channel goes with --qmp; libvirt domains name their channel in their XML");
		ret = 2;
		goto out;
	}
	if (qprof_resolve_rate(&o)) {
		ret = 2;
		goto out;
	}
	qprof_apply_umask(&o);
	if (!qmp_path) {
		v = virt_open(uri, err, sizeof(err));
		if (!v) {
			pr_err("cannot reach libvirt: %s (is libvirtd running? try -c URI)", err);
			goto out;
		}
		if (all) {
			r = virt_list_running(v, &names, err, sizeof(err));
			if (r < 0) {
				pr_err("%s", err);
				goto out;
			}
			if (r == 0) {
				pr_err("no running libvirt domains at %s", uri ? uri : "qemu:///system");
				goto out;
			}
			free(doms);
			doms = names;
			nr_doms = (size_t)r;
		}
	} else {
		nr_doms = 1;
	}
	ag = calloc(nr_doms, sizeof(*ag));
	t = calloc(nr_doms, sizeof(*t));
	if (!ag || !t)
		goto out;
	qprof_signals(&stop);

	for (n = 0; n < nr_doms; n++) {
		int running;

		t[n].chan_fd = -1;
		if (qmp_path) {
			ag[n].qmp_path = qmp_path;
			ag[n].qmp = qmp_open(qmp_path, 5000);
			if (!ag[n].qmp) {
				pr_err("cannot talk QMP on %s: %s (is QEMU running with "
				       "-qmp unix:%s,server=on,wait=off, and no other client on it?)",
				       qmp_path, strerror(errno), qmp_path);
				goto out;
			}
			snprintf(t[n].name, sizeof(t[n].name), "%s", name);
			t[n].how = "QMP socket";
			if (chan)
				snprintf(ag[n].chan_path, sizeof(ag[n].chan_path), "%s", chan);
			running = qmp_running(ag[n].qmp, 5000);
		} else {
			ag[n].dom = virt_dom_open(v, doms[n], err, sizeof(err));
			if (!ag[n].dom) {
				pr_err("no libvirt domain '%s' (%s); 'virsh list' shows the running ones",
				       doms[n], err);
				goto out;
			}
			snprintf(t[n].name, sizeof(t[n].name), "%s", doms[n]);
			t[n].how = "libvirt domain";
			running = virt_dom_running(ag[n].dom);
			if (running == -ESRCH) {
				pr_err("domain '%s' is not running; start it first (virsh start %s)",
				       doms[n], doms[n]);
				goto out;
			}
			r = virt_dom_channel_path(ag[n].dom, "org.opvm.0", ag[n].chan_path,
						  sizeof(ag[n].chan_path));
			if (r) {
				ag[n].chan_path[0] = '\0';
				pr_warn("domain '%s' has no <channel type='unix'> with target name "
					"org.opvm.0: profiling without process names (docs/usage.md "
					"shows the XML to add)", doms[n]);
			}
		}
		if (running < 0) {
			pr_err("cannot tell whether '%s' runs: %s", t[n].name, strerror(-running));
			goto out;
		}
		if (attach_one(&ag[n], &t[n], &o, running)) {
			n++;
			goto out;
		}
	}
	if (isatty(STDERR_FILENO))
		pr_info("profiling %zu guest%s; Ctrl-C stops%s", n, n == 1 ? "" : "s",
			o.duration_ms ? " (or --duration)" : "");
	ret = qprof_collect(&o, t, n, &stop) ? 1 : 0;
	qprof_summary(&o, t, n, NULL);
out:
	for (size_t i = 0; i < n && ag && t; i++)
		detach_one(&ag[i], &t[i]);
	free(ag);
	free(t);
	if (doms == names)
		virt_free_names(names);
	else
		free(doms);
	virt_close(v);
	return ret;
}
