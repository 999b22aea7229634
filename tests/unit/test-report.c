// SPDX-License-Identifier: MIT
/*
 * Report model and outputs against the fixture (tests/golden/fixture.h):
 * real binaries compiled with cc -g -O1, a real sample tree written with
 * the store API, exact expected text and JSON in tests/golden/.
 * OPVM_UPDATE_GOLDEN=1 rewrites the golden files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <inttypes.h>
#include <unistd.h>
#include <jansson.h>
#include <zlib.h>

#include "host/collect/store.h"
#include "host/report/report.h"
#include "host/report/report-cli.h"
#include "host/report/report-priv.h"
#include "host/report/profile.pb-c.h"
#include "tests/golden/fixture.h"
#include "lib/array.h"

static struct fixture fx;

static int setup(void **state)
{
	const char *build = getenv("BUILD");
	char base[PATH_MAX];

	snprintf(base, sizeof(base), "%s/tmp", build && *build ? build : "build");
	fx_sh("mkdir -p '%s'", base);
	return fixture_build(&fx, base);
}

static int teardown(void **state)
{
	fixture_cleanup(&fx);
	return 0;
}

/* Replaces every occurrence of from with to in the malloc'd string s. */
static char *subst(char *s, const char *from, const char *to)
{
	size_t fl = strlen(from), tl = strlen(to), n = 0;
	char *out, *o;
	const char *p;

	if (!fl)
		return s;
	for (p = s; (p = strstr(p, from)); p += fl)
		n++;
	out = malloc(strlen(s) + n * (tl > fl ? tl - fl : 0) + 1);
	assert_non_null(out);
	for (p = s, o = out; *p;) {
		if (!strncmp(p, from, fl)) {
			memcpy(o, to, tl);
			o += tl;
			p += fl;
		} else {
			*o++ = *p++;
		}
	}
	*o = '\0';
	free(s);
	return out;
}

/* Footer lines wrap at 80 columns wherever the (temporary) root's path
 * ends: continuation lines (4 spaces, after a "warning:" line or a
 * 2-space problem line) are joined back, in place. */
static char *unwrap(char *s)
{
	char *o = s, *p = s;
	int joinable = 0;

	while (*p) {
		char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		int cont = joinable && !strncmp(p, "    ", 4) && p[4] && p[4] != ' ';

		if (cont) {
			o[-1] = ' ';		/* the previous line's '\n' */
			p += 4;
			len -= 4;
		} else {
			joinable = !strncmp(p, "warning:", 8) ||
				   (!strncmp(p, "  ", 2) && p[2] && p[2] != ' ');
		}
		memmove(o, p, len);
		o += len;
		p += len;
		if (*p == '\n')
			*o++ = *p++;
	}
	*o = '\0';
	return s;
}

static char *normalise(char *s)
{
	s = subst(s, fx.root, "$ROOT");
	return unwrap(subst(s, fx.bid_hex, "$BUILDID"));
}

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;

	if (!f)
		return NULL;
	buf = calloc(1, 1 << 20);
	assert_non_null(buf);
	len = fread(buf, 1, (1 << 20) - 1, f);
	buf[len] = '\0';
	fclose(f);
	return buf;
}

static void golden(const char *name, char *text)
{
	char path[PATH_MAX];
	char *want;

	if (snprintf(path, sizeof(path), "%s/../%s", fx.src, name) >= (int)sizeof(path))
		fail_msg("path too long");
	if (getenv("OPVM_UPDATE_GOLDEN")) {
		FILE *f = fopen(path, "w");

		assert_non_null(f);
		fputs(text, f);
		fclose(f);
		print_message("updated %s\n", path);
		return;
	}
	want = read_all(path);
	if (!want)
		fail_msg("%s missing: run with OPVM_UPDATE_GOLDEN=1 to create it", path);
	if (strcmp(want, text)) {
		print_message("---- expected (%s)\n%s---- got\n%s----\n", path, want, text);
		fail_msg("output differs from %s", name);
	}
	free(want);
}

struct ctx {
	struct symres *res;
	struct report *r;
};

static struct report *load(struct symres **resp, int symbols, int details,
			   unsigned keep, const char *const *specs)
{
	struct symres_root root = { .guest = "t1", .dir = fx.root };
	struct symres_config sc = {
		.session_dir = fx.session, .roots = &root, .nr_roots = 1,
		.no_host_kernel = 1, .no_debuginfod = 1,
	};
	struct report_opts o = {
		.session_dir = fx.session, .keep = keep, .symbols = symbols,
		.details = details,
	};
	static char specbuf[8][128];
	char err[512];
	struct report *r;

	for (size_t i = 0; specs && specs[i]; i++) {
		snprintf(specbuf[i], sizeof(specbuf[i]), "%s", specs[i]);
		assert_int_equal(report_filter_add(&o.filter, specbuf[i]), 0);
	}
	*resp = NULL;
	if (symbols) {
		*resp = symres_new(&sc);
		assert_non_null(*resp);
		o.res = *resp;
	}
	r = report_load(&o, err, sizeof(err));
	if (!r)
		fail_msg("report_load: %s", err);
	return r;
}

static char *render(void (*fn)(FILE *, const struct report *, const struct report_print_opts *),
		    const struct report *r, const struct report_print_opts *po)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	report_print_header(f, r);
	fputc('\n', f);
	fn(f, r, po);
	report_print_footer(f, r);
	fclose(f);
	return normalise(buf);
}

static void check_width(const char *text, int width)
{
	const char *p = text;

	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t n = eol ? (size_t)(eol - p) : strlen(p);

		/* Table lines fit; footer reasons carry paths and may not. */
		if (!strncmp(p, "  ", 2) || !strncmp(p, "warning", 7)) {
			p += n + (eol != NULL);
			continue;
		}
		if (n > (size_t)width)
			fail_msg("line longer than %d columns: '%.*s'", width, (int)n, p);
		p += n + (eol != NULL);
	}
}

static void test_summary_golden(void **state)
{
	struct symres *res;
	struct report *r = load(&res, 0, 0, REPORT_KEEP_DEFAULT, NULL);
	char *text;

	assert_int_equal(r->total, FX_TOTAL);
	text = render(report_print_summary, r, NULL);
	check_width(text, 80);
	golden("report-summary.txt", text);
	free(text);
	report_free(r);
	symres_free(res);
}

/* --by guest: the noisy-neighbour view. */
static void test_summary_by_guest(void **state)
{
	struct report_print_opts po = { .depth = 1 };
	struct symres *res;
	struct report *r = load(&res, 0, 0, REPORT_KEEP_DEFAULT, NULL);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	report_print_summary(f, r, &po);
	fclose(f);
	assert_string_equal(buf, " samples        %  guest\n"
				 "    2365  95.9432  t1\n"
				 "     100   4.0568  t2\n");
	free(buf);
	report_free(r);
}

static void test_symbols_golden(void **state)
{
	struct report_print_opts po = { .width = 80 };
	struct symres *res;
	struct report *r = load(&res, 1, 0, REPORT_KEEP_DEFAULT, NULL);
	char *text;

	assert_int_equal(r->total, FX_TOTAL);
	assert_string_equal(r->rows[0].symbol, "func_b");
	assert_int_equal(r->rows[0].samples, 1100);
	assert_int_equal(r->mismatches, 1);
	text = render(report_print_symbols, r, &po);
	check_width(text, 80);
	golden("report-l.txt", text);
	free(text);
	report_free(r);
	symres_free(res);
}

