// SPDX-License-Identifier: MIT
/*
 * The collector (see host/collect/collector.h): per guest a store, one ring per
 * vCPU, a guest-state model, a channel decoder and a sync; one poll() loop
 * that reads channels, syncs every sync_ms, writes session.json
 * (collector-json.c) and watches
 * the samplers.
 *
 * Data safety: every exit path (stop flag, duration, target gone, sampler
 * fault, collector_free) stops the samplers, reads what the channels still
 * hold, drains the rings, files every held sample and syncs the store, so
 * nothing already taken is lost.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "host/collect/collector.h"
#include "host/collect/collector-priv.h"
#include "host/collect/decoder.h"
#include "host/collect/fetch.h"
#include "host/collect/gstate.h"
#include "lib/pynames.h"
#include "lib/ring.h"
#include "lib/sample.h"
#include "host/collect/stats.h"
#include "host/collect/store.h"
#include "host/collect/attribution.h"
#include "vmm/introspect/introspect.h"
#include "vmm/sampler.h"
#include "lib/clock.h"

/* Ring size per vCPU: room for RING_HEADROOM_S seconds (or four sync
 * intervals) of samples (with full call chains under -g, and a whole user
 * stack window under -g dwarf) at the configured rate, between 1 MiB and
 * 8 MiB.  Sized for chains alone, a dwarf ring held 0.6 s at 200 Hz: a
 * collector starved that long on a loaded host lost samples (ring full).  Rings are committed memory (lib/ring.h), so
 * this is what they cost, per vCPU, from the first second. */
#define RING_MIN_WORDS_CFG	(1u << 17)
#define RING_MAX_WORDS_CFG	(1u << 20)
#define RING_HEADROOM_S		4u
#define SAMPLE_WORDS		8u
#define SAMPLE_MAX_WORDS	(SAMPLE_WORDS + OPVM_MAX_CALLCHAIN)
/* a stack window's words: user ip, sp, bp, then the bytes (lib/ring.c) */
#define SAMPLE_STACK_WORDS	(3u + OPVM_MAX_STACK / 8)
#define READ_CHUNK		65536
#define READ_MAX_PER_WAKE	(1u << 20)	/* stay responsive under a flood */
#define STATUS_EVERY_MS		250
#define POLL_MAX_MS		100		/* the end's channel reading: stop flag */
/* The run loop's longest sleep: a stop signal interrupts poll() (one that
 * comes just before it waits this long at most), and a sampler's end is
 * seen this late at most.  Each wake-up costs: at 100 ms they were most
 * of what an idle guest's attach did between syncs. */
#define RUN_POLL_MAX_MS		1000
/* Held samples retried because of channel records, per sync interval: a
 * guest that sends exits by the thousand must not make the collector
 * retry its whole hold queue for each one. */
#define RETRY_BUDGET		(1u << 18)
/* -g dwarf: how long the end of a session waits for binaries the guest is
 * still sending, for the stacks that need them (attribution.h) */
#define FINISH_WAIT_MS		10000

struct collector *collector_new(const struct collector_config *cfg)
{
	struct collector *c;

