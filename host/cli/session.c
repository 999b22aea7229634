// SPDX-License-Identifier: MIT
/*
 * One profiling session (host/cli/session.h): collector, backend life cycle,
 * signals (its options: host/cli/session-options.c; the end-of-session
 * summary: host/cli/summary.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/collect/collector.h"
#include "host/cli/session.h"
#include "host/collect/stats.h"
#include "host/collect/store.h"
#include "lib/array.h"
#include "lib/log.h"
#include "symbols/ksyms.h"
#include "symbols/symres.h"
#include "lib/safepath.h"
#include "lib/clock.h"
#include "lib/signals.h"
#include "lib/size.h"
#include "symbols/symres.h"
#include "vmm/backend.h"
#include "vmm/guest/monitor.h"
#include "vmm/sampler.h"

/* ---- collecting ------------------------------------------------------------ */

static volatile sig_atomic_t stop_flag;

/*
 * The build-id cache of fetched binaries, absolute so report finds it from
 * anywhere: --fetch-cache DIR, or opvm/buildid (made 0700) in
 * $XDG_CACHE_HOME or ~/.cache.  Opened through lib/safepath.h: a link at
 * opvm's own components, a directory of another user or one others may
 * write is refused (with what to do), and nothing is chmod'ed through a
 * path.  NULL (binaries not fetched) when none can be used.
 */
static const char *fetch_cache_dir(const struct session_opts *o, char *buf, size_t len)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME"), *sub = NULL;
	char base[PATH_MAX], err[512] = "";
	size_t n;
	int fd;

	if (o->fetch_cache)
		snprintf(base, sizeof(base), "%s", o->fetch_cache);
	else if (xdg && xdg[0] == '/')
		snprintf(base, sizeof(base), "%s", xdg);
	else if (home && home[0] == '/')
		snprintf(base, sizeof(base), "%s/.cache", home);
	else
		return NULL;
	if (!o->fetch_cache)
		sub = "opvm/buildid";
	fd = safepath_open_base(base, 0700, SAFEPATH_CREATE, buf, len, err, sizeof(err));
	if (fd >= 0 && sub) {
		int bfd = fd;

		fd = safepath_open_sub(bfd, buf, sub, 0700, SAFEPATH_CREATE | SAFEPATH_PRIVATE,
				       err, sizeof(err));
		close(bfd);
		n = strlen(buf);
		if (fd >= 0 && snprintf(buf + n, len - n, "%s%s", buf[n - 1] == '/' ? "" : "/", sub) >=
		    (int)(len - n)) {
			close(fd);
			fd = -ENAMETOOLONG;
		}
	}
	if (fd < 0) {
		log_warn("%s; the guests' binaries are not fetched (give --fetch-cache DIR, "
			 "a private directory of yours, or --no-fetch)",
			 err[0] ? err : strerror(-fd));
		return NULL;
	}
	close(fd);
	return buf;
}

/* The live status line on a terminal (collector_config.progress): one
 * line redrawn in place, ended when the run ends. */
static void session_progress(void *arg, const struct collector_progress *p, bool last)
{
	(void)arg;
	if (p)
		fprintf(stderr, "\ropvm: %7.1fs  %9.0f samples/s  %llu samples  %llu lost  "
			"%llu held  %zu guest%s ", p->secs, p->rate,
			(unsigned long long)p->received, (unsigned long long)p->lost,
			(unsigned long long)p->held, p->nr_guests, p->nr_guests == 1 ? "" : "s");
	if (last)
		fputc('\n', stderr);
	fflush(stderr);
}

