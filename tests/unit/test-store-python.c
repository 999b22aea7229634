// SPDX-License-Identifier: MIT
/*
 * Python frames from the sampler to the report: the sampler's name table
 * (lib/pynames.c: dedup, cut, full), the store's Python frame table
 * (host/collect/store-python.c: round trip, hostile names made printable,
 * its bound counted, a torn or forged file), {py} sample files and Python
 * frames in stacks read back as report rows and frames, and the rule that
 * puts the Python frames in place of the eval loop (report_python_merge()).
 */
#include <errno.h>
#include <fcntl.h>
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

#include "host/collect/store.h"
#include "host/report/report.h"
#include "lib/pynames.h"
#include "lib/text.h"
#include "tmpdir.h"

static const struct store_event ev1[] = { { .name = "TIMER", .count = 1000 } };

static char *cur_dir(const char *d)
{
	char *p;

	assert_true(asprintf(&p, "%s/guests/g/samples/current", d) > 0);
	return p;
}

static void test_pynames(void **state)
{
	struct pynames *t = pynames_new();
	char big[1000];
	uint32_t a, b, c, i;

	assert_non_null(t);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(pynames_intern(t, "f", "/a.py", 3, 5, &a), 0);
	assert_int_equal(pynames_intern(t, "f", "/a.py", 3, 6, &b), 0);
	assert_int_equal(pynames_intern(t, "f", "/a.py", 3, 5, &c), 0);
	assert_int_equal(a, c);
	assert_int_not_equal(a, b);
	assert_int_equal(pynames_intern(t, big, big, 1, 1, &c), 0);
	assert_int_equal(strlen(pynames_get(t, c)->name), PYNAMES_NAME_MAX - 1);
	assert_int_equal(strlen(pynames_get(t, c)->file), PYNAMES_FILE_MAX - 1);
	assert_null(pynames_get(t, pynames_count(t)));
	/* full: refused and counted, the old ones still found */
	for (i = 0; pynames_count(t) < PYNAMES_MAX; i++)
		assert_int_equal(pynames_intern(t, "g", "/b.py", i, i, &c), 0);
	assert_int_equal(pynames_intern(t, "new", "/c.py", 1, 1, &c), -ENOSPC);
	assert_int_equal(pynames_refused(t), 1);
	assert_int_equal(pynames_intern(t, "f", "/a.py", 3, 6, &c), 0);
	assert_int_equal(c, b);
	pynames_free(t);
}