	if (!cfg || cfg->nr_events > OPVM_MAX_EVENTS || (cfg->separate & ~OPVM_SEP_ALL)) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->cfg = *cfg;
	if (!c->cfg.nr_events) {
		/* a store needs one event; the timer is what every mode has */
		memset(&c->cfg.events[0], 0, sizeof(c->cfg.events[0]));
		strcpy(c->cfg.events[0].name, "TIMER");
		c->cfg.events[0].count = 1;
		c->cfg.nr_events = 1;
	}
	if (!c->cfg.sync_ms)
		c->cfg.sync_ms = 1000;
	if (!c->cfg.hold_ms)
		c->cfg.hold_ms = 2000;
	if (!c->cfg.model_max_bytes)
		c->cfg.model_max_bytes = OPVM_MODEL_MAX_BYTES;
	if (!c->cfg.model_total_bytes)
		c->cfg.model_total_bytes = OPVM_MODEL_TOTAL_BYTES;
	c->model_budget.limit = c->cfg.model_total_bytes;
	c->session_dir = strdup(cfg->session_dir && *cfg->session_dir ?
				cfg->session_dir : "./opvm_data");
	c->mode = strdup(cfg->mode ? cfg->mode : "unknown");
	c->buf = malloc(READ_CHUNK);
	c->reserve = malloc(RESERVE_BYTES);
	if (!c->session_dir || !c->mode || !c->buf || !c->reserve) {
		collector_free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->cfg.session_dir = c->session_dir;
	c->cfg.mode = c->mode;
	clock_gettime(CLOCK_REALTIME, &c->start_wall);
	c->start_ms = clk_now_ms();
	c->status_ms = c->start_ms;
	c->status_shown_ms = c->start_ms;
	return c;
}

static void guest_free(struct cguest *g)
{
	unsigned i;

	if (!g)
		return;
	if (g->fd >= 0)
		close(g->fd);
	attribution_free(g->sy);
	pynames_free(g->py);
	fetch_free(g->fetch);
	cguest_memsyms_free(g);
	introspect_free(g->intro);
	free(g->py_told);
	decoder_free(g->idec);
	decoder_free(g->dec);
	store_close(g->st);
	cguest_window_seal(g);
	gstate_free(g->gs);
	if (g->rings)
		for (i = 0; i < g->nr_vcpus; i++)
			ring_free(g->rings[i]);
	free(g->rings);
	free(g->name);
	free(g);
}

static void on_record(const struct opvm_rec_hdr *rec, size_t len, void *arg);

/* sync opened a sample file for a user image: the guest may send it. */
static void image_used(const struct gstate_cookie *ck, void *arg)
{
	struct cguest *g = arg;

	fetch_want(g->fetch, ck->path, ck->build_id, ck->build_id_len);
	cguest_memsyms_want(g, ck);
}

/* sync opened a sample file for a process's anonymous memory: JIT code,
 * which its runtime's perf map may name. */
static void anon_used(int64_t tgid, void *arg)
{
	struct cguest *g = arg;

	fetch_perfmap_want(g->fetch, tgid);
}

/* An unwind needs a binary the host lacks: asked for, and waited for while
 * it is on its way (attribution.h, first-session stacks). */
static int image_wait(const struct gstate_cookie *ck, void *arg)
{
	struct cguest *g = arg;

	fetch_want(g->fetch, ck->path, ck->build_id, ck->build_id_len);
	return fetch_coming(g->fetch, ck->build_id, ck->build_id_len);
}

/* Counter-overflow modes have no fixed rate (rate_hz 0): the largest ring. */
static size_t ring_words(const struct collector_config *cfg)
{
	uint64_t secs = cfg->sync_ms * 4 / 1000 > RING_HEADROOM_S ?
			cfg->sync_ms * 4 / 1000 : RING_HEADROOM_S;
	uint64_t per = cfg->callgraph ? SAMPLE_MAX_WORDS : SAMPLE_WORDS;
	uint64_t w;

	if (cfg->callgraph && !strcmp(cfg->callgraph, "dwarf"))
		per += SAMPLE_STACK_WORDS;
	w = (uint64_t)cfg->rate_hz * secs * per;
	if (!cfg->rate_hz || w > RING_MAX_WORDS_CFG)
		return RING_MAX_WORDS_CFG;
	return w < RING_MIN_WORDS_CFG ? RING_MIN_WORDS_CFG : (size_t)w;
}

/* attribution_config's host_file for guest g: the session's, told the guest. */
static int guest_host_file(void *arg, const char *path, const uint8_t *bid, size_t bid_len,
			   char *out, size_t outlen)
{
	struct cguest *g = arg;

	return g->c->cfg.host_file(g->c->cfg.host_file_arg, g->name, path, bid, bid_len, out,
				   outlen);
}

/* attribution's task_by_sp: boot samples named by their kernel stack. */
static int task_by_sp(void *arg, uint64_t sp, uint32_t *tgid, bool *kthread)
{
	struct cguest *g = arg;

	return g->intro ? introspect_task_by_sp(g->intro, sp, tgid, kthread) : -ENOENT;
}

/* attribution's on_hold: a sample waits for what the model lacks; without
 * opvm.ko, introspection's next walk brings it (introspect.h). */
static void sample_held(void *arg)
{
	struct cguest *g = arg;

	introspect_walk_wanted(g->intro);
}

/* The guest's directory holds its kernel symbols (fetch.h): two levels
 * above its store's samples/current, whose name (the store's mangled
 * guest name) also names its part of the build-id cache. */
static struct fetch *guest_fetch_new(const struct collector *c, struct store *st)
{
	char dir[PATH_MAX], cache[PATH_MAX], gname[PATH_MAX];
	struct fetch_config fc = {
		.guest_dir = dir,
		.max_file = c->cfg.fetch.max_file,
		.max_session = c->cfg.fetch.max_session,
		.max_cache = c->cfg.fetch.max_cache,
		.max_ksyms = c->cfg.fetch.max_ksyms,
		.no_ksyms = c->cfg.fetch.off,
		.public_files = c->cfg.public_tree,
		.verify = c->cfg.fetch.verify,
	};