static void collector_cfg(const struct session_opts *o, const struct backend_setup *setup,
			  struct collector_config *cfg)
{
	*cfg = (struct collector_config){
		.session_dir = o->common.session_dir,
		/* kernel time under the process it ran for, as perf files it;
		 * --separate lib is OProfile's layout (the kernel its own app) */
		.separate = o->separate_set ? o->separate : OPVM_SEP_LIB | OPVM_SEP_KERNEL,
		.append = o->append,
		.nr_events = setup->nr_events,
		.sync_ms = o->sync_ms ? o->sync_ms : 1000,
		.window_ms = o->window_s * 1000,
		.hold_ms = 2000,
		.mode = setup->mode,
		.rate_hz = setup->rate_hz,
		.progress = isatty(STDERR_FILENO) ? session_progress : NULL,
		.store_limits = o->limits,
		.public_tree = o->umask >= 0,
		.model_max_bytes = (size_t)o->model_max_bytes,
		.symbols = o->sym,
		.callgraph = o->callgraph.mode == SAMPLER_CG_DWARF ? "dwarf" :
			     o->callgraph.mode ? "fp" : NULL,
		.start_exec = o->from_exec ? o->from_exec :
			      o->from_workload ? o->workload_exec : NULL,
		.python_off = o->no_python,
		.fetch = { .off = o->no_fetch, .max_file = o->fetch_max_file,
			   .max_session = o->fetch_max_session,
			   .max_cache = o->fetch_max_cache,
			   .max_ksyms = o->fetch_max_ksyms,
			   .verify = symres_check_build_id },
	};
	for (unsigned i = 0; i < setup->nr_events; i++) {
		snprintf(cfg->events[i].name, sizeof(cfg->events[i].name), "%s",
			 setup->events[i].name);
		cfg->events[i].count = setup->events[i].count;
		cfg->events[i].unit_mask = setup->events[i].unit_mask;
	}
}

/* What the user did not name, the backend's defaults (the test image's
 * root, System.map and vmlinuz), as absolute paths in def[]. */
static void default_symbols(const struct backend_setup *setup, struct collector_symbols *s,
			    char def[3][PATH_MAX])
{
	if (!s->nr_roots && setup->guest_root && realpath(setup->guest_root, def[0]))
		s->roots[s->nr_roots++] = def[0];
	if (!s->system_map && setup->system_map && realpath(setup->system_map, def[1]))
		s->system_map = def[1];
	if (!s->vmlinux && setup->vmlinux && realpath(setup->vmlinux, def[2]))
		s->vmlinux = def[2];
}

/*
 * --call-graph dwarf: the collector unwinds user stacks with the guest's
 * binaries, found where the reports find them (the guest roots, the
 * session's build-id cache, what was fetched from the guest: an image is
 * asked for when its first sample is filed or an unwind needs it, and
 * looked for again once it is in the fetch cache, while the stacks that
 * need it wait (host/collect/attribution.h); never debuginfod from the collector,
 * whose thread must not wait on the network), each checked against the
 * guest's build-id: a file that is not the guest's unwinds nothing.
 */
struct host_files {
	struct symres *res;
	struct symres_root roots[COLLECTOR_MAX_ROOTS];
	char guests[COLLECTOR_MAX_ROOTS][129];
};

static int host_file(void *arg, const char *guest, const char *path, const uint8_t *bid,
		     size_t bid_len, char *out, size_t outlen)
{
	struct host_files *hf = arg;
	struct simage *si = symres_image(hf->res, guest, path, 0, bid_len ? bid : NULL, bid_len,
					 NULL);
	const char *p;

	/* The file, not its symbols: a stripped executable (Debian's xz,
	 * sqlite3) unwinds by its .eh_frame all the same. */
	if (si && !simage_file(si))
		symres_image_recheck(hf->res, si, guest, path);
	p = si ? simage_file(si) : NULL;
	if (!p || (size_t)snprintf(out, outlen, "%s", p) >= outlen)
		return -ENOENT;
	return 0;
}

static int host_files_open(struct host_files *hf, struct collector_config *cfg)
{
	struct symres_config sc = { .session_dir = cfg->session_dir, .roots = hf->roots,
				    .fetch_cache = cfg->fetch.cache_dir,
				    .no_host_kernel = 1, .no_debuginfod = 1 };

	for (size_t i = 0; i < cfg->symbols.nr_roots; i++) {
		const char *r = cfg->symbols.roots[i], *eq = strchr(r, '=');

		/* "GUEST=DIR" (parse_symbols() checked it) or "DIR" */
		hf->roots[i].dir = r;
		hf->roots[i].guest = NULL;
		if (eq && eq[1] == '/' && eq - r < 129) {
			snprintf(hf->guests[i], sizeof(hf->guests[i]), "%.*s", (int)(eq - r), r);
			hf->roots[i].guest = hf->guests[i];
			hf->roots[i].dir = eq + 1;
		}
	}
	sc.nr_roots = cfg->symbols.nr_roots;
	hf->res = symres_new(&sc);
	if (!hf->res)
		return -1;
	cfg->host_file = host_file;
	cfg->host_file_arg = hf;
	return 0;
}

