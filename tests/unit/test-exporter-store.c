// SPDX-License-Identifier: MIT
/*
 * The continuous exporter's store under a hostile guest (docs/usage.md,
 * `opvm exporter --continuous`): a guest that churns processes or cgroups
 * makes a new sample file for nearly every sample.  Fed here as the
 * sampler would file them (distinct keys into a store with the window's
 * cap, pcont_window_cap(), as attach --max-disk sets it), window after
 * window, with a big file beside them (a log grown, a leftover): every
 * window stays under its cap and keeps the samples it had, the rest go to
 * its {overflow} bucket and are counted, and the exporter's prune keeps
 * the whole store, not only its sealed windows, under --max-store, the
 * oldest windows going first, counted on /metrics and in the JSON.
 */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/cli/exporter-http.h"
#include "host/cli/exporter-job.h"
#include "host/collect/stats.h"
#include "host/collect/store.h"
#include "lib/clock.h"
#include "tmpdir.h"

#define MAX_STORE	(24ull << 20)
#define SLACK		(64ull << 10)	/* PCONT_WINDOW_SLACK */
#define WINDOWS		40
#define CHURN		300		/* distinct processes a window */
#define KEEP		10		/* samples of the one file before the churn */
#define BIG		(23ull << 20)	/* a file beside the windows */

static const struct store_event ev[] = { { "cpu-clock", 100000, 0 } };

/* Blocks of the tree at path, as du counts them. */
static uint64_t du(const char *path)
{
	struct stat sb;
	uint64_t sum;
	struct dirent *de;
	DIR *d;

	if (lstat(path, &sb))
		return 0;
	sum = (uint64_t)sb.st_blocks * 512;
	if (!S_ISDIR(sb.st_mode) || !(d = opendir(path)))
		return sum;
	while ((de = readdir(d))) {
		char sub[4096];

		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
			sum += du(sub);
		}
	}
	closedir(d);
	return sum;
}

static void add(struct store *st, const char *app, unsigned n)
{
	struct store_key k = { .app = app, .image = app, .tgid = -1, .tid = -1, .cpu = -1 };
	struct sfile *sf = store_get(st, &k);

	assert_non_null(sf);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(sfile_add(sf, 0x1000 + i, 1), 0);
}

/* One window of the churning guest, sealed as [s, e); what its cap
 * refused. */
static uint64_t churn_window(const char *sess, uint64_t cap, int64_t s, int64_t e)
{
	struct store_limits lim = { .max_disk = cap };
	char name[STORE_WINDOW_NAME_MAX], cur[4200], *txt;
	struct store *st = store_open(sess, "churn", ev, 1, OPVM_SEP_NONE, 0);
	struct store_stats ss;
	json_t *meta;

	assert_non_null(st);
	store_set_limits(st, &lim);
	add(st, "/usr/bin/kept", KEEP);	/* before the churn: a file of its own */
	for (unsigned i = 0; i < CHURN; i++) {
		char app[64];

		snprintf(app, sizeof(app), "/tmp/churn-%u", i);
		add(st, app, 1);
	}
	store_get_stats(st, &ss);
	assert_int_equal(store_sync(st), 0);
	meta = json_pack("{s:I, s:I, s:o}", "window_start_ms", (json_int_t)s,
			 "window_end_ms", (json_int_t)e, "store", stats_store_to_json(&ss, &lim));
	txt = json_dumps(meta, 0);
	assert_int_equal(store_write_meta(st, txt), 0);
	free(txt);
	json_decref(meta);
	snprintf(cur, sizeof(cur), "%s", store_dir(st));
	/* the cap holds: what the exempt bucket and session.json add aside */
	assert_true(du(cur) <= cap + SLACK);
	store_close(st);
	store_window_name(name, s, e);
	assert_int_equal(store_seal_window(sess, "churn", name), 0);
	return ss.overflow_samples;
}

struct walk {
	uint64_t kept, total;
};

static int walk_cb(const struct store_entry *e, void *arg)
{
	struct walk *w = arg;
	struct sfile_reader *r = sfile_reader_open(e->path, NULL, 0);

	assert_non_null(r);
	w->total += sfile_reader_info(r)->total;
	if (!strcmp(e->app, "/usr/bin/kept"))
		w->kept += sfile_reader_info(r)->total;
	sfile_reader_close(r);
	return 0;
}