static void test_json_golden(void **state)
{
	struct symres *res;
	struct report *r = load(&res, 1, 0, REPORT_KEEP_DEFAULT, NULL);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_error_t jerr;
	json_t *o, *syms, *first;

	assert_non_null(f);
	assert_int_equal(report_print_json(f, r, NULL), 0);
	fclose(f);
	buf = normalise(buf);
	golden("report.json", buf);

	/* The stable contract other tests rely on. */
	o = json_loads(buf, 0, &jerr);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "mode")), "gdbstub-timer");
	assert_string_equal(json_string_value(json_object_get(o, "event")), "TIMER");
	assert_int_equal(json_integer_value(json_object_get(o, "total_samples")), FX_TOTAL);
	assert_int_equal(json_integer_value(json_object_get(o, "lost_samples")), 0);
	syms = json_object_get(o, "symbols");
	assert_true(json_is_array(syms));
	first = json_array_get(syms, 0);
	assert_string_equal(json_string_value(json_object_get(first, "symbol")), "func_b");
	assert_string_equal(json_string_value(json_object_get(first, "guest")), "t1");
	assert_string_equal(json_string_value(json_object_get(first, "app")), "/usr/bin/prog");
	assert_string_equal(json_string_value(json_object_get(first, "image")), "/usr/bin/prog");
	assert_true(json_is_null(json_object_get(first, "tgid")));
	assert_true(json_is_null(json_object_get(first, "tid")));
	assert_int_equal(json_integer_value(json_object_get(first, "samples")), 1100);
	assert_true(json_number_value(json_object_get(first, "percent")) > 44.6);
	for (size_t i = 1; i < json_array_size(syms); i++)
		assert_true(json_integer_value(json_object_get(json_array_get(syms, i - 1), "samples")) >=
			    json_integer_value(json_object_get(json_array_get(syms, i), "samples")));
	json_decref(o);
	free(buf);
	report_free(r);
	symres_free(res);
}

static const struct report_row *find_row(const struct report *r, const char *guest,
					 const char *symbol)
{
	for (size_t i = 0; i < r->nr_rows; i++)
		if (!strcmp(r->rows[i].guest, guest) && r->rows[i].symbol &&
		    !strcmp(r->rows[i].symbol, symbol))
			return &r->rows[i];
	return NULL;
}

static void test_kernel_and_modules(void **state)
{
	struct symres *res;
	struct report *r = load(&res, 1, 0, REPORT_KEEP_DEFAULT, NULL);
	const struct report_row *row;

	/* Run-time addresses minus the KASLR slide from session.json. */
	row = find_row(r, "t1", "do_syscall_64");
	assert_non_null(row);
	assert_int_equal(row->samples, 150);
	assert_true(row->kernel);
	row = find_row(r, "t1", "__x64_sys_getpid");
	assert_non_null(row);
	assert_int_equal(row->samples, 60);
	/* Module offsets from the core text base. */
	row = find_row(r, "t1", "fakemod_hot_path");
	assert_non_null(row);
	assert_int_equal(row->samples, 40);
	/* Shared library under its application. */
	row = find_row(r, "t1", "lib_hot");
	assert_non_null(row);
	assert_string_equal(row->app, "/usr/bin/prog");
	assert_string_equal(row->image, "/usr/lib/libfix.so");
	report_free(r);
	symres_free(res);
}

static void test_filters(void **state)
{
	static const char *const tgid[] = { "tgid:100", NULL };
	static const char *const image[] = { "image:libfix.so", NULL };
	static const char *const guest[] = { "guest:t2", NULL };
	static const char *const both[] = { "guest:t1", "image:/usr/bin/prog,vmlinux", NULL };
	struct symres *res;
	struct report *r;

	r = load(&res, 0, 0, REPORT_KEEP_DEFAULT, tgid);
	assert_int_equal(r->total, 2365 - 5);
	report_free(r);
	r = load(&res, 0, 0, REPORT_KEEP_DEFAULT, image);
	assert_int_equal(r->total, 300);
	report_free(r);
	r = load(&res, 0, 0, REPORT_KEEP_DEFAULT, guest);
	assert_int_equal(r->total, 100);
	report_free(r);
	r = load(&res, 0, 0, REPORT_KEEP_DEFAULT, both);
	assert_int_equal(r->total, 1800 + 210);
	report_free(r);
}

static void test_merge_separate(void **state)
{
	struct symres *res;
	struct report *r;
	const struct report_row *row;

	/* Threads kept: func_b's samples were all in tid 101. */
	r = load(&res, 1, 0, REPORT_KEEP_DEFAULT | REPORT_KEEP_THREAD, NULL);
	row = find_row(r, "t1", "func_b");
	assert_non_null(row);
	assert_int_equal(row->tgid, 100);
	assert_int_equal(row->samples, 1000);
	report_free(r);
	symres_free(res);

	/* Guests merged: func_a from both guests in one row.  Guest t2 has no
	 * root of its own here, so only t1's 450 resolve. */
	r = load(&res, 1, 0, REPORT_KEEP_DEFAULT & ~REPORT_KEEP_GUEST, NULL);
	row = find_row(r, "all", "func_a");
	assert_non_null(row);
	assert_int_equal(row->samples, 450);
	report_free(r);
	symres_free(res);

	/* Libraries merged: libfix.so is its own application. */
	r = load(&res, 1, 0, REPORT_KEEP_GUEST, NULL);
	row = find_row(r, "t1", "lib_hot");
	assert_non_null(row);
	assert_string_equal(row->app, "/usr/lib/libfix.so");
	report_free(r);
	symres_free(res);
}

static void test_threshold(void **state)
{
	struct report_print_opts po = { .width = 80, .threshold = 10 };
	struct symres *res;
	struct report *r = load(&res, 1, 0, REPORT_KEEP_DEFAULT, NULL);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	report_print_symbols(f, r, &po);
	fclose(f);
	assert_non_null(strstr(buf, "func_b"));
	assert_non_null(strstr(buf, "lib_hot"));
	assert_null(strstr(buf, "do_syscall_64"));
	free(buf);
	report_free(r);
	symres_free(res);
}

static void test_details(void **state)
{
	struct symres *res;
	struct report *r = load(&res, 1, 1, REPORT_KEEP_DEFAULT, NULL);
	const struct report_row *row = find_row(r, "t1", "func_b");
	int found = 0;

	assert_non_null(row);
	assert_int_equal(row->nr_addrs, 2);
	for (size_t i = 0; i < row->nr_addrs; i++) {
		if (row->addrs[i].addr == fx.hot_addr[FX_B]) {
			assert_int_equal(row->addrs[i].count, 1000);
			found = 1;
		}
		assert_true(row->addrs[i].addr >= row->sym_addr &&
			    row->addrs[i].addr < row->sym_addr + row->sym_size);
	}
	assert_true(found);
	report_free(r);
	symres_free(res);
}

static void test_diff_self(void **state)
{
	struct symres *res, *res2;
	struct report *a = load(&res, 1, 0, REPORT_KEEP_DEFAULT, NULL);
	struct report *b = load(&res2, 1, 0, REPORT_KEEP_DEFAULT, NULL);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_error_t jerr;
	json_t *o;

	assert_int_equal(report_print_diff_json(f, a, b, NULL), 0);
	fclose(f);
	o = json_loads(buf, 0, &jerr);
	assert_non_null(o);
	for (size_t i = 0; i < json_array_size(json_object_get(o, "symbols")); i++) {
		json_t *s = json_array_get(json_object_get(o, "symbols"), i);

		assert_true(json_real_value(json_object_get(s, "delta_percent")) == 0.0);
		assert_int_equal(json_integer_value(json_object_get(s, "samples")),
				 json_integer_value(json_object_get(s, "baseline_samples")));
	}
	json_decref(o);
	free(buf);
	report_free(a);
	report_free(b);
	symres_free(res);
	symres_free(res2);
}

/* The CLI prints what the library renders. */
static void test_cli(void **state)
{
	const char *build = getenv("BUILD");
	char opvm[PATH_MAX], cmd[PATH_MAX * 4];
	char *buf = NULL;
	size_t len = 0;
	FILE *p, *out;
	char chunk[4096];
	size_t n;

	snprintf(opvm, sizeof(opvm), "%s/opvm", build && *build ? build : "build");
	if (access(opvm, X_OK)) {
		print_message("SKIP: %s not built\n", opvm);
		skip();
	}
	snprintf(cmd, sizeof(cmd),
		 "%s report -l --session-dir '%s' --guest-root 't1=%s' --no-host-kernel",
		 opvm, fx.session, fx.root);
	setenv("DEBUGINFOD_URLS", "", 1);
	p = popen(cmd, "r");
	assert_non_null(p);
	out = open_memstream(&buf, &len);
	while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
		fwrite(chunk, 1, n, out);
	assert_int_equal(pclose(p), 0);
	fclose(out);
	buf = normalise(buf);
	golden("report-l.txt", buf);
	free(buf);
}