static void test_table_round_trip(void **state)
{
	char *d = tmpdir_new(), *cur, err[128] = "", big[1000];
	struct store *st = store_open(d, "g", ev1, 1, 0, 0);
	struct store_pytab *t = st ? store_python_open(st) : NULL;
	const struct store_pyframe *f;
	struct store_pyread *rd;
	struct store_stats ss;
	uint32_t id;

	assert_non_null(t);
	memset(big, 'y', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(store_python_add(t, "Outer.method", "/srv/app.py", 10, 12, &id), 0);
	assert_int_equal(id, 0);
	/* a terminal escape, a newline and bytes that are not UTF-8 */
	assert_int_equal(store_python_add(t, "ev\x1b[2Jil\nx\xff\xc3", "/t\xe9.py", 1, 2, &id), 0);
	assert_int_equal(store_python_add(t, big, big, 0, 0, &id), 0);
	assert_int_equal(store_python_add(t, "caf\xc3\xa9", "", 7, 0, &id), 0);
	store_python_close(t);
	store_get_stats(st, &ss);
	assert_int_equal(ss.py_frames, 4);
	cur = cur_dir(d);
	rd = store_python_load(cur, err, sizeof(err));
	assert_non_null(rd);
	assert_int_equal(store_python_count(rd), 4);
	f = store_python_get(rd, 0);
	assert_string_equal(f->name, "Outer.method");
	assert_string_equal(f->file, "/srv/app.py");
	assert_int_equal(f->first_line, 10);
	assert_int_equal(f->line, 12);
	f = store_python_get(rd, 1);
	assert_string_equal(f->name, "ev?[2Jil?x\\xff\\xc3");
	assert_string_equal(f->file, "/t\\xe9.py");
	assert_true(text_utf8_valid(f->name));
	f = store_python_get(rd, 2);
	assert_int_equal(strlen(f->name), STORE_PY_NAME_MAX);
	assert_int_equal(strlen(f->file), STORE_PY_FILE_MAX);
	assert_string_equal(store_python_get(rd, 3)->name, "caf\xc3\xa9");
	assert_null(store_python_get(rd, 4));
	assert_null(store_python_get(rd, UINT64_MAX));
	store_python_free(rd);
	store_close(st);
	free(cur);
	tmpdir_free(d);
}

/* A writer killed mid-record, then an appending one: the torn record is
 * cut, the ids go on from the last whole one. */
static void test_table_torn_append(void **state)
{
	char *d = tmpdir_new(), *cur, path[4096];
	struct store *st = store_open(d, "g", ev1, 1, 0, 0);
	struct store_pytab *t = st ? store_python_open(st) : NULL;
	struct store_pyread *rd;
	struct stat sb;
	uint32_t id;

	assert_non_null(t);
	assert_int_equal(store_python_add(t, "a", "/a.py", 1, 1, &id), 0);
	assert_int_equal(store_python_add(t, "b", "/b.py", 2, 2, &id), 0);
	store_python_close(t);
	store_close(st);
	cur = cur_dir(d);
	snprintf(path, sizeof(path), "%s/python.def", cur);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(truncate(path, sb.st_size - 3), 0);
	rd = store_python_load(cur, NULL, 0);
	assert_int_equal(store_python_count(rd), 1);
	store_python_free(rd);
	st = store_open(d, "g", ev1, 1, 0, STORE_APPEND);
	t = st ? store_python_open(st) : NULL;
	assert_non_null(t);
	assert_int_equal(store_python_add(t, "c", "/c.py", 3, 3, &id), 0);
	assert_int_equal(id, 1);
	store_python_close(t);
	store_close(st);
	rd = store_python_load(cur, NULL, 0);
	assert_int_equal(store_python_count(rd), 2);
	assert_string_equal(store_python_get(rd, 1)->name, "c");
	store_python_free(rd);
	free(cur);
	tmpdir_free(d);
}

/* Forged tables: wrong magic, ids out of order, lengths past the file or
 * their bounds; the reader keeps the good prefix or refuses, never more. */
static void test_table_forged(void **state)
{
	char *d = tmpdir_new(), *cur, path[4096], err[128] = "";
	struct store *st = store_open(d, "g", ev1, 1, 0, 0);
	struct store_pytab *t = st ? store_python_open(st) : NULL;
	struct { uint32_t id, first, line; uint16_t nl, fl; } rec = { 5, 1, 1, 2, 0 };
	struct store_pyread *rd;
	uint32_t id;
	int fd;

	assert_non_null(t);
	assert_int_equal(store_python_add(t, "ok", "/ok.py", 1, 1, &id), 0);
	store_python_close(t);
	store_close(st);
	cur = cur_dir(d);
	snprintf(path, sizeof(path), "%s/python.def", cur);
	fd = open(path, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, &rec, sizeof(rec)), sizeof(rec));	/* id 5, not 1 */
	assert_int_equal(write(fd, "zz\0\0\0\0\0\0", 8), 8);
	rec.id = 1;
	rec.nl = 60000;			/* past its bound and the file */
	assert_int_equal(write(fd, &rec, sizeof(rec)), sizeof(rec));
	close(fd);
	rd = store_python_load(cur, err, sizeof(err));
	assert_non_null(rd);
	assert_int_equal(store_python_count(rd), 1);
	store_python_free(rd);
	fd = open(path, O_WRONLY);
	assert_int_equal(write(fd, "NOTATABL", 8), 8);
	close(fd);
	errno = 0;
	assert_null(store_python_load(cur, err, sizeof(err)));
	assert_int_equal(errno, EBADMSG);
	assert_true(err[0] != '\0');
	unlink(path);
	assert_int_equal(mkfifo(path, 0600), 0);	/* must not block */
	assert_null(store_python_load(cur, NULL, 0));
	free(cur);
	tmpdir_free(d);
}

