// SPDX-License-Identifier: MIT
/*
 * Crash safety: a writer process adds samples and calls store_sync(); the
 * test SIGKILLs it at random instants and right at table growth, then reads
 * every file back.  Each file must open, and each count must lie between
 * what the writer had synced and what it had started to add before it died.
 * Rounds append to the same files, so recovery of a killed file is tested
 * too; the last rounds kill a writer while it rotates current/ to previous/.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/collect/store.h"
#include "tmpdir.h"

#define NFILES		3
#define KEYSPACE	200000u		/* offsets per file: tables reach 2^19 */
#define SYNC_EVERY	997u
#define MAX_ITERS	4000000u

static const struct store_event ev = { .name = "TIMER", .count = 1000 };

struct shm {
	volatile uint64_t started;	/* iterations that may have been applied */
	volatile uint64_t synced;	/* iterations made durable by store_sync */
	volatile uint64_t distinct0;	/* distinct offsets in file 0 */
	volatile int fault;		/* writer saw an error */
};

static uint32_t prev[NFILES][KEYSPACE], lo[NFILES][KEYSPACE],
	hi[NFILES][KEYSPACE], got[NFILES][KEYSPACE];
static uint8_t seen0[KEYSPACE];

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	x ^= x >> 33;
	return x;
}

static void iter_key(uint64_t seed, uint64_t i, unsigned *f, uint32_t *k)
{
	*f = (unsigned)(i % NFILES);
	*k = (uint32_t)(mix(seed * 0x100000000ULL + i) % KEYSPACE);
}

static void file_path(const char *d, unsigned f, char *buf, size_t n)
{
	snprintf(buf, n, "%s/guests/g/samples/current/{root}/img%u/{dep}/{root}/img%u/TIMER.1000.0.all.all.all",
		 d, f, f);
}

static void __attribute__((noreturn)) writer(const char *d, uint64_t seed,
					     unsigned flags, struct shm *sh)
{
	struct store *st = store_open(d, "g", &ev, 1, 0, flags);
	struct sfile *sf[NFILES];
	uint64_t distinct = sh->distinct0;

	if (!st) {
		sh->fault = errno;
		_exit(2);
	}
	for (unsigned f = 0; f < NFILES; f++) {
		char img[16];
		struct store_key k = { .image = img, .tgid = -1, .tid = -1, .cpu = -1 };

		snprintf(img, sizeof(img), "img%u", f);
		sf[f] = store_get(st, &k);
		if (!sf[f]) {
			sh->fault = errno;
			_exit(3);
		}
	}
	for (uint64_t i = 0; i < MAX_ITERS; i++) {
		unsigned f;
		uint32_t k;
		int ret;

		iter_key(seed, i, &f, &k);
		sh->started = i + 1;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		ret = sfile_add(sf[f], 0x1000 + (uint64_t)k * 4, 1);
		if (ret) {
			sh->fault = -ret;
			_exit(4);
		}
		if (f == 0 && !prev[0][k] && !seen0[k]) {
			seen0[k] = 1;
			sh->distinct0 = ++distinct;
		}
		if ((i + 1) % SYNC_EVERY == 0) {
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			if (store_sync(st)) {
				sh->fault = EIO;
				_exit(5);
			}
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			sh->synced = i + 1;
		}
	}
	/* Not killed in time: wait for it. */
	for (;;)
		pause();
}

struct fill {
	unsigned f;
	int bad;
};

static int fill_cb(uint64_t off, uint64_t count, void *arg)
{
	struct fill *fl = arg;
	uint64_t k = (off - 0x1000) / 4;

	if (off < 0x1000 || (off - 0x1000) % 4 || k >= KEYSPACE || count > UINT32_MAX) {
		fl->bad++;
		return 0;
	}
	got[fl->f][k] = (uint32_t)count;
	return 0;
}

static int mid_growth_kills;

