// SPDX-License-Identifier: MIT
/*
 * kallsyms found by shape (vmm/introspect/kallsyms-find.c) in a synthetic
 * guest (introspect-image.h) read through the real guest-memory reader:
 * the tables in the order before 6.4, from 6.4, and without
 * kallsyms_relative_base, behind a decoy run of digits; each found table
 * decodes to its symbols; introspection of a guest whose VMCOREINFO lists
 * no tables (Linux before 6.0) finds and sends them; and tables that lie
 * (an index that does not match its strings, markers out of order, a
 * count that does not match the names) are not taken, within the bound.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "vmm/guest/guestmem.h"
#include "vmm/introspect/introspect.h"
#include "vmm/introspect/kallsyms.h"
#include "introspect-image.h"

/* A tool that takes the records only (vmm/introspect/introspect.h). */
#define TOOL(fn, a)	(&(const struct introspect_tool){ .record = (fn), .arg = (a) })

#define RAM		(8u << 20)
#define VMCI_PA		0x600000ull
#define FIND_VA		(XI_KERNEL_VA + 0x300000)
#define DECOY_VA	(XI_KERNEL_VA + 0x10000)
#define NMANY		600u	/* three markers */

static struct xi_sym many[NMANY];
static char names[NMANY][16];
static char long_name[160];

struct guest {
	struct ximage x;
	struct guestmem *m;
	struct unwind_mem um;
};

static int kread(void *arg, uint64_t va, void *buf, size_t len)
{
	return guestmem_read_virt(arg, XI_PGD_PA, va, buf, len) ? -EFAULT : 0;
}

/* A guest with the 6.1 layout's tables (xi_kallsyms: a decoy of their
 * own, token_index before token_table), a bare run of digits, and the
 * kernel's layout in order at FIND_VA. */
static void guest_new(struct guest *g, int order, struct xi_tables *t)
{
	static const char digits[] = "0\0" "1\0" "2\0" "3\0" "4\0" "5\0" "6\0" "7\0" "8\0" "9";

	many[0] = (struct xi_sym){ "_text", 'T', XI_KERNEL_VA };
	many[1] = (struct xi_sym){ "_stext", 'T', XI_KERNEL_VA + 0x40 };
	for (unsigned i = 2; i < NMANY; i++) {
		snprintf(names[i], sizeof(names[i]), "fn_%u", i);
		many[i] = (struct xi_sym){ names[i], i % 2 ? 't' : 'T', XI_KERNEL_VA + 0x100 * i };
	}
	memset(long_name, 'x', sizeof(long_name) - 1);
	many[300].name = long_name;	/* a two-byte length */
	assert_int_equal(ximage_build(&g->x, RAM, many, 8, VMCI_PA), 0);
	xi_put(&g->x, DECOY_VA, digits, sizeof(digits));
	xi_kallsyms_image(&g->x, FIND_VA, many, NMANY, order, t);
	g->m = guestmem_open(getpid());
	assert_non_null(g->m);
	assert_int_equal(guestmem_add_range(g->m, 0, RAM, (uint64_t)(uintptr_t)g->x.ram), 0);
	g->um = (struct unwind_mem){ kread, g->m };
}

static void guest_free(struct guest *g)
{
	guestmem_close(g->m);
	ximage_free(&g->x);
}

struct seen {
	unsigned n, wrong;
};

static int check_sym(void *arg, uint64_t addr, char type, const char *name, size_t len)
{
	struct seen *s = arg;
	const struct xi_sym *e = s->n < NMANY ? &many[s->n] : NULL;

	s->wrong += !e || addr != e->addr || type != e->type || strlen(e->name) != len ||
		    memcmp(name, e->name, len);
	s->n++;
	return 0;
}

static void test_find_orders(void **state)
{
	for (int order = 0; order < 3; order++) {
		struct kallsyms_find_result fr;
		struct kallsyms_result res;
		struct kallsyms_addrs a;
		struct xi_tables t;
		struct seen s = { 0 };
		struct guest g;
		char err[160];

		guest_new(&g, order, &t);
		assert_int_equal(kallsyms_find(&g.um, XI_KERNEL_VA, RAM, &a, &fr, err, sizeof(err)), 0);
		assert_int_equal(a.token_table, t.token_table);
		assert_int_equal(a.token_index, t.token_index);
		assert_int_equal(a.names, t.names);
		assert_int_equal(a.num_syms, t.num_syms);
		assert_int_equal(a.offsets, t.offsets);
		assert_int_equal(a.relative_base, t.relative_base);
		assert_true(fr.candidates >= 3);	/* the decoys first */
		/* without relative_base, _text is VMCOREINFO's _stext less its offset */
		a.stext = XI_KERNEL_VA + 0x40;
		assert_int_equal(kallsyms_decode(&g.um, &a, check_sym, &s, &res, err, sizeof(err)), 0);
		assert_int_equal(s.n, NMANY);
		assert_int_equal(s.wrong, 0);
		assert_int_equal(res.relative_base, XI_KERNEL_VA);
		guest_free(&g);
	}
}

