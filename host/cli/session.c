// SPDX-License-Identifier: MIT
/*
 * One profiling session (host/cli/session.h): options, collector, backend life
 * cycle, signals (the end-of-session summary: host/cli/summary.c).
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
#include "host/cli/options.h"
#include "host/cli/session.h"
#include "host/collect/stats.h"
#include "host/collect/store.h"
#include "lib/array.h"
#include "lib/log.h"
#include "lib/numparse.h"
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

enum {
	OPT_SEPARATE = SESSION_OPT, OPT_DURATION, OPT_APPEND_SAMPLES, OPT_MAX_FILES,
	OPT_MAX_DIRS, OPT_MAX_DISK, OPT_MAX_MAPPED, OPT_UMASK, OPT_MAX_MODEL_MEM,
	OPT_GUEST_ROOT, OPT_SYSTEM_MAP, OPT_VMLINUX, OPT_FROM_EXEC, OPT_FROM_WORKLOAD,
	OPT_CALL_GRAPH,
	OPT_NO_IMAGE_SYMBOLS, OPT_NO_FETCH, OPT_FETCH_CACHE, OPT_FETCH_MAX_FILE,
	OPT_FETCH_MAX_SESSION,
	OPT_FETCH_CACHE_MAX, OPT_INTROSPECT, OPT_WINDOW,
};

const struct opt_def session_options[] = {
	{ "rate", 'F', "HZ", "samples per second per vCPU (timer modes)", 0 },
	{ "event", 'e', "SPEC", "event to sample ('opvm list-events'), up to 8 with "
	  "--vmm=kvm; the gdbstub takes TIMER[:period_us] only", 0 },
	{ "session-dir", 'd', "DIR", "where sample trees go (default ./opvm_data)", 0 },
	{ NULL, 'g', NULL, "the same as --call-graph fp", 0 },
	{ "call-graph", OPT_CALL_GRAPH, "fp|dwarf", "record each sample's call chain: user "
	  "stacks by frame pointers (-g, fp) or by the binaries' DWARF CFI from an 8 KiB "
	  "stack copy (dwarf: --guest-root), kernel stacks by the guest kernel's ORC tables "
	  "(its System.map); gdbstub and qemu backends only", 0 },
	{ "separate", OPT_SEPARATE, "SPEC", "none, lib, kernel, thread, cpu, all (default "
	  "lib,kernel: a process's kernel time under it; lib: OProfile's layout, the kernel "
	  "an application of its own)", 0 },
	{ "duration", OPT_DURATION, "S", "stop after S seconds (a guest opvm booted is quit)",
	  0 },
	{ "window", OPT_WINDOW, "S", "seal the samples every S seconds (1 to 3600) as "
	  "samples/w-START-END, a new window each (opvm exporter --continuous; "
	  "opvm report --since/--until read them)", 0 },
	{ "append-samples", OPT_APPEND_SAMPLES, NULL, "add to the current samples instead "
	  "of starting afresh", 0 },
	{ "from-exec", OPT_FROM_EXEC, "NAME", "file samples from when a process NAME starts "
	  "(its executable's base name); earlier ones are counted", 0 },
	{ "from-workload", OPT_FROM_WORKLOAD, NULL, "opvm run --workload W: the same as "
	  "--from-exec W", 0 },
	{ "max-files", OPT_MAX_FILES, "N", "sample files per guest (default 16384)", 0 },
	{ "max-dirs", OPT_MAX_DIRS, "N", "directories per guest (default 65536)", 0 },
	{ "max-disk", OPT_MAX_DISK, "SIZE", "bytes per guest, e.g. 2G (default 1G); past a "
	  "cap, samples go to the {overflow} bucket, counted in the summary", 0 },
	{ "max-mapped", OPT_MAX_MAPPED, "N", "sample files mapped at once per guest (default "
	  "256)", 0 },
	{ "max-model-mem", OPT_MAX_MODEL_MEM, "SIZE", "memory for one guest's processes, "
	  "mappings and file names (default 64M; all guests together 512M)", 0 },
	{ "umask", OPT_UMASK, "MASK", "session tree modes from MASK, e.g. 022 (default: "
	  "private, directories 0700 and files 0600)", 0 },
	{ "guest-root", OPT_GUEST_ROOT, "[GUEST=]DIR", "the guest's root file system, "
	  "kept in session.json (as --system-map and --vmlinux) so report, annotate and "
	  "export find symbols without flags (default with the test image: "
	  "build/images/...)", 0 },
	{ "system-map", OPT_SYSTEM_MAP, "FILE", "the guest kernel's System.map", 0 },
	{ "vmlinux", OPT_VMLINUX, "FILE", "the guest kernel", 0 },
	{ "no-image-symbols", OPT_NO_IMAGE_SYMBOLS, NULL, "not those test-image defaults: "
	  "only what the guest sends (its kallsyms) and what is named", 0 },
	{ "no-fetch", OPT_NO_FETCH, NULL, "keep nothing the guest sends: neither its kernel "
	  "symbols nor its binaries (fetched by build-id for every image with samples, by "
	  "default)", 0 },
	{ "fetch-cache", OPT_FETCH_CACHE, "DIR", "the guests' fetched binaries, "
	  "DIR/GUEST/xx/yyyy (default $XDG_CACHE_HOME/opvm/buildid, ~/.cache/opvm/buildid)",
	  0 },
	{ "fetch-max-file", OPT_FETCH_MAX_FILE, "SIZE", "largest binary taken (default "
	  "256M)", 0 },
	{ "fetch-max-session", OPT_FETCH_MAX_SESSION, "SIZE", "all of one session (default "
	  "1G)", 0 },
	{ "fetch-cache-max", OPT_FETCH_CACHE_MAX, "SIZE", "one guest's cache, all sessions "
	  "(default 2G): past it the least recently used files go", 0 },
	{ "introspect", OPT_INTROSPECT, "auto|off|only", "read the guest kernel's symbols "
	  "from its memory (auto: unless opvm.ko sends them; only: and ignore opvm.ko's "
	  "channel); docs/introspection.md", 0 },
	{ 0 },
};

void session_opts_init(struct session_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->common.session_dir = "./opvm_data";
}

/* --max-files, --max-dirs, --max-disk, --max-mapped: counts take units
 * too (--max-files 64k). */