/* The file is longer than its live table reaches: the writer died after
 * extending the file for a new table and before publishing it. */
static int mid_growth(const char *p)
{
	uint64_t desc;
	struct stat sb;
	int fd = open(p, O_RDONLY), ret = 0;

	if (fd < 0)
		return 0;
	if (pread(fd, &desc, 8, 160) == 8 && !fstat(fd, &sb))
		ret = (uint64_t)sb.st_size > (desc & ~63ULL) + (16ULL << (desc & 63));
	close(fd);
	return ret;
}

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* Runs one writer round and checks the files.  kill_at_size > 0 kills as
 * soon as file 0 is at least that long; otherwise after delay_us. */
static void round_run(const char *d, uint64_t seed, unsigned flags,
		      long delay_us, uint64_t kill_at_size, uint64_t *distinct)
{
	struct shm *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int status;
	pid_t pid;

	assert_true(sh != MAP_FAILED);
	memset(seen0, 0, sizeof(seen0));
	sh->distinct0 = *distinct;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		writer(d, seed, flags, sh);
	if (kill_at_size) {
		/* Wait for the file to be extended for the next table: the
		 * writer is then building it and has not published it yet. */
		struct timespec t0, t;
		char p0[1024];
		struct stat sb;

		file_path(d, 0, p0, sizeof(p0));
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			if (sh->fault)
				break;
			if (!stat(p0, &sb) && (uint64_t)sb.st_size >= kill_at_size)
				break;
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec > 5)
				break;
		}
	} else {
		sleep_us(delay_us);
	}
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFSIGNALED(status))
		fail_msg("writer exited with %d (error %d)", WEXITSTATUS(status), sh->fault);

	/* Expected bounds. */
	memcpy(lo, prev, sizeof(prev));
	memcpy(hi, prev, sizeof(prev));
	for (uint64_t i = 0; i < sh->started; i++) {
		unsigned f;
		uint32_t k;

		iter_key(seed, i, &f, &k);
		hi[f][k]++;
		if (i < sh->synced)
			lo[f][k]++;
	}
	memset(got, 0, sizeof(got));
	for (unsigned f = 0; f < NFILES; f++) {
		char p[1024], err[256];
		struct sfile_reader *r;
		struct fill fl = { f, 0 };
		struct stat sb;

		file_path(d, f, p, sizeof(p));
		if (stat(p, &sb) && errno == ENOENT && sh->synced == 0) {
			uint64_t had = 0;

			for (uint32_t k = 0; k < KEYSPACE; k++)
				had += prev[f][k];
			if (!had)
				continue;	/* killed before the file existed */
		}
		if (f == 0 && mid_growth(p))
			mid_growth_kills++;
		r = sfile_reader_open(p, err, sizeof(err));
		if (!r)
			fail_msg("round seed %llu: file %u unreadable: %s",
				 (unsigned long long)seed, f, err);
		assert_int_equal(sfile_reader_foreach(r, fill_cb, &fl), 0);
		assert_int_equal(fl.bad, 0);
		sfile_reader_close(r);
	}
	for (unsigned f = 0; f < NFILES; f++)
		for (uint32_t k = 0; k < KEYSPACE; k++)
			if (got[f][k] < lo[f][k] || got[f][k] > hi[f][k])
				fail_msg("seed %llu file %u offset %u: count %u, synced %u, started %u",
					 (unsigned long long)seed, f, k, got[f][k],
					 lo[f][k], hi[f][k]);
	memcpy(prev, got, sizeof(got));
	*distinct = 0;
	for (uint32_t k = 0; k < KEYSPACE; k++)
		*distinct += prev[0][k] != 0;
	print_message("round seed %llu: killed after %llu adds (%llu synced), file 0 has %llu entries\n",
		      (unsigned long long)seed, (unsigned long long)sh->started,
		      (unsigned long long)sh->synced, (unsigned long long)*distinct);
	munmap(sh, sizeof(*sh));
}

