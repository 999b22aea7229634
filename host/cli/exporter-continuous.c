// SPDX-License-Identifier: MIT
/*
 * `opvm exporter --continuous` (host/cli/exporter-job.h): every guest the
 * exporter may profile gets one `opvm attach --window` child from when it
 * appears until it goes away, sampling at --rate into the rolling store,
 * one session directory per guest:
 *
 *   STORE/<uid>.<guest>/guests/<guest>/samples/w-<start>-<end>/   sealed windows
 *   STORE/<uid>.<guest>/guests/<guest>/samples/current/           the open one
 *   STORE/<uid>.<guest>/attach.log                                the child's output
 *
 * (<guest> mangled as the store mangles names, host/collect/store.h).  The
 * guests and their children are the on-demand profiles' (exporter-guests.c:
 * sockets of the QEMU's own user, attach --qemu-pid, the perf sampler for
 * KVM, the gdbstub only with --allow-gdbstub), so the hardening is theirs.
 * A child is started from this module's thread and tied to it
 * (subcmd_spawn_tied()): an exporter killed with SIGKILL takes its
 * children with it, each sealing its last window; a child killed with
 * SIGKILL leaves a current/ the next child of that guest seals.
 *
 * The same thread keeps the store within --retention and --max-store
 * (sealed windows, every guest together): windows past the retention go,
 * then the oldest of all until the rest fit, each counted.  A sealed
 * window never changes, so its size is measured once.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/cli/exporter-job.h"
#include "host/cli/subcmd.h"
#include "host/collect/store.h"
#include "lib/log.h"
#include "lib/safepath.h"
#include "lib/array.h"
#include "lib/clock.h"
#include "lib/signals.h"

#define PCONT_MAX		256	/* guests sampled at once */
#define PCONT_TICK_MS		1000
#define PCONT_BACKOFF_MS	5000	/* a child that ended while its guest runs */
#define PCONT_GONE_GRACE_MS	10000	/* its guest went and it did not */
#define PCONT_STOP_MS		10000	/* SIGTERM at the end, then SIGKILL */
#define PCONT_MAX_WINDOWS	(1u << 20)
#define PCONT_DU_DEPTH		12

/* One guest's sampler child. */
struct csampler {
	struct pguest g;
	char key[OPVM_MANGLE_MAX + 16];	/* its directory in the store */
	pid_t pid;			/* 0: none now */
	int64_t retry_at;		/* monotonic ms: no child before */
	int64_t gone_at;		/* its guest was last seen; 0: seen now */
	int seen;			/* in this scan */
};

/* One sealed window of the store. */
struct cwin {
	char key[OPVM_MANGLE_MAX + 16];
	char gdir[OPVM_MANGLE_MAX];
	char name[STORE_WINDOW_NAME_MAX];
	int64_t start, end;
	uint64_t bytes;
};

struct pcont {
	struct pprof *p;
	pthread_t thread;
	int started;
	char root[PATH_MAX];
	struct csampler s[PCONT_MAX];
	unsigned nr;
	struct cwin *w;			/* sorted by key, gdir, name */
	size_t nr_w;
	/* metrics, under p->lock */
	uint64_t starts, exits, dropped_retention, dropped_cap, windows, bytes;
	unsigned running;
	double cpu_reaped;
};

/* The store directory of g: "<uid>.<mangled name>". */
static void guest_key(const struct pguest *g, char *key, size_t len)
{
	char mg[OPVM_MANGLE_MAX];

	store_mangle(g->q.name, strlen(g->q.name), mg);
	snprintf(key, len, "%u.%s", (unsigned)g->owner, mg);
}

/* ---- the store's size ---------------------------------------------------- */

/* Bytes of the tree at dfd/name (blocks), not following links. */
static uint64_t tree_bytes(int dfd, const char *name, int depth)
{
	struct stat sb;
	struct dirent *de;
	uint64_t sum;
	DIR *d;
	int fd;

	if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	sum = (uint64_t)sb.st_blocks * 512;
	if (!S_ISDIR(sb.st_mode) || depth > PCONT_DU_DEPTH)
		return sum;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return sum;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			sum += tree_bytes(fd, de->d_name, depth + 1);
	closedir(d);
	return sum;
}