/* The table's bound: refused and counted, the rest intact. */
static void test_table_bound(void **state)
{
	char *d = tmpdir_new();
	struct store *st = store_open(d, "g", ev1, 1, 0, 0);
	struct store_pytab *t = st ? store_python_open(st) : NULL;
	struct store_stats ss;
	uint32_t id;

	assert_non_null(t);
	for (unsigned i = 0; i < STORE_PY_MAX; i++)
		assert_int_equal(store_python_add(t, "f", "/f.py", i, i, &id), 0);
	assert_int_equal(store_python_add(t, "g", "/g.py", 1, 1, &id), -ENOSPC);
	store_get_stats(st, &ss);
	assert_int_equal(ss.py_frames, STORE_PY_MAX);
	assert_int_equal(ss.py_refused, 1);
	store_python_close(t);
	store_close(st);
	tmpdir_free(d);
}

/* ---- the report side ------------------------------------------------------ */

#define PY_IMG	"/usr/bin/python3.11"

static void add_py(struct store *st, uint64_t id, uint64_t n)
{
	struct store_key k = { .app = PY_IMG, .image = PY_IMG, .python = 1, .tgid = -1,
			       .tid = -1, .cpu = -1 };
	struct sfile *sf = store_get(st, &k);

	assert_non_null(sf);
	assert_int_equal(sfile_add(sf, id, n), 0);
}

/* A session: f10/f30/f60 under <module>, a hostile name, an id its table
 * does not define, and stacks of Python frames (one a recursion loop of
 * the whole depth). */
static char *py_session(void)
{
	char *d = tmpdir_new();
	struct store *st = store_open(d, "g", ev1, 1, 0, 0);
	struct store_pytab *t = st ? store_python_open(st) : NULL;
	struct stacktab *tab = st ? store_stacks_open(st) : NULL;
	struct store_frame f[STORE_STACKS_MAX_FRAMES];
	struct store_key nk = { .image = PY_IMG, .tgid = -1, .tid = -1, .cpu = -1 };
	uint32_t id;

	assert_non_null(t);
	assert_non_null(tab);
	assert_int_equal(store_python_add(t, "f10", "/tmp/split.py", 3, 6, &id), 0);
	assert_int_equal(store_python_add(t, "f30", "/tmp/split.py", 9, 12, &id), 0);
	assert_int_equal(store_python_add(t, "main", "/tmp/split.py", 21, 23, &id), 0);
	assert_int_equal(store_python_add(t, "<module>", "/tmp/split.py", 1, 30, &id), 0);
	assert_int_equal(store_python_add(t, "\x1b]0;pwn\x07", "/x\n.py", 1, 1, &id), 0);
	add_py(st, 0, 100);
	add_py(st, 1, 300);
	add_py(st, 4, 5);
	add_py(st, 99, 7);		/* no such id */
	assert_int_equal(sfile_add(store_get(st, &nk), 0x1000, 11), 0);
	/* native leaf, then Python frames innermost first */
	f[0] = (struct store_frame){ .image = PY_IMG, .offset = 0x1000 };
	f[1] = (struct store_frame){ .image = PY_IMG, .python = 1, .offset = 1 };
	f[2] = (struct store_frame){ .image = PY_IMG, .python = 1, .offset = 2 };
	f[3] = (struct store_frame){ .image = PY_IMG, .python = 1, .offset = 3 };
	assert_int_equal(store_stack_add(tab, 0, PY_IMG, f, 4), 0);
	for (unsigned i = 0; i < STORE_STACKS_MAX_FRAMES; i++)
		f[i] = (struct store_frame){ .image = PY_IMG, .python = 1, .offset = 0 };
	assert_int_equal(store_stack_add(tab, 0, PY_IMG, f, STORE_STACKS_MAX_FRAMES), 0);
	assert_int_equal(store_stack_add(tab, 0, PY_IMG, f, STORE_STACKS_MAX_FRAMES + 1),
			 -ENOSPC);
	store_stacks_close(tab);
	store_python_close(t);
	assert_int_equal(store_sync(st), 0);
	store_close(st);
	return d;
}

static const struct report_row *row_named(const struct report *r, const char *sym)
{
	for (size_t i = 0; i < r->nr_rows; i++)
		if (r->rows[i].symbol && !strcmp(r->rows[i].symbol, sym))
			return &r->rows[i];
	return NULL;
}