static void test_kill_while_adding(void **state)
{
	uint64_t distinct = 0, seed = 1;
	char *d = NULL;
	unsigned rnd;

	rnd = (unsigned)time(NULL) ^ (unsigned)getpid();
	print_message("random seed %u\n", rnd);
	srand(rnd);
	/* Kills that land between extending the file and publishing the new
	 * table are the interesting ones; they are likely, not certain, so
	 * repeat the growth phase on fresh files until a few were seen. */
	for (int attempt = 0; attempt < 8 && mid_growth_kills < 3; attempt++) {
		if (d) {
			tmpdir_free(d);
		}
		d = tmpdir_new();
		assert_non_null(d);
		memset(prev, 0, sizeof(prev));
		distinct = 0;
		/* First round creates; very early kills hit file creation. */
		round_run(d, seed++, 0, 200 + rand() % 2000, 0, &distinct);
		round_run(d, seed++, STORE_APPEND, rand() % 2000, 0, &distinct);
		/* Right at growth, for each table size the file passes. */
		for (unsigned lg = 7; lg <= 19; lg++) {
			if ((1ULL << lg) / 4 * 3 < distinct ||
			    (1ULL << (lg - 1)) / 4 * 3 >= KEYSPACE)
				continue;
			round_run(d, seed++, STORE_APPEND, 0, 16ULL << lg, &distinct);
		}
	}
	print_message("%d kills landed mid-growth (new table not yet published)\n",
		      mid_growth_kills);
	assert_true(mid_growth_kills > 0);
	/* Random instants on full-size files. */
	for (int i = 0; i < 6; i++)
		round_run(d, seed++, STORE_APPEND, rand() % 40000, 0, &distinct);
	tmpdir_free(d);
}

struct walk_check {
	int files, bad;
	char why[256];
};

static int walk_cb(const struct store_entry *e, void *arg)
{
	struct walk_check *w = arg;
	struct sfile_reader *r = sfile_reader_open(e->path, w->why, sizeof(w->why));

	w->files++;
	if (!r)
		w->bad++;
	sfile_reader_close(r);
	return 0;
}

/* Kill writers that rotate current/ to previous/ (and remove the old
 * previous/): the next store_open still works and every file reads. */
static void test_kill_while_rotating(void **state)
{
	char *d = tmpdir_new();
	uint64_t distinct = 0;

	assert_non_null(d);
	srand((unsigned)time(NULL));
	memset(prev, 0, sizeof(prev));
	round_run(d, 100, 0, 30000, 0, &distinct);
	/* that writer may have died before it made the tree: make it, so
	 * that the walks below have a guests/ to read */
	store_close(store_open(d, "g", &ev, 1, 0, STORE_APPEND));
	for (int i = 0; i < 8; i++) {
		struct shm *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		struct walk_check w = { 0 };
		struct store *st;
		size_t skipped = 0;
		pid_t pid;
		int status;

		assert_true(sh != MAP_FAILED);
		memset(prev, 0, sizeof(prev));
		memset(seen0, 0, sizeof(seen0));
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			writer(d, 200 + (uint64_t)i, 0, sh);
		sleep_us(rand() % 20000);
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (!WIFSIGNALED(status))
			fail_msg("writer exited with %d (error %d)",
				 WEXITSTATUS(status), sh->fault);
		munmap(sh, sizeof(*sh));
		for (int c = 0; c < 2; c++) {
			const char *which = c ? "previous" : "current";

			assert_int_equal(store_walk(d, which, walk_cb, &w, &skipped), 0);
			assert_int_equal(skipped, 0);
		}
		if (w.bad)
			fail_msg("unreadable file after a kill: %s", w.why);
		st = store_open(d, "g", &ev, 1, 0, STORE_APPEND);
		assert_non_null(st);
		store_close(st);
	}
	tmpdir_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kill_while_adding),
		cmocka_unit_test(test_kill_while_rotating),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