	if (snprintf(dir, sizeof(dir), "%s/../..", store_dir(st)) >= (int)sizeof(dir)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	snprintf(cache, sizeof(cache), "%s", store_dir(st));
	*strrchr(cache, '/') = '\0';	/* .../guests/G/samples */
	*strrchr(cache, '/') = '\0';	/* .../guests/G */
	snprintf(gname, sizeof(gname), "%s", strrchr(cache, '/') + 1);
	if (!c->cfg.fetch.off && c->cfg.fetch.cache_dir &&
	    snprintf(cache, sizeof(cache), "%s/%s", c->cfg.fetch.cache_dir,
		     gname) < (int)sizeof(cache))
		fc.cache_dir = cache;
	return fetch_new(&fc);
}

/* Guest g's attribution: the session's rules, g's callbacks. */
static void guest_attribution_cfg(struct collector *c, struct cguest *g,
				  struct attribution_config *scfg)
{
	*scfg = (struct attribution_config){ .hold_ms = c->cfg.hold_ms,
				     .start_exec = c->cfg.start_exec,
				     .chains = c->cfg.callgraph != NULL,
				     .host_file = c->cfg.host_file ? guest_host_file : NULL,
				     .host_file_arg = g,
				     .image_used = image_used, .anon_used = anon_used, .image_arg = g,
				     .image_wait = c->cfg.host_file ? image_wait : NULL,
				     /* tests only: user samples shaped as host
				      * perf's (attribution.h) */
				     .no_cr3 = getenv("OPVM_TEST_NO_CR3") != NULL,
				     .task_by_sp = task_by_sp, .on_hold = sample_held,
				     .task_arg = g,
				     .py = g->py };
}

struct cguest *collector_add_guest(struct collector *c, const char *name,
				   unsigned nr_vcpus)
{
	struct attribution_config scfg;
	struct gstate_limits glim;
	struct cguest *g;
	unsigned i;
	size_t k;
	int err = ENOMEM;

	if (!c || !name || !*name || !nr_vcpus || nr_vcpus > 4096) {
		errno = EINVAL;
		return NULL;
	}
	if (c->nr_guests == MAX_GUESTS) {
		errno = ENOSPC;
		return NULL;
	}
	/* two guests of one name would share (and rotate) one sample tree */
	for (k = 0; k < c->nr_guests; k++) {
		if (!strcmp(c->guests[k]->name, name)) {
			errno = EEXIST;
			return NULL;
		}
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->c = c;
	g->fd = -1;
	g->retry_budget = RETRY_BUDGET;
	g->nr_vcpus = nr_vcpus;
	g->name = strdup(name);
	g->rings = calloc(nr_vcpus, sizeof(*g->rings));
	if (!g->name || !g->rings)
		goto fail;
	for (i = 0; i < nr_vcpus; i++) {
		g->rings[i] = ring_new(ring_words(&c->cfg));
		if (!g->rings[i])
			goto fail;
	}
	gstate_default_limits(&glim);
	glim.max_bytes = c->cfg.model_max_bytes;
	glim.shared = &c->model_budget;
	g->gs = gstate_new(&glim);
	if (!g->gs)
		goto fail;
	g->dec = decoder_new(g->gs);
	if (!g->dec)
		goto fail;
	cguest_window_begin(g);
	g->st = store_open(c->session_dir, name, c->cfg.events, c->cfg.nr_events,
			   c->cfg.separate, (c->cfg.append ? STORE_APPEND : 0) |
			   (c->cfg.public_tree ? STORE_PUBLIC : 0));
	if (!g->st) {
		err = errno;
		goto fail;
	}
	store_set_limits(g->st, &c->cfg.store_limits);
	g->fetch = guest_fetch_new(c, g->st);
	if (!g->fetch)
		goto fail;
	g->py = pynames_new();
	if (!g->py)
		goto fail;
	guest_attribution_cfg(c, g, &scfg);
	g->sy = attribution_new(g->st, g->gs, g->rings, nr_vcpus, &scfg);
	if (!g->sy)
		goto fail;
	decoder_set_record_fn(g->dec, on_record, g);
	c->guests[c->nr_guests++] = g;
	return g;
fail:
	guest_free(g);
	errno = err;
	return NULL;
}

struct ring *cguest_ring(struct cguest *g, unsigned vcpu)
{
	return g && vcpu < g->nr_vcpus ? g->rings[vcpu] : NULL;
}

struct sampler_sink cguest_sink(struct cguest *g)
{
	if (!g)
		return (struct sampler_sink){ NULL, 0, NULL };
	return (struct sampler_sink){ .rings = g->rings, .nr_rings = g->nr_vcpus, .py = g->py };
}

unsigned cguest_nr_vcpus(const struct cguest *g)
{
	return g ? g->nr_vcpus : 0;
}

struct gstate *cguest_gstate(struct cguest *g)
{
	return g ? g->gs : NULL;
}

const char *cguest_name(const struct cguest *g)
{
	return g ? g->name : NULL;
}

static int fd_prepare(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;
	return 0;
}

/* fd as g's channel from now on, in place of the one it had: owned (closed
 * here on failure), its HELLO asked again, and the partial record of the
 * last one dropped (a record never spans connections).  0 or -errno. */
static int channel_adopt(struct cguest *g, int fd)
{
	int err = fd_prepare(fd);

	if (err) {
		close(fd);
		return err;
	}
	if (g->fd >= 0)
		close(g->fd);
	g->fd = fd;
	g->hello_due = true;
	decoder_reset(g->dec);
	return 0;
}

int cguest_set_channel(struct cguest *g, int fd, int (*reconnect)(void *arg), void *arg)
{
	int err;

	if (!g || fd < 0)
		return -EINVAL;
	err = channel_adopt(g, fd);
	if (err)
		return err;
	g->reconnect = reconnect;
	g->reconnect_arg = arg;
	g->want_reconnect = false;
	return 0;
}

/*
 * Asks the relay for HELLO, once per connection and before anything else
 * (OPVM_REQ_HELLO).  The relay greets a host it sees connect, but it sees
 * only whether one is connected now: the previous host's close and this
 * one's open, handled together by a guest that was paused or given little
 * CPU in between, hide the new session from it, and nothing else would
 * ever bring this session a HELLO.  The ask is what the relay waits for,
 * not a time.  A relay that saw the connection takes the ask as answered
 * (one HELLO), one that predates the ask skips it.
 */
static void hello_ask(struct cguest *g)
{
	struct opvm_req_hello r;
	ssize_t n;

	if (!g->hello_due || g->fd < 0)
		return;
	memset(&r, 0, sizeof(r));
	r.hdr.magic = htole16(OPVM_PROTO_MAGIC);
	r.hdr.type = htole16(OPVM_REQ_HELLO);
	r.hdr.len = htole32((uint32_t)sizeof(r));
	n = write(g->fd, &r, sizeof(r));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;		/* the channel is full: at the next read */
	g->hello_due = false;	/* written, or the connection is broken (EOF next) */
}

/*
 * Tells the sampler what the newest HELLO says (slot array, switch rings).
 * The collector is the only reader of the channel, so this is how a
 * backend learns it; only the last of several HELLOs in one read matters.
 * The model's own copy goes: one HELLO type (lib/channel.h), checked once.
 */
static void hello_tell(struct cguest *g)
{
	const struct chan_hello *h = gstate_get_hello(g->gs);
	uint64_t n = gstate_get_stats(g->gs)->hellos;

	if (!h || n == g->hellos_told || !g->smp || !g->smp->ops->guest_hello)
		return;
	g->hellos_told = n;
	g->smp->ops->guest_hello(g->smp, h);
	g->orc_told = (struct sampler_orc){ 0 };	/* a new boot's come next */
	g->int3_told = (struct sampler_int3){ 0 };
}

/* Tells the sampler where the guest's kallsyms say the kernel's ORC
 * tables are (call graphs without a System.map), once per boot: after its
 * HELLO, or as soon as introspection decoded them (no opvm.ko). */
static void orc_tell(struct cguest *g)
{
	struct sampler_orc o = { 0 };

	if (!g->smp || !g->smp->ops->guest_orc || (!g->hellos_told && !g->intro) ||
	    fetch_kernel_orc(g->fetch, &o.ip_start, &o.ip_stop, &o.orc_start))
		return;
	/* Without a HELLO the release comes from the guest's memory. */
	if (!g->hellos_told)
		snprintf(o.release, sizeof(o.release), "%s", g->intro_release);
	if (!memcmp(&o, &g->orc_told, sizeof(o)))
		return;
	g->orc_told = o;
	g->smp->ops->guest_orc(g->smp, &o);
}

/* Tells the sampler where the guest kernel's int3 entry path is, by its
 * kallsyms, once per boot (when, like orc_tell()): a backend that can end
 * a vCPU's loop on a stale int3 watches its samples for one
 * (vmm/guest/int3loop.h). */
static void int3_tell(struct cguest *g)
{
	struct sampler_int3 r = { 0 };

	if (!g->smp || !g->smp->ops->guest_int3 || (!g->hellos_told && !g->intro) ||
	    fetch_kernel_int3(g->fetch, &r) || !memcmp(&r, &g->int3_told, sizeof(r)))
		return;
	g->int3_told = r;
	g->smp->ops->guest_int3(g->smp, &r);
}

/* Everything the guest's kallsyms tell a sampler. */
static void kallsyms_tell(struct cguest *g)
{
	orc_tell(g);
	int3_tell(g);
}

/* ---- CPython processes (docs/runtimes.md) ------------------------------ */

/* PY_VERSION_HEX of 3.N for an executable named python3.N, else 0. */
static uint32_t python_version_of(const char *path)
{
	const char *b = strrchr(path, '/');
	unsigned minor;
	char end;

	b = b ? b + 1 : path;
	if (sscanf(b, "python3.%u%c", &minor, &end) != 1 || minor < 11 || minor > 99)
		return 0;
	return 0x03000000u | minor << 16;
}

/* Where the process's executable named python3.N begins: the guest
 * reports its executable mappings only, so the file's first page is the
 * first such mapping's start less its file offset (the ELF header page,
 * mapped read-only below the text). */
static int python_add(const struct gstate_process *p, void *arg)
{
	struct sampler_python *set = arg;

	if (!p->cr3 || set->nr >= SAMPLER_PYTHON_MAX)
		return 0;
	for (size_t i = 0; i < p->nr_maps; i++) {	/* sorted by start */
		const struct gstate_mapping *m = &p->maps[i];
		uint32_t v = m->cookie ? python_version_of(m->cookie->path) : 0;

		if (!v || m->pgoff > m->start || ((m->start - m->pgoff) & 0xfff))
			continue;
		set->as[set->nr].cr3 = p->cr3;
		set->as[set->nr].exe_base = m->start - m->pgoff;
		set->as[set->nr].version = v;
		set->nr++;
		break;
	}
	return 0;
}

/* Tells the sampler which address spaces run CPython, when the guest
 * state changed (at most every 200 ms: a process list is walked). */
static void python_tell(struct cguest *g)
{
	uint64_t gen = gstate_generation(g->gs);
	int64_t now;
	struct sampler_python *set;

	/* --no-python: never told, so the sampler reads no frames at all (and
	 * the perf sampler keeps its 100 ms polls) */
	if (!g->smp || !g->smp->ops->guest_python || gen == g->py_gen ||
	    g->c->cfg.python_off)
		return;
	now = clk_now_ns();
	if (g->py_at && now - g->py_at < 200 * 1000000ll)
		return;
	set = calloc(1, sizeof(*set));
	if (!set)
		return;
	g->py_gen = gen;
	g->py_at = now;
	gstate_for_each_proc(g->gs, python_add, set);
	if (g->py_told ? !memcmp(set, g->py_told, sizeof(*set)) : !set->nr) {
		free(set);
		return;
	}
	g->smp->ops->guest_python(g->smp, set);
	free(g->py_told);
	g->py_told = set;
}

static void intro_tool_set(struct cguest *g);

void cguest_set_sampler(struct cguest *g, struct sampler *s)
{
	if (!g)
		return;
	g->smp = s;
	g->smp_stopped = false;
	g->gone = false;
	g->hellos_told = 0;
	g->cur_known = false;	/* the new sampler was told nothing */
	if (g->intro) {
		intro_tool_set(g);
		introspect_current_again(g->intro);
	}
	free(g->py_told);
	g->py_told = NULL;
	g->py_gen = 0;
	hello_tell(g);		/* a HELLO read before the sampler came */
	kallsyms_tell(g);
}

/* ---- introspection ----------------------------------------------------------- */

static void intro_record(void *arg, const void *rec, size_t len);
static void intro_walked(void *arg, const struct introspect_walk *w);
static void intro_progress(void *arg, const struct introspect_progress *p);

int cguest_set_introspect(struct cguest *g, struct guestmem *mem, enum introspect_mode mode)
{
	struct introspect_config ic = { .no_ksyms = g && g->c->cfg.fetch.off,
					.nr_cpus = g ? g->nr_vcpus : 0 };

	if (!g)
		return -EINVAL;
	g->intro_mode = mode;
	if (mode == INTROSPECT_OFF || !mem)
		return 0;
	g->idec = decoder_new(g->gs);
	g->intro = g->idec ? introspect_new(mem, &ic) : NULL;
	if (!g->intro) {
		int err = -errno;

		decoder_free(g->idec);
		g->idec = NULL;
		return err;
	}
	decoder_set_record_fn(g->idec, on_record, g);
	intro_tool_set(g);
	/* from the first sample on: the first search is a sync away */
	gstate_set_procs_expected(g->gs, true);
	return 0;
}

/* Introspection's records go through their own decoder (their own framing
 * and sequence) into the same model, fetch and callbacks as the
 * channel's. */
static void intro_record(void *arg, const void *rec, size_t len)
{
	struct cguest *g = arg;
	struct opvm_rec_hdr h;

	memcpy(&h, rec, sizeof(h));
	if (le16toh(h.type) == OPVM_REC_KSYMS)
		g->intro_ksyms_records++;
	decoder_feed(g->idec, rec, len);
}

/* opvm.ko's model against introspection's walk: the processes with an
 * address space, each compared by CR3 (normalised) and name. */
static void intro_walked(void *arg, const struct introspect_walk *w)
{
	struct cguest *g = arg;

	if (!gstate_get_hello(g->gs))
		return;		/* no second source to check */
	g->xc_walks++;
	for (size_t i = 0; i < w->nr_tasks; i++) {
		const struct introspect_task *t = &w->tasks[i];
		const struct gstate_process *p;

		if (!t->cr3)
			continue;	/* kernel threads: the module sends 0 too */
		g->xc_seen++;
		p = gstate_proc_by_tgid(g->gs, t->tgid);
		if (!p)
			g->xc_missing++;
		else if (p->cr3 == opvm_cr3_normalise(t->cr3) && !strcmp(p->comm, t->comm))
			g->xc_agree++;
		else
			g->xc_differ++;
	}
}

/* What introspection's search means to the model: whether processes
 * (and their mappings) are announced, or soon will be. */
static void intro_progress(void *arg, const struct introspect_progress *p)
{
	struct cguest *g = arg;

	g->intro_state = p->state;
	g->intro_ksyms_sent = p->ksyms_sent;
	snprintf(g->intro_release, sizeof(g->intro_release), "%s", p->release);
	if (p->procs_live)
		gstate_set_procs_walked(g->gs);
	if (p->procs_live && p->maps)
		gstate_set_maps_walked(g->gs);
	if (p->procs_live)
		gstate_set_walks(g->gs, p->walks);
	gstate_set_procs_expected(g->gs, p->procs_expected);
}

/* Where the guest's CPUs' current-task pointers are (introspection found
 * them, or lost them at a reboot), straight to the sampler. */
static void intro_current(void *arg, const struct kcurrent_info *ci, bool known)
{
	struct cguest *g = arg;

	if (!g->smp || !g->smp->ops->guest_current)
		return;
	g->cur_known = known;
	g->smp->ops->guest_current(g->smp, ci);
}

/* What introspection hands to this guest: the current-task pointers only
 * for a sampler that reads them (looking for them reads guest memory). */
static void intro_tool_set(struct cguest *g)
{
	g->intro_tool = (struct introspect_tool){
		.arg = g, .record = intro_record, .walked = intro_walked,
		.progress = intro_progress,
		.current = g->smp && g->smp->ops->guest_current ? intro_current : NULL,
	};
}

static void ksyms_word(struct cguest *g, uint64_t now);

/* Whether the guest's OS started since the last poll (first samples, or
 * first after a reboot's firmware): a kernel search backed off is told.
 * Not at every OS sample: an OS without VMCOREINFO would be searched
 * once a second for ever. */
static bool os_started(struct cguest *g)
{
	uint64_t os, boot;
	bool started;

	if (!g->sy)
		return false;
	attribution_os_counts(g->sy, &os, &boot);
	if (boot != g->boot_seen)
		g->fw_since = true;
	started = os != g->os_seen && (g->fw_since || !g->os_seen);
	if (os != g->os_seen)
		g->fw_since = false;
	g->os_seen = os;
	g->boot_seen = boot;
	return started;
}

/* One bounded step of introspection, told what the session learned since
 * the last; what it finds comes back through g->intro_tool.  final: the
 * session's end (only the modules' symbols still owed go out). */
static void intro_poll(struct cguest *g, uint64_t now, bool final)
{
	const struct fetch_stats *fs = fetch_get_stats(g->fetch);
	bool auto_mode = g->intro_mode == INTROSPECT_AUTO;
	struct introspect_news news = {
		/* the relay sends all of them (asked, or it predates the
		 * word).  The fetch counts introspection's own records too:
		 * only more are the relay's */
		.relay_ksyms = auto_mode && fs->ksyms_records > g->intro_ksyms_records &&
			       !fs->ksyms_asked_modules && !fs->ksyms_asked_none,
		.module_active = auto_mode && gstate_get_hello(g->gs),
		.final = final,
	};

	if (!g->intro)
		return;
	news.os_started = !final && os_started(g);
	introspect_poll(g->intro, now, &news, &g->intro_tool);
	if (final)
		return;
	kallsyms_tell(g);
	cguest_memsyms_poll(g, false);
	ksyms_word(g, now);	/* introspection may have decided it */
}

/* ---- the kernel's symbols: what the relay must send -------------------------- */

/* How long a HELLO's word waits for introspection still searching guest
 * memory for the kernel (host time; the relay itself waits
 * OPVM_KSYMS_WAIT_MS before it sends everything anyway). */
#define KSYMS_INTRO_WAIT_MS	5000

/*
 * What the relay must send: reading /proc/kallsyms is the relay's largest
 * cost to the guest (~300 M instructions: the kernel formats every line),
 * so it is asked for only when the host has vmlinux's symbols from nowhere
 * else: no System.map, none of this boot's in the session's kallsyms, and
 * introspection off, without guest memory, or failed.  The modules'
 * symbols are asked for in any case (none of those has them, or they may
 * have changed: opvm.ko walks their text for little).  -1: not known yet
 * (introspection still searching).
 */
static int ksyms_need(const struct cguest *g, uint64_t now)
{
	if (g->c->cfg.fetch.off)
		return OPVM_KSYMS_WANT_NONE;	/* --no-fetch: nothing is kept */
	if (g->intro && g->intro_ksyms_sent)
		return OPVM_KSYMS_WANT_MODULES;
	/* introspection's table first, even with a System.map: sent while
	 * the relay's is open, the two would interleave */
	if (g->intro && g->intro_state == INTROSPECT_SEARCHING &&
	    now - g->word_wait_ms < KSYMS_INTRO_WAIT_MS)
		return -1;
	/* the session's kallsyms has this boot's already (a sampler started
	 * again): vmlinux's are not read again */
	if (g->c->cfg.symbols.system_map || fetch_ksyms_stored(g->fetch))
		return OPVM_KSYMS_WANT_MODULES;
	return OPVM_KSYMS_WANT_ALL;
}

/* After each HELLO, the host's word to the relay, as soon as it is known. */
static void ksyms_word(struct cguest *g, uint64_t now)
{
	int want;

	if (!fetch_ksyms_word_due(g->fetch) || g->fd < 0) {
		g->word_wait_ms = 0;
		return;
	}
	if (!g->word_wait_ms)
		g->word_wait_ms = now ? now : 1;
	want = ksyms_need(g, now);
	if (want >= 0 && fetch_ksyms_tell(g->fetch, g->fd, (unsigned)want) != -EAGAIN)
		g->word_wait_ms = 0;
}

/* ---- channel ---------------------------------------------------------------- */

/* Retrying held samples costs one attribution each; past the budget, only
 * drain the rings (what matters most: samples already taken) and let the
 * periodic sync retry. */
static bool budget_take(struct cguest *g)
{
	size_t held = attribution_nr_held(g->sy);

	if (held > g->retry_budget)
		return false;
	g->retry_budget -= held;
	return true;
}

/*
 * What a record asks of attribution before it changes the model, one
 * function per record type (record_before[]); each gets a record the
 * decoder checked, its fields little-endian.  A record that makes the
 * model forget something must not be applied while samples that need it
 * still sit in the rings (see "Ordering" in host/collect/attribution.h):
 * those go first.  Processes going away also retry the held samples,
 * which may be waiting for exactly the process that is about to exit.
 */
typedef void (*record_before_fn)(struct cguest *g, uint16_t type, const struct opvm_rec_hdr *rec,
				 size_t len, uint64_t now);

/* A process announced again: what was filed under its old self goes
 * first (a new process forgets nothing). */
static void before_proc(struct cguest *g, uint16_t type, const struct opvm_rec_hdr *rec,
			size_t len, uint64_t now)
{
	struct opvm_rec_proc r;

	(void)type;
	if (len < sizeof(r))
		return;
	memcpy(&r, rec, sizeof(r));
	if (!gstate_proc_by_tgid(g->gs, le32toh(r.tgid)))
		return;
	if (budget_take(g))
		attribution_forget_process(g->sy, le32toh(r.tgid), now);
	else
		attribution_drain(g->sy, now);
}

/* A reboot: file everything with the old model.  The first HELLO forgets
 * nothing, and samples already waiting are better held for the walk that
 * follows it. */
static void before_hello(struct cguest *g, uint16_t type, const struct opvm_rec_hdr *rec,
			 size_t len, uint64_t now)
{
	(void)type, (void)rec, (void)len;
	if (!gstate_get_hello(g->gs))
		return;
	if (budget_take(g))
		attribution_flush(g->sy, now);
	else
		attribution_drain(g->sy, now);
}

/* exec, a process's or a thread's exit: same layout, the tid (exit) or
 * tgid (exec) first. */
static void before_exit(struct cguest *g, uint16_t type, const struct opvm_rec_hdr *rec,
			size_t len, uint64_t now)
{
	struct opvm_rec_exit r;
	uint32_t id;

	if (len < sizeof(r))
		return;
	memcpy(&r, rec, sizeof(r));
	id = type == OPVM_REC_PROC_EXIT ? le32toh(r.tgid) : le32toh(r.tid);
	if (type == OPVM_REC_THREAD_EXIT ? !gstate_thread_tgid(g->gs, id) :
					   !gstate_proc_by_tgid(g->gs, id))
		return;		/* nothing to forget */
	if (!budget_take(g))
		attribution_drain(g->sy, now);
	else if (type == OPVM_REC_THREAD_EXIT)
		attribution_run(g->sy, now);	/* held samples of the thread */
	else
		attribution_forget_process(g->sy, id, now);
}

/* mmap, munmap: same layout up to end. */
static void before_mapping(struct cguest *g, uint16_t type, const struct opvm_rec_hdr *rec,
			   size_t len, uint64_t now)
{
	struct opvm_rec_munmap r;

	(void)type;
	if (len < sizeof(r))
		return;
	memcpy(&r, rec, sizeof(r));
	if (gstate_map_overlaps(gstate_proc_by_tgid(g->gs, le32toh(r.tgid)),
				le64toh(r.start), le64toh(r.end)))
		attribution_drain(g->sy, now);
}

/* A cookie id reused for another file: samples already in the rings were
 * taken under the old name (the decoder checked the lengths). */
static void before_cookie(struct cguest *g, uint16_t type, const struct opvm_rec_hdr *rec,
			  size_t len, uint64_t now)
{
	struct opvm_rec_cookie r;

	(void)type;
	if (len < sizeof(r))
		return;
	memcpy(&r, rec, sizeof(r));
	if (le16toh(r.path_len) <= len - sizeof(r) &&
	    gstate_cookie_renames(g->gs, le64toh(r.cookie), (const char *)rec + sizeof(r),
				  le16toh(r.path_len), r.build_id, r.build_id_len))
		attribution_drain(g->sy, now);
}

/* A module loaded over another's text, or one going. */
static void before_module(struct cguest *g, uint16_t type, const struct opvm_rec_hdr *rec,
			  size_t len, uint64_t now)
{
	struct opvm_rec_module r;
	uint64_t base, end;

	if (len < sizeof(r))
		return;
	memcpy(&r, rec, sizeof(r));
	base = le64toh(r.base);
	if (__builtin_add_overflow(base, le64toh(r.size), &end))
		end = UINT64_MAX;
	if (gstate_module_by_name(g->gs, r.name, strnlen(r.name, sizeof(r.name))) ||
	    (type == OPVM_REC_MODULE && gstate_module_overlaps(g->gs, base, end)))
		attribution_drain(g->sy, now);
}

/* The records that make the model forget or rename something; the others
 * (NULL) ask nothing of attribution. */
static const record_before_fn record_before[OPVM_REC_TYPE_MAX] = {
	[OPVM_REC_HELLO]	= before_hello,
	[OPVM_REC_PROC]		= before_proc,
	[OPVM_REC_EXEC]		= before_exit,
	[OPVM_REC_PROC_EXIT]	= before_exit,
	[OPVM_REC_THREAD_EXIT]	= before_exit,
	[OPVM_REC_COOKIE]	= before_cookie,
	[OPVM_REC_MMAP]		= before_mapping,
	[OPVM_REC_MUNMAP]	= before_mapping,
	[OPVM_REC_MODULE]	= before_module,
	[OPVM_REC_MODULE_FREE]	= before_module,
};

/* Every record of both sources, the channel's decoder and introspection's,
 * before the model applies it: the fetch's, then attribution's per type. */
static void on_record(const struct opvm_rec_hdr *rec, size_t len, void *arg)
{
	struct cguest *g = arg;
	uint16_t type = le16toh(rec->type);

	fetch_record(g->fetch, rec, len);
	if (type < OPVM_REC_TYPE_MAX && record_before[type])
		record_before[type](g, type, rec, len, clk_now_ms());
}

static void channel_try_reconnect(struct cguest *g)
{
	int fd;

	g->want_reconnect = false;
	if (!g->reconnect)
		return;
	fd = g->reconnect(g->reconnect_arg);
	if (fd < 0 || channel_adopt(g, fd))
		g->want_reconnect = true;	/* the guest may come back */
}

/* Reads what the channel holds now (bounded).  Returns 0 or -errno for a
 * host-side decoder failure. */
static int channel_read_bytes(struct collector *c, struct cguest *g)
{
	size_t total = 0;

	while (g->fd >= 0 && total < READ_MAX_PER_WAKE) {
		ssize_t n = read(g->fd, c->buf, READ_CHUNK);

		if (n > 0) {
			int err = decoder_feed(g->dec, c->buf, (size_t)n);

			if (err)
				return err;
			hello_tell(g);
			kallsyms_tell(g);
			total += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		/* EOF or a dead socket: the guest went away or rebooted */
		close(g->fd);
		g->fd = -1;
		channel_try_reconnect(g);
	}
	return 0;
}

/* What the channel brought, then the next request for a guest file (one
 * at a time: the next goes as soon as the last one's end arrived). */
static int channel_read(struct collector *c, struct cguest *g)
{
	int err;
	uint64_t settled;

	hello_ask(g);
	err = channel_read_bytes(c, g);
	hello_ask(g);	/* a connection made again while reading */

	fetch_poll(g->fetch, g->fd, clk_now_ms());
	ksyms_word(g, clk_now_ms());
	settled = fetch_settled(g->fetch);
	if (settled != g->settled_seen) {
		g->settled_seen = settled;
		attribution_images_changed(g->sy);
	}
	return err;
}

/* ---- sync ------------------------------------------------------------------- */

/* With windows (`opvm exporter --continuous`), session.json is written
 * every SESSION_JSON_MS, not at every sync: rewritten once a second it was
 * 56 % of an idle KVM guest's sampler CPU, and no one reads the open
 * window's while it is open (the exporter reads sealed windows).  It is
 * written at the sync that ends each window (what the sealed window keeps),
 * at the first sync of the next (its times for a session killed then) and
 * at the end; a session killed between writes leaves a current/ whose
 * times end up to SESSION_JSON_MS early (the next session seals it with
 * them).  Without windows, at every sync as before. */
#define SESSION_JSON_MS	5000

static bool session_due(const struct collector *c, const struct cguest *g, uint64_t now,
			bool final)
{
	return final || !c->cfg.window_ms || g->meta_due || !g->meta_ms ||
	       now - g->meta_ms >= SESSION_JSON_MS;
}

static int guest_sync(struct collector *c, struct cguest *g, uint64_t now, bool final)
{
	int err, ret = 0;

	if (!g->st)	/* a window that could not be opened */
		return g->last_err ? g->last_err : -EIO;
	/* state first, so the samples about to be drained find it */
	err = channel_read(c, g);
	if (err)
		ret = err;
	if (g->fd < 0 && g->want_reconnect && !final) {
		channel_try_reconnect(g);
		err = channel_read(c, g);
		if (err && !ret)
			ret = err;
	}
	intro_poll(g, now, final);
	if (!final)
		python_tell(g);
	/* samples that could not be filed are counted (store_errors), and
	 * profiling goes on: not this function's failure */
	err = final ? attribution_flush(g->sy, now) : attribution_run(g->sy, now);
	if (final)
		cguest_memsyms_poll(g, true);	/* images the last samples named */
	g->retry_budget = RETRY_BUDGET;
	if (err)
		g->last_err = err;
	err = store_sync(g->st);
	if (err)
		g->last_err = err;
	if (!session_due(c, g, now, final))
		return ret;
	err = collector_write_session(c, g, now);
	if (err && !ret)
		ret = err;
	g->meta_ms = now;
	g->meta_due = false;
	return ret;
}

/* The guests whose window has ended (collector-window.c): each synced
 * first, so that everything up to now goes into the closing window (held
 * samples past their hold time too, not a later window), then rotated.
 * 0, or -errno when a guest was left without a store. */
static int windows_tick(struct collector *c, uint64_t now_ms)
{
	int64_t now = clk_wall_ms();

	for (size_t i = 0; i < c->nr_guests; i++) {
		struct cguest *g = c->guests[i];
		int err;

		if (!cguest_window_due(g, now))
			continue;
		err = g->st ? attribution_window_end(g->sy, now_ms) : 0;
		if (err)
			g->last_err = err;	/* counted, as guest_sync() does */
		g->meta_due = true;	/* what the sealed window keeps */
		guest_sync(c, g, now_ms, false);
		err = cguest_window_rotate(g);
		g->meta_due = true;	/* the new window's times */
		if (err)
			return err;
	}
	return 0;
}

int collector_sync(struct collector *c)
{
	uint64_t now = clk_now_ms();
	int ret = 0;
	size_t i;

	if (!c)
		return -EINVAL;
	for (i = 0; i < c->nr_guests; i++) {
		int err = guest_sync(c, c->guests[i], now, false);

		if (err && !ret)
			ret = err;
	}
	return ret;
}

static void samplers_stop(struct collector *c)
{
	size_t i;

	for (i = 0; i < c->nr_guests; i++) {
		struct cguest *g = c->guests[i];

		if (g->smp && !g->smp_stopped && g->smp->ops && g->smp->ops->stop)
			g->smp->ops->stop(g->smp);
		g->smp_stopped = true;
	}
}

/* -g dwarf: stacks still waiting for binaries the guest is sending (an
 * attach whose guest runs on) get up to FINISH_WAIT_MS of channel reading
 * for them to come; the final sync then files them. */
static void finish_wait(struct collector *c)
{
	uint64_t until = clk_now_ms() + FINISH_WAIT_MS;
	struct pollfd pfd[MAX_GUESTS];
	struct cguest *pg[MAX_GUESTS];

	for (;;) {
		uint64_t now = clk_now_ms();
		int n = 0, r;

		for (size_t i = 0; i < c->nr_guests; i++) {
			struct cguest *g = c->guests[i];

			if (g->fd < 0 || !attribution_nr_deferred(g->sy) || !fetch_busy(g->fetch))
				continue;
			pfd[n] = (struct pollfd){ .fd = g->fd, .events = POLLIN };
			pg[n++] = g;
		}
		if (!n || now >= until)
			return;
		r = poll(pfd, (nfds_t)n, until - now < POLL_MAX_MS ? (int)(until - now) :
			 POLL_MAX_MS);
		if (r < 0 && errno != EINTR)
			return;
		for (int i = 0; i < n; i++)
			if (channel_read(c, pg[i]))
				return;
	}
}

/* Stop sampling, then file everything: rings, held samples, store. */
static int collector_finish(struct collector *c)
{
	uint64_t now;
	int ret = 0;
	size_t i;

	samplers_stop(c);
	finish_wait(c);
	now = clk_now_ms();
	for (i = 0; i < c->nr_guests; i++) {
		int err = guest_sync(c, c->guests[i], now, true);

		if (err && !ret)
			ret = err;
	}
	c->finished = true;
	return ret;
}

/* ---- status line ------------------------------------------------------------- */

static void status_line(struct collector *c, uint64_t now, bool last)
{
	struct collector_progress p = { .nr_guests = c->nr_guests };
	uint64_t received = 0, lost = 0, held = 0;
	double secs;
	size_t i;

	if (!c->cfg.progress)
		return;
	if (!last && now - c->status_shown_ms < STATUS_EVERY_MS)
		return;
	for (i = 0; i < c->nr_guests; i++) {
		struct sampler_stats ss;
		struct opvm_stats st;

		collector_guest_stats(c->guests[i], &st, &ss);
		received += st.received;
		/* as the summary's "lost": ring overflow only (samples without a
		 * process or mapping are filed under {anon}, not lost) */
		lost += st.lost_overflow;
		held += attribution_nr_held(c->guests[i]->sy);
	}
	secs = (double)(now - c->start_ms) / 1000.0;
	/* received grows at each sync (every sync_ms), not at each status
	 * refresh: the rate is over the time between two growths, and kept
	 * until two sync intervals pass without one. */
	if (received != c->status_received) {
		c->status_rate = now > c->status_ms ? (double)(received - c->status_received) *
				 1000.0 / (double)(now - c->status_ms) : 0;
		c->status_ms = now;
		c->status_received = received;
	} else if (now - c->status_ms > 2 * (uint64_t)c->cfg.sync_ms) {
		c->status_rate = 0;
	}
	p.secs = secs;
	p.rate = c->status_rate;
	p.received = received;
	p.lost = lost;
	p.held = held;
	c->cfg.progress(c->cfg.progress_arg, &p, last);
	c->status_shown = true;
	c->status_shown_ms = now;
}

/* ---- main loop ---------------------------------------------------------------- */

/* Returns 1 when every sampled guest is gone, -errno for a sampler fault,
 * else 0. */
static int samplers_check(struct collector *c)
{
	size_t i, sampled = 0, gone = 0;

	for (i = 0; i < c->nr_guests; i++) {
		struct cguest *g = c->guests[i];
		int st;

		if (!g->smp || !g->smp->ops || !g->smp->ops->status)
			continue;
		sampled++;
		if (g->gone) {
			gone++;
			continue;
		}
		st = g->smp->ops->status(g->smp);
		if (st < 0)
			return st;
		if (st == SAMPLER_TARGET_GONE) {
			g->gone = true;
			gone++;
		}
	}
	return sampled && gone == sampled ? 1 : 0;
}

int collector_run(struct collector *c, volatile sig_atomic_t *stop, uint64_t duration_ms)
{
	struct pollfd pfd[MAX_GUESTS];
	struct cguest *pg[MAX_GUESTS];
	uint64_t begin = clk_now_ms(), next_sync;
	int ret = 0, err;

	if (!c)
		return -EINVAL;
	next_sync = begin + c->cfg.sync_ms;
	c->finished = false;
	for (;;) {
		uint64_t now = clk_now_ms();
		int timeout, n = 0, r;
		size_t i;

		if (stop && *stop)
			break;
		if (duration_ms && now - begin >= duration_ms)
			break;
		r = samplers_check(c);
		if (r < 0) {
			ret = r;
			break;
		}
		if (r == 1)
			break;
		if (now >= next_sync) {
			/* a store error (disk full...) is counted in
			 * session.json's store_errors; collecting goes on, and
			 * the final sync reports it */
			collector_sync(c);
			next_sync = now + c->cfg.sync_ms;
		}
		err = windows_tick(c, now);
		if (err) {
			ret = err;
			break;
		}
		status_line(c, now, false);

		timeout = (int)(next_sync > now ? next_sync - now : 0);
		if (timeout > RUN_POLL_MAX_MS)
			timeout = RUN_POLL_MAX_MS;
		timeout = (int)collector_window_wait_ms(c, (unsigned)timeout);
		if (c->cfg.progress && timeout > STATUS_EVERY_MS)
			timeout = STATUS_EVERY_MS;
		if (duration_ms && begin + duration_ms - now < (uint64_t)timeout)
			timeout = (int)(begin + duration_ms - now);
		for (i = 0; i < c->nr_guests; i++) {
			if (c->guests[i]->fd < 0)
				continue;
			pfd[n].fd = c->guests[i]->fd;
			pfd[n].events = POLLIN;
			pfd[n].revents = 0;
			pg[n++] = c->guests[i];
		}
		r = poll(pfd, (nfds_t)n, timeout);
		if (r < 0 && errno != EINTR) {
			ret = -errno;
			break;
		}
		for (i = 0; r > 0 && i < (size_t)n; i++) {
			if (!pfd[i].revents)
				continue;
			err = channel_read(c, pg[i]);
			if (err) {
				ret = err;
				goto out;
			}
		}
	}
out:
	err = collector_finish(c);
	if (!ret)
		ret = err;
	status_line(c, clk_now_ms(), true);
	return ret;
}

void collector_free(struct collector *c)
{
	size_t i;

	if (!c)
		return;
	if (!c->finished)
		collector_finish(c);
	if (c->status_shown && c->cfg.progress && !c->finished)
		c->cfg.progress(c->cfg.progress_arg, NULL, true);
	for (i = 0; i < c->nr_guests; i++)
		guest_free(c->guests[i]);
	free(c->buf);
	free(c->reserve);
	free(c->session_dir);
	free(c->mode);
	free(c);
}