static void test_report_rows(void **state)
{
	char *d = py_session(), err[256] = "";
	struct symres_config sc = { .session_dir = d, .no_host_kernel = 1, .no_debuginfod = 1 };
	struct symres *res = symres_new(&sc);
	struct report_opts o = { .session_dir = d, .keep = REPORT_KEEP_DEFAULT, .symbols = 1,
				 .res = res };
	struct report *r = report_load(&o, err, sizeof(err));
	const struct report_row *row;
	unsigned deep = 0;

	if (!r) {
		fail_msg("report_load: %s", err);
		return;
	}
	if (!(row = row_named(r, "f30 (/tmp/split.py:9)"))) {
		fail_msg("no f30 row");
		return;
	}
	assert_true(row->python);
	assert_int_equal(row->samples, 300);
	assert_string_equal(row->file, "/tmp/split.py");
	assert_int_equal(row->first_line, 9);
	if (!(row = row_named(r, "f10 (/tmp/split.py:3)"))) {
		fail_msg("no f10 row");
		return;
	}
	assert_int_equal(row->samples, 100);
	if (!(row = row_named(r, "?]0;pwn? (/x?.py:1)"))) {
		fail_msg("no hostile row");
		return;
	}
	assert_int_equal(row->samples, 5);
	assert_int_equal(r->total, 100 + 300 + 5 + 7 + 11);
	assert_true(r->unresolved >= 7);
	assert_int_equal(report_stacks_load(r, &o), 0);
	assert_int_equal(r->nr_stacks, 2);
	for (size_t i = 0; i < r->nr_stacks; i++) {
		const struct report_stack *s = &r->stacks[i];

		if (s->nr == STORE_STACKS_MAX_FRAMES) {
			deep++;
			assert_string_equal(s->frames[s->nr - 1].symbol, "f10 (/tmp/split.py:3)");
			continue;
		}
		/* the native leaf has no symbol here (no binary): the eval
		 * loop is not found, and the order stays */
		assert_int_equal(s->nr, 4);
		assert_false(s->frames[0].python);
		assert_true(s->frames[1].python);
		assert_string_equal(s->frames[3].symbol, "<module> (/tmp/split.py:1)");
		assert_int_equal(s->frames[3].line, 30);
	}
	assert_int_equal(deep, 1);
	report_free(r);
	symres_free(res);
	tmpdir_free(d);
}

/* One window of a windowed session: its own Python table, defining the
 * frames names[] in that order (ids 0, 1...), counts[i] samples of each
 * and one stack whose Python frame is the last; sealed as window w. */
static void py_window(struct store *st, int w, const char *const *names, const uint64_t *counts,
		      unsigned n)
{
	struct store_pytab *t = store_python_open(st);
	struct stacktab *tab = store_stacks_open(st);
	struct store_frame f[2] = { { .image = PY_IMG, .offset = 0x1000 },
				    { .image = PY_IMG, .python = 1, .offset = n - 1 } };
	char name[STORE_WINDOW_NAME_MAX];
	uint32_t id;
	int sealed;

	assert_non_null(t);
	assert_non_null(tab);
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(store_python_add(t, names[i], "/tmp/split.py", 1, 2, &id), 0);
		assert_int_equal(id, i);
		add_py(st, id, counts[i]);
	}
	assert_int_equal(store_stack_add(tab, 0, PY_IMG, f, 2), 0);
	store_stacks_close(tab);
	store_python_close(t);
	store_window_name(name, 1000000 + w * 10, 1000010 + w * 10);
	assert_int_equal(store_rotate(st, name, &sealed), 0);
	assert_int_equal(sealed, 0);
}

/*
 * A range of windows (report --since/--until, the exporter's answers):
 * each window's Python ids are its own table's, and its stacks its own
 * table's.  Here id 0 is f10 in the first window and f60 in the second:
 * the rows and stacks of both are named right, and the stacks of every
 * window are read, not the last one's alone.
 */