static char *annotate_text(const char *symbol, int assembly, int source)
{
	struct symres_root root = { .guest = "t1", .dir = fx.root };
	/* the sources are in tests/golden/fixtures, outside the guest root */
	struct symres_config sc = {
		.session_dir = fx.session, .roots = &root, .nr_roots = 1,
		.no_host_kernel = 1, .no_debuginfod = 1, .source_dir = fx.src,
	};
	struct report_opts o = {
		.session_dir = fx.session, .keep = REPORT_KEEP_DEFAULT, .symbols = 1,
		.details = 1, .only_symbol = symbol,
	};
	struct annotate_opts ao = { .assembly = assembly, .source = source };
	struct symres *res = symres_new(&sc);
	struct report *r;
	char err[256], *buf = NULL;
	size_t len = 0;
	FILE *f;

	assert_non_null(res);
	o.res = res;
	r = report_load(&o, err, sizeof(err));
	assert_non_null(r);
	f = open_memstream(&buf, &len);
	assert_true(report_annotate(f, r, res, &ao, NULL, NULL) > 0);
	fclose(f);
	report_free(r);
	symres_free(res);
	return buf;
}

/* The line of text holding needle, or fail. */
static const char *line_with(const char *text, const char *needle, char *out, size_t len)
{
	const char *p = strstr(text, needle), *b, *e;

	if (!p)
		fail_msg("'%s' not in:\n%s", needle, text);
	for (b = p; b > text && b[-1] != '\n'; b--)
		;
	e = strchr(p, '\n');
	snprintf(out, len, "%.*s", (int)(e ? e - b : (long)strlen(b)), b);
	return out;
}

/* Every other 40-digit hex run (a build-id: the fixture's libraries are
 * built with -g, so theirs follow the checkout's path) overwritten in s. */
static char *hide_build_ids(char *s)
{
	for (char *p = s; *p; p++) {
		size_t n = strspn(p, "0123456789abcdef");

		if (n == 40)
			memset(p, 'B', n);
		p += n ? n - 1 : 0;
	}
	return s;
}

/* One line per message of p, strings by their text. */
static void pprof_dump(FILE *f, const Perftools__Profiles__Profile *p)
{
#define S(i) ((size_t)(i) < p->n_string_table ? p->string_table[i] : "?")
	for (size_t i = 0; i < p->n_sample_type; i++)
		fprintf(f, "sample_type %s/%s\n", S(p->sample_type[i]->type),
			S(p->sample_type[i]->unit));
	for (size_t i = 0; i < p->n_sample; i++) {
		fprintf(f, "sample locations");
		for (size_t k = 0; k < p->sample[i]->n_location_id; k++)
			fprintf(f, " %" PRIu64, p->sample[i]->location_id[k]);
		fprintf(f, " values");
		for (size_t k = 0; k < p->sample[i]->n_value; k++)
			fprintf(f, " %" PRId64, p->sample[i]->value[k]);
		for (size_t k = 0; k < p->sample[i]->n_label; k++)
			fprintf(f, " %s=%s/%" PRId64, S(p->sample[i]->label[k]->key),
				S(p->sample[i]->label[k]->str), p->sample[i]->label[k]->num);
		fputc('\n', f);
	}
	for (size_t i = 0; i < p->n_mapping; i++) {
		const Perftools__Profiles__Mapping *m = p->mapping[i];

		fprintf(f, "mapping %" PRIu64 " %#" PRIx64 "-%#" PRIx64 " +%#" PRIx64 " %s %s %d%d\n",
			m->id, m->memory_start, m->memory_limit, m->file_offset, S(m->filename),
			S(m->build_id), m->has_functions, m->has_line_numbers);
	}
	for (size_t i = 0; i < p->n_location; i++) {
		const Perftools__Profiles__Location *l = p->location[i];

		fprintf(f, "location %" PRIu64 " mapping %" PRIu64 " %#" PRIx64, l->id,
			l->mapping_id, l->address);
		for (size_t k = 0; k < l->n_line; k++)
			fprintf(f, " fn %" PRIu64 ":%" PRId64, l->line[k]->function_id, l->line[k]->line);
		fputc('\n', f);
	}
	for (size_t i = 0; i < p->n_function; i++)
		fprintf(f, "function %" PRIu64 " %s %s %s %" PRId64 "\n", p->function[i]->id,
			S(p->function[i]->name), S(p->function[i]->system_name),
			S(p->function[i]->filename), p->function[i]->start_line);
	fprintf(f, "period %" PRId64 " %s/%s duration %" PRId64 " comments %zu\n", p->period,
		p->period_type ? S(p->period_type->type) : "-",
		p->period_type ? S(p->period_type->unit) : "-", p->duration_nanos, p->n_comment);
	for (size_t i = 0; i < p->n_comment; i++)
		fprintf(f, "comment %s\n", S(p->comment[i]));
#undef S
}

/* pprof's gzip'd bytes inflated, unpacked with protobuf-c and written as
 * text, one message a line with its string-table entries spelled out: a
 * golden file for a binary format, its paths normalised like the text
 * outputs' (the fixture's root differs between checkouts). */