static int cwin_cmp(const void *a, const void *b)
{
	const struct cwin *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	if (!c)
		c = strcmp(x->gdir, y->gdir);
	return c ? c : strcmp(x->name, y->name);
}

static int cwin_age_cmp(const void *a, const void *b)
{
	const struct cwin *x = *(struct cwin *const *)a, *y = *(struct cwin *const *)b;

	return x->end < y->end ? -1 : x->end > y->end ? 1 : cwin_cmp(x, y);
}

/* The windows of samples/ (fd, consumed) into *w, sizes from the last
 * list where it had them. */
static void list_samples(struct pcont *pc, int fd, const char *key, const char *gdir,
			 struct cwin **w, size_t *n, size_t *cap)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;

	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) && *n < PCONT_MAX_WINDOWS) {
		struct cwin x = { 0 }, *old;

		if (store_window_parse(de->d_name, &x.start, &x.end) ||
		    array_grow(w, cap, *n + 1, sizeof(**w), 256))
			continue;
		snprintf(x.key, sizeof(x.key), "%s", key);
		snprintf(x.gdir, sizeof(x.gdir), "%s", gdir);
		memcpy(x.name, de->d_name, 30);	/* a window's name: 29 bytes */
		old = pc->w ? bsearch(&x, pc->w, pc->nr_w, sizeof(x), cwin_cmp) : NULL;
		x.bytes = old ? old->bytes : tree_bytes(dirfd(d), de->d_name, 0);
		(*w)[(*n)++] = x;
	}
	closedir(d);
}