static int parse_cap(struct session_opts *o, int opt, const char *arg)
{
	static const char *const names[] = { "--max-files", "--max-dirs", "--max-disk",
					     "--max-mapped" };
	uint64_t *caps[] = { &o->limits.max_files, &o->limits.max_dirs,
			     &o->limits.max_disk, &o->limits.max_mapped };
	unsigned k = (unsigned)(opt - OPT_MAX_FILES);
	uint64_t v;

	if (size_parse(arg, &v) || v == 0) {
		char e[160];

		log_err("%s", num_bad_value(e, sizeof(e), names[k], arg, opt == OPT_MAX_DISK ?
					    "a size (bytes, k, M, G)" :
					    "a number (64k: k, M, G)"));
		return -1;
	}
	*caps[k] = v;
	return 1;
}

/* --guest-root, --system-map, --vmlinux: kept as absolute paths, so a
 * report run from another directory finds them.  A path that is not there
 * is a usage error now rather than [unknown] symbols later. */
static int parse_symbols(struct session_opts *o, int opt, const char *arg)
{
	static const char *const names[] = { "--guest-root", "--system-map", "--vmlinux" };
	const char *name = names[opt - OPT_GUEST_ROOT], *path = arg, *eq = strchr(arg, '=');
	char *buf, abs[PATH_MAX];
	int prefix = 0;

	if (opt == OPT_GUEST_ROOT && eq && eq > arg && !memchr(arg, '/', (size_t)(eq - arg))) {
		prefix = (int)(eq - arg) + 1;	/* GUEST=DIR */
		path = eq + 1;
	}
	if (opt == OPT_GUEST_ROOT && o->sym.nr_roots >= COLLECTOR_MAX_ROOTS) {
		log_err("at most %d --guest-root options", COLLECTOR_MAX_ROOTS);
		return -1;
	}
	if (o->sym_used >= ARRAY_SIZE(o->sym_buf) ||
	    prefix > 128 || !realpath(path, abs)) {
		log_err("%s %s: %s; give the guest's %s", name, path,
			o->sym_used >= ARRAY_SIZE(o->sym_buf) ?
			"too many symbol options" : strerror(errno ? errno : EINVAL),
			opt == OPT_GUEST_ROOT ? "root file system (a directory)" :
			opt == OPT_SYSTEM_MAP ? "System.map (or /proc/kallsyms copy)" :
			"kernel image (vmlinux or vmlinuz)");
		return -1;
	}
	buf = o->sym_buf[o->sym_used++];
	snprintf(buf, sizeof(o->sym_buf[0]), "%.*s%s", prefix, arg, abs);
	if (opt == OPT_GUEST_ROOT)
		o->sym.roots[o->sym.nr_roots++] = buf;
	else if (opt == OPT_SYSTEM_MAP)
		o->sym.system_map = buf;
	else
		o->sym.vmlinux = buf;
	return 1;
}

