// SPDX-License-Identifier: MIT
/*
 * symbols/jitdump.c: a jitdump as perf's agents write it (header, loads
 * with their code, a move, records opvm skips by their size) read into
 * symbols with their code bytes; what a hostile guest writes (headers of
 * another byte order, version or machine, lying record sizes, names that
 * do not end, code past its record, moves of nothing) refused and
 * counted; a last record still being written left for the next read; a
 * dump and a map of one process read together, the dump winning; and
 * symres_jit_image() with a session's dump.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/fs.h"
#include "lib/array.h"
#include "symbols/perfmap.h"
#include "symbols/symres.h"
#include "tests/unit/tmpdir.h"

struct dump {
	uint8_t b[8192];
	size_t n;
};

static void put(struct dump *d, const void *p, size_t n)
{
	assert_true(d->n + n <= sizeof(d->b));
	memcpy(d->b + d->n, p, n);
	d->n += n;
}

static void put32(struct dump *d, uint32_t v)
{
	put(d, &v, 4);
}

static void put64(struct dump *d, uint64_t v)
{
	put(d, &v, 8);
}

static void header(struct dump *d, uint32_t magic, uint32_t version, uint32_t size,
		   uint32_t mach)
{
	d->n = 0;
	put32(d, magic);
	put32(d, version);
	put32(d, size);
	put32(d, mach);
	put32(d, 0);
	put32(d, 42);		/* pid */
	put64(d, 1);		/* timestamp */
	put64(d, 0);		/* flags */
}

static void rec_hdr(struct dump *d, uint32_t id, uint32_t size)
{
	put32(d, id);
	put32(d, size);
	put64(d, 2);
}

/* A JIT_CODE_LOAD of n code bytes (each 0xc3 + i) named name. */
static void load(struct dump *d, const char *name, uint64_t addr, uint64_t n, uint64_t index)
{
	size_t nl = strlen(name) + 1;

	rec_hdr(d, 0, (uint32_t)(16 + 40 + nl + n));
	put32(d, 42);
	put32(d, 42);
	put64(d, addr);
	put64(d, addr);
	put64(d, n);
	put64(d, index);
	put(d, name, nl);
	for (uint64_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)(0xc3 + i);

		put(d, &c, 1);
	}
}

static void move(struct dump *d, uint64_t from, uint64_t to, uint64_t n, uint64_t index)
{
	rec_hdr(d, 1, 16 + 48);
	put32(d, 42);
	put32(d, 42);
	put64(d, to);
	put64(d, from);
	put64(d, to);
	put64(d, n);
	put64(d, index);
}

static const char *name_at(const struct perfmap *pm, uint64_t addr)
{
	long i = perfmap_lookup(pm, addr);

	return i < 0 ? NULL : perfmap_sym(pm, (size_t)i)->name;
}

#define A 0x7f0000001000ull

