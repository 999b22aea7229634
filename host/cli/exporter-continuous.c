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
 * The same thread keeps the whole store within --retention and --max-store:
 * windows past the retention go, then the oldest of all until the store
 * fits, each counted.  The store is its sealed windows (a sealed window
 * never changes, so its size is measured once), the rest measured at each
 * prune (logs, kallsyms, a current/ no sampler writes), and a reserve for
 * each running sampler: a window is capped (pcont_window_cap(), attach's
 * --max-disk; past it samples go to its {overflow} bucket) and a sampler
 * may seal one window between two prunes while it writes the next, so two
 * capped windows a sampler cover what it can add before the next prune;
 * and a sampler may write its guest's kernel symbols anew (a reboot, a
 * module loaded: kallsyms.part beside the kallsyms the store has, until
 * the rename), at most its room (ksyms_room(), attach's
 * --fetch-max-ksyms), so that room is in its reserve too.  (A table that
 * repeats the stored one is not written at all: host/collect/fetch.h.)
 * A sealed window's overflow counts are read once, when it is first seen.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
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
#include "host/collect/fetch.h"
#include "host/collect/stats.h"
#include "host/collect/store.h"
#include "lib/log.h"
#include "lib/safepath.h"
#include "lib/array.h"
#include "lib/clock.h"
#include "lib/signals.h"
#include "lib/text.h"

#define PCONT_MAX		256	/* guests sampled at once */
#define PCONT_TICK_MS		1000
#define PCONT_BACKOFF_MS	5000	/* a child that ended while its guest runs */
#define PCONT_GONE_GRACE_MS	10000	/* its guest went and it did not */
#define PCONT_STOP_MS		10000	/* SIGTERM at the end, then SIGKILL */
#define PCONT_MAX_WINDOWS	(1u << 20)
#define PCONT_DU_DEPTH		12
/* What a window takes past its cap: session.json and the {overflow}
 * bucket's directories and files, which the store's cap exempts so that
 * it can always take a sample (tests/unit/test-exporter-store.c measures) */
#define PCONT_WINDOW_SLACK	(64u << 10)
#define PCONT_MAX_KEYS		4096	/* guests whose overflow is counted apart */
/* A sampler's room for its guest's kernel symbols written anew: the size
 * of the kallsyms the store has of it, this at least (Debian 12's with
 * the test image's modules: 2 MB), and what the transfer takes on disk
 * past its bytes (blocks, kallsyms.modules and its part file). */
#define PCONT_KSYMS_ROOM	(4u << 20)
#define PCONT_KSYMS_SLACK	(64u << 10)