static int parse_window(struct session_opts *o, const char *arg)
{
	char e[160];

	if (!num_parse_uint(arg, 1, 3600, &o->window_s))
		return 1;
	log_err("%s", num_bad_value(e, sizeof(e), "--window", arg, "1 to 3600 seconds"));
	return -1;
}

static int parse_duration(struct session_opts *o, const char *arg)
{
	double s;

	if (num_parse_decimal(arg, 0.001, 1e7, &s)) {
		char e[160];

		log_err("%s", num_bad_value(e, sizeof(e), "--duration", arg,
					    "seconds, e.g. --duration 30"));
		return -1;
	}
	o->common.duration_ms = (uint64_t)(s * 1000);
	return 1;
}

static int parse_umask(struct session_opts *o, const char *arg)
{
	unsigned long m = strtoul(arg, NULL, 8);

	/* octal digits only: strtoul() alone takes " 5", "+5" and "-1" */
	if (!*arg || strspn(arg, "01234567") != strlen(arg) || strlen(arg) > 4 || m > 0777) {
		char e[160];

		log_err("%s", num_bad_value(e, sizeof(e), "--umask", arg,
					    "an octal mask (022)"));
		return -1;
	}
	o->umask = (unsigned)m;
	o->umask_set = 1;
	return 1;
}

/* What the guest sends and where it goes: --no-fetch, --fetch-*,
 * --introspect.  1 handled, 0 not one of them, -1 after printing. */
static int parse_fetch(struct session_opts *o, int opt, const char *arg)
{
	switch (opt) {
	case OPT_NO_FETCH:
		o->no_fetch = 1;
		return 1;
	case OPT_FETCH_CACHE:
		o->fetch_cache = arg;
		return 1;
	case OPT_INTROSPECT: {
		enum introspect_mode m;

		if (introspect_parse_mode(arg, &m)) {
			log_err("--introspect takes auto, off or only, not '%s'", arg);
			return -1;
		}
		o->introspect = (int)m;
		return 1;
	}
	case OPT_FETCH_MAX_FILE: case OPT_FETCH_MAX_SESSION: case OPT_FETCH_CACHE_MAX: {
		uint64_t *v = opt == OPT_FETCH_MAX_FILE ? &o->fetch_max_file :
			      opt == OPT_FETCH_MAX_SESSION ? &o->fetch_max_session :
			      &o->fetch_max_cache;

		if (size_parse(arg, v) || *v < 4096) {
			char e[160];

			log_err("%s", num_bad_value(e, sizeof(e),
				opt == OPT_FETCH_MAX_FILE ? "--fetch-max-file" :
				opt == OPT_FETCH_MAX_SESSION ? "--fetch-max-session" :
				"--fetch-cache-max", arg, "4k or more (64M)"));
			return -1;
		}
		return 1;
	}
	default:
		return 0;
	}
}

/* -F HZ: read once here, for every backend (each checks its own range). */
static int parse_rate(struct backend_common *c, const char *arg)
{
	char e[160];

	if (!num_parse_uint(arg, 1, 10000, &c->rate)) {
		c->rate_arg = arg;
		return 1;
	}
	log_err("%s", num_bad_value(e, sizeof(e), "-F", arg, "samples/s a vCPU, 1 to 10000"));
	return -1;
}