/* Introspection of a guest whose VMCOREINFO lists no kallsyms tables. */
static void emit_none(void *arg, const void *rec, size_t len)
{
	(void)rec;
	(void)len;
	(*(unsigned *)arg)++;
}

static void test_introspect_search(void **state)
{
	struct introspect_config cfg = { .scan_bytes = RAM };
	const struct introspect_stats *st;
	struct introspect *in;
	struct xi_tables t;
	struct guest g;
	unsigned recs = 0;

	guest_new(&g, 0, &t);
	xi_vmcoreinfo_old(&g.x);
	in = introspect_new(g.m, &cfg);
	assert_non_null(in);
	for (int i = 0; i < 5 && introspect_get_stats(in)->state == INTROSPECT_SEARCHING; i++)
		assert_int_equal(introspect_poll(in, 1000u * (uint64_t)(i + 1), NULL, TOOL(emit_none, &recs)), 0);
	st = introspect_get_stats(in);
	assert_int_equal(st->state, INTROSPECT_READY);
	assert_string_equal(st->release, "5.10.0-test");
	assert_non_null(st->kallsyms_from);
	assert_string_equal(st->kallsyms_from, "search");
	assert_int_equal(st->nr_syms, NMANY);
	assert_int_equal(st->ksyms_sent, NMANY - 1);	/* the long name is not sent */
	assert_int_equal(st->ksyms_bad + st->ksyms_unsorted, 0);
	assert_int_equal(st->text_addr, XI_KERNEL_VA);
	assert_true(recs >= 2);
	introspect_free(in);
	guest_free(&g);
}

/* Tables that lie are not taken, and the search stays within its bound. */
static void test_lying(void **state)
{
	struct kallsyms_find_result fr;
	struct kallsyms_addrs a;
	struct xi_tables t;
	struct guest g;
	char err[160];
	uint32_t v;
	uint16_t idx;

	/* a token index one off for one string */
	guest_new(&g, 0, &t);
	assert_int_equal(kread(g.m, t.token_index + 2 * 'A', &idx, 2), 0);
	idx++;
	xi_put(&g.x, t.token_index + 2 * 'A', &idx, 2);
	assert_int_equal(kallsyms_find(&g.um, XI_KERNEL_VA, RAM, &a, &fr, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "--system-map"));
	assert_true(fr.scanned <= RAM + (1u << 20));
	guest_free(&g);
	/* markers out of order */
	guest_new(&g, 1, &t);
	v = 0xfffff;
	xi_put(&g.x, t.markers + 4, &v, 4);
	assert_int_equal(kallsyms_find(&g.um, XI_KERNEL_VA, RAM, &a, &fr, err, sizeof(err)),
			 -ENOENT);
	guest_free(&g);
	/* a count that the names do not bear out */
	guest_new(&g, 0, &t);
	v = NMANY - 1;
	xi_put(&g.x, t.num_syms, &v, 4);
	assert_int_equal(kallsyms_find(&g.um, XI_KERNEL_VA, RAM, &a, &fr, err, sizeof(err)),
			 -ENOENT);
	/* runs of digits planted everywhere before the table: the search
	 * gives up after its cap of candidates */
	for (unsigned k = 0; k < KALLSYMS_FIND_CANDIDATES + 10; k++)
		xi_put(&g.x, DECOY_VA + 0x100 * (k + 1), "0\0" "1\0" "2\0" "3\0" "4\0" "5\0" "6\0"
		       "7\0" "8\0" "9", 20);
	assert_int_equal(kallsyms_find(&g.um, XI_KERNEL_VA, RAM, &a, &fr, err, sizeof(err)),
			 -ENOENT);
	assert_int_equal(fr.candidates, KALLSYMS_FIND_CANDIDATES);
	/* nothing past the image: a start outside RAM reads nothing */
	assert_int_equal(kallsyms_find(&g.um, 0xffffffffa0000000ull, KALLSYMS_FIND_MAX << 4, &a,
				       &fr, err, sizeof(err)), -ENOENT);
	assert_true(fr.scanned <= KALLSYMS_FIND_MAX);
	assert_int_equal(fr.candidates, 0);
	guest_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find_orders),
		cmocka_unit_test(test_introspect_search),
		cmocka_unit_test(test_lying),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