/* One guest's sampler child. */
struct csampler {
	struct pguest g;
	char key[OPVM_MANGLE_MAX + 16];	/* its directory in the store */
	pid_t pid;			/* 0: none now */
	uint64_t ksyms_room;		/* its child's --fetch-max-ksyms */
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

/* What the caps refused in one guest's sealed windows, since the start. */
struct ckey {
	char key[OPVM_MANGLE_MAX + 16];
	uint64_t ovf_samples, ovf_keys;
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
	uint64_t rest;			/* this list's bytes besides sealed windows */
	/* metrics, under p->lock */
	uint64_t starts, exits, dropped_retention, dropped_cap, windows, bytes;
	uint64_t other_bytes, reserved, ksyms_reserved, ovf_samples, ovf_keys;
	struct ckey *k;			/* sorted by key, at most PCONT_MAX_KEYS */
	size_t nr_k;
	unsigned running;
	double cpu_reaped;
	struct pguest_seen seen;	/* pcont_main()'s scans */
};

uint64_t pcont_window_cap(const struct pprof_cfg *cfg)
{
	uint64_t r = ((uint64_t)cfg->retention_s + cfg->window_s - 1) / cfg->window_s;
	uint64_t w = cfg->max_store / (r + 2 * PCONT_MAX);

	return w ? w : 1;	/* attach's --max-disk takes 1 at least */
}

/* Bytes the running samplers may add before the next prune: two capped
 * windows each and the room of a kernel-symbol transfer (*ksyms). */
static uint64_t reserve(const struct pcont *pc, uint64_t *ksyms)
{
	uint64_t n = 0;

	*ksyms = 0;
	for (unsigned i = 0; i < pc->nr; i++) {
		if (!pc->s[i].pid)
			continue;
		n++;
		*ksyms += pc->s[i].ksyms_room + PCONT_KSYMS_SLACK;
	}
	return n * 2 * (pcont_window_cap(&pc->p->cfg) + PCONT_WINDOW_SLACK) + *ksyms;
}

/* The room of key's sampler for its guest's kernel symbols: the largest
 * kallsyms the store has of it (a table written again is that size, or
 * about), PCONT_KSYMS_ROOM at least, FETCH_KSYMS_MAX_BYTES at most. */
static uint64_t ksyms_room(const struct pcont *pc, const char *key)
{
	char dir[PATH_MAX];
	uint64_t room = PCONT_KSYMS_ROOM;
	struct dirent *de;
	int fd;
	DIR *d;

	if (snprintf(dir, sizeof(dir), "%s/%s/guests", pc->root, key) >= (int)sizeof(dir))
		return room;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return room;
	}
	while ((de = readdir(d))) {
		char path[NAME_MAX + 16];
		struct stat sb;

		snprintf(path, sizeof(path), "%s/kallsyms", de->d_name);
		if (de->d_name[0] != '.' && !fstatat(fd, path, &sb, AT_SYMLINK_NOFOLLOW) &&
		    S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > room)
			room = (uint64_t)sb.st_size;
	}
	closedir(d);
	return room < FETCH_KSYMS_MAX_BYTES ? room : FETCH_KSYMS_MAX_BYTES;
}

/* Whether key's sampler runs now (its current/ is in the reserve). */
static int key_running(const struct pcont *pc, const char *key)
{
	for (unsigned i = 0; i < pc->nr; i++)
		if (pc->s[i].pid && !strcmp(pc->s[i].key, key))
			return 1;
	return 0;
}

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

/* The counts of key's guest, made if there is room. */
static struct ckey *ckey_of(struct pcont *pc, const char *key)
{
	size_t cap = pc->nr_k;

	const char *dot = strchr(key, '.');

	for (size_t i = 0; i < pc->nr_k; i++)
		if (!strcmp(pc->k[i].key, key))
			return &pc->k[i];
	/* "<uid>.<guest>" only: its parts are the metrics' labels */
	if (!dot || dot == key || strspn(key, "0123456789") != (size_t)(dot - key) ||
	    pc->nr_k >= PCONT_MAX_KEYS || array_grow(&pc->k, &cap, pc->nr_k + 1,
						     sizeof(*pc->k), 16))
		return NULL;
	memset(&pc->k[pc->nr_k], 0, sizeof(*pc->k));
	snprintf(pc->k[pc->nr_k].key, sizeof(pc->k->key), "%s", key);
	return &pc->k[pc->nr_k++];
}

/* Adds what the caps refused in window name of samples/ (sfd) to key's
 * counts: the window is new to this exporter. */
static void count_overflow(struct pcont *pc, int sfd, const char *name, const char *key)
{
	int wfd = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int fd = wfd >= 0 ? openat(wfd, "session.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
	json_t *root = NULL, *so;
	struct ckey *c;
	struct stat sb;

	if (fd >= 0 && !fstat(fd, &sb) && S_ISREG(sb.st_mode))
		root = stats_json_loadfd(fd, 0, NULL);
	if (fd >= 0)
		close(fd);
	if (wfd >= 0)
		close(wfd);
	so = json_object_get(root, "store");
	if (so) {
		pthread_mutex_lock(&pc->p->lock);
		c = ckey_of(pc, key);
		pc->ovf_samples += stats_json_get(so, "overflow_samples");
		pc->ovf_keys += stats_json_get(so, "overflow_keys");
		if (c) {
			c->ovf_samples += stats_json_get(so, "overflow_samples");
			c->ovf_keys += stats_json_get(so, "overflow_keys");
		}
		pthread_mutex_unlock(&pc->p->lock);
	}
	json_decref(root);
}

static uint64_t self_bytes(int fd)
{
	struct stat sb;

	return fstat(fd, &sb) ? 0 : (uint64_t)sb.st_blocks * 512;
}

/* Bytes of directory fd itself and of its entries but skip. */
static uint64_t bytes_but(int fd, const char *skip)
{
	int dfd = dup(fd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	uint64_t sum = self_bytes(fd);

	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return sum;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, skip))
			sum += tree_bytes(fd, de->d_name, 1);
	closedir(d);
	return sum;
}

