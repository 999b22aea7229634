// SPDX-License-Identifier: MIT
/*
 * Events database: every shipped family file parses (from disk and from the
 * built-in copy, which must match the files), malformed files are refused
 * with file:line, -e specs enforce minimums and unit masks, defaults follow
 * PMU presence, CPUID picks the right family, and perf attributes come out
 * as the kernel expects them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>
#include <linux/perf_event.h>
#include <cmocka.h>
#include <jansson.h>

#include "events/builtin.h"
#include "events/events.h"
#include "lib/array.h"

static char data_dir[4096];

/* events/data of this source tree, found from __FILE__ so the test runs
 * from the repository root or with an absolute __FILE__ from anywhere. */
static int setup_dir(void **state)
{
	const char *me = __FILE__;
	const char *tail = strstr(me, "tests/unit/test-events.c");
	int n = tail ? (int)(tail - me) : 0;

	snprintf(data_dir, sizeof(data_dir), "%.*sevents/data", n, me);
	unsetenv("OPVM_EVENTS_DIR");
	unsetenv("OPVM_NO_PMU");
	return 0;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long len;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = malloc((size_t)len + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
	buf[len] = '\0';
	fclose(f);
	return buf;
}

/* ---- shipped files ------------------------------------------------------- */

static void check_db_sane(const struct events_db *db)
{
	assert_true(events_db_count(db) > 0);
	for (size_t i = 0; i < events_db_count(db); i++) {
		const struct opvm_event *ev = events_db_get(db, i);

		assert_non_null(ev->um);
		assert_true(ev->min_count > 0);
		assert_true(ev->default_count >= ev->min_count);
		assert_true(strlen(ev->name) < OPVM_EVENT_NAME_MAX);
		assert_true(strlen(ev->desc) > 0);
		if (ev->perf_type == PERF_TYPE_RAW)
			assert_true(ev->flags & OPVM_EV_HARDWARE);
		if (ev->flags & OPVM_EV_TIMER)
			assert_int_equal(ev->unit, OPVM_UNIT_US);
		assert_ptr_equal(events_find(db, ev->name), ev);
	}
}

static void test_every_family_parses(void **state)
{
	const struct opvm_event_family *fams;
	size_t n = events_families(&fams);
	char err[512];

	assert_true(n >= 5);
	for (size_t i = 0; i < n; i++) {
		struct events_db *db;

		err[0] = '\0';
		db = events_db_load_dir(data_dir, fams[i].id, 0, err, sizeof(err));
		if (!db)
			fail_msg("%s: %s", fams[i].id, err);
		assert_string_equal(events_db_family(db), fams[i].id);
		check_db_sane(db);
		/* family + generic + software are all there */
		assert_non_null(events_find(db, "TIMER"));
		assert_non_null(events_find(db, "task-clock"));
		if (strcmp(fams[i].id, "software"))
			assert_non_null(events_find(db, "cycles"));
		events_db_free(db);

		db = events_db_load(fams[i].id, OPVM_EVDB_BUILTIN, err, sizeof(err));
		if (!db)
			fail_msg("built-in %s: %s", fams[i].id, err);
		assert_string_equal(events_db_source(db), "built-in");
		check_db_sane(db);
		events_db_free(db);
	}
}

static void test_builtin_matches_files(void **state)
{
	size_t nfiles = 0;

	for (size_t i = 0; i < events_builtin_nr; i++) {
		char path[4200];
		char *text;

		snprintf(path, sizeof(path), "%s/%s", data_dir,
			 events_builtin_files[i].name);
		text = slurp(path);
		if (!text)
			fail_msg("%s is built in but missing from %s", path, data_dir);
		if (strcmp(text, events_builtin_files[i].text))
			fail_msg("events/builtin.c is stale for %s: run events/mkbuiltin.sh",
				 events_builtin_files[i].name);
		free(text);
		nfiles++;
	}
	/* and nothing on disk is missing from the copy */
	{
		const struct opvm_event_family *fams;
		size_t n = events_families(&fams);

		assert_int_equal(nfiles, 2 * n);
	}
}

static void test_intel_contents(void **state)
{
	struct events_db *db;
	const struct opvm_event *ev;
	char err[256];

	db = events_db_load_dir(data_dir, "x86-intel-arch", OPVM_EVDB_FAMILY_ONLY,
				err, sizeof(err));
	assert_non_null(db);
	assert_null(events_find(db, "TIMER"));	/* family only */
	ev = events_find(db, "INST_RETIRED");
	assert_non_null(ev);
	assert_int_equal(ev->code, 0xc0);
	assert_int_equal(ev->min_count, 6000);
	assert_int_equal(ev->perf_type, PERF_TYPE_RAW);
	ev = events_find(db, "BR_MISS_PRED_RETIRED");
	assert_non_null(ev);
	assert_int_equal(ev->min_count, 500);
	ev = events_find(db, "CPU_CLK_UNHALTED");
	assert_true(ev->flags & OPVM_EV_DEFAULT);
	assert_non_null(events_find(db, "LLC_REFS"));
	assert_non_null(events_find(db, "LLC_MISSES"));
	assert_non_null(events_find(db, "BR_INST_RETIRED"));
	ev = events_find(db, "UNHALTED_REFERENCE_CYCLES");
	assert_int_equal(ev->perf_type, PERF_TYPE_HARDWARE);
	assert_int_equal(ev->perf_config, PERF_COUNT_HW_REF_CPU_CYCLES);
	events_db_free(db);
}

/* ---- malformed files ------------------------------------------------------- */

static const char good_um[] =
	"name:zero type:mandatory default:0x0\n"
	"\t0x0 No unit mask\n"
	"name:bits type:bitmask default:0x3\n"
	"\t0x01 name:a first\n"
	"\t0x02 name:b second\n"
	"\t0x04 name:c third\n"
	"name:pick type:exclusive default:0x10\n"
	"\t0x10 name:x ten\n"
	"\t0x20 name:y twenty\n";

static const char good_ev[] =
	"# comment\n"
	"\n"
	"event:0x3c um:zero minimum:6000 default:100000 perf:raw flags:default name:CYC : cycles\n"
	"event:0x1c0 um:bits minimum:500 perf:raw name:EXT : extended select\n"
	"event:0x2e um:pick minimum:1000 perf:raw name:PICK : exclusive mask\n"
	"event:0 um:zero minimum:1000 default:4000 perf:timer name:TIMER : timer\n";

static void test_synthetic_ok(void **state)
{
	char err[256] = "";
	struct events_db *db;
	const struct opvm_event *ev;

	db = events_db_parse("t", good_ev, "t.events", good_um, "t.unit_masks",
			     err, sizeof(err));
	if (!db)
		fail_msg("%s", err);
	assert_int_equal(events_db_count(db), 4);
	ev = events_find(db, "ext");	/* case-insensitive */
	assert_non_null(ev);
	assert_int_equal(ev->default_count, 100000);	/* implied */
	assert_int_equal(ev->code, 0x1c0);
	ev = events_find(db, "TIMER");
	assert_true(ev->flags & OPVM_EV_TIMER);
	assert_true(ev->flags & OPVM_EV_SOFTWARE);
	assert_int_equal(ev->unit, OPVM_UNIT_US);
	events_db_free(db);
}

struct bad_case {
	const char *ev, *um;
	const char *want;	/* substring of the error */
};

static void test_malformed(void **state)
{
	static const struct bad_case cases[] = {
		{ "event:0x3c um:zero minimum:6000 perf:raw name:A : a\n"
		  "event:0x3c um:zero minimum:6000 perf:raw name:B\n",
		  NULL, "t.events:2: missing ' : description'" },
		{ "\n\nevent:0x3c um:nope minimum:6000 perf:raw name:A : a\n",
		  NULL, "t.events:3: unit mask 'nope' is not defined" },
		{ "event:0x3c um:zero minimum:-5 perf:raw name:A : a\n",
		  NULL, "t.events:1: minimum '-5'" },
		{ "event:0x3c um:zero minimum:0 perf:raw name:A : a\n",
		  NULL, "t.events:1: minimum '0'" },
		{ "event:0x3c um:zero minimum:99999999999999999999999 perf:raw name:A : a\n",
		  NULL, "t.events:1: minimum" },
		{ "event:0x3c um:zero minimum:6000 default:10 perf:raw name:A : a\n",
		  NULL, "t.events:1: default 10 is below the minimum 6000" },
		{ "event:0x1000 um:zero minimum:6000 perf:raw name:A : a\n",
		  NULL, "t.events:1: event code '0x1000'" },
		{ "event:0x3c um:zero minimum:6000 perf:bogus name:A : a\n",
		  NULL, "t.events:1: perf:bogus" },
		{ "event:0x3c um:zero minimum:6000 perf:hardware:99 name:A : a\n",
		  NULL, "t.events:1: perf:hardware:99" },
		{ "event:0x3c um:zero minimum:6000 perf:hw-cache:0x99 name:A : a\n",
		  NULL, "t.events:1: perf:hw-cache" },
		{ "event:0x3c um:zero minimum:6000 perf:raw name:A/B : a\n",
		  NULL, "t.events:1: bad event name 'A/B'" },
		{ "event:0x3c um:zero minimum:6000 perf:raw name:ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 : a\n",
		  NULL, "t.events:1: bad event name" },
		{ "event:0x3c um:zero minimum:6000 perf:raw name:A : a\n"
		  "event:0x3d um:zero minimum:6000 perf:raw name:a : dup\n",
		  NULL, "t.events:2: event 'a' defined twice" },
		{ "event:0x3c um:zero minimum:6000 perf:raw name:A wat : a\n",
		  NULL, "t.events:1: 'wat' is not key:value" },
		{ "event:0x3c um:zero minimum:6000 minimum:7000 perf:raw name:A : a\n",
		  NULL, "t.events:1: unexpected or repeated key 'minimum'" },
		{ "event:0x3c um:zero perf:raw name:A : a\n",
		  NULL, "t.events:1: an event needs" },
		{ "event:0x3c um:zero minimum:6000 perf:raw unit:parsecs name:A : a\n",
		  NULL, "t.events:1: unit 'parsecs'" },
		{ "event:0x3c um:zero minimum:6000 perf:raw flags:default name:A : a\n"
		  "event:0x3d um:zero minimum:6000 perf:raw flags:default name:B : b\n",
		  NULL, "t.events:2: a second flags:default" },
		{ "# only comments\n\n", NULL, "t.events: no events" },
		/* unit masks */
		{ NULL, "\t0x1 value first\n", "t.unit_masks:1: value before any 'name:'" },
		{ NULL, "name:zero type:mandatory default:0x0\n\t0x0 none\n"
			"name:q type:sometimes default:0x1\n",
		  "t.unit_masks:3: type 'sometimes'" },
		{ NULL, "name:zero type:mandatory default:0x0\n\t0x0 none\n"
			"name:q type:exclusive default:0x5\n\t0x1 one\n\t0x2 two\n",
		  "t.unit_masks:3: default 0x5 of unit mask 'q' is not one of its values" },
		{ NULL, "name:zero type:mandatory default:0x0\n\t0x0 none\n"
			"name:q type:bitmask default:0x7\n\t0x1 one\n\t0x2 two\n",
		  "t.unit_masks:3: default 0x7 of bitmask 'q'" },
		{ NULL, "name:zero type:mandatory default:0x0\n\t0x0 none\n"
			"name:q type:bitmask default:0x1\n",
		  "t.unit_masks:3: unit mask 'q' lists no values" },
		{ NULL, "name:zero type:mandatory default:0x0\n\t0x0 none\n"
			"name:zero type:mandatory default:0x0\n\t0x0 none\n",
		  "t.unit_masks:3: unit mask 'zero' defined twice" },
		{ NULL, "name:zero type:mandatory default:0x0\n\t0x0 none\n\t0x100 big\n",
		  "t.unit_masks:3: '0x100' is not a unit mask value" },
		{ NULL, "name:zero type:mandatory default:0x0\n\t0x0 none\n"
			"name:q type:exclusive default:0x1\n\t0x1 name:a one\n\t0x2 name:a two\n",
		  "t.unit_masks:5: value name 'a' used twice" },
		{ NULL, "name:zero type:mandatory default:0x0\n\t0x0 none\n\t0x1 also\n",
		  "t.unit_masks:1: mandatory unit mask 'zero' must list exactly one" },
		{ NULL, "name:zero default:0x0\n\t0x0 none\n",
		  "t.unit_masks:1: a unit mask needs name:, type: and default:" },
	};
	static const char min_ev[] =
		"event:0x3c um:zero minimum:6000 perf:raw name:A : a\n";
	static const char min_um[] =
		"name:zero type:mandatory default:0x0\n\t0x0 none\n";

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[512] = "";
		struct events_db *db;

		errno = 0;
		db = events_db_parse("t", cases[i].ev ? cases[i].ev : min_ev,
				     "t.events", cases[i].um ? cases[i].um : min_um,
				     "t.unit_masks", err, sizeof(err));
		if (db)
			fail_msg("case %zu parsed but should not", i);
		assert_int_equal(errno, EINVAL);
		if (!strstr(err, cases[i].want))
			fail_msg("case %zu: error '%s' lacks '%s'", i, err,
				 cases[i].want);
	}
}