static char *pprof_text(const char *gz, size_t gzlen)
{
	z_stream z = { .next_in = (Bytef *)gz, .avail_in = (uInt)gzlen };
	size_t cap = 1 << 20, n, len = 0;
	unsigned char *raw = malloc(cap);
	Perftools__Profiles__Profile *p;
	char *out = NULL, cwd[PATH_MAX];
	FILE *f;

	assert_non_null(raw);
	assert_int_equal(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
	z.next_out = raw;
	z.avail_out = (uInt)cap;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	n = cap - z.avail_out;
	inflateEnd(&z);
	p = perftools__profiles__profile__unpack(NULL, n, raw);
	assert_non_null(p);
	f = open_memstream(&out, &len);
	assert_non_null(f);
	pprof_dump(f, p);
	fclose(f);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(raw);
	/* DWARF's file names are absolute: the checkout's path, which pprof
	 * writes without its leading slash */
	if (getcwd(cwd, sizeof(cwd)) && cwd[1])
		out = subst(out, cwd + 1, "$CHECKOUT");
	return hide_build_ids(normalise(out));
}

/* A second session: only func_b, twice as hot.  Returns its path. */
static const char *session_b(void)
{
	static const struct store_event ev[] = { { .name = "TIMER", .count = 1 },
						 { .name = "CYCLES", .count = 100000 } };
	static char dir[PATH_MAX * 2];
	struct store *st;

	snprintf(dir, sizeof(dir), "%s/session-b", fx.dir);
	if (!access(dir, F_OK))
		return dir;
	st = store_open(dir, "t1", ev, 2, OPVM_SEP_LIB, 0);
	assert_non_null(st);
	assert_int_equal(fx_add(st, NULL, "/usr/bin/prog", 0, -1, -1, fx.bid, fx.bid_len,
				fx.hot_off[FX_B], 2000), 0);
	{
		struct store_key k = { .image = "/usr/bin/prog", .event = 1, .tgid = -1,
				       .tid = -1, .cpu = -1, .build_id = fx.bid,
				       .build_id_len = fx.bid_len };
		struct sfile *sf = store_get(st, &k);

		assert_non_null(sf);
		assert_int_equal(sfile_add(sf, fx.hot_off[FX_A], 77), 0);
	}
	assert_int_equal(fx_meta(st, "t1", 1), 0);
	assert_int_equal(store_sync(st), 0);
	store_close(st);
	return dir;
}

static struct report *load_dir(const char *dir, struct symres *res, const char *spec)
{
	struct report_opts o = { .session_dir = dir, .keep = REPORT_KEEP_DEFAULT,
				 .symbols = 1, .res = res };
	static char specbuf[64];
	char err[256];
	struct report *r;

	if (spec) {
		snprintf(specbuf, sizeof(specbuf), "%s", spec);
		assert_int_equal(report_filter_add(&o.filter, specbuf), 0);
	}
	r = report_load(&o, err, sizeof(err));
	if (!r)
		fail_msg("%s", err);
	return r;
}

/* annotate with source lines (mixed: and their instructions).  The note
 * that names a source file wraps at 80 columns wherever the checkout's
 * path ends: its continuation lines (blank where the others have the
 * ':' column) are joined back, then the checkout is named $CHECKOUT. */
static char *annotate_src_text(const char *symbol, int mixed)
{
	char *text = annotate_text(symbol, mixed, 1), *o = text, cwd[PATH_MAX];

	for (const char *p = text; *p;) {
		if (*p == '\n' && strspn(p + 1, " ") >= 20) {
			*o++ = ' ';
			p += 1 + strspn(p + 1, " ");
		} else {
			*o++ = *p++;
		}
	}
	*o = '\0';
	if (getcwd(cwd, sizeof(cwd)) && cwd[1])
		text = subst(text, cwd, "$CHECKOUT");
	return normalise(text);
}

/*
 * How a format's output becomes its golden file: normalised text under
 * the name the registry's format is looked up by.  pprof is gzip'd
 * protobuf, so its golden file is the profile decoded (pprof_text).  A
 * format of the registry not listed here is checked too, as text, against
 * export-NAME.txt: a new writer is byte-checked from its first run.
 */
static const struct {
	const char *format, *golden, *diff_golden;
	int decode;
} export_goldens[] = {
	{ "folded", "export-folded.txt", NULL, 0 },
	{ "speedscope", "export-speedscope.json", NULL, 0 },
	{ "html", "export.html", "export-diff.html", 0 },
	{ "pprof", "export-pprof.txt", NULL, 1 },
};

/* Writes in in format ops to memory, normalised (decode: pprof's bytes
 * decoded first). */
static char *export_text(const struct export_ops *ops, const struct export_in *in, int decode)
{
	char *buf = NULL, *hex;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(ops->write(f, in), 0);
	fclose(f);
	if (!decode)
		return normalise(buf);
	hex = pprof_text(buf, len);
	free(buf);
	return hex;
}

/* The fixture loaded as `opvm export --format` loads it for ops: with
 * per-address counts and cgroup rows where the format asks for them. */
static struct report *load_for(const struct export_ops *ops, struct symres **res)
{
	unsigned keep = REPORT_KEEP_DEFAULT;

	if (ops->flags & EXPORT_CGROUP)
		keep |= REPORT_KEEP_CGROUP;
	return load(res, 1, !!(ops->flags & EXPORT_DETAILS), keep, NULL);
}

/* One format of the registry against its golden file, and against
 * session_b() as the baseline where it draws differences. */
static void export_golden(const struct export_ops *ops)
{
	const char *name = NULL, *diff_name = NULL;
	char fallback[128], *text;
	struct symres *res;
	struct report *r = load_for(ops, &res), *base;
	struct export_in in = { .r = r, .res = res, .title = "golden", .exporter = "opvm test" };
	int decode = 0;

	for (size_t i = 0; i < ARRAY_SIZE(export_goldens); i++)
		if (!strcmp(export_goldens[i].format, ops->name)) {
			name = export_goldens[i].golden;
			diff_name = export_goldens[i].diff_golden;
			decode = export_goldens[i].decode;
		}
	if (!name) {
		snprintf(fallback, sizeof(fallback), "export-%s.txt", ops->name);
		name = fallback;
	}
	text = export_text(ops, &in, decode);
	golden(name, text);
	free(text);
	if (ops->flags & EXPORT_DIFF) {
		if (!diff_name)
			fail_msg("format %s draws differences: give it a diff golden file", ops->name);
		base = load_dir(session_b(), res, NULL);
		in.base = base;
		text = export_text(ops, &in, decode);
		golden(diff_name, text);
		free(text);
		report_free(base);
	}
	report_free(r);
	symres_free(res);
}

/* Every export format of the registry and annotate's three views, byte for
 * byte against tests/golden/: a change of output is a decision, never a
 * side effect of a refactor. */
static void test_exports_golden(void **state)
{
	char *text;

	for (size_t i = 0; i < ARRAY_SIZE(export_goldens); i++)
		if (!export_find(export_goldens[i].format))
			fail_msg("golden file for %s, a format not in the registry",
				 export_goldens[i].format);
	for (size_t i = 0; export_formats[i]; i++)
		export_golden(export_formats[i]);
	text = normalise(annotate_text("func_b", 1, 0));
	golden("annotate-func_b.txt", text);
	free(text);
	text = annotate_src_text("func_b", 0);
	golden("annotate-func_b-source.txt", text);
	free(text);
	text = annotate_src_text("func_b", 1);
	golden("annotate-func_b-mixed.txt", text);
	free(text);
	text = annotate_src_text("lib_hot", 0);
	golden("annotate-lib_hot-source.txt", text);
	free(text);
}

/* The registry's contract (host/report/report.h): every entry complete,
 * names unique and found by export_find(), each help clause "NAME: ..."
 * (--help joins them), each ending a dotted one; export_names() keeps to
 * the formats with the flags asked for. */
static void test_export_registry(void **state)
{
	char all[256], text[256], want[256] = "";
	size_t n = 0;

	for (size_t i = 0; export_formats[i]; i++, n++) {
		const struct export_ops *f = export_formats[i];
		size_t len;

		assert_non_null(f->name);
		assert_non_null(f->write);
		assert_non_null(f->ext);
		assert_int_equal(f->ext[0], '.');
		len = strlen(f->name);
		assert_true(len > 0);
		assert_int_equal(strncmp(f->help, f->name, len), 0);
		assert_int_equal(f->help[len], ':');
		assert_ptr_equal(export_find(f->name), f);
		for (size_t k = 0; k < i; k++)
			assert_string_not_equal(export_formats[k]->name, f->name);
		if (f->flags & EXPORT_TEXT)
			snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%s",
				 want[0] ? "," : "", f->name);
	}
	assert_true(n >= 4);
	assert_null(export_find("no-such-format"));
	export_names(all, sizeof(all), 0, ",", ",");
	assert_true(strlen(all) > 0);
	assert_string_equal(export_names(text, sizeof(text), EXPORT_TEXT, ",", ","), want);
	/* no format can do everything: an empty string; a short buffer cut */
	assert_string_equal(export_names(text, sizeof(text), EXPORT_DIFF | EXPORT_EMPTY |
					 EXPORT_TEXT | EXPORT_DETAILS | EXPORT_CGROUP, ",", ","),
			    "");
	assert_int_equal(strlen(export_names(text, 4, 0, ",", ",")), 3);
	assert_int_equal(strncmp(text, all, 3), 0);
}

/* Runs `opvm ARGS` (a printf format) on the fixture; its stdout in a new
 * string, *len its length.  NULL if opvm is not built (the caller skips). */
static char *opvm_run(size_t *len, const char *fmt, ...)
{
	const char *build = getenv("BUILD");
	char opvm[PATH_MAX], args[256], *cmd, chunk[4096], *buf = NULL;
	va_list ap;
	size_t n;
	FILE *p, *out;

	snprintf(opvm, sizeof(opvm), "%s/opvm", build && *build ? build : "build");
	if (access(opvm, X_OK))
		return NULL;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	assert_true(asprintf(&cmd, "%s %s --session-dir '%s' --guest-root 't1=%s' "
			     "--no-host-kernel", opvm, args, fx.session, fx.root) > 0);
	setenv("DEBUGINFOD_URLS", "", 1);
	p = popen(cmd, "r");
	assert_non_null(p);
	out = open_memstream(&buf, len);
	assert_non_null(out);
	while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
		fwrite(chunk, 1, n, out);
	fclose(out);
	if (pclose(p))
		fail_msg("%s exits non-zero", cmd);
	free(cmd);
	return buf;
}

/* The same golden files through the commands: `opvm export --format NAME
 * -o -` for every format of the registry (its own loading, threshold and
 * output path) and `opvm annotate`.  The only differences from the
 * writers' own calls are the ones asked for: the page's title, and the
 * exporter's name speedscope records ("opvm VERSION", here "opvm test"). */