/* Every guest into the collector (channel, sampler), then every sampler
 * started: a sampler pushes into rings the collector must already own. */
static int add_and_start(struct collector *c, struct backend_target *t, size_t n,
			 enum introspect_mode im)
{
	struct cguest *g[n ? n : 1];
	int err;

	for (size_t i = 0; i < n; i++) {
		g[i] = collector_add_guest(c, t[i].name, t[i].nr_vcpus);
		if (!g[i]) {
			log_err("cannot add guest '%s' to the session: %s", t[i].name,
				strerror(errno));
			return -1;
		}
		err = cguest_set_introspect(g[i], t[i].mem, im);
		if (err < 0) {
			log_err("cannot read the memory of '%s': %s", t[i].name, strerror(-err));
			return -1;
		}
		if (t[i].chan_fd >= 0 && im == INTROSPECT_ONLY) {
			/* --introspect only: what opvm.ko says is not read */
			close(t[i].chan_fd);
			t[i].chan_fd = -1;
		}
		if (t[i].chan_fd >= 0) {
			err = cguest_set_channel(g[i], t[i].chan_fd, t[i].reconnect,
						 t[i].reconnect_arg);
			t[i].chan_fd = -1;
			if (err < 0) {
				log_err("cannot read the channel of '%s': %s", t[i].name,
					strerror(-err));
				return -1;
			}
		}
		cguest_set_sampler(g[i], t[i].sampler);
	}
	for (size_t i = 0; i < n; i++) {
		struct sampler_sink sink = cguest_sink(g[i]);
		struct sampler *s = t[i].sampler;
		const char *why;

		err = s->ops->start(s, &sink);
		if (err) {
			why = s->ops->last_error(s);
			log_err("cannot start sampling '%s': %s%s%s", t[i].name, strerror(-err),
				why ? ": " : "", why ? why : "");
			return -1;
		}
	}
	return 0;
}

/* Whether a sampler failed on its own thread during the session. */
static int samplers_failed(struct backend_target *t, size_t n)
{
	int ret = 0;

	for (size_t i = 0; i < n; i++) {
		struct sampler *s = t[i].sampler;
		const char *why = s->ops->last_error(s);
		int st = s->ops->status(s);

		if (st < 0) {
			log_err("guest '%s': %s; the samples taken so far are kept",
				t[i].name, why ? why : strerror(-st));
			ret = -1;
		}
	}
	return ret;
}

/* The collector's life: 0, or -1 after printing what failed.  *elapsed_ns
 * gets the time the samplers ran. */
static int collect(const struct session_opts *o, const struct backend_setup *setup,
		   struct backend_target *t, size_t n, uint64_t *elapsed_ns)
{
	struct collector_config cfg;
	struct host_files hf = { 0 };
	char def[3][PATH_MAX], fcache[PATH_MAX];
	struct collector *c;
	int64_t t0 = 0;
	int err, ret = -1;

