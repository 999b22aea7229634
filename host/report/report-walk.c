// SPDX-License-Identifier: MIT
/*
 * Sample files counted per symbol on worker threads.  See report-priv.h.
 *
 * Slots form a ring in push order: head (next to fill), resolve (next
 * whose image is looked up), tail (oldest pending).  A job is OPEN_QUEUED
 * when pushed, OPENING while a thread reads its sample file, OPENED after;
 * RESOLVING while its image is looked up (one job at a time, in push
 * order: the resolver is not thread-safe, and its first look-up of a file
 * names it); then QUEUED for counting (or DONE: nothing to count), CLAIMED
 * while counted, DONE after.  The caller, waiting for the oldest job,
 * works on whatever there is as the workers do, so a busy machine never
 * leaves it waiting on a descheduled worker.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/collect/store.h"
#include "host/report/report-priv.h"
#include "lib/sample.h"
#include "lib/arith.h"
#include "lib/signals.h"
#include "symbols/symres.h"

/* Pending files: enough to keep the workers busy while the caller opens
 * an image, few enough that their tables add little to the peak RSS. */
#define WALK_SLOTS	16
#define WALK_THREADS	4	/* at most */

enum {
	JOB_FREE, JOB_OPEN_QUEUED, JOB_OPENING, JOB_OPENED,	/* sample file */
	JOB_RESOLVING,						/* its image */
	JOB_QUEUED, JOB_CLAIMED, JOB_DONE			/* counts */
};

/* One counter per symbol (+1: none), zero between files. */
struct scratch {
	uint64_t *counts;
	size_t *touched;
	size_t cap;
};

struct walk {
	pthread_mutex_t mu;
	/* Signalled only when someone sleeps on them: a wake-up per file
	 * would cost more than the counting it hands over. */
	pthread_cond_t work, done;	/* workers wait for work, the caller
					 * for a job's end */
	unsigned sleepers, waiting;
	struct walk_job slots[WALK_SLOTS];
	size_t head, resolve, tail;	/* tail <= resolve <= head */
	int resolving;			/* a thread looks up job resolve's image */
	int (*resolve_fn)(void *arg, struct walk_job *j);
	void *resolve_arg;
	int quit;
	unsigned nr_threads;
	pthread_t th[WALK_THREADS];
	struct scratch scr[WALK_THREADS + 1];	/* [0]: the caller's */
};

struct count_ctx {
	const struct simage *img;
	uint64_t *hist;			/* scratch counts + 1 */
	size_t *touched, nt;
	uint64_t outside;
	int kernel;
};

static int count_cb(const uint64_t *offs, const uint64_t *counts, size_t n, void *arg)
{
	struct count_ctx *c = arg;
	long idx[SFILE_BATCH];
	/* Locals, not c's fields: the stores to hist (uint64_t) could alias
	 * them, and the compiler would reload each one every entry. */
	uint64_t *hist = c->hist, outside = c->outside;
	size_t *touched = c->touched, nt = c->nt;
	int kernel = c->kernel;

	simage_lookup_batch(c->img, offs, idx, n);
	for (size_t k = 0; k < n; k++) {
		long i = idx[k];

		/* Only the counters a file touches are visited and reset: an
		 * image with 100 k symbols costs nothing per file it is not
		 * sampled in. */
		if (!hist[i])
			touched[nt++] = (size_t)(i + 1);
		hist[i] = arith_sat_add(hist[i], counts[k]);
		/* x86-64 kernels run in the upper half; a "kernel" sample
		 * below it was firmware or boot code before the kernel's
		 * own mapping. */
		if (i < 0 && kernel && offs[k] < OPVM_KERNEL_HALF)
			outside = arith_sat_add(outside, counts[k]);
	}
	c->outside = outside;
	c->nt = nt;
	return 0;
}

static int scratch_reserve(struct scratch *s, size_t n)
{
	uint64_t *t;
	size_t *u;

	if (n <= s->cap)
		return 0;
	t = realloc(s->counts, n * sizeof(*t));
	if (!t)
		return -ENOMEM;
	memset(t + s->cap, 0, (n - s->cap) * sizeof(*t));
	s->counts = t;
	u = realloc(s->touched, n * sizeof(*u));
	if (!u)
		return -ENOMEM;
	s->touched = u;
	s->cap = n;
	return 0;
}