/* Every guest tree of one guest's directory (fd, consumed). */
static void list_key(struct pcont *pc, int kfd, const char *key, struct cwin **w, size_t *n,
		     size_t *cap)
{
	int gfd = openat(kfd, "guests", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = gfd >= 0 ? fdopendir(gfd) : NULL;
	struct dirent *de;

	close(kfd);
	if (!d) {
		if (gfd >= 0)
			close(gfd);
		return;
	}
	while ((de = readdir(d))) {
		int g, s;

		if (de->d_name[0] == '.')
			continue;
		g = openat(gfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		s = g >= 0 ? openat(g, "samples", O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				    O_CLOEXEC) : -1;
		if (g >= 0)
			close(g);
		if (s >= 0)
			list_samples(pc, s, key, de->d_name, w, n, cap);
	}
	closedir(d);
}

/* The store's sealed windows, listed anew into pc->w. */
static void store_list(struct pcont *pc)
{
	int rfd = open(pc->root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = rfd >= 0 ? fdopendir(rfd) : NULL;
	struct cwin *w = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;

	if (!d) {
		if (rfd >= 0)
			close(rfd);
		return;
	}
	while ((de = readdir(d))) {
		int k;

		if (de->d_name[0] == '.')
			continue;
		k = openat(rfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (k >= 0)
			list_key(pc, k, de->d_name, &w, &n, &cap);
	}
	closedir(d);
	if (n)
		qsort(w, n, sizeof(*w), cwin_cmp);
	free(pc->w);
	pc->w = w;
	pc->nr_w = n;
}

/* Drops window x (counted in *count); 0 if it went. */
static int drop(struct pcont *pc, struct cwin *x, uint64_t *count)
{
	char dir[PATH_MAX];

	if (snprintf(dir, sizeof(dir), "%s/%s", pc->root, x->key) >= (int)sizeof(dir) ||
	    store_remove_window(dir, x->gdir, x->name))
		return -1;
	pthread_mutex_lock(&pc->p->lock);
	(*count)++;
	pthread_mutex_unlock(&pc->p->lock);
	x->bytes = 0;
	x->name[0] = '\0';
	return 0;
}

/* Retention, then the byte cap, oldest window first. */
static void store_prune(struct pcont *pc)
{
	const struct pprof_cfg *cfg = &pc->p->cfg;
	int64_t oldest = clk_wall_ms() - (int64_t)cfg->retention_s * 1000;
	struct cwin **by_age;
	uint64_t total = 0;
	size_t n = 0;

	store_list(pc);
	by_age = calloc(pc->nr_w + 1, sizeof(*by_age));
	if (!by_age)
		return;
	for (size_t i = 0; i < pc->nr_w; i++)
		by_age[n++] = &pc->w[i];
	qsort(by_age, n, sizeof(*by_age), cwin_age_cmp);
	for (size_t i = 0; i < n; i++) {
		if (by_age[i]->end < oldest)
			drop(pc, by_age[i], &pc->dropped_retention);
		total += by_age[i]->bytes;
	}
	for (size_t i = 0; i < n && total > cfg->max_store; i++) {
		uint64_t b = by_age[i]->bytes;

		if (by_age[i]->name[0] && !drop(pc, by_age[i], &pc->dropped_cap))
			total -= b;
	}
	pthread_mutex_lock(&pc->p->lock);
	pc->windows = 0;
	for (size_t i = 0; i < n; i++)
		pc->windows += by_age[i]->name[0] != '\0';
	pc->bytes = total;
	pthread_mutex_unlock(&pc->p->lock);
	free(by_age);
}

/* ---- the samplers -------------------------------------------------------- */

/* Starts s's child: `opvm attach --window` into its directory. */
static void sampler_start(struct pcont *pc, struct csampler *s)
{
	const struct pprof_cfg *cfg = &pc->p->cfg;
	char pid[2][32], rate[16], win[16], dir[PATH_MAX], log[PATH_MAX + 16];
	char *argv[32];
	int a, rfd;

	s->retry_at = clk_now_ms() + PCONT_BACKOFF_MS;
	rfd = open(pc->root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rfd < 0)
		return;
	if (mkdirat(rfd, s->key, 0700) < 0 && errno != EEXIST) {
		close(rfd);
		return;
	}
	close(rfd);
	snprintf(rate, sizeof(rate), "%u", cfg->rate_hz);
	snprintf(win, sizeof(win), "%u", cfg->window_s);
	if (snprintf(dir, sizeof(dir), "%s/%s", pc->root, s->key) >= (int)sizeof(dir))
		return;
	snprintf(log, sizeof(log), "%s/attach.log", dir);
	a = pguest_attach_argv(pc->p, &s->g, argv, pid);
	argv[a++] = "-F";
	argv[a++] = rate;
	argv[a++] = "--window";
	argv[a++] = win;
	argv[a++] = "-d";
	argv[a++] = dir;
	argv[a] = NULL;
	s->pid = subcmd_spawn_tied(argv, log, log);
	if (s->pid < 0) {
		s->pid = 0;
		return;
	}
	pthread_mutex_lock(&pc->p->lock);
	pc->starts++;
	pc->running++;
	pthread_mutex_unlock(&pc->p->lock);
}

/* Reaps s's child if it ended (wait as asked); 1 if it did. */
static int sampler_reap(struct pcont *pc, struct csampler *s, int wait)
{
	struct rusage ru = { 0 };
	int st;
	pid_t r;

	if (!s->pid)
		return 0;
	r = wait4(s->pid, &st, wait ? 0 : WNOHANG, &ru);
	if (r == 0 || (r < 0 && errno == EINTR))
		return 0;
	s->pid = 0;
	pthread_mutex_lock(&pc->p->lock);
	pc->exits++;
	pc->running--;
	pc->cpu_reaped += (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
			  (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	pthread_mutex_unlock(&pc->p->lock);
	return 1;
}

static struct csampler *sampler_of(struct pcont *pc, const struct pguest *g)
{
	for (unsigned i = 0; i < pc->nr; i++)
		if (pc->s[i].g.q.pid == g->q.pid && pc->s[i].g.q.start_ticks == g->q.start_ticks)
			return &pc->s[i];
	return NULL;
}

/* This scan's guests: new ones get a sampler, gone ones lose theirs. */
static void samplers_update(struct pcont *pc, const struct pguest *gs, int n)
{
	int64_t now = clk_now_ms();

	for (unsigned i = 0; i < pc->nr; i++)
		pc->s[i].seen = 0;
	for (int i = 0; i < n; i++) {
		struct csampler *s = sampler_of(pc, &gs[i]);

		/* not to be profiled (exporter-guests.c), or not asked for */
		if (gs[i].why[0] || (pc->p->cfg.only && fnmatch(pc->p->cfg.only, gs[i].q.name, 0)))
			continue;
		if (!s && pc->nr < PCONT_MAX) {
			s = &pc->s[pc->nr++];
			memset(s, 0, sizeof(*s));
			s->g = gs[i];
			guest_key(&s->g, s->key, sizeof(s->key));
		}
		if (s)
			s->seen = 1;
	}
	for (unsigned i = 0; i < pc->nr; i++) {
		struct csampler *s = &pc->s[i];

		sampler_reap(pc, s, 0);
		if (s->seen) {
			s->gone_at = 0;
			if (!s->pid && now >= s->retry_at)
				sampler_start(pc, s);
			continue;
		}
		if (!s->gone_at)
			s->gone_at = now;
		if (s->pid && now - s->gone_at > PCONT_GONE_GRACE_MS)
			kill(s->pid, SIGTERM);	/* attach should have seen it go */
		if (!s->pid)
			pc->s[i--] = pc->s[--pc->nr];
	}
}

static void samplers_stop(struct pcont *pc)
{
	int64_t until = clk_now_ms() + PCONT_STOP_MS;
	unsigned left;

	for (unsigned i = 0; i < pc->nr; i++)
		if (pc->s[i].pid)
			kill(pc->s[i].pid, SIGTERM);
	do {
		left = 0;
		for (unsigned i = 0; i < pc->nr; i++)
			left += pc->s[i].pid && !sampler_reap(pc, &pc->s[i], 0);
		if (left)
			usleep(20 * 1000);
	} while (left && clk_now_ms() < until);
	for (unsigned i = 0; i < pc->nr; i++) {
		if (pc->s[i].pid) {
			kill(pc->s[i].pid, SIGKILL);
			sampler_reap(pc, &pc->s[i], 1);
		}
	}
}

static void *pcont_main(void *arg)
{
	struct pcont *pc = arg;
	struct pollfd f = { .fd = pc->p->stop_pipe[0], .events = POLLIN };
	unsigned prune_every = pc->p->cfg.window_s < 4 ? 1 : pc->p->cfg.window_s / 2, tick = 0;

	for (;;) {
		struct pguest *gs;
		int n = pguest_scan(&pc->p->cfg, &gs);

		if (n >= 0) {
			samplers_update(pc, gs, n);
			free(gs);
		}
		if (tick++ % prune_every == 0)
			store_prune(pc);
		if (poll(&f, 1, PCONT_TICK_MS) > 0)
			break;
	}
	samplers_stop(pc);
	return NULL;
}

int pcont_start(struct pprof *p)
{
	struct pcont *pc = calloc(1, sizeof(*pc));
	char err[512];
	int fd, r;

	if (!pc)
		return -ENOMEM;
	pc->p = p;
	fd = safepath_open_base(p->cfg.store_dir, 0700, SAFEPATH_CREATE, pc->root,
				sizeof(pc->root), err, sizeof(err));
	if (fd < 0) {
		log_err("the store: %s", err);
		free(pc);
		return fd;
	}
	r = safepath_check_dir(fd, pc->root, 1, err, sizeof(err));
	if (!r)
		fchmod(fd, 0700);	/* private: the guests' profiles */
	close(fd);
	if (r) {
		log_err("%s", err);
		free(pc);
		return r;
	}
	p->cont = pc;
	store_prune(pc);	/* what a last exporter left, as it is now */
	r = signals_thread_start(&pc->thread, pcont_main, pc);
	if (r) {
		log_err("cannot start the continuous sampler: %s", strerror(r));
		p->cont = NULL;
		free(pc);
		return -r;
	}
	pc->started = 1;
	return 0;
}

void pcont_stop(struct pprof *p)
{
	struct pcont *pc = p ? p->cont : NULL;

	if (!pc)
		return;
	if (pc->started)
		pthread_join(pc->thread, NULL);
	p->cont = NULL;
	free(pc->w);
	free(pc);
}

/* The live children's CPU time so far. */
static double live_cpu(const struct pcont *pc)
{
	double s = 0;

	for (unsigned i = 0; i < pc->nr; i++) {
		struct ps_task t;

		if (pc->s[i].pid && !procstat_read_proc(pc->s[i].pid, &t))
			s += (double)(t.utime_ns + t.stime_ns) / 1e9;
	}
	return s;
}

static void metric(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Under p->lock. */
void pcont_metrics(struct pprof *p, FILE *f)
{
	struct pcont *pc = p->cont;

	if (!pc)
		return;
	metric(f, "opvm_continuous_samplers", "gauge", "Guests sampled continuously now.");
	fprintf(f, "opvm_continuous_samplers %u\n", pc->running);
	metric(f, "opvm_continuous_sampler_starts_total", "counter", "Sampler children started.");
	fprintf(f, "opvm_continuous_sampler_starts_total %llu\n", (unsigned long long)pc->starts);
	metric(f, "opvm_continuous_sampler_exits_total", "counter", "Sampler children ended.");
	fprintf(f, "opvm_continuous_sampler_exits_total %llu\n", (unsigned long long)pc->exits);
	metric(f, "opvm_continuous_cpu_seconds_total", "counter",
	       "CPU time of the sampler children, ended and running.");
	fprintf(f, "opvm_continuous_cpu_seconds_total %.3f\n", pc->cpu_reaped + live_cpu(pc));
	metric(f, "opvm_store_windows", "gauge", "Sealed windows in the store.");
	fprintf(f, "opvm_store_windows %llu\n", (unsigned long long)pc->windows);
	metric(f, "opvm_store_bytes", "gauge", "Bytes of the sealed windows.");
	fprintf(f, "opvm_store_bytes %llu\n", (unsigned long long)pc->bytes);
	metric(f, "opvm_store_windows_dropped_total", "counter",
	       "Windows dropped, by why: older than --retention, or past --max-store.");
	fprintf(f, "opvm_store_windows_dropped_total{reason=\"retention\"} %llu\n",
		(unsigned long long)pc->dropped_retention);
	fprintf(f, "opvm_store_windows_dropped_total{reason=\"max_store\"} %llu\n",
		(unsigned long long)pc->dropped_cap);
}

int pcont_find(struct pprof *p, const struct pguest *live, const char *name,
	       const char *owner, char *dir, size_t len)
{
	char mg[OPVM_MANGLE_MAX], key[OPVM_MANGLE_MAX + 16];
	uid_t want = 0;
	struct pcont *pc = p->cont;
	int hits = 0, trusted = 0;
	struct dirent *de;
	DIR *d;

	if (live) {
		guest_key(live, key, sizeof(key));
		snprintf(dir, len, "%s/%s", pc->root, key);
		return 0;
	}
	/* a guest gone: its directory's name says its owner */
	store_mangle(name, strlen(name), mg);
	if (owner && pguest_owner_uid(owner, &want))
		return -EINVAL;
	d = opendir(pc->root);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *dot = strchr(de->d_name, '.');
		unsigned long uid;

		if (!dot || dot == de->d_name || strcmp(dot + 1, mg) ||
		    strspn(de->d_name, "0123456789") != (size_t)(dot - de->d_name))
			continue;
		uid = strtoul(de->d_name, NULL, 10);
		if (owner && uid != (unsigned long)want)
			continue;
		/* root's and the exporter's own first, as pguest_match() */
		if (uid == 0 || uid == (unsigned long)geteuid()) {
			if (!trusted++)
				hits = 0;
		} else if (trusted) {
			continue;
		}
		hits++;
		snprintf(dir, len, "%s/%s", pc->root, de->d_name);
	}
	closedir(d);
	return hits == 1 ? 0 : hits ? -EEXIST : -ENOENT;
}