/* The windows of samples/ (fd, consumed) into *w, sizes from the last
 * list where it had them; what else is there into pc->rest, but the
 * current/ of a running sampler (reserved instead). */
static void list_samples(struct pcont *pc, int fd, const char *key, const char *gdir,
			 struct cwin **w, size_t *n, size_t *cap)
{
	DIR *d = fdopendir(fd);
	int running = key_running(pc, key);
	struct dirent *de;

	if (!d) {
		close(fd);
		return;
	}
	pc->rest += self_bytes(fd);
	while ((de = readdir(d)) && *n < PCONT_MAX_WINDOWS) {
		struct cwin x = { 0 }, *old;

		if (store_window_parse(de->d_name, &x.start, &x.end)) {
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
			    (!running || strcmp(de->d_name, "current")))
				pc->rest += tree_bytes(fd, de->d_name, 1);
			continue;
		}
		if (array_grow(w, cap, *n + 1, sizeof(**w), 256))
			continue;
		snprintf(x.key, sizeof(x.key), "%s", key);
		snprintf(x.gdir, sizeof(x.gdir), "%s", gdir);
		memcpy(x.name, de->d_name, 30);	/* a window's name: 29 bytes */
		old = pc->w ? bsearch(&x, pc->w, pc->nr_w, sizeof(x), cwin_cmp) : NULL;
		x.bytes = old ? old->bytes : tree_bytes(fd, de->d_name, 0);
		if (!old)
			count_overflow(pc, fd, de->d_name, key);
		(*w)[(*n)++] = x;
	}
	closedir(d);
}

/* Every guest tree of one guest's directory (fd, consumed); the files
 * beside them into pc->rest. */