/* j's file counted per symbol into j's idx/cnt; the scratch left zeroed. */
static void job_count(struct walk_job *j, struct scratch *s)
{
	struct count_ctx c = { .img = j->img, .kernel = simage_is_kernel(j->img) };
	int ret;

	if (scratch_reserve(s, j->nsyms + 1)) {
		j->nomem = 1;
		return;
	}
	c.hist = s->counts + 1;
	c.touched = s->touched;
	ret = sfile_reader_foreach_batch(j->sr, count_cb, &c);
	if (!ret && c.nt > j->cap) {
		size_t *i = realloc(j->idx, c.nt * sizeof(*i));
		uint64_t *n = i ? realloc(j->cnt, c.nt * sizeof(*n)) : NULL;

		if (i)
			j->idx = i;
		if (n)
			j->cnt = n;
		if (!i || !n)
			j->nomem = 1;
		else
			j->cap = c.nt;
	}
	for (size_t t = 0; t < c.nt; t++) {
		size_t i = c.touched[t];

		if (!ret && !j->nomem) {
			j->idx[t] = i;
			j->cnt[t] = s->counts[i];
		}
		s->counts[i] = 0;
	}
	j->nr = ret || j->nomem ? 0 : c.nt;
	j->bad = ret != 0;
	/* the reader summed the counts as it checked them */
	j->total = sfile_reader_info(j->sr)->total;
	j->outside = c.outside;
}

/* The oldest job there is work on, marked as taken: a file to open, the
 * next file's image to look up (the resolver is not thread-safe: one
 * lookup at a time, in list order), or counts to take.  NULL if none.
 * Under w->mu. */
static struct walk_job *take(struct walk *w)
{
	for (size_t k = w->tail; k < w->head; k++) {
		struct walk_job *j = &w->slots[k % WALK_SLOTS];

		switch (j->state) {
		case JOB_OPEN_QUEUED:
			j->state = JOB_OPENING;
			return j;
		case JOB_OPENED:
			if (k != w->resolve || w->resolving)
				break;
			w->resolving = 1;
			j->state = JOB_RESOLVING;
			return j;
		case JOB_QUEUED:
			j->state = JOB_CLAIMED;
			return j;
		default:
			break;
		}
	}
	return NULL;
}

/* What take() took, done; its next state.  Not under w->mu. */
static int job_run(struct walk *w, struct walk_job *j, struct scratch *s)
{
	switch (j->state) {
	case JOB_OPENING:
		/* the slot's reader, reused: its table's memory is then
		 * allocated (and faulted in) once per slot, not per file */
		if (!j->rd)
			j->rd = sfile_reader_new();
		j->sr = j->rd && !sfile_reader_reopen(j->rd, j->path, SFILE_READ_LATE_CHECK,
						      NULL, 0) ? j->rd : NULL;
		return JOB_OPENED;
	case JOB_RESOLVING:
		if (j->sr)
			j->err = w->resolve_fn(w->resolve_arg, j);
		return !j->err && j->sr && j->img && j->nsyms ? JOB_QUEUED : JOB_DONE;
	default:
		job_count(j, s);
		return JOB_DONE;
	}
}

/* j's new state st after job_run(), published.  Under w->mu. */
static void job_end(struct walk *w, struct walk_job *j, int st)
{
	if (j->state == JOB_RESOLVING) {
		w->resolve++;
		w->resolving = 0;
	}
	j->state = st;
	if (st != JOB_DONE && w->sleepers)
		pthread_cond_broadcast(&w->work);	/* more work */
	if (w->waiting)
		pthread_cond_signal(&w->done);
}

struct worker_arg {
	struct walk *w;
	struct scratch *s;
};