static void test_long_line_and_nul(void **state)
{
	char *ev = malloc(10000);
	char err[512] = "";
	struct events_db *db;

	assert_non_null(ev);
	strcpy(ev, "event:0x3c um:zero minimum:6000 perf:raw name:A : a\n"
		   "event:0x3d um:zero minimum:6000 perf:raw name:B : ");
	memset(ev + strlen(ev), 'x', 5000);
	ev[9000] = '\0';
	strcat(ev, "\n");
	db = events_db_parse("t", ev, "t.events",
			     "name:zero type:mandatory default:0x0\n\t0x0 none\n",
			     "t.unit_masks", err, sizeof(err));
	assert_null(db);
	assert_non_null(strstr(err, "t.events:2: line longer than"));
	free(ev);
}

/* Random damage to real files must give an error or a sane database,
 * never a crash (run under SAN=address,undefined in make check). */
static void test_mutations(void **state)
{
	char path[4200], err[512];
	char *ev, *um;
	unsigned seed = 12345;

	snprintf(path, sizeof(path), "%s/x86-amd-fam17h.events", data_dir);
	ev = slurp(path);
	snprintf(path, sizeof(path), "%s/x86-amd-fam17h.unit_masks", data_dir);
	um = slurp(path);
	assert_non_null(ev);
	assert_non_null(um);
	for (int round = 0; round < 3000; round++) {
		char *e = strdup(ev), *u = strdup(um);
		size_t el = strlen(e), ul = strlen(u);
		struct events_db *db;
		static const char junk[] = ":# \t\n0x9z-+";

		for (int k = 0; k < 4; k++) {
			seed = seed * 1103515245 + 12345;
			if (seed & 0x10000)
				e[(seed >> 8) % el] = junk[(seed >> 3) % (sizeof(junk) - 1)];
			else
				u[(seed >> 8) % ul] = junk[(seed >> 3) % (sizeof(junk) - 1)];
		}
		db = events_db_parse("m", e, "m.events", u, "m.unit_masks", err,
				     sizeof(err));
		if (db) {
			check_db_sane(db);
			events_db_free(db);
		} else {
			assert_true(strchr(err, ':') != NULL);
		}
		free(e);
		free(u);
	}
	free(ev);
	free(um);
}