static void test_cli_goldens(void **state)
{
	size_t len;
	char *text = opvm_run(&len, "annotate --assembly func_b");

	if (!text) {
		print_message("SKIP: opvm not built\n");
		skip();
	}
	text = normalise(text);
	golden("annotate-func_b.txt", text);
	free(text);
	for (size_t i = 0; export_formats[i]; i++) {
		const struct export_ops *ops = export_formats[i];
		const char *name = NULL;
		char fallback[128];
		int decode = 0;

		for (size_t k = 0; k < ARRAY_SIZE(export_goldens); k++)
			if (!strcmp(export_goldens[k].format, ops->name)) {
				name = export_goldens[k].golden;
				decode = export_goldens[k].decode;
			}
		if (!name) {
			snprintf(fallback, sizeof(fallback), "export-%s.txt", ops->name);
			name = fallback;
		}
		text = opvm_run(&len, "export --format %s -o - --title golden", ops->name);
		if (decode) {
			char *hex = pprof_text(text, len);

			free(text);
			text = hex;
		} else {
			text = subst(normalise(text), "\"opvm " OPVM_VERSION "\"", "\"opvm test\"");
		}
		golden(name, text);
		free(text);
	}
}

static void test_annotate_assembly(void **state)
{
	char *text = annotate_text("func_b", 1, 0);
	char needle[64], line[512];

	/* The hot instruction carries the 1000 samples placed on it. */
	snprintf(needle, sizeof(needle), " %8" PRIx64 ":  ", fx.hot_addr[FX_B]);
	line_with(text, needle, line, sizeof(line));
	assert_int_equal(strtoul(line, NULL, 10), 1000);
	assert_non_null(strstr(text, "<func_b>:"));
	assert_null(strstr(text, "func_a"));
	free(text);
}

static void test_annotate_source(void **state)
{
	char *text = annotate_text("func_b", 0, 1);
	char line[512];

	/* The hot source line carries them too. */
	line_with(text, "HOT_B", line, sizeof(line));
	assert_int_equal(strtoul(line, NULL, 10), 1000);
	/* and the file they came from is named (found in --source-dir; the
	 * note wraps at 80 columns, so the path may be on the next line) */
	/* a long checkout path wraps right after "(source": compare the
	 * note as one line */
	for (char *c = text; *c; c++)
		if (*c == '\n' && c[1] == ' ')
			*c = ' ';
	assert_non_null(strstr(text, "(source"));
	assert_non_null(strstr(strstr(text, "(source"), "golden/fixtures/prog.c)"));
	free(text);

	/* Interleaved: source line, then its instructions. */
	text = annotate_text("func_b", 1, 1);
	line_with(text, "HOT_B", line, sizeof(line));
	assert_int_equal(strtoul(line, NULL, 10), 1000);
	assert_non_null(strstr(text, "prog.c:"));
	free(text);

	/* Shared libraries too. */
	text = annotate_text("lib_hot", 0, 1);
	line_with(text, "HOT_LIB", line, sizeof(line));
	assert_int_equal(strtoul(line, NULL, 10), 300);
	free(text);
}

static void test_annotate_module(void **state)
{
	char *text = annotate_text("fakemod_hot_path", 1, 0);

	assert_non_null(strstr(text, "<fakemod_hot_path>:"));
	free(text);
}

static void test_diff_text(void **state)
{
	struct symres_root root = { .guest = "t1", .dir = fx.root };
	struct symres_config sc = { .roots = &root, .nr_roots = 1, .no_host_kernel = 1,
				    .no_debuginfod = 1 };
	struct symres *res = symres_new(&sc);
	struct report *a = load_dir(fx.session, res, "guest:t1");
	struct report *b = load_dir(session_b(), res, NULL);
	char *buf = NULL, line[512];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	report_print_diff(f, a, b, NULL);
	fclose(f);
	/* func_b: 1100 of 2365 before, all 2000 after. */
	line_with(buf, " func_b", line, sizeof(line));
	assert_non_null(strstr(line, "1100"));
	assert_non_null(strstr(line, "2000"));
	assert_non_null(strstr(line, "+53.48"));
	line_with(buf, " func_a", line, sizeof(line));
	assert_non_null(strstr(line, "-19.02"));
	free(buf);
	report_free(a);
	report_free(b);
	symres_free(res);
}

static void test_events(void **state)
{
	struct symres_root root = { .guest = "t1", .dir = fx.root };
	struct symres_config sc = { .roots = &root, .nr_roots = 1, .no_host_kernel = 1,
				    .no_debuginfod = 1 };
	struct symres *res = symres_new(&sc);
	struct report *r;

	/* The first event of session.json; the other one is named. */
	r = load_dir(session_b(), res, NULL);
	assert_string_equal(r->event, "TIMER");
	assert_int_equal(r->total, 2000);
	assert_int_equal(r->nr_other_events, 1);
	assert_string_equal(r->other_events[0], "CYCLES");
	report_free(r);
	r = load_dir(session_b(), res, "event:CYCLES");
	assert_string_equal(r->event, "CYCLES");
	assert_int_equal(r->event_count, 100000);
	assert_int_equal(r->total, 77);
	assert_string_equal(r->rows[0].symbol, "func_a");
	report_free(r);
	symres_free(res);
}

/* --import: a binary put in the session's build-id cache serves every
 * guest whose samples carry its build-id (t2 has no guest root here). */
static void test_import(void **state)
{
	char copy[PATH_MAX * 2], prog[PATH_MAX * 2], where[4096];
	struct symres_config sc = { .session_dir = copy, .no_host_kernel = 1,
				    .no_debuginfod = 1 };
	struct symres *res;
	struct report *r;
	const struct report_row *row;

	snprintf(copy, sizeof(copy), "%s/session-import", fx.dir);
	snprintf(prog, sizeof(prog), "%s/usr/bin/prog", fx.root);
	assert_int_equal(fx_sh("rm -rf '%s' && cp -r '%s' '%s'", copy, fx.session, copy), 0);
	assert_int_equal(symres_import(copy, prog, where, sizeof(where)), 0);
	assert_non_null(strstr(where, fx.bid_hex + 2));
	assert_int_equal(symres_import(copy, "/dev/null", NULL, 0), -ENOEXEC);
	sc.session_dir = copy;
	res = symres_new(&sc);
	r = load_dir(copy, res, "guest:t2");
	row = find_row(r, "t2", "func_a");
	assert_non_null(row);
	assert_int_equal(row->samples, 100);
	report_free(r);
	symres_free(res);
}

/* Guest-chosen names cannot drive the terminal. */
static void test_safe_stream(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	FILE *f = report_cli_safe_stream(mem);

	assert_non_null(f);
	fputs("sym\x1b]0;pwned\x07\r\tok\n", f);
	assert_int_equal(fclose(f), 0);
	fclose(mem);
	assert_string_equal(buf, "sym?]0;pwned??\tok\n");
	free(buf);
}

/* Every byte value at every place of a block and the tail after it (the
 * 16- and 8-byte scans and the byte loop): only controls other than
 * newline and tab, and DEL, become '?'; UTF-8's bytes pass. */