	collector_cfg(o, setup, &cfg);
	if (!o->no_fetch)
		cfg.fetch.cache_dir = fetch_cache_dir(o, fcache, sizeof(fcache));
	if (!o->no_image_symbols)
		default_symbols(setup, &cfg.symbols, def);
	if (o->callgraph.mode == SAMPLER_CG_DWARF && host_files_open(&hf, &cfg)) {
		log_err("cannot set up symbol lookup for --call-graph dwarf: %s", strerror(errno));
		return -1;
	}
	c = collector_new(&cfg);
	if (!c) {
		log_err("cannot set up the session in %s: %s", cfg.session_dir, strerror(errno));
		return -1;
	}
	t0 = clk_now_ns();
	if (add_and_start(c, t, n, (enum introspect_mode)o->introspect))
		goto out;
	err = collector_run(c, &stop_flag, o->common.duration_ms);
	ret = 0;
	if (err) {
		log_err("profiling stopped early: %s; the samples taken so far are kept",
			strerror(-err));
		ret = -1;
	}
	if (samplers_failed(t, n))
		ret = -1;
out:
	/* Stop the samplers before the collector frees their rings. */
	for (size_t i = 0; i < n; i++)
		t[i].sampler->ops->stop(t[i].sampler);
	*elapsed_ns = (uint64_t)(clk_now_ns() - t0);
	collector_free(c);
	symres_free(hf.res);
	return ret;
}

/* ---- the session --------------------------------------------------------------- */

static void print_notes(const char *notes)
{
	const char *p = notes;

	while (*p) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);

		log_warn("%.*s", len, p);
		p += len + (nl ? 1 : 0);
	}
}

/* Opens every guest; 0, or -1 after printing (opened ones stay in t). */
static int open_all(const struct backend_ops *b, void *bst, struct vm_monitor *const *mons,
		    struct backend_target *t, size_t n, size_t *opened)
{
	char err[4096];

	for (*opened = 0; *opened < n; ++*opened) {
		struct backend_target *ti = &t[*opened];
		int r;

		ti->chan_fd = -1;
		if (mons) {
			snprintf(ti->name, sizeof(ti->name), "%s", vm_monitor_name(mons[*opened]));
			ti->how = vm_monitor_how(mons[*opened]);
		}
		err[0] = '\0';
		r = b->open(bst, mons ? mons[*opened] : NULL, ti, err, sizeof(err));
		print_notes(ti->notes);
		ti->notes[0] = '\0';
		if (r) {
			log_err("%s", err[0] ? err : strerror(-r));
			++*opened;	/* half open: close() it too */
			return -1;
		}
	}
	return 0;
}

/* Sampling done: each backend says how its guest ended. */
static int finish_all(const struct backend_ops *b, void *bst, struct backend_target *t,
		      size_t n)
{
	char err[1024];
	int ret = 0;

	for (size_t i = 0; i < n; i++) {
		err[0] = '\0';
		if (b->finish(bst, &t[i], err, sizeof(err))) {
			if (err[0])
				log_err("%s", err);
			ret = -1;
		}
	}
	return ret;
}

static void intro(const struct session_opts *o, const struct backend_target *t, size_t n)
{
	if (!isatty(STDERR_FILENO))
		return;
	if (n == 1 && t[0].intro[0])
		log_info("%s", t[0].intro);
	else
		log_info("profiling %zu guest%s; Ctrl-C stops%s", n, n == 1 ? "" : "s",
			 o->common.duration_ms ? " (or --duration)" : "");
}

/* Where the guest kernel's ORC tables are (link-time addresses), from the
 * System.map the session will keep; without one, the guest's kallsyms
 * locate them (its relay sends them unless --no-fetch); with neither,
 * kernel samples keep their own frame only, which the user is told. */
static void callgraph_kernel(struct session_opts *o, const struct backend_setup *setup)
{
	static const char *const orc[] = { "__start_orc_unwind_ip", "__stop_orc_unwind_ip",
					   "__start_orc_unwind" };
	static const char *const anchors[SAMPLER_CG_ANCHORS] = { "_printk", "printk" };
	uint64_t *addr[] = { &o->callgraph.orc_ip_start, &o->callgraph.orc_ip_stop,
			     &o->callgraph.orc_start };
	const char *map = o->sym.system_map ? o->sym.system_map :
			  o->no_image_symbols ? NULL : setup->system_map;
	char err[512] = "";
	struct ksyms *ks = map ? ksyms_open(map, err, sizeof(err)) : NULL;
	unsigned missing = 0;

	for (unsigned i = 0; ks && i < 3; i++)
		missing += ksyms_addr(ks, orc[i], addr[i]) != 0;
	for (unsigned i = 0; ks && i < SAMPLER_CG_ANCHORS; i++) {
		snprintf(o->callgraph.anchors[i].name, sizeof(o->callgraph.anchors[i].name),
			 "%s", anchors[i]);
		if (ksyms_addr(ks, anchors[i], &o->callgraph.anchors[i].addr))
			o->callgraph.anchors[i].addr = 0;
	}
	if (!map && o->no_fetch)
		log_warn("--call-graph: kernel samples keep their own frame only: with "
			 "--no-fetch the guest's kallsyms cannot locate its kernel's ORC "
			 "tables; give its System.map (--system-map FILE) for kernel stacks");
	else if (map && !ks)
		log_warn("--call-graph: %s; kernel samples keep their own frame only", err);
	else if (missing) {
		log_warn("--call-graph: %s has no ORC tables (__start_orc_unwind...): kernel "
			 "samples keep their own frame only", map);
		o->callgraph.orc_ip_start = 0;
	}
	ksyms_free(ks);
}