/* ---- specs ----------------------------------------------------------------- */

static struct events_db *intel_db(void)
{
	char err[256];
	struct events_db *db;

	db = events_db_load_dir(data_dir, "x86-intel-arch", 0, err, sizeof(err));
	if (!db)
		fail_msg("%s", err);
	return db;
}

static void test_spec_minimum(void **state)
{
	struct events_db *db = intel_db();
	struct opvm_event_spec s;
	char err[512];

	assert_int_equal(events_parse_spec(db, "INST_RETIRED:1000", &s, err,
					   sizeof(err)), -EINVAL);
	assert_string_equal(err,
		"count 1000 for INST_RETIRED is below its minimum 6000; use at least 6000");
	assert_int_equal(events_parse_spec(db, "INST_RETIRED:5999", &s, err,
					   sizeof(err)), -EINVAL);
	assert_int_equal(events_parse_spec(db, "INST_RETIRED:6000", &s, err,
					   sizeof(err)), 0);
	assert_string_equal(s.event->name, "INST_RETIRED");
	assert_int_equal(s.count, 6000);
	assert_int_equal(s.kernel, 1);
	assert_int_equal(s.user, 1);
	/* name alone: default count */
	assert_int_equal(events_parse_spec(db, "inst_retired", &s, err,
					   sizeof(err)), 0);
	assert_int_equal(s.count, 100000);
	/* TIMER is in microseconds and says so */
	assert_int_equal(events_parse_spec(db, "TIMER:100", &s, err,
					   sizeof(err)), -EINVAL);
	assert_string_equal(err,
		"count 100 for TIMER is below its minimum 1000; use at least 1000 microseconds");
	assert_int_equal(events_parse_spec(db, "TIMER:10000", &s, err,
					   sizeof(err)), 0);
	assert_int_equal(events_spec_rate_hz(&s), 100);
	assert_int_equal(events_spec_period_ns(&s), 10000000);
	/* decimal with leading zeros, never octal (000001000 is not 512);
	 * 0x is hex */
	assert_int_equal(events_parse_spec(db, "TIMER:000001000", &s, err,
					   sizeof(err)), 0);
	assert_int_equal(s.count, 1000);
	assert_int_equal(events_parse_spec(db, "TIMER:0x1000", &s, err,
					   sizeof(err)), 0);
	assert_int_equal(s.count, 4096);
	assert_int_equal(events_parse_spec(db, "TIMER:0x", &s, err,
					   sizeof(err)), -EINVAL);
	/* bad counts */
	assert_int_equal(events_parse_spec(db, "INST_RETIRED:0", &s, err,
					   sizeof(err)), -EINVAL);
	assert_int_equal(events_parse_spec(db, "INST_RETIRED:-7000", &s, err,
					   sizeof(err)), -EINVAL);
	assert_int_equal(events_parse_spec(db, "INST_RETIRED:7k", &s, err,
					   sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a positive number"));
	events_db_free(db);
}

static void test_spec_unknown_and_syntax(void **state)
{
	struct events_db *db = intel_db();
	struct opvm_event_spec s;
	char err[512];
	char longspec[400];

	assert_int_equal(events_parse_spec(db, "NO_SUCH_EVENT:100000", &s, err,
					   sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "unknown event 'NO_SUCH_EVENT'"));
	assert_non_null(strstr(err, "opvm list-events"));
	assert_int_equal(events_parse_spec(db, ":100000", &s, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(events_parse_spec(db, "INST_RETIRED:6000:0:1:1:9", &s,
					   err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "too many fields"));
	memset(longspec, 'A', sizeof(longspec) - 1);
	longspec[sizeof(longspec) - 1] = '\0';
	assert_int_equal(events_parse_spec(db, longspec, &s, err, sizeof(err)),
			 -EINVAL);
	/* a tiny error buffer is not overrun */
	assert_int_equal(events_parse_spec(db, "NOPE", &s, err, 8), -ENOENT);
	assert_int_equal(strlen(err), 7);
	events_db_free(db);
}

static void test_spec_kernel_user(void **state)
{
	struct events_db *db = intel_db();
	struct opvm_event_spec s;
	struct perf_event_attr attr;
	char err[512], buf[OPVM_EVENT_SPEC_MAX];

	assert_int_equal(events_parse_spec(db, "CPU_CLK_UNHALTED:100000:0:1:0",
					   &s, err, sizeof(err)), 0);
	assert_int_equal(s.kernel, 1);
	assert_int_equal(s.user, 0);
	memset(&attr, 0, sizeof(attr));
	events_spec_perf_attr(&s, &attr);
	assert_int_equal(attr.type, PERF_TYPE_RAW);
	assert_int_equal(attr.config, 0x3c);
	assert_int_equal(attr.sample_period, 100000);
	assert_int_equal(attr.exclude_kernel, 0);
	assert_int_equal(attr.exclude_user, 1);
	assert_string_equal(events_spec_format(&s, buf, sizeof(buf)),
			    "CPU_CLK_UNHALTED:100000:0x0:1:0");

	assert_int_equal(events_parse_spec(db, "CPU_CLK_UNHALTED:100000::0",
					   &s, err, sizeof(err)), 0);
	assert_int_equal(s.kernel, 0);
	assert_int_equal(s.user, 1);
	assert_int_equal(events_parse_spec(db, "CPU_CLK_UNHALTED:100000::0:0",
					   &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "never sample"));
	assert_int_equal(events_parse_spec(db, "CPU_CLK_UNHALTED:100000::2",
					   &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "must be 0 or 1"));
	assert_int_equal(events_parse_spec(db, "CPU_CLK_UNHALTED:100000:::yes",
					   &s, err, sizeof(err)), -EINVAL);
	events_db_free(db);
}

static void test_spec_unit_masks(void **state)
{
	struct events_db *db;
	struct opvm_event_spec s;
	char err[512];

	db = events_db_load_dir(data_dir, "x86-amd-fam17h", 0, err, sizeof(err));
	assert_non_null(db);
	/* default: both miss kinds, the kernel's cache-misses (0x0964) */
	assert_int_equal(events_parse_spec(db, "L2_CACHE_MISS:10000", &s, err,
					   sizeof(err)), 0);
	assert_int_equal(s.unit_mask, 0x09);
	assert_int_equal(events_perf_config(&s), 0x0964);
	/* by name, by number, names joined */
	assert_int_equal(events_parse_spec(db, "L2_CACHE_MISS:10000:ic_fill_miss",
					   &s, err, sizeof(err)), 0);
	assert_int_equal(s.unit_mask, 0x01);
	assert_int_equal(events_parse_spec(db, "L2_CACHE_MISS:10000:0x08",
					   &s, err, sizeof(err)), 0);
	assert_int_equal(s.unit_mask, 0x08);
	assert_int_equal(events_parse_spec(db, "L2_CACHE_MISS:10000:8",
					   &s, err, sizeof(err)), 0);
	assert_int_equal(s.unit_mask, 0x08);
	assert_int_equal(events_parse_spec(db,
			 "L2_CACHE_MISS:10000:IC_FILL_MISS+ls_rd_blk_c",
			 &s, err, sizeof(err)), 0);
	assert_int_equal(s.unit_mask, 0x09);
	/* refusals name the valid values */
	assert_int_equal(events_parse_spec(db, "L2_CACHE_MISS:10000:bogus",
					   &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "ic_fill_miss (0x1)"));
	assert_int_equal(events_parse_spec(db, "L2_CACHE_MISS:10000:0x10",
					   &s, err, sizeof(err)), -EINVAL);
	assert_int_equal(events_parse_spec(db, "L2_CACHE_MISS:10000:0",
					   &s, err, sizeof(err)), -EINVAL);
	assert_int_equal(events_parse_spec(db, "L2_CACHE_MISS:10000:0x100",
					   &s, err, sizeof(err)), -EINVAL);
	/* mandatory: only its value */
	assert_int_equal(events_parse_spec(db, "RETIRED_INSTRUCTIONS:10000:1",
					   &s, err, sizeof(err)), -EINVAL);
	assert_int_equal(events_parse_spec(db, "RETIRED_INSTRUCTIONS:10000:0",
					   &s, err, sizeof(err)), 0);
	/* cache references: 0xff60 as the kernel maps it */
	assert_int_equal(events_parse_spec(db, "L2_CACHE_REQUESTS:10000",
					   &s, err, sizeof(err)), 0);
	assert_int_equal(events_perf_config(&s), 0xff60);
	events_db_free(db);

	/* exclusive groups take one value; extended AMD selects go to 35:32 */
	db = events_db_parse("t", good_ev, "t.events", good_um, "t.unit_masks",
			     err, sizeof(err));
	assert_non_null(db);
	assert_int_equal(events_parse_spec(db, "PICK:1000:y", &s, err,
					   sizeof(err)), 0);
	assert_int_equal(s.unit_mask, 0x20);
	assert_int_equal(events_parse_spec(db, "PICK:1000:x+y", &s, err,
					   sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "exclusive"));
	assert_int_equal(events_parse_spec(db, "PICK:1000:0x30", &s, err,
					   sizeof(err)), -EINVAL);
	assert_int_equal(events_parse_spec(db, "EXT:500:c", &s, err,
					   sizeof(err)), 0);
	assert_int_equal(events_perf_config(&s), 0x1000004c0ull);
	events_db_free(db);
}

static void test_intel_configs(void **state)
{
	struct events_db *db = intel_db();
	struct opvm_event_spec s;
	char err[256];

	assert_int_equal(events_parse_spec(db, "LLC_MISSES:6000", &s, err,
					   sizeof(err)), 0);
	assert_int_equal(events_perf_config(&s), 0x412e);
	assert_int_equal(events_parse_spec(db, "LLC_REFS:6000:0x4f", &s, err,
					   sizeof(err)), 0);
	assert_int_equal(events_perf_config(&s), 0x4f2e);
	assert_int_equal(events_parse_spec(db, "BR_MISS_PRED_RETIRED:500", &s,
					   err, sizeof(err)), 0);
	assert_int_equal(events_perf_config(&s), 0xc5);
	assert_int_equal(events_parse_spec(db, "cache-misses", &s, err,
					   sizeof(err)), 0);
	assert_int_equal(s.event->perf_type, PERF_TYPE_HARDWARE);
	assert_int_equal(events_perf_config(&s), PERF_COUNT_HW_CACHE_MISSES);
	events_db_free(db);
}

/* ---- defaults and usability --------------------------------------------------- */

static void test_defaults(void **state)
{
	struct events_db *db = intel_db();
	struct opvm_event_spec s;
	struct perf_event_attr attr;
	char err[256], buf[OPVM_EVENT_SPEC_MAX];

	assert_int_equal(events_default(db, 1, &s), 0);
	assert_string_equal(events_spec_format(&s, buf, sizeof(buf)),
			    "CPU_CLK_UNHALTED:100000:0x0:1:1");
	assert_true(events_usable(s.event, 1));
	assert_false(events_usable(s.event, 0));

	assert_int_equal(events_default(db, 0, &s), 0);
	assert_string_equal(events_spec_format(&s, buf, sizeof(buf)),
			    "TIMER:4000:0x0:1:1");
	assert_true(events_usable(s.event, 0));
	assert_int_equal(events_spec_rate_hz(&s), 250);
	memset(&attr, 0, sizeof(attr));
	events_spec_perf_attr(&s, &attr);
	assert_int_equal(attr.type, PERF_TYPE_SOFTWARE);
	assert_int_equal(attr.config, PERF_COUNT_SW_TASK_CLOCK);
	assert_int_equal(attr.sample_period, 4000000);

	/* -F HZ for the gdbstub backend */
	assert_int_equal(events_timer_spec(db, 250, &s, err, sizeof(err)), 0);
	assert_int_equal(s.count, 4000);
	assert_int_equal(events_spec_rate_hz(&s), 250);
	assert_int_equal(events_timer_spec(db, 1000, &s, err, sizeof(err)), 0);
	assert_int_equal(s.count, 1000);
	assert_int_equal(events_timer_spec(db, 1001, &s, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err,
		"a timer rate of 1001 Hz is not allowed; use 1 to 1000 samples/s per vCPU");
	assert_int_equal(events_timer_spec(db, 0, &s, err, sizeof(err)), -EINVAL);
	assert_int_equal(events_timer_spec(db, 3, &s, err, sizeof(err)), 0);
	assert_int_equal(s.count, 333333);

	assert_int_equal(events_parse_spec(db, "task-clock:1000000", &s, err,
					   sizeof(err)), 0);
	assert_true(events_usable(s.event, 0));
	assert_int_equal(events_spec_rate_hz(&s), 1000);
	events_spec_perf_attr(&s, &attr);
	assert_int_equal(attr.sample_period, 1000000);
	assert_int_equal(events_parse_spec(db, "cycles", &s, err, sizeof(err)), 0);
	assert_false(events_usable(s.event, 0));
	assert_int_equal(events_spec_rate_hz(&s), 0);
	events_db_free(db);

	db = events_db_load_dir(data_dir, "generic", 0, err, sizeof(err));
	assert_int_equal(events_default(db, 1, &s), 0);
	assert_string_equal(s.event->name, "cycles");
	events_db_free(db);
	db = events_db_load_dir(data_dir, "x86-amd-fam19h", 0, err, sizeof(err));
	assert_int_equal(events_default(db, 1, &s), 0);
	assert_string_equal(s.event->name, "CPU_CLK_UNHALTED");
	assert_int_equal(events_perf_config(&s), 0x76);
	events_db_free(db);
	db = events_db_load_dir(data_dir, "software", 0, err, sizeof(err));
	assert_int_equal(events_default(db, 1, &s), 0);
	assert_string_equal(s.event->name, "TIMER");
	events_db_free(db);
}

/* ---- CPU -> family ------------------------------------------------------------ */

static void test_family_selection(void **state)
{
	static const struct {
		const char *vendor;
		unsigned family, model;
		int perfmon;
		const char *want;
	} cases[] = {
		{ "GenuineIntel", 6, 0xcf, 0, "x86-intel-arch" },	/* no vPMU */
		{ "GenuineIntel", 6, 0x55, 4, "x86-intel-arch" },
		{ "GenuineIntel", 6, 0x0f, 2, "x86-intel-arch" },
		{ "GenuineIntel", 15, 4, 0, "generic" },		/* NetBurst */
		{ "GenuineIntel", 19, 1, 6, "x86-intel-arch" },
		{ "AuthenticAMD", 0x17, 0x31, 0, "x86-amd-fam17h" },
		{ "AuthenticAMD", 0x19, 0x61, 0, "x86-amd-fam19h" },
		{ "AuthenticAMD", 0x1a, 0x02, 0, "generic" },
		{ "AuthenticAMD", 0x15, 0x02, 0, "generic" },
		{ "HygonGenuine", 0x18, 0x00, 0, "x86-amd-fam17h" },
		{ "CentaurHauls", 6, 0x0f, 0, "generic" },
		{ "", 0, 0, 0, "generic" },
	};
	const struct opvm_event_family *fams;
	size_t nfam = events_families(&fams);

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct opvm_cpu_id id = { 0 };
		const char *got;
		int known = 0;

		snprintf(id.vendor, sizeof(id.vendor), "%s", cases[i].vendor);
		id.family = cases[i].family;
		id.model = cases[i].model;
		id.arch_perfmon_version = cases[i].perfmon;
		got = events_family_for_cpu(&id);
		if (strcmp(got, cases[i].want))
			fail_msg("%s family 0x%x: got %s, want %s", cases[i].vendor,
				 cases[i].family, got, cases[i].want);
		for (size_t f = 0; f < nfam; f++)
			known |= !strcmp(fams[f].id, got);
		assert_true(known);
	}
	assert_string_equal(events_family_for_cpu(NULL), "generic");
}

static void test_host(void **state)
{
	struct opvm_cpu_id id;
	char err[256];
	struct events_db *db;
	int pmu;

#if defined(__x86_64__) || defined(__i386__)
	assert_int_equal(events_host_cpu(&id), 0);
	assert_true(strlen(id.vendor) == 12);
	assert_true(id.family > 0);
#else
	skip();
#endif
	pmu = events_host_has_pmu();
	assert_true(pmu == 0 || pmu == 1);
	print_message("host: %s family %u model %u -> %s, PMU %s\n", id.vendor,
		      id.family, id.model, events_family_for_cpu(&id),
		      pmu ? "yes" : "no");
	setenv("OPVM_NO_PMU", "1", 1);
	assert_int_equal(events_host_has_pmu(), 0);
	unsetenv("OPVM_NO_PMU");

	/* NULL family = this host's */
	db = events_db_load(NULL, 0, err, sizeof(err));
	if (!db)
		fail_msg("%s", err);
	assert_string_equal(events_db_family(db), events_family_for_cpu(&id));
	events_db_free(db);
}

/* $OPVM_EVENTS_DIR is obeyed, and a broken file there is reported with its
 * path and line rather than silently replaced by the built-in copy. */
static void test_events_dir_env(void **state)
{
	char dir[] = "/tmp/opvm-test-events-XXXXXX";
	char path[256], err[512];
	struct events_db *db;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/software.events", dir);
	f = fopen(path, "we");
	fputs("event:0 um:zero minimum:1000 perf:timer name:TIMER : t\n"
	      "event:0 um:zero minimum:1000 perf:timer name:BROKEN\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/software.unit_masks", dir);
	f = fopen(path, "we");
	fputs("name:zero type:mandatory default:0x0\n\t0x0 none\n", f);
	fclose(f);

	setenv("OPVM_EVENTS_DIR", dir, 1);
	db = events_db_load("software", 0, err, sizeof(err));
	assert_null(db);
	assert_non_null(strstr(err, "/software.events:2: missing ' : description'"));
	db = events_db_load("x86-intel-arch", 0, err, sizeof(err));
	assert_null(db);
	assert_int_equal(errno, ENOENT);
	assert_non_null(strstr(err, "x86-intel-arch.events"));
	db = events_db_load("no-such-family", 0, err, sizeof(err));
	assert_null(db);
	assert_non_null(strstr(err, "opvm list-events --all"));
	unsetenv("OPVM_EVENTS_DIR");

	db = events_db_load("no-such-family", OPVM_EVDB_BUILTIN, err, sizeof(err));
	assert_null(db);
	assert_int_equal(errno, ENOENT);

	snprintf(path, sizeof(path), "%s/software.events", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/software.unit_masks", dir);
	unlink(path);
	rmdir(dir);
	events_db_free(NULL);
}

/* ---- the command: opvm list-events, run for real ------------------------------- */

static char opvm_path[4200];

/* build/opvm next to build/tests/test-events (or $OPVM from run-tests.sh). */
static int find_opvm(void)
{
	const char *env = getenv("OPVM");
	char exe[4096];
	ssize_t n;
	char *slash;

	if (env && !access(env, X_OK)) {
		snprintf(opvm_path, sizeof(opvm_path), "%s", env);
		return 1;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 0;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return 0;
	*slash = '\0';
	snprintf(opvm_path, sizeof(opvm_path), "%s/../opvm", exe);
	return !access(opvm_path, X_OK);
}

/* Runs "opvm list-events ARGS" with env prefix, returns exit code and
 * stdout+stderr in a malloc'd *out. */
/* Messages wrap at 80 columns (lib/log.h): joins "\n  " continuations. */
static void unwrap(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\n' && s[1] == ' ' && s[2] == ' ') {
			*w++ = ' ';
			s += 2;
			continue;
		}
		*w++ = *s;
	}
	*w = '\0';
}

static int run_list_events(const char *envs, const char *args, char **out)
{
	char cmd[8192], *buf = NULL;
	size_t len = 0, cap = 0;
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "env -u OPVM_EVENTS_DIR %s '%s' list-events %s 2>&1",
		 envs, opvm_path, args);
	p = popen(cmd, "r");
	assert_non_null(p);
	for (;;) {
		size_t k;

		if (cap - len < 4096) {
			cap = cap * 2 + 8192;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		k = fread(buf + len, 1, cap - len - 1, p);
		if (!k)
			break;
		len += k;
	}
	buf[len] = '\0';
	st = pclose(p);
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_command(void **state)
{
	char *out;
	json_t *root;
	json_error_t jerr;
	int pmu = events_host_has_pmu();
	struct opvm_cpu_id id;

	if (!find_opvm()) {
		print_message("SKIP: opvm binary not built next to this test\n");
		skip();
	}
	events_host_cpu(&id);

	/* JSON agrees with the library about this host */
	assert_int_equal(run_list_events("", "--json", &out), 0);
	root = json_loads(out, 0, &jerr);
	if (!root)
		fail_msg("list-events --json: %s: %s", jerr.text, out);
	assert_string_equal(json_string_value(json_object_get(root, "host_family")),
			    events_family_for_cpu(&id));
	assert_int_equal(json_is_true(json_object_get(root, "has_pmu")), pmu);
	assert_true(json_array_size(json_object_get(root, "events")) >= 10);
	{
		struct events_db *db = events_db_load(NULL, 0, NULL, 0);
		struct opvm_event_spec def;
		char buf[OPVM_EVENT_SPEC_MAX];

		assert_non_null(db);
		assert_int_equal(events_default(db, pmu, &def), 0);
		assert_string_equal(json_string_value(json_object_get(root,
							"default_event")),
				    events_spec_format(&def, buf, sizeof(buf)));
		if (!pmu)
			assert_string_equal(buf, "TIMER:4000:0x0:1:1");
		events_db_free(db);
	}
	json_decref(root);
	free(out);

	/* no PMU: said plainly, hardware specs refused, TIMER accepted */
	assert_int_equal(run_list_events("OPVM_NO_PMU=1", "", &out), 0);
	unwrap(out);
	assert_non_null(strstr(out, "no hardware PMU on this host: only TIMER and software events can be sampled"));
	assert_non_null(strstr(out, "CPU (by CPUID): "));
	/* the rate run and attach really use, not the events file's 250/s */
	assert_non_null(strstr(out, "default: run and attach sample at 50/s per vCPU"));
	free(out);
	assert_int_equal(run_list_events("OPVM_NO_PMU=1",
					 "--check TIMER:4000", &out), 0);
	assert_non_null(strstr(out, "250 samples/s"));
	free(out);
	assert_int_equal(run_list_events("OPVM_NO_PMU=1",
					 "--check cycles:100000", &out), 1);
	assert_non_null(strstr(out, "needs a hardware PMU"));
	free(out);

	/* minimum enforced with the message the user sees */
	assert_int_equal(run_list_events("", "--family x86-intel-arch --check INST_RETIRED:1000",
					 &out), 1);
	unwrap(out);
	assert_non_null(strstr(out,
		"count 1000 for INST_RETIRED is below its minimum 6000; use at least 6000"));
	free(out);
	assert_int_equal(run_list_events("", "--family x86-amd-fam17h --check L2_CACHE_MISS:500:ls_rd_blk_c",
					 &out), 0);
	assert_non_null(strstr(out, "config 0x864"));
	free(out);
	assert_int_equal(run_list_events("", "--check NOT_AN_EVENT", &out), 1);
	unwrap(out);
	assert_non_null(strstr(out, "opvm list-events"));
	free(out);

	/* every family listed, nothing wider than 80 columns */
	assert_int_equal(run_list_events("", "--all", &out), 0);
	{
		const char *fams[] = { "x86-intel-arch:", "x86-amd-fam17h:",
				       "x86-amd-fam19h:", "generic:", "software:" };
		char *line, *save = NULL;

		for (size_t i = 0; i < ARRAY_SIZE(fams); i++)
			assert_non_null(strstr(out, fams[i]));
		for (line = strtok_r(out, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save))
			if (strlen(line) > 80)
				fail_msg("wider than 80 columns: %s", line);
	}
	free(out);

	assert_int_equal(run_list_events("", "--bogus", &out), 2);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_family_parses),
		cmocka_unit_test(test_builtin_matches_files),
		cmocka_unit_test(test_intel_contents),
		cmocka_unit_test(test_synthetic_ok),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_long_line_and_nul),
		cmocka_unit_test(test_mutations),
		cmocka_unit_test(test_spec_minimum),
		cmocka_unit_test(test_spec_unknown_and_syntax),
		cmocka_unit_test(test_spec_kernel_user),
		cmocka_unit_test(test_spec_unit_masks),
		cmocka_unit_test(test_intel_configs),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_family_selection),
		cmocka_unit_test(test_host),
		cmocka_unit_test(test_events_dir_env),
		cmocka_unit_test(test_command),
	};

	return cmocka_run_group_tests(tests, setup_dir, NULL);
}