static void test_churn_within_max_store(void **state)
{
	char *d = tmpdir_new(), store[512], sess[600], big[700], want[256];
	struct pprof_cfg cfg;
	struct pprof *p;
	uint64_t cap, refused = 0, dropped;
	int64_t now = clk_wall_ms() / 2000 * 2000;
	char *m, *line;
	int fd;

	(void)state;
	assert_non_null(d);
	pprof_cfg_init(&cfg);
	cfg.continuous = 1;
	cfg.max_profiles = 0;		/* the store only */
	cfg.no_libvirt = 1;
	cfg.window_s = 2;
	cfg.retention_s = 600;
	cfg.max_store = MAX_STORE;
	cfg.only = "opvm-unit-no-such-guest-*";
	snprintf(store, sizeof(store), "%s/store", d);
	cfg.store_dir = store;
	cap = pcont_window_cap(&cfg);
	/* 300 windows of retention and the reserve of 256 guests fit */
	assert_true(cap * (300 + 2 * 256) <= MAX_STORE);
	assert_int_equal(mkdir(store, 0700), 0);
	snprintf(sess, sizeof(sess), "%s/0.churn", store);
	assert_int_equal(mkdir(sess, 0700), 0);
	for (int i = 0; i < WINDOWS; i++)
		refused += churn_window(sess, cap, now - (WINDOWS - i) * 2000,
					now - (WINDOWS - i - 1) * 2000);
	assert_true(refused >= WINDOWS * (CHURN / 2));
	/* the samples kept: the file made before the churn whole, and every
	 * sample somewhere (its file or the bucket) */
	for (int i = 0; i < WINDOWS; i++) {
		char name[STORE_WINDOW_NAME_MAX];
		struct walk one = { 0 };

		store_window_name(name, now - (WINDOWS - i) * 2000, now - (WINDOWS - i - 1) * 2000);
		assert_int_equal(store_walk(sess, name, walk_cb, &one, NULL), 0);
		assert_int_equal(one.kept, KEEP);
		assert_int_equal(one.total, KEEP + CHURN);
	}
	/* a big file beside the windows: it takes room as much as they do */
	snprintf(big, sizeof(big), "%s/attach.log", sess);
	fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	for (uint64_t o = 0; o < BIG; o += 1 << 20) {
		static char mb[1 << 20];

		assert_int_equal(write(fd, mb, sizeof(mb)), (ssize_t)sizeof(mb));
	}
	close(fd);
	assert_true(du(store) > MAX_STORE);

	p = pprof_new(&cfg);		/* prunes the store as it starts */
	assert_non_null(p);
	assert_true(du(store) <= MAX_STORE);
	m = pprof_metrics(p, NULL);
	assert_non_null(m);
	snprintf(want, sizeof(want), "opvm_continuous_overflow_samples_total{guest=\"churn\","
		 "owner=\"0\"} %llu\n", (unsigned long long)refused);
	assert_non_null(strstr(m, want));
	line = strstr(m, "opvm_store_windows_dropped_total{reason=\"max_store\"} ");
	assert_non_null(line);
	dropped = strtoull(strchr(line, '}') + 2, NULL, 10);
	assert_true(dropped > 0 && dropped < WINDOWS);
	free(m);
	pprof_stop(p);
	pprof_free(p);
	/* the oldest went first: the newest window is there */
	{
		char name[STORE_WINDOW_NAME_MAX];
		struct walk last = { 0 };

		store_window_name(name, now - 2000, now);
		assert_int_equal(store_walk(sess, name, walk_cb, &last, NULL), 0);
		assert_int_equal(last.kept, KEEP);
		char path[800];

		store_window_name(name, now - WINDOWS * 2000, now - (WINDOWS - 1) * 2000);
		snprintf(path, sizeof(path), "%s/guests/churn/samples/%s", sess, name);
		assert_int_equal(access(path, F_OK), -1);	/* the oldest: gone */
	}
	tmpdir_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_churn_within_max_store),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