static void test_safe_stream_bytes(void **state)
{
	(void)state;
	for (int c = 0; c < 256; c++) {
		int bad = (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f;

		for (size_t at = 0; at < 41; at++) {
			char in[41], *buf = NULL;
			size_t len = 0;
			FILE *mem = open_memstream(&buf, &len);
			FILE *f = report_cli_safe_stream(mem);

			assert_non_null(f);
			memset(in, 'a', sizeof(in));
			in[at] = (char)c;
			assert_int_equal(fwrite(in, 1, sizeof(in), f), sizeof(in));
			assert_int_equal(fclose(f), 0);
			fclose(mem);
			assert_int_equal(len, sizeof(in));
			for (size_t i = 0; i < sizeof(in); i++)
				assert_int_equal((unsigned char)buf[i],
						 i != at ? 'a' : bad ? '?' : c);
			free(buf);
		}
	}
}

static void test_bad_session(void **state)
{
	struct report_opts o = { .session_dir = "/nonexistent/opvm", .keep = REPORT_KEEP_DEFAULT };
	char err[256] = "";

	assert_null(report_load(&o, err, sizeof(err)));
	assert_int_equal(errno, ENOENT);
	assert_non_null(strstr(err, "--session-dir"));
}

/* guest:NAME naming no guest is an error listing the guests there are;
 * a glob that matches one is not. */
static void test_no_such_guest(void **state)
{
	struct report_opts o = { .session_dir = fx.session, .keep = REPORT_KEEP_DEFAULT };
	char err[256] = "", t1[] = "guest:nosuch", t2[] = "guest:t*";
	struct report *r;

	(void)state;
	assert_int_equal(report_filter_add(&o.filter, t1), 0);
	assert_null(report_load(&o, err, sizeof(err)));
	assert_int_equal(errno, ENOENT);
	assert_non_null(strstr(err, "no guest 'nosuch'"));
	assert_non_null(strstr(err, "its guests are t1, t2"));
	memset(&o.filter, 0, sizeof(o.filter));
	assert_int_equal(report_filter_add(&o.filter, t2), 0);
	r = report_load(&o, err, sizeof(err));
	assert_non_null(r);
	report_free(r);
}

/* --separate cpu on a session recorded without cpu says so (it used to
 * change nothing, silently); thread, which it recorded, and all work. */
static void test_separate_not_recorded(void **state)
{
	struct report_opts o = { .session_dir = fx.session,
				 .keep = REPORT_KEEP_DEFAULT | REPORT_KEEP_CPU };
	char err[256] = "";
	struct report *r;

	(void)state;
	assert_null(report_load(&o, err, sizeof(err)));
	assert_non_null(strstr(err, "--separate cpu: the session was recorded with "
				    "--separate lib,kernel,thread"));
	o.keep = REPORT_KEEP_DEFAULT | REPORT_KEEP_THREAD;
	r = report_load(&o, err, sizeof(err));
	assert_non_null(r);
	report_free(r);
	o.keep = REPORT_KEEP_ALL;
	r = report_load(&o, err, sizeof(err));
	assert_non_null(r);
	report_free(r);
}

/* A sample file cut short is counted and skipped, never a crash. */
static void test_corrupt_sample_file(void **state)
{
	char copy[PATH_MAX * 2];
	struct report_opts o = { .session_dir = copy, .keep = REPORT_KEEP_DEFAULT };
	char err[256];
	struct report *r;

	snprintf(copy, sizeof(copy), "%s/session-corrupt", fx.dir);
	assert_int_equal(fx_sh("cp -r '%s' '%s' && for f in $(find '%s' -name 'TIMER.*' | head -3);"
			       " do truncate -s 300 \"$f\"; done", fx.session, copy, copy), 0);
	r = report_load(&o, err, sizeof(err));
	assert_non_null(r);
	assert_true(r->bad_files + r->files > 0);
	assert_true(r->total <= FX_TOTAL);
	report_free(r);
}

/* A sample file whose header claims more samples than its table holds (a
 * check the walk makes as it counts, not at open): counted as bad, none
 * of its samples in any row, every other file's intact, with symbols and
 * details as without.  The file is of t1's prog, an image with symbols:
 * the walk counts it per symbol. */
static void test_lying_sample_file(void **state)
{
	char copy[PATH_MAX * 2], path[PATH_MAX * 2 + 64];
	struct symres_root root = { .guest = "t1", .dir = fx.root };
	struct symres_config sc = {
		.session_dir = copy, .roots = &root, .nr_roots = 1,
		.no_host_kernel = 1, .no_debuginfod = 1,
	};
	uint64_t lie = UINT64_MAX / 2, file_total;
	struct sfile_reader *sr;
	FILE *f;
	char err[256];
	int fd;

	(void)state;
	snprintf(copy, sizeof(copy), "%s/session-lying", fx.dir);
	snprintf(path, sizeof(path), "%s/lying-file", fx.dir);
	assert_int_equal(fx_sh("rm -rf '%s' && cp -r '%s' '%s' && find '%s/guests/t1' -path '*/{root}/^usr^bin^prog/TIMER.*' "
			       "| sort | head -1 | tr -d '\\n' > '%s'", copy,
			       fx.session, copy, copy, path), 0);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(path, sizeof(path), f));
	fclose(f);
	sr = sfile_reader_open(path, NULL, 0);
	assert_non_null(sr);
	file_total = sfile_reader_info(sr)->total;
	sfile_reader_close(sr);
	assert_true(file_total > 0 && file_total < FX_TOTAL);
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, &lie, 8, 176), 8);	/* the header's total */
	close(fd);
	for (int symbols = 0; symbols < 2; symbols++) {
		struct report_opts o = { .session_dir = copy, .keep = REPORT_KEEP_DEFAULT,
					 .symbols = symbols, .details = symbols };
		struct symres *res = symbols ? symres_new(&sc) : NULL;
		uint64_t rows = 0;
		struct report *r;

		o.res = res;
		r = report_load(&o, err, sizeof(err));
		if (!r)
			fail_msg("report_load: %s", err);
		assert_int_equal(r->bad_files, 1);
		assert_int_equal(r->total, FX_TOTAL - file_total);
		for (size_t i = 0; i < r->nr_rows; i++)
			rows += r->rows[i].samples;
		assert_int_equal(rows, r->total);
		report_free(r);
		symres_free(res);
	}
}

