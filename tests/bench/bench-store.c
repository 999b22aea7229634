// SPDX-License-Identifier: MIT
/*
 * Sample-file store hot path: sfile_add() on offsets already in the file
 * (the common case: hot code), inserts of new offsets (with growth),
 * store_get() of a cached file, and store_sync() with many files.
 * Prints "name: value unit" lines.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "host/collect/store.h"

#ifndef HOT
#define HOT 4096	/* distinct hot offsets */
#endif

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

int main(void)
{
	const struct store_event ev = { .name = "CPU_CLK_UNHALTED", .count = 100000 };
	const char *b = getenv("BUILD");
	char dir[512], cmd[600];
	struct store_key k = { .app = "/usr/bin/app", .image = "/usr/lib/libfoo.so",
			       .tgid = 100, .tid = 101, .cpu = 0 };
	struct store *st;
	struct sfile *sf;
	uint64_t s = 88172645463325252ULL, *offs;
	const uint64_t hot = HOT, n = 50 * 1000 * 1000, nnew = 2 * 1000 * 1000;
	volatile uint64_t sink = 0;
	double t;
	int ret = 0;

	snprintf(dir, sizeof(dir), "%s/tmp/bench-store.%d", b ? b : "build", (int)getpid());
	snprintf(cmd, sizeof(cmd), "%s/tmp", b ? b : "build");
	mkdir(cmd, 0755);
	st = store_open(dir, "bench", &ev, 1, OPVM_SEP_ALL, 0);
	if (!st) {
		perror("store_open");
		return 1;
	}
	sf = store_get(st, &k);
	offs = malloc(hot * sizeof(*offs));
	if (!sf || !offs)
		return 1;
	/* A hot set of 4096 code addresses, as a profile of busy code has. */
	for (uint64_t i = 0; i < hot; i++) {
		offs[i] = 0x400000 + (rnd(&s) % (1 << 20));
		ret |= sfile_add(sf, offs[i], 1);
	}
	t = now();
	for (uint64_t i = 0; i < n; i++)
		ret |= sfile_add(sf, offs[(i * 2654435761u) & (hot - 1)], 1);
	t = now() - t;
	printf("store_add_existing: %.2f ns/op\n", t * 1e9 / n);
	printf("store_add_existing_rate: %.1f Msamples/s\n", n / t / 1e6);

	/* The same through the batch call, 256 samples per call. */
	{
		uint64_t batch[256];
		int err = 0;

		t = now();
		for (uint64_t i = 0; i < n; i += 256) {
			for (uint64_t j = 0; j < 256; j++)
				batch[j] = offs[((i + j) * 2654435761u) & (hot - 1)];
			ret |= sfile_add_many(sf, batch, 256, &err) ? err : 0;
		}
		t = now() - t;
		printf("store_add_many_existing: %.2f ns/op\n", t * 1e9 / n);
	}

	k.image = "/usr/lib/libbar.so";
	sf = store_get(st, &k);
	t = now();
	for (uint64_t i = 0; i < nnew; i++)
		ret |= sfile_add(sf, rnd(&s), 1);
	t = now() - t;
	printf("store_add_new_with_growth: %.1f ns/op\n", t * 1e9 / nnew);

	t = now();
	for (uint64_t i = 0; i < 10 * 1000 * 1000; i++)
		sink += (uintptr_t)store_get(st, &k);
	t = now() - t;
	printf("store_get_cached: %.1f ns/op\n", t * 1e9 / 1e7);

	/* Alternating keys defeat the last-file shortcut: the hashed path. */
	{
		struct store_key k2 = k;

		k2.image = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30";
		sink += (uintptr_t)store_get(st, &k2);
		t = now();
		for (uint64_t i = 0; i < 5 * 1000 * 1000; i++)
			sink += (uintptr_t)store_get(st, (i & 1) ? &k2 : &k);
		t = now() - t;
		printf("store_get_hashed: %.1f ns/op\n", t * 1e9 / 5e6);
	}

	/* Many files: sync cost. */
	for (int tid = 0; tid < 2000; tid++) {
		k.tid = tid;
		ret |= sfile_add(store_get(st, &k), 0x1000, 1);
	}
	t = now();
	for (int i = 0; i < 1000; i++) {
		k.tid = i;
		sfile_add(store_get(st, &k), 0x1000, 1);
		store_sync(st);
	}
	t = now() - t;
	printf("store_sync_2000_files: %.1f us/op\n", t * 1e6 / 1000);
	store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd)) {}
	free(offs);
	(void)sink;
	return ret ? 1 : 0;
}