/* Loads with code, a move, a debug-info and an unknown record skipped. */
static void test_agent_dump(void **state)
{
	static struct dump d;
	struct perfmap *pm;
	const struct jitdump_stats *st;
	uint8_t code[64];

	(void)state;
	header(&d, JITDUMP_MAGIC, 1, 40, 62);
	load(&d, "jit_a", A, 0x20, 1);
	rec_hdr(&d, 2, 16 + 16);	/* debug info: skipped */
	put64(&d, A);
	put64(&d, 0);
	load(&d, "LazyCompile:*jitB /srv/app.js:13", A + 0x40, 0x10, 2);
	move(&d, A + 0x40, A + 0x100, 0x10, 2);
	rec_hdr(&d, 99, 16 + 8);	/* an id of a later spec: by its size */
	put64(&d, 0);
	pm = perfmap_parse_jitdump(d.b, d.n);
	assert_non_null(pm);
	st = &perfmap_stats(pm)->jd;
	assert_int_equal(st->records, 5);
	assert_int_equal(st->loads, 2);
	assert_int_equal(st->moves, 1);
	assert_int_equal(st->skipped, 2);
	assert_int_equal(st->unknown, 1);
	assert_int_equal(st->code_bytes, 0x30);
	assert_int_equal(st->bad + st->bad_header + st->bad_size + st->partial, 0);
	assert_string_equal(name_at(pm, A + 0x1f), "jit_a");
	assert_null(name_at(pm, A + 0x20));
	assert_string_equal(name_at(pm, A + 0x40), "LazyCompile:*jitB /srv/app.js:13");
	assert_string_equal(name_at(pm, A + 0x10f), "LazyCompile:*jitB /srv/app.js:13");
	/* the code bytes, the moved function's with it */
	assert_int_equal(perfmap_code(pm, A + 2, code, sizeof(code)), 0x1e);
	assert_int_equal(code[0], 0xc5);
	assert_int_equal(perfmap_code(pm, A + 0x100, code, 4), 4);
	assert_int_equal(code[3], 0xc6);
	assert_int_equal(perfmap_code(pm, A + 0x30, code, 4), -1);
	perfmap_free(pm);
}

/* Headers this host does not read: nothing, counted once. */
static void test_bad_headers(void **state)
{
	static const uint32_t h[][4] = {
		{ 0x4454694a, 1, 40, 62 },	/* the other byte order */
		{ JITDUMP_MAGIC, 2, 40, 62 },	/* a version after 1 */
		{ JITDUMP_MAGIC, 1, 40, 183 },	/* aarch64's code */
		{ JITDUMP_MAGIC, 1, 39, 62 },	/* shorter than its fields */
		{ JITDUMP_MAGIC, 1, 1u << 20, 62 },	/* past the file */
	};
	static struct dump d;
	struct perfmap *pm;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(h); i++) {
		header(&d, h[i][0], h[i][1], h[i][2], h[i][3]);
		load(&d, "jit_a", A, 0x20, 1);
		pm = perfmap_parse_jitdump(d.b, d.n);
		assert_non_null(pm);
		assert_int_equal(perfmap_stats(pm)->jd.bad_header, 1);
		assert_int_equal(perfmap_nr(pm), 0);
		perfmap_free(pm);
	}
	pm = perfmap_parse_jitdump(d.b, 12);	/* a header being written */
	assert_int_equal(perfmap_stats(pm)->jd.bad_header, 1);
	perfmap_free(pm);
}

/* Records that lie: each refused and counted, the good ones around them
 * taken; a size below the record header ends the read. */
static void test_hostile_records(void **state)
{
	static struct dump d;
	const struct jitdump_stats *st;
	struct perfmap *pm;
	size_t at;

	(void)state;
	header(&d, JITDUMP_MAGIC, 1, 48, 62);
	put64(&d, 0);			/* a longer header: skipped by its size */
	load(&d, "ok1", A, 0x10, 1);
	load(&d, "nonul", A + 0x100, 0, 2);	/* a name without its NUL */
	d.b[d.n - 1] = 'x';
	at = d.n;			/* code past its record */
	load(&d, "short", A + 0x200, 8, 3);
	memcpy(d.b + at + 4, &(uint32_t){ 16 + 40 + 6 + 4 }, 4);
	d.n = at + 16 + 40 + 6 + 4;
	load(&d, "wraps", 0xfffffffffffffff0ull, 0x20, 4);
	load(&d, "kernel", 0xffffffff81000000ull, 0x10, 5);
	load(&d, "empty", A + 0x300, 0, 6);
	move(&d, A, A + 0x400, 0x10, 77);	/* no such load */
	move(&d, A, A + 0x400, 0x11, 1);	/* another size */
	rec_hdr(&d, 1, 16 + 8);		/* a move too short */
	put64(&d, 0);
	load(&d, "ok2", A + 0x500, 0x10, 8);
	rec_hdr(&d, 0, 8);		/* smaller than its header */
	load(&d, "never", A + 0x600, 0x10, 9);
	pm = perfmap_parse_jitdump(d.b, d.n);
	assert_non_null(pm);
	st = &perfmap_stats(pm)->jd;
	assert_int_equal(st->loads, 2);
	assert_int_equal(st->bad, 3);		/* no NUL, code past, short move */
	assert_int_equal(st->bad_range, 3);	/* wraps, kernel, empty */
	assert_int_equal(st->unmatched, 2);
	assert_int_equal(st->bad_size, 1);
	assert_string_equal(name_at(pm, A), "ok1");
	assert_string_equal(name_at(pm, A + 0x500), "ok2");
	assert_null(name_at(pm, A + 0x600));
	assert_int_equal(perfmap_nr(pm), 2);
	perfmap_free(pm);
}