int session_parse(struct session_opts *o, int opt, const char *arg)
{
	struct backend_common *c = &o->common;

	switch (opt) {
	case 'F':
		return parse_rate(c, arg);
	case 'e':
		if (c->nr_event_specs >= OPVM_MAX_EVENTS) {
			log_err("at most %d events at once", OPVM_MAX_EVENTS);
			return -1;
		}
		c->event_specs[c->nr_event_specs++] = arg;
		return 1;
	case 'd':
		c->session_dir = arg;
		return 1;
	case OPT_SEPARATE:
		if (store_parse_separate(arg, &o->separate)) {
			log_err("--separate takes none, lib, kernel, thread, cpu or all "
				"(comma-separated), not '%s'", arg);
			return -1;
		}
		o->separate_set = 1;
		return 1;
	case OPT_DURATION:
		return parse_duration(o, arg);
	case OPT_WINDOW:
		return parse_window(o, arg);
	case OPT_APPEND_SAMPLES:
		o->append = 1;
		return 1;
	case OPT_FROM_EXEC:
		if (!*arg || strchr(arg, '/') || strlen(arg) >= 64) {
			log_err("--from-exec wants an executable's base name such as abratio, "
				"not '%s'", arg);
			return -1;
		}
		o->from_exec = arg;
		return 1;
	case OPT_FROM_WORKLOAD:
		o->from_workload = 1;
		return 1;
	case OPT_NO_IMAGE_SYMBOLS:
		o->no_image_symbols = 1;
		return 1;
	case OPT_MAX_FILES: case OPT_MAX_DIRS: case OPT_MAX_DISK: case OPT_MAX_MAPPED:
		return parse_cap(o, opt, arg);
	case OPT_UMASK:
		return parse_umask(o, arg);
	case OPT_GUEST_ROOT: case OPT_SYSTEM_MAP: case OPT_VMLINUX:
		return parse_symbols(o, opt, arg);
	case 'g':
		o->callgraph.mode = SAMPLER_CG_FP;
		return 1;
	case OPT_CALL_GRAPH:
		if (strcmp(arg, "fp") && strcmp(arg, "dwarf")) {
			log_err("--call-graph takes fp (frame pointers) or dwarf (the guest "
				"binaries' CFI, needs them on the host), not '%s'", arg);
			return -1;
		}
		o->callgraph.mode = strcmp(arg, "fp") ? SAMPLER_CG_DWARF : SAMPLER_CG_FP;
		return 1;
	case OPT_MAX_MODEL_MEM:
		if (size_parse(arg, &o->model_max_bytes) || o->model_max_bytes < (1u << 20)) {
			char e[160];

			log_err("%s", num_bad_value(e, sizeof(e), "--max-model-mem", arg,
						    "1M or more (128M)"));
			return -1;
		}
		return 1;
	default:
		return parse_fetch(o, opt, arg);
	}
}


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
		.public_tree = o->umask_set,
		.model_max_bytes = (size_t)o->model_max_bytes,
		.symbols = o->sym,
		.callgraph = o->callgraph.mode == SAMPLER_CG_DWARF ? "dwarf" :
			     o->callgraph.mode ? "fp" : NULL,
		.start_exec = o->from_exec ? o->from_exec :
			      o->from_workload ? setup->workload : NULL,
		.fetch = { .off = o->no_fetch, .max_file = o->fetch_max_file,
			   .max_session = o->fetch_max_session,
			   .max_cache = o->fetch_max_cache,
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
	if (o->callgraph.mode && !b->callgraph) {
		log_err("--call-graph: the %s backend cannot read guest stacks (it never "
			"stops the guest); use --sampler gdbstub, or drop -g", b->name);
		return 2;
	}
	if (o->callgraph.mode)
		callgraph_kernel(o, &setup);
	umask(o->umask_set ? (mode_t)o->umask : 077);
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

/* ---- command lines ------------------------------------------------------------- */

#define CLI_MAX_GROUPS	(3 + 16)

/* The groups of cli's command: its own options, the backends' (all of its
 * kind, or only b), the session's.  g has room for 3 + nr_backends. */
static void cli_groups(const struct session_cli *cli, const struct backend_ops *b,
		       struct opt_group *g, char (*titles)[48])
{
	size_t n = 0;

	g[n++] = (struct opt_group){ NULL, cli->options };
	for (size_t i = 0; i < nr_backends; i++) {
		if (backends[i]->kind != cli->kind || !backends[i]->options ||
		    (b && backends[i] != b) || n + 2 >= CLI_MAX_GROUPS)
			continue;
		snprintf(titles[n], sizeof(titles[n]), "--%s=%s", cli->select,
			 backends[i]->name);
		g[n] = (struct opt_group){ titles[n], backends[i]->options };
		n++;
	}
	g[n++] = (struct opt_group){ "session", session_options };
	g[n] = (struct opt_group){ NULL, NULL };
}

/* The usage text: cli's header and the backends it offers. */
static void cli_usage(const struct session_cli *cli, char *buf, size_t len)
{
	size_t off = (size_t)snprintf(buf, len, "%s\n--%s=NAME, one of:\n", cli->header,
				      cli->select);

	for (size_t i = 0; i < nr_backends && off < len; i++) {
		char name[32];

		if (backends[i]->kind != cli->kind)
			continue;
		/* attach picks its default by the guest (the header says how) */
		snprintf(name, sizeof(name), "%s%s", backends[i]->name,
			 cli->kind == BACKEND_LAUNCH &&
			 backends[i] == backend_find(cli->kind, NULL) ? " (default)" : "");
		off += (size_t)snprintf(buf + off, len - off, "  %-15s%s\n", name,
					backends[i]->help);
	}
	if (off < len)
		snprintf(buf + off, len - off, "\n");
}

/* What the first pass looks for: the select option's value. */
struct find_select {
	int key;
	const char *name;
};

static int note_select(void *ctx, int key, char *arg)
{
	struct find_select *f = ctx;

	if (key == f->key)
		f->name = arg;
	return 0;
}

/* The key of cli's select option in its table. */
static int select_key(const struct session_cli *cli)
{
	for (const struct opt_def *d = cli->options; d->name; d++)
		if (!strcmp(d->name, cli->select))
			return d->key;
	return -1;
}

static int unknown_backend(const struct session_cli *cli, const char *name)
{
	char names[256] = "";

	for (size_t i = 0; i < nr_backends; i++) {
		if (backends[i]->kind != cli->kind)
			continue;
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s--%s=%s",
			 names[0] ? " or " : "", cli->select, backends[i]->name);
	}
	log_err("unknown %s '%s': use %s", cli->select, name, names);
	return 2;
}