/* Text output of r: header, summary, symbols, footer. */
static char *report_text(const struct report *r)
{
	struct report_print_opts po = { .width = 80 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	report_print_header(f, r);
	report_print_summary(f, r, &po);
	report_print_symbols(f, r, &po);
	report_print_footer(f, r);
	fclose(f);
	return buf;
}

/*
 * Names a guest controls (paths, comms, session.json fields) with newlines,
 * tabs, escape sequences and bytes that are not UTF-8: text output escapes
 * them (no planted row, no terminal control), JSON keeps them exactly where
 * JSON can.  Saturated counters print as such, not as 9223372036854775807.
 */
/* report.c's order before report-sort.c: samples descending, then
 * symbol (none last), image, app, guest, tgid, tid, cpu by strcmp(). */
static int ref_strcmp_null(const char *a, const char *b)
{
	if (a == b)
		return 0;
	if (!a || !b)
		return a ? -1 : 1;
	return strcmp(a, b);
}

static int ref_tail(const struct report_row *x, const struct report_row *y)
{
	int c;

	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	if ((c = ref_strcmp_null(x->symbol, y->symbol)) || (c = strcmp(x->image, y->image)) ||
	    (c = strcmp(x->app, y->app)) || (c = strcmp(x->guest, y->guest)))
		return c;
	if (x->tgid != y->tgid)
		return x->tgid < y->tgid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->cpu < y->cpu ? -1 : x->cpu > y->cpu;
}

static enum report_sort ref_how;
static void rows_sort_order(int big, size_t n);

static int ref_cmp(const void *a, const void *b)
{
	const struct report_row *x = a, *y = b;
	int c = 0;

	if (ref_how == REPORT_SORT_SYMBOL)
		c = ref_strcmp_null(x->symbol, y->symbol);
	else if (ref_how == REPORT_SORT_IMAGE)
		c = strcmp(x->image, y->image);
	else if (ref_how == REPORT_SORT_APP)
		c = strcmp(x->app, y->app);
	return c ? c : ref_tail(x, y);
}

/* The sort by ranks gives qsort()'s order (stable, as glibc's merge sort
 * is) on rows with many ties, unresolved symbols, and equal names that are
 * different copies (not interned); with counts up to 2^41 (the 128-bit
 * radix sort for the sort by samples) and below 7 (keys packed in 64 bits,
 * as the other sorts' are). */
static void test_rows_sort_order(void **state)
{
	for (int big = 0; big < 2; big++)
		rows_sort_order(big, 5000);
	/* long enough for the sort's two halves (names in both, and in
	 * one only) */
	rows_sort_order(0, 40000);
}

static void rows_sort_order(int big, size_t n)
{
	static char names[2][8][16];
	static const enum report_sort hows[] = { REPORT_SORT_SAMPLES, REPORT_SORT_SYMBOL,
						  REPORT_SORT_IMAGE, REPORT_SORT_APP };
	struct report_row *a = calloc(n, sizeof(*a)), *b = calloc(n, sizeof(*b));
	uint64_t seed = 42;

	assert_non_null(a);
	assert_non_null(b);
	for (int c = 0; c < 2; c++)
		for (int i = 0; i < 8; i++)
			snprintf(names[c][i], sizeof(names[c][i]), "%c_%d", "zab"[i % 3], 7 - i);
	for (size_t i = 0; i < n; i++) {
		uint64_t v[8];

		for (int k = 0; k < 8; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			v[k] = seed >> 33;
		}
		a[i] = (struct report_row){
			.samples = v[0] % 5 || !big ? v[0] % 7 : (v[0] % 3) << 40,
			.symbol = v[1] % 6 ? names[v[1] & 1][v[1] % 8] : NULL,
			.image = names[v[2] & 1][v[2] % 4], .app = names[v[3] & 1][v[3] % 3],
			.guest = names[v[4] & 1][v[4] % 2], .kernel = (int)(v[5] & 1),
			.tgid = (int64_t)(v[5] % 3) - 1, .tid = (int64_t)(v[6] % 3) - 1,
			.cpu = (int64_t)(v[7] % 3) - 1, .sym_addr = i,
		};
		/* names seen in one half only, one of them the same as a
		 * name of the other half in another copy */
		if (i % 13 == 0)
			a[i].symbol = i < n / 2 ? "e_early" : i % 2 ? "m_late" : names[1][2];
		if (i % 17 == 0 && i >= n / 2)
			a[i].image = "0_image_late";
	}
	for (size_t h = 0; h < ARRAY_SIZE(hows); h++) {
		memcpy(b, a, n * sizeof(*a));
		ref_how = hows[h];
		qsort(a, n, sizeof(*a), ref_cmp);
		assert_int_equal(report_rows_sort(b, n, hows[h]), 0);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(a[i].sym_addr, b[i].sym_addr);
	}
	free(a);
	free(b);
}

/* Many files (more than the walk's pending slots), counted on 0, 1 and 4
 * worker threads: the same rows in the same order, the same text. */
static void test_walk_threads(void **state)
{
	static const struct store_event ev[] = { { .name = "TIMER", .count = 1 } };
	struct symres_root root = { .dir = fx.root };
	struct symres_config sc = { .roots = &root, .nr_roots = 1, .no_host_kernel = 1,
				    .no_debuginfod = 1 };
	char dir[PATH_MAX * 2], *text[3];
	static const int threads[3] = { 0, 1, 4 };
	struct store *st;

	snprintf(dir, sizeof(dir), "%s/session-walk", fx.dir);
	st = store_open(dir, "w", ev, 1, OPVM_SEP_LIB | OPVM_SEP_THREAD, 0);
	assert_non_null(st);
	for (int t = 0; t < 40; t++) {
		assert_int_equal(fx_add(st, NULL, t % 5 ? "/usr/bin/prog" : "/usr/bin/nosuch", 0,
					100, 100 + t, NULL, 0, fx.hot_off[t % 3],
					(uint64_t)t + 1), 0);
		assert_int_equal(fx_add(st, NULL, "/usr/bin/prog", 0, 100, 100 + t, NULL, 0,
					fx.func_off[(t + 1) % 3], 7), 0);
		assert_int_equal(fx_add(st, "/usr/bin/prog", "/usr/lib/libfix.so", 0, 100,
					100 + t, NULL, 0, fx.hot_off[FX_LIB], 3), 0);
	}
	assert_int_equal(fx_meta(st, "w", 0), 0);
	assert_int_equal(store_sync(st), 0);
	store_close(st);
	for (int i = 0; i < 3; i++) {
		struct symres *res = symres_new(&sc);
		struct report_opts o = { .session_dir = dir, .keep = REPORT_KEEP_ALL,
					 .symbols = 1, .res = res };
		struct report *r;
		char err[256];

		walk_set_threads(threads[i]);
		r = report_load(&o, err, sizeof(err));
		walk_set_threads(-1);
		if (!r)
			fail_msg("report_load: %s", err);
		assert_int_equal(r->files, 88);
		assert_int_equal(r->total, 40 * 41 / 2 + 40 * 7 + 40 * 3);
		text[i] = report_text(r);
		report_free(r);
		symres_free(res);
	}
	assert_string_equal(text[0], text[1]);
	assert_string_equal(text[0], text[2]);
	for (int i = 0; i < 3; i++)
		free(text[i]);
}

/* A listing long enough to be formatted on two threads prints what one
 * thread prints (-d without addresses takes the one-thread path), each
 * half measuring its own columns: a second guest, a wider image or app
 * in one half only, a guest name copied (one guest still), a threshold
 * that hides the widest names. */
static void test_print_threaded(void **state)
{
	static const char *const names[] = { "alpha", "b", "a_much_longer_symbol_name_x",
					     "caf\xc3\xa9", "tab\there" };
	static char g_copy[] = "g";
	const size_t n = 20000;
	struct report r = { .nr_rows = n, .total = 0 };

	r.rows = calloc(n, sizeof(*r.rows));
	assert_non_null(r.rows);
	for (int v = 0; v < 6; v++) {
		struct report_print_opts po = { .width = 80, .threshold = v == 5 ? 10.0 : 0 };
		struct report_print_opts pd = po;
		char *out[2];

		pd.details = 1;
		for (size_t i = 0; i < n; i++) {
			r.rows[i] = (struct report_row){
				.samples = n - i, .guest = "g", .app = names[i % 3],
				.image = names[(i / 7) % 5], .symbol = i % 11 ? names[i % 5] : NULL,
				.tgid = -1, .tid = -1, .cpu = -1,
			};
			r.rows[i].percent = 100.0 * (double)(n - i) / (double)n;
		}
		if (v == 1)
			r.rows[n - 1].guest = "guest-two";	/* second half */
		if (v == 2)
			r.rows[3].guest = "other";		/* first half */
		if (v == 3)
			for (size_t i = n / 2; i < n; i++)
				r.rows[i].guest = g_copy;	/* the same name */
		if (v == 4 || v == 5) {
			r.rows[n - 2].image = "/usr/lib/a_very_long_library_name.so";
			r.rows[n - 3].app = "an_application_name";
			r.rows[n - 3].tgid = 12345;
		}
		for (int k = 0; k < 2; k++) {
			size_t len = 0;
			FILE *f;

			out[k] = NULL;
			f = open_memstream(&out[k], &len);
			assert_non_null(f);
			report_print_symbols(f, &r, k ? &pd : &po);
			fclose(f);
		}
		if (v < 5)
			assert_true(strlen(out[0]) > n * 40);
		assert_string_equal(out[0], out[1]);
		/* the guest column when two guests print, not for a copy */
		assert_int_equal(strncmp(out[0] + 18, "guest", 5) == 0, v == 1 || v == 2);
		free(out[0]);
		free(out[1]);
	}
	free(r.rows);
}

/* A session recorded with --no-python says so in the header, text and
 * JSON; the fixture's sessions (no such key) do not. */
static void test_no_python_header(void **state)
{
	static const struct store_event ev[] = { { .name = "TIMER", .count = 1 } };
	char dir[PATH_MAX * 2], err[256], *text, *js;
	struct report_opts o = { .session_dir = dir, .keep = REPORT_KEEP_DEFAULT };
	struct store *st;
	struct report *r;
	json_t *root, *g;
	size_t n;
	FILE *f;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/session-nopy", fx.dir);
	st = store_open(dir, "np", ev, 1, OPVM_SEP_LIB, 0);
	assert_non_null(st);
	assert_int_equal(fx_add(st, NULL, "/usr/bin/app", 0, -1, -1, NULL, 0, 0x10, 3), 0);
	assert_int_equal(store_write_meta(st, "{\"version\": 1, \"mode\": \"perf-timer\", "
					  "\"rate_hz\": 19, \"vcpus\": 1, \"no_python\": true, "
					  "\"stats\": {\"received\": 3}}"), 0);
	assert_int_equal(store_sync(st), 0);
	store_close(st);
	r = report_load(&o, err, sizeof(err));
	assert_non_null(r);
	text = report_text(r);
	assert_non_null(strstr(text, "guest np: perf-timer at 19 Hz, 1 vCPU, "
				     "Python frames off (--no-python)"));
	f = open_memstream(&js, &n);
	assert_int_equal(report_print_json(f, r, NULL), 0);
	fclose(f);
	root = json_loads(js, 0, NULL);
	g = json_array_get(json_object_get(root, "guests"), 0);
	assert_true(json_is_true(json_object_get(g, "no_python")));
	json_decref(root);
	free(js);
	free(text);
	report_free(r);
	r = report_load(&(struct report_opts){ .session_dir = fx.session,
					       .keep = REPORT_KEEP_DEFAULT }, err, sizeof(err));
	assert_non_null(r);
	text = report_text(r);
	assert_null(strstr(text, "--no-python"));
	free(text);
	report_free(r);
}

static void test_hostile_names(void **state)
{
	static const struct store_event ev[] = { { .name = "TIMER", .count = 1 } };
	static const char fake[] = "/usr/bin/evil\n99999999 99.9999 /bin/planted-row";
	char dir[PATH_MAX * 2], err[256], *text, *js, json[1024];
	struct report_opts o = { .session_dir = dir, .keep = REPORT_KEEP_DEFAULT };
	struct store *st;
	struct report *r;
	json_t *root, *rows;
	int seen_fake = 0, seen_bad = 0;
	size_t i;
	json_t *row;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/session-hostile", fx.dir);
	st = store_open(dir, "h1", ev, 1, OPVM_SEP_LIB, 0);
	assert_non_null(st);
	assert_int_equal(fx_add(st, "tab\tapp\x1b[2J", fake, 0, -1, -1, NULL, 0, 0x10, 7), 0);
	assert_int_equal(fx_add(st, NULL, "/usr/bin/\xff\xfe-bad", 0, -1, -1, NULL, 0, 0x10, 5), 0);
	assert_int_equal(fx_add(st, NULL, "/usr/bin/big", 0, -1, -1, NULL, 0, 0x10, UINT64_MAX), 0);
	snprintf(json, sizeof(json),
		 "{\"version\": 1, \"mode\": \"gdbstub-timer\\nguest fake: planted\", "
		 "\"events\": [{\"name\": \"TIMER\", \"count\": 1}], \"vcpus\": 1, "
		 "\"stats\": {\"received\": 12, \"lost_overflow\": %lld, \"throttled\": 0}, "
		 "\"kernel\": {\"release\": \"6.1\\u001b]0;owned\\u0007\"}}", (long long)INT64_MAX);
	assert_int_equal(store_write_meta(st, json), 0);
	assert_int_equal(store_sync(st), 0);
	store_close(st);

	r = report_load(&o, err, sizeof(err));
	assert_non_null(r);
	text = report_text(r);
	/* Every line is one the report wrote: no row planted by a name. */
	for (char *l = text; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		assert_false(!strncmp(l, "99999999", 8));
		assert_false(!strncmp(l, "guest fake", 10));
	}
	assert_non_null(strstr(text, "evil\\n99999999 99.9999 /bin/planted-row"));
	assert_non_null(strstr(text, "tab\\tapp\\x1b[2J"));
	assert_non_null(strstr(text, "gdbstub-timer\\nguest fake"));
	assert_non_null(strstr(text, "kernel 6.1\\x1b]0;owned\\x07"));
	assert_non_null(strstr(text, "\\xff\\xfe-bad"));
	assert_null(strchr(text, '\x1b'));
	assert_null(strchr(text, '\t'));
	/* The saturated counters say so. */
	assert_non_null(strstr(text, ">= 2^63 "));
	assert_non_null(strstr(text, "lost >= 2^63,"));
	assert_null(strstr(text, "9223372036854775807"));
	assert_null(strstr(text, "18446744073709551615"));

	/* JSON: exact names where JSON can carry them, escaped text where the
	 * bytes are not UTF-8; saturated counts stay INT64_MAX. */
	f = open_memstream(&js, &i);
	assert_int_equal(report_print_json(f, r, NULL), 0);
	fclose(f);
	root = json_loads(js, 0, NULL);
	assert_non_null(root);
	rows = json_object_get(root, "symbols");
	json_array_foreach(rows, i, row) {
		const char *img = json_string_value(json_object_get(row, "image"));

		seen_fake += !strcmp(img, fake);
		seen_bad += !strcmp(img, "/usr/bin/\\xff\\xfe-bad");
	}
	assert_int_equal(seen_fake, 1);
	assert_int_equal(seen_bad, 1);
	assert_int_equal(json_integer_value(json_object_get(root, "lost_samples")), INT64_MAX);
	assert_int_equal(json_integer_value(json_object_get(root, "total_samples")), INT64_MAX);
	json_decref(root);
	free(js);
	free(text);

	/* pprof: protobuf strings must be UTF-8 or go tool pprof refuses the
	 * whole profile */
	snprintf(dir, sizeof(dir), "%s/hostile.pb.gz", fx.dir);
	f = fopen(dir, "we");
	assert_non_null(f);
	assert_int_equal(report_export_pprof(f, r, NULL), 0);
	assert_int_equal(fclose(f), 0);
	if (system("command -v go >/dev/null 2>&1") == 0) {
		char cmd[PATH_MAX * 4];

		snprintf(cmd, sizeof(cmd), "cd '%s' && HOME=$PWD GOCACHE=$PWD/gocache "
			 "go tool pprof -raw hostile.pb.gz 2>&1 | grep -q 'xff.xfe-bad'", fx.dir);
		assert_int_equal(system(cmd), 0);
	} else {
		print_message("go is not installed: pprof's reading not checked\n");
	}
	report_free(r);
}

/* A FIFO (or a symlink) planted as session.json: the report neither hangs
 * nor follows it, and says why the guest's header is missing. */
static void test_session_json_not_regular(void **state)
{
	char copy[PATH_MAX * 2], meta[PATH_MAX * 3], err[256], *text;
	struct report_opts o = { .session_dir = copy, .keep = REPORT_KEEP_DEFAULT };
	struct report *r;

	snprintf(copy, sizeof(copy), "%s/session-fifo", fx.dir);
	snprintf(meta, sizeof(meta), "%s/guests/t1/samples/current/session.json", copy);
	assert_int_equal(fx_sh("rm -rf '%s' && cp -r '%s' '%s' && rm '%s' && mkfifo '%s'",
			       copy, fx.session, copy, meta, meta), 0);
	alarm(60);	/* a hang fails the test instead of the whole run */
	r = report_load(&o, err, sizeof(err));
	assert_non_null(r);
	assert_int_equal(r->total, FX_TOTAL);	/* the samples are all there */
	text = report_text(r);
	assert_non_null(strstr(text, "guest t1: sampling mode unknown (session.json is not a "
				     "regular file)"));
	free(text);
	report_free(r);
	assert_int_equal(fx_sh("rm '%s' && ln -s /etc/passwd '%s'", meta, meta), 0);
	r = report_load(&o, err, sizeof(err));
	assert_non_null(r);
	text = report_text(r);
	assert_non_null(strstr(text, "(session.json is a symlink)"));
	free(text);
	report_free(r);
	alarm(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_summary_golden),
		cmocka_unit_test(test_summary_by_guest),
		cmocka_unit_test(test_symbols_golden),
		cmocka_unit_test(test_json_golden),
		cmocka_unit_test(test_kernel_and_modules),
		cmocka_unit_test(test_filters),
		cmocka_unit_test(test_merge_separate),
		cmocka_unit_test(test_threshold),
		cmocka_unit_test(test_details),
		cmocka_unit_test(test_diff_self),
		cmocka_unit_test(test_cli),
		cmocka_unit_test(test_export_registry),
		cmocka_unit_test(test_exports_golden),
		cmocka_unit_test(test_cli_goldens),
		cmocka_unit_test(test_annotate_assembly),
		cmocka_unit_test(test_annotate_source),
		cmocka_unit_test(test_annotate_module),
		cmocka_unit_test(test_diff_text),
		cmocka_unit_test(test_events),
		cmocka_unit_test(test_import),
		cmocka_unit_test(test_safe_stream),
		cmocka_unit_test(test_safe_stream_bytes),
		cmocka_unit_test(test_bad_session),
		cmocka_unit_test(test_no_such_guest),
		cmocka_unit_test(test_separate_not_recorded),
		cmocka_unit_test(test_no_python_header),
		cmocka_unit_test(test_corrupt_sample_file),
		cmocka_unit_test(test_lying_sample_file),
		cmocka_unit_test(test_rows_sort_order),
		cmocka_unit_test(test_walk_threads),
		cmocka_unit_test(test_print_threaded),
		cmocka_unit_test(test_hostile_names),
		cmocka_unit_test(test_session_json_not_regular),
	};

	setenv("DEBUGINFOD_URLS", "", 1);
	return cmocka_run_group_tests(tests, setup, teardown);
}