static void list_key(struct pcont *pc, int kfd, const char *key, struct cwin **w, size_t *n,
		     size_t *cap)
{
	int gfd = openat(kfd, "guests", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = gfd >= 0 ? fdopendir(gfd) : NULL;
	struct dirent *de;

	pc->rest += bytes_but(kfd, "guests");
	close(kfd);
	if (!d) {
		if (gfd >= 0)
			close(gfd);
		return;
	}
	pc->rest += self_bytes(gfd);
	while ((de = readdir(d))) {
		int g, s;

		if (de->d_name[0] == '.')
			continue;
		g = openat(gfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (g < 0)
			continue;
		pc->rest += bytes_but(g, "samples");
		s = openat(g, "samples", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
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

	pc->rest = 0;
	if (!d) {
		if (rfd >= 0)
			close(rfd);
		return;
	}
	pc->rest = self_bytes(rfd);
	while ((de = readdir(d))) {
		int k = -1;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (de->d_name[0] != '.')
			k = openat(rfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				   O_CLOEXEC);
		if (k >= 0)
			list_key(pc, k, de->d_name, &w, &n, &cap);
		else	/* no guest's: it takes room all the same */
			pc->rest += tree_bytes(rfd, de->d_name, 1);
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

/* The windows left after a prune, still sorted (bsearch()ed by the next
 * list, which must find every window it measured). */
static void compact(struct pcont *pc)
{
	size_t n = 0;

	for (size_t i = 0; i < pc->nr_w; i++)
		if (pc->w[i].name[0])
			pc->w[n++] = pc->w[i];
	pc->nr_w = n;
}

/* Retention, then the byte cap, oldest window first: the sealed windows,
 * the rest and the running samplers' reserve within --max-store. */
static void store_prune(struct pcont *pc)
{
	const struct pprof_cfg *cfg = &pc->p->cfg;
	int64_t oldest = clk_wall_ms() - (int64_t)cfg->retention_s * 1000;
	uint64_t total = 0, other, ksyms, resv = reserve(pc, &ksyms);
	struct cwin **by_age;
	size_t n = 0;

	store_list(pc);
	other = pc->rest;
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
	for (size_t i = 0; i < n && total + other + resv > cfg->max_store; i++) {
		uint64_t b = by_age[i]->bytes;

		if (by_age[i]->name[0] && !drop(pc, by_age[i], &pc->dropped_cap))
			total -= b;
	}
	free(by_age);
	compact(pc);
	pthread_mutex_lock(&pc->p->lock);
	pc->windows = pc->nr_w;
	pc->bytes = total;
	pc->other_bytes = other;
	pc->reserved = resv;
	pc->ksyms_reserved = ksyms;
	pthread_mutex_unlock(&pc->p->lock);
}

/* ---- the samplers -------------------------------------------------------- */

/* Starts s's child: `opvm attach --window` into its directory. */
static void sampler_start(struct pcont *pc, struct csampler *s)
{
	const struct pprof_cfg *cfg = &pc->p->cfg;
	char pid[2][32], rate[16], win[16], cap[24], room[24], dir[PATH_MAX];
	char log[PATH_MAX + 16];
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
	snprintf(cap, sizeof(cap), "%llu", (unsigned long long)pcont_window_cap(cfg));
	s->ksyms_room = ksyms_room(pc, s->key);
	snprintf(room, sizeof(room), "%llu", (unsigned long long)s->ksyms_room);
	if (snprintf(dir, sizeof(dir), "%s/%s", pc->root, s->key) >= (int)sizeof(dir))
		return;
	snprintf(log, sizeof(log), "%s/attach.log", dir);
	a = pguest_attach_argv(pc->p, &s->g, argv, pid);
	argv[a++] = "-F";
	argv[a++] = rate;
	argv[a++] = "--window";
	argv[a++] = win;
	argv[a++] = "--max-disk";	/* a window's cap */
	argv[a++] = cap;
	argv[a++] = "--fetch-max-ksyms";	/* its room in the reserve */
	argv[a++] = room;
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
		int n = pguest_scan(&pc->p->cfg, &pc->seen, &gs);
		uint64_t starts = pc->starts;	/* written by this thread only */

		if (n >= 0) {
			samplers_update(pc, gs, n);
			free(gs);
		}
		/* a new sampler's reserve counts from its start */
		if (tick++ % prune_every == 0 || pc->starts != starts)
			store_prune(pc);
		if (poll(&f, 1, PCONT_TICK_MS) > 0)
			break;
	}
	samplers_stop(pc);
	pguest_seen_free(&pc->seen);
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
	free(pc->k);
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

/* Key's guest as a Prometheus label value: its name is its owner's
 * input, so only printable ASCII, quotes and backslashes escaped. */
static void key_labels(const char *key, char *out, size_t len)
{
	const char *dot = strchr(key, '.');
	char name[OPVM_MANGLE_MAX * 4];
	int n = dot ? store_unmangle(dot + 1, name, sizeof(name)) : -1;
	size_t o = 0;

	for (int i = 0; i < n && o + 3 < len; i++) {
		unsigned char ch = (unsigned char)name[i];

		if (ch == '"' || ch == '\\')
			out[o++] = '\\';
		out[o++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	out[o] = '\0';
	o = strlen(out);
	snprintf(out + o, len - o, "\",owner=\"%.*s", dot ? (int)(dot - key) : 0, key);
}

/* What the caps refused, by guest; keys past PCONT_MAX_KEYS as "". */
static void overflow_metrics(const struct pcont *pc, FILE *f)
{
	uint64_t s = 0, k = 0;
	char lab[OPVM_MANGLE_MAX * 2 + 64];

	metric(f, "opvm_continuous_overflow_samples_total", "counter",
	       "Samples the caps of a window (--max-store's share, files, dirs) sent to its "
	       "{overflow} bucket, counted as its window is sealed.");
	for (size_t i = 0; i < pc->nr_k; i++) {
		key_labels(pc->k[i].key, lab, sizeof(lab));
		fprintf(f, "opvm_continuous_overflow_samples_total{guest=\"%s\"} %llu\n", lab,
			(unsigned long long)pc->k[i].ovf_samples);
		s += pc->k[i].ovf_samples;
		k += pc->k[i].ovf_keys;
	}
	if (s != pc->ovf_samples)
		fprintf(f, "opvm_continuous_overflow_samples_total{guest=\"\",owner=\"\"} "
			"%llu\n", (unsigned long long)(pc->ovf_samples - s));
	metric(f, "opvm_continuous_overflow_keys_total", "counter",
	       "Sample files the caps of a window refused (lookups sent to its bucket).");
	for (size_t i = 0; i < pc->nr_k; i++) {
		key_labels(pc->k[i].key, lab, sizeof(lab));
		fprintf(f, "opvm_continuous_overflow_keys_total{guest=\"%s\"} %llu\n", lab,
			(unsigned long long)pc->k[i].ovf_keys);
	}
	if (k != pc->ovf_keys)
		fprintf(f, "opvm_continuous_overflow_keys_total{guest=\"\",owner=\"\"} %llu\n",
			(unsigned long long)(pc->ovf_keys - k));
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
	metric(f, "opvm_store_other_bytes", "gauge",
	       "Bytes of the store besides sealed windows and the running samplers' windows.");
	fprintf(f, "opvm_store_other_bytes %llu\n", (unsigned long long)pc->other_bytes);
	metric(f, "opvm_store_reserved_bytes", "gauge",
	       "Bytes kept free for the running samplers: two capped windows each and the "
	       "room to write their guest's kernel symbols anew.");
	fprintf(f, "opvm_store_reserved_bytes %llu\n", (unsigned long long)pc->reserved);
	metric(f, "opvm_store_window_cap_bytes", "gauge", "A window's cap (attach --max-disk).");
	fprintf(f, "opvm_store_window_cap_bytes %llu\n",
		(unsigned long long)pcont_window_cap(&p->cfg));
	overflow_metrics(pc, f);
}

/* Under p->lock. */
json_t *pcont_json(struct pprof *p)
{
	struct pcont *pc = p->cont;
	json_t *g = json_array(), *o;

	for (size_t i = 0; g && i < pc->nr_k; i++) {
		char name[OPVM_MANGLE_MAX * 4], esc[OPVM_MANGLE_MAX * 4];
		const char *dot = strchr(pc->k[i].key, '.');

		if (store_unmangle(dot + 1, name, sizeof(name)) < 0)
			name[0] = '\0';
		/* printable: a name is its owner's input, JSON wants UTF-8 */
		o = json_pack("{s:s, s:I, s:I, s:I}", "guest", text_escape(esc, sizeof(esc), name),
			      "owner", (json_int_t)strtoul(pc->k[i].key, NULL, 10),
			      "overflow_samples", (json_int_t)pc->k[i].ovf_samples,
			      "overflow_keys", (json_int_t)pc->k[i].ovf_keys);
		json_array_append_new(g, o);
	}
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}",
			 "max_store", (json_int_t)p->cfg.max_store,
			 "window_cap", (json_int_t)pcont_window_cap(&p->cfg),
			 "windows", (json_int_t)pc->windows, "bytes", (json_int_t)pc->bytes,
			 "other_bytes", (json_int_t)pc->other_bytes,
			 "reserved_bytes", (json_int_t)pc->reserved,
			 "ksyms_reserved_bytes", (json_int_t)pc->ksyms_reserved,
			 "windows_dropped_retention", (json_int_t)pc->dropped_retention,
			 "windows_dropped_max_store", (json_int_t)pc->dropped_cap,
			 "overflow_samples", (json_int_t)pc->ovf_samples,
			 "overflow_keys", (json_int_t)pc->ovf_keys, "guests", g);
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