static void *worker(void *arg)
{
	struct walk *w = ((struct worker_arg *)arg)->w;
	struct scratch *s = ((struct worker_arg *)arg)->s;
	struct walk_job *j;
	int st;

	free(arg);
	pthread_mutex_lock(&w->mu);
	while (!w->quit) {
		j = take(w);
		if (!j) {
			w->sleepers++;
			pthread_cond_wait(&w->work, &w->mu);
			w->sleepers--;
			continue;
		}
		pthread_mutex_unlock(&w->mu);
		st = job_run(w, j, s);
		pthread_mutex_lock(&w->mu);
		job_end(w, j, st);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static int threads_set = -1;

void walk_set_threads(int n)
{
	threads_set = n > WALK_THREADS ? WALK_THREADS : n;
}

static unsigned nr_workers(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (threads_set >= 0)
		return (unsigned)threads_set;
	if (n <= 1)
		return 0;
	return n - 1 > WALK_THREADS ? WALK_THREADS : (unsigned)(n - 1);
}

struct walk *walk_new(int (*resolve)(void *arg, struct walk_job *j), void *arg)
{
	struct walk *w = calloc(1, sizeof(*w));
	unsigned want = nr_workers();

	if (!w)
		return NULL;
	w->resolve_fn = resolve;
	w->resolve_arg = arg;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->work, NULL);
	pthread_cond_init(&w->done, NULL);
	/* Signals stay with the caller's thread (signals_thread_start()). */
	for (unsigned i = 0; i < want; i++) {
		struct worker_arg *a = malloc(sizeof(*a));

		if (!a)
			break;
		*a = (struct worker_arg){ .w = w, .s = &w->scr[i + 1] };
		if (signals_thread_start(&w->th[i], worker, a)) {
			free(a);
			break;	/* fewer workers; the caller does the rest */
		}
		w->nr_threads++;
	}
	return w;
}

void walk_free(struct walk *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->quit = 1;
	pthread_cond_broadcast(&w->work);
	pthread_mutex_unlock(&w->mu);
	for (unsigned i = 0; i < w->nr_threads; i++)
		pthread_join(w->th[i], NULL);
	for (size_t i = 0; i < WALK_SLOTS; i++) {
		sfile_reader_close(w->slots[i].rd);
		free(w->slots[i].idx);
		free(w->slots[i].cnt);
	}
	for (size_t i = 0; i <= WALK_THREADS; i++) {
		free(w->scr[i].counts);
		free(w->scr[i].touched);
	}
	pthread_cond_destroy(&w->work);
	pthread_cond_destroy(&w->done);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

struct walk_job *walk_slot(struct walk *w)
{
	struct walk_job *j;
	struct sfile_reader *rd;
	size_t *idx;
	uint64_t *cnt;
	size_t cap;

	if (w->head - w->tail == WALK_SLOTS)
		return NULL;
	/* Only the caller touches a slot that is not pending (the workers
	 * look at [tail, head) only). */
	j = &w->slots[w->head % WALK_SLOTS];
	rd = j->rd;
	idx = j->idx;
	cnt = j->cnt;
	cap = j->cap;
	*j = (struct walk_job){ .rd = rd, .idx = idx, .cnt = cnt, .cap = cap };
	return j;
}

void walk_push_open(struct walk *w)
{
	pthread_mutex_lock(&w->mu);
	w->slots[w->head % WALK_SLOTS].state = JOB_OPEN_QUEUED;
	w->head++;
	if (w->sleepers)
		pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->mu);
}

struct walk_job *walk_oldest(struct walk *w)
{
	struct walk_job *j, *o;
	int st;

	if (w->tail == w->head)
		return NULL;
	o = &w->slots[w->tail % WALK_SLOTS];
	pthread_mutex_lock(&w->mu);
	/* Rather than wait, the caller works as the workers do. */
	while (o->state != JOB_DONE) {
		j = take(w);
		if (j) {
			pthread_mutex_unlock(&w->mu);
			st = job_run(w, j, &w->scr[0]);
			pthread_mutex_lock(&w->mu);
			job_end(w, j, st);
			continue;
		}
		w->waiting++;
		pthread_cond_wait(&w->done, &w->mu);
		w->waiting--;
	}
	pthread_mutex_unlock(&w->mu);
	return o;
}

void walk_pop(struct walk *w)
{
	pthread_mutex_lock(&w->mu);
	if (w->tail < w->head)
		w->tail++;
	pthread_mutex_unlock(&w->mu);
}