static void test_report_windows(void **state)
{
	static const char *const w1[] = { "f10", "f30" }, *const w2[] = { "f60", "f10" };
	static const uint64_t c1[] = { 100, 300 }, c2[] = { 600, 50 };
	char *d = tmpdir_new(), err[256] = "";
	struct store *st = d ? store_open(d, "g", ev1, 1, 0, 0) : NULL;
	struct symres_config sc = { .session_dir = d, .no_host_kernel = 1, .no_debuginfod = 1 };
	struct symres *res = symres_new(&sc);
	struct report_opts o = { .session_dir = d, .keep = REPORT_KEEP_DEFAULT, .symbols = 1,
				 .res = res, .range = 1, .since_ms = 0, .until_ms = INT64_MAX };
	const struct report_row *row;
	struct report *r;
	const char *leaf[2];

	assert_non_null(st);
	py_window(st, 0, w1, c1, 2);
	py_window(st, 1, w2, c2, 2);
	store_close(st);
	r = report_load(&o, err, sizeof(err));
	if (!r) {
		fail_msg("report_load: %s", err);
		return;
	}
	for (size_t i = 0; i < 3; i++) {
		static const char *const sym[] = { "f10 (/tmp/split.py:1)",
						   "f30 (/tmp/split.py:1)",
						   "f60 (/tmp/split.py:1)" };
		static const uint64_t want[] = { 150, 300, 600 };

		if (!(row = row_named(r, sym[i]))) {
			fail_msg("no row %s", sym[i]);
			return;
		}
		assert_int_equal(row->samples, want[i]);
	}
	assert_int_equal(report_stacks_load(r, &o), 0);
	assert_int_equal(r->nr_stacks, 2);
	assert_int_equal(r->stack_guests, 1);
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(r->stacks[i].nr, 2);
		leaf[i] = r->stacks[i].frames[1].symbol;
		assert_non_null(leaf[i]);
	}
	assert_string_equal(leaf[0], "f30 (/tmp/split.py:1)");	/* oldest first */
	assert_string_equal(leaf[1], "f10 (/tmp/split.py:1)");
	report_free(r);
	symres_free(res);
	tmpdir_free(d);
}

static void frame(struct report_frame *f, const char *sym, int python)
{
	*f = (struct report_frame){ .image = PY_IMG, .symbol = sym, .python = python };
}

static void test_merge(void **state)
{
	struct report_frame f[16];
	unsigned n;

	/* a C function called from Python, two eval loops (a builtin calling
	 * back into Python between them), what started the interpreter */
	frame(&f[0], "PyLong_FromString", 0);
	frame(&f[1], "_PyEval_EvalFrameDefault", 0);
	frame(&f[2], "builtin_sorted", 0);
	frame(&f[3], "_PyEval_EvalFrameDefault", 0);
	frame(&f[4], "PyEval_EvalCode", 0);
	frame(&f[5], "main", 0);
	frame(&f[6], "f60 (/s.py:15)", 1);
	frame(&f[7], "main (/s.py:21)", 1);
	frame(&f[8], "<module> (/s.py:1)", 1);
	n = report_python_merge(f, 9);
	assert_int_equal(n, 6);
	assert_string_equal(f[0].symbol, "PyLong_FromString");
	assert_string_equal(f[1].symbol, "f60 (/s.py:15)");
	assert_string_equal(f[3].symbol, "<module> (/s.py:1)");
	assert_string_equal(f[4].symbol, "PyEval_EvalCode");
	assert_string_equal(f[5].symbol, "main");
	/* the leaf in the eval loop: the Python frame is the leaf */
	frame(&f[0], "_PyEval_EvalFrameDefault", 0);
	frame(&f[1], "main", 0);
	frame(&f[2], "f10 (/s.py:3)", 1);
	n = report_python_merge(f, 3);
	assert_int_equal(n, 2);
	assert_string_equal(f[0].symbol, "f10 (/s.py:3)");
	assert_string_equal(f[1].symbol, "main");
	/* no eval loop found, no Python frames, only Python frames: as is */
	frame(&f[0], "memcpy", 0);
	frame(&f[1], "f10 (/s.py:3)", 1);
	assert_int_equal(report_python_merge(f, 2), 2);
	assert_string_equal(f[0].symbol, "memcpy");
	frame(&f[0], "_PyEval_EvalFrameDefault", 0);
	assert_int_equal(report_python_merge(f, 1), 1);
	frame(&f[0], "f10 (/s.py:3)", 1);
	assert_int_equal(report_python_merge(f, 1), 1);
	assert_int_equal(report_python_merge(f, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pynames),
		cmocka_unit_test(test_table_round_trip),
		cmocka_unit_test(test_table_torn_append),
		cmocka_unit_test(test_table_forged),
		cmocka_unit_test(test_table_bound),
		cmocka_unit_test(test_report_rows),
		cmocka_unit_test(test_report_windows),
		cmocka_unit_test(test_merge),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