/*
 * The session directory, made when missing (lib/safepath.h): every
 * directory on the way is checked and the new ones are made without
 * following a link, before a backend makes anything inside.  One that
 * exists must be this user's and writable by no one else: in a directory
 * another user owns or may write, guests/NAME could be that user's link to
 * a directory of yours, whose console.log and qemu.log opvm would write.
 */
static int session_dir_check(const char *dir)
{
	char err[512] = "";
	int fd;

	fd = safepath_open_session(dir, 0755, SAFEPATH_CREATE, err, sizeof(err));
	if (fd < 0) {
		log_err("cannot use the session directory %s: %s", dir,
			err[0] ? err : strerror(-fd));
		return -1;
	}
	close(fd);
	return 0;
}

int session_run(const struct backend_ops *b, void *bst, struct session_opts *o,
		struct vm_monitor *const *mons, size_t n)
{
	struct backend_setup setup = { 0 };
	struct backend_target *t;
	char err[1024] = "";
	uint64_t elapsed_ns = 0;
	size_t opened = 0;
	int r, ret = 1;

	r = b->prepare(bst, &o->common, &setup, err, sizeof(err));
	print_notes(setup.notes);
	if (r) {
		log_err("%s", err[0] ? err : strerror(-r));
		return r == -EINVAL ? 2 : 1;
	}
	if (o->from_workload && !setup.workload) {
		log_err("--from-workload goes with opvm run --workload NAME; name the "
			"process with --from-exec NAME otherwise");
		return 2;
	}
	/* "abratio:3,30+libcmix:4": the process is abratio */
	if (o->from_workload)
		snprintf(o->workload_exec, sizeof(o->workload_exec), "%.*s",
			 (int)strcspn(setup.workload, ":+"), setup.workload);
	if (o->callgraph.mode && !b->callgraph) {
		log_err("--call-graph: the %s backend cannot read guest stacks (it never "
			"stops the guest); use --sampler gdbstub, or drop -g", b->name);
		return 2;
	}
	if (o->callgraph.mode)
		callgraph_kernel(o, &setup);
	umask(o->umask >= 0 ? (mode_t)o->umask : 077);
	if (session_dir_check(o->common.session_dir))
		return 1;
	signals_stop_on(&stop_flag);
	/* a closed pipe or socket is an EPIPE to handle, never a reason to
	 * leave a guest stopped or samples unsynced */
	signal(SIGPIPE, SIG_IGN);
	t = calloc(n ? n : 1, sizeof(*t));
	if (!t) {
		log_err("out of memory");
		return 1;
	}
	for (size_t i = 0; i < n && o->callgraph.mode; i++)
		t[i].callgraph = &o->callgraph;
	if (!open_all(b, bst, mons, t, n, &opened)) {
		intro(o, t, n);
		ret = collect(o, &setup, t, n, &elapsed_ns) ? 1 : 0;
		if (finish_all(b, bst, t, n))
			ret = 1;
		session_summary(b, bst, o, &setup, t, n, elapsed_ns);
	}
	for (size_t i = 0; i < opened; i++) {
		if (t[i].chan_fd >= 0)
			close(t[i].chan_fd);
		b->close(bst, &t[i]);
	}
	free(t);
	return ret;
}