/* A record cut short is the runtime writing it: not counted as bad. */
static void test_partial(void **state)
{
	static struct dump d;
	struct perfmap *pm;

	(void)state;
	header(&d, JITDUMP_MAGIC, 1, 40, 62);
	load(&d, "jit_a", A, 0x20, 1);
	load(&d, "jit_b", A + 0x40, 0x20, 2);
	pm = perfmap_parse_jitdump(d.b, d.n - 5);
	assert_int_equal(perfmap_stats(pm)->jd.partial, 1);
	assert_int_equal(perfmap_stats(pm)->jd.loads, 1);
	assert_int_equal(perfmap_stats(pm)->jd.bad, 0);
	perfmap_free(pm);
}

/* A process's map and dump in a session: one image; the dump's name wins
 * where both name a range; the map alone names the rest. */
static void test_session(void **state)
{
	static struct dump d;
	char *dir = tmpdir_new(), path[4200];
	struct symres *r;
	struct simage *si;
	uint8_t code[8];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/guests/g1/perfmaps", dir);
	assert_int_equal(fs_mkdir_p(path), 0);
	snprintf(path, sizeof(path), "%s/guests/g1/perfmaps/42.map", dir);
	f = fopen(path, "w");
	fprintf(f, "7f0000001000 20 map_a\n7f0000002000 20 map_only\n");
	fclose(f);
	header(&d, JITDUMP_MAGIC, 1, 40, 62);
	load(&d, "dump_a", A, 0x20, 1);
	load(&d, "dump_only", A + 0x3000, 0x20, 2);
	snprintf(path, sizeof(path), "%s/guests/g1/perfmaps/42.dump", dir);
	f = fopen(path, "w");
	fwrite(d.b, 1, d.n, f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/guests/g1/perfmaps/43.dump", dir);
	f = fopen(path, "w");
	fwrite(d.b, 1, d.n, f);		/* a dump without a map */
	fclose(f);
	r = symres_new(&(struct symres_config){ .session_dir = dir, .no_debuginfod = 1,
						.no_host_kernel = 1 });
	si = symres_jit_image(r, "g1", 42);
	assert_true(simage_is_jit(si));
	assert_string_equal(simage_sym(si, (size_t)simage_lookup(si, A + 8, NULL))->name,
			    "dump_a");
	assert_string_equal(simage_sym(si, (size_t)simage_lookup(si, A + 0x1000, NULL))->name,
			    "map_only");
	assert_int_equal(simage_jit_code(si, A + 0x3000, code, 8), 8);
	assert_int_equal(code[1], 0xc4);
	assert_int_equal(simage_jit_code(si, A + 0x1000, code, 8), -1);	/* a map's */
	si = symres_jit_image(r, "g1", 43);
	assert_true(simage_is_jit(si));
	assert_string_equal(simage_sym(si, (size_t)simage_lookup(si, A + 0x3008, NULL))->name,
			    "dump_only");
	symres_free(r);
	tmpdir_free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agent_dump),
		cmocka_unit_test(test_bad_headers),
		cmocka_unit_test(test_hostile_records),
		cmocka_unit_test(test_partial),
		cmocka_unit_test(test_session),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