/* The second pass: each option to the session, the command, the backend. */
struct dispatch {
	const struct session_cli *cli;
	struct session_opts *o;
	const struct backend_ops *b;
	void *bst;
};

static int dispatch(void *ctx, int key, char *arg)
{
	struct dispatch *d = ctx;
	char err[512] = "";
	int r;

	r = session_parse(d->o, key, arg);
	if (r)
		return r < 0 ? -1 : 0;
	r = d->cli->parse(d->cli->arg, key, arg);
	if (r)
		return r < 0 ? -1 : 0;
	if (d->b->parse && !d->b->parse(d->bst, key, arg, err, sizeof(err)))
		return 0;
	log_err("%s", err[0] ? err : "bad option");
	return -1;
}

int session_parse_argv(const struct session_cli *cli, int argc, char **argv,
		       struct session_opts *o, const struct backend_ops **b, void **bst)
{
	struct opt_group all[CLI_MAX_GROUPS], used[CLI_MAX_GROUPS];
	char titles[CLI_MAX_GROUPS][48], usage[2048];
	struct opts_cmd c = { .name = cli->command, .usage = usage, .groups = all,
			      .flags = OPTS_IN_ORDER | OPTS_QUIET };
	struct find_select f = { select_key(cli), NULL };
	struct dispatch d = { cli, o, NULL, NULL };
	int ret;

	cli_groups(cli, NULL, all, titles);
	cli_usage(cli, usage, sizeof(usage));
	/* the select option may come anywhere: a first pass finds it */
	opts_parse(&c, argc, argv, note_select, &f);
	*b = backend_find(cli->kind, f.name);
	*bst = NULL;
	if (!*b)
		return unknown_backend(cli, f.name);
	*bst = (*b)->new();
	if (!*bst) {
		log_err("out of memory");
		return 2;
	}
	cli_groups(cli, *b, used, titles);
	c.groups = used;
	c.help_groups = all;
	c.flags = OPTS_IN_ORDER;
	d.b = *b;
	d.bst = *bst;
	ret = opts_parse(&c, argc, argv, dispatch, &d);
	o->common.extra = argv + optind;
	o->common.nr_extra = (unsigned)(argc - optind);
	return ret;
}

void session_usage_print(FILE *f, const struct session_cli *cli)
{
	struct opt_group all[CLI_MAX_GROUPS];
	char titles[CLI_MAX_GROUPS][48], usage[2048];
	struct opts_cmd c = { .name = cli->command, .usage = usage, .groups = all };

	cli_groups(cli, NULL, all, titles);
	cli_usage(cli, usage, sizeof(usage));
	opts_help(f, &c);
}
