// SPDX-License-Identifier: MIT
/*
 * Introspection (vmm/introspect/) over a synthetic guest (introspect-image.h)
 * read through the real guest-memory reader on this process's own memory:
 * VMCOREINFO parsing, kallsyms decoding, the KSYMS records it emits (read
 * back by fetch's converter, as the collector does), and a guest that lies:
 * huge counts, pointers outside RAM, a page that only looks like
 * VMCOREINFO, names that run past the end of memory.
 */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "guest-kmod/opvm_proto.h"
#include "host/collect/fetch.h"
#include "vmm/guest/guestmem.h"
#include "vmm/introspect/introspect.h"
#include "vmm/introspect/kallsyms.h"
#include "vmm/introspect/kcurrent.h"
#include "vmm/introspect/kmods.h"
#include "vmm/introspect/ktasks.h"
#include "vmm/introspect/kvmas.h"
#include "vmm/introspect/vmcoreinfo.h"
#include "introspect-image.h"
#include "lib/channel.h"
#include "lib/array.h"

/* A tool that takes the records only (vmm/introspect/introspect.h). */
#define TOOL(fn, a)	(&(const struct introspect_tool){ .record = (fn), .arg = (a) })
#define NEWS(...)	(&(const struct introspect_news){ __VA_ARGS__ })

#define RAM	(8u << 20)
#define VMCI_PA	0x600000ull

static char long_name[200];

static const struct xi_sym syms[] = {
	{ "fixed_percpu_data", 'D', 0 },
	{ "cpu_number", 'D', 0x1f000 },
	{ "_text", 'T', XI_KERNEL_VA },
	{ "startup_64", 'T', XI_KERNEL_VA },
	{ "secondary_startup_64", 'T', XI_KERNEL_VA + 0x60 },
	{ "__do_sys_getpid", 't', XI_KERNEL_VA + 0x1000 },
	{ "sys_call_table", 'D', XI_KERNEL_VA + 0x2000 },
	{ "schedule", 'T', XI_KERNEL_VA + 0x3000 },
	{ long_name, 'T', XI_KERNEL_VA + 0x4000 },	/* two-byte length */
	{ "weak_fn", 'W', XI_KERNEL_VA + 0x5000 },
};
#define NSYMS	(ARRAY_SIZE(syms))

struct capture {
	char text[1 << 16];
	size_t len;
	uint64_t ok, bad, capped, records, ends, end_nr;
	uint32_t next_seq;
	int seq_ok;
	uint64_t procs, execs, exits;
	struct opvm_rec_proc p105, last_exec;
	uint32_t last_exit;
	uint64_t cookies, maps, munmaps, cgroups;
	char cgroup_path[64];		/* the last CGROUP's */
	uint32_t cgroup_tgid;
	char cookie_path[2][64];
	uint8_t cookie_bid[2][32];
	uint8_t cookie_bid_len[2];
	uint64_t cookie_id[2];
	struct opvm_rec_mmap map105[2], last_map;
	struct opvm_rec_munmap last_munmap;
	uint64_t mods, mod_frees, mod_records, mod_ends, end_flags;
	struct opvm_rec_module last_mod, last_free;
};

static void capture(void *arg, const void *rec, size_t len)
{
	struct capture *c = arg;
	const struct opvm_rec_hdr *h = rec;

	assert_int_equal(h->magic, OPVM_PROTO_MAGIC);
	assert_int_equal(h->len, len);
	assert_int_equal(len % OPVM_REC_ALIGN, 0);
	assert_true(len <= OPVM_REC_MAX);
	c->seq_ok += h->seq == c->next_seq++;
	if (h->type == OPVM_REC_KSYMS) {
		c->records++;
		c->mod_records += ((const struct opvm_rec_ksyms *)rec)->module[0] != 0;
		c->len += fetch_ksyms_text(rec, len, c->text + c->len, sizeof(c->text) - c->len,
					   &c->ok, &c->bad, &c->capped, NULL);
	} else if (h->type == OPVM_REC_PROC || h->type == OPVM_REC_EXEC) {
		const struct opvm_rec_proc *r = rec;

		assert_int_equal(len, (sizeof(*r) + 7) & ~7ul);
		if (h->type == OPVM_REC_PROC)
			c->procs++;
		else
			c->execs++, c->last_exec = *r;
		if (r->tgid == 105)
			c->p105 = *r;
	} else if (h->type == OPVM_REC_PROC_EXIT) {
		const struct opvm_rec_exit *r = rec;

		c->exits++;
		c->last_exit = r->tgid;
	} else if (h->type == OPVM_REC_COOKIE) {
		const struct opvm_rec_cookie *r = rec;
		unsigned k = c->cookies < 2 ? (unsigned)c->cookies : 1;

		assert_true(sizeof(*r) + r->path_len <= len);
		assert_true(r->path_len < sizeof(c->cookie_path[0]));
		memcpy(c->cookie_path[k], r + 1, r->path_len);
		c->cookie_path[k][r->path_len] = '\0';
		memcpy(c->cookie_bid[k], r->build_id, sizeof(r->build_id));
		c->cookie_bid_len[k] = r->build_id_len;
		c->cookie_id[k] = r->cookie;
		c->cookies++;
	} else if (h->type == OPVM_REC_MMAP) {
		const struct opvm_rec_mmap *r = rec;

		assert_int_equal(len, sizeof(*r));
		c->maps++;
		c->last_map = *r;
		if (r->tgid == 105)
			c->map105[r->start >= 0x7f0000000000ull] = *r;
	} else if (h->type == OPVM_REC_MUNMAP) {
		c->munmaps++;
		memcpy(&c->last_munmap, rec, sizeof(c->last_munmap));
	} else if (h->type == OPVM_REC_CGROUP) {
		const struct opvm_rec_cgroup *r = rec;

		assert_true(sizeof(*r) + r->path_len <= len);
		assert_true(chan_rec_check(rec, len));
		snprintf(c->cgroup_path, sizeof(c->cgroup_path), "%.*s", (int)r->path_len,
			 (const char *)(r + 1));
		c->cgroup_tgid = r->tgid;
		c->cgroups++;
	} else if (h->type == OPVM_REC_KSYMS_END) {
		const struct opvm_rec_ksyms_end *e = rec;

		c->ends++;
		c->end_nr = e->nr_syms;
		c->end_flags = e->flags;
		c->mod_ends += !!(e->flags & OPVM_KSYMS_MODULES_ONLY);
	} else if (h->type == OPVM_REC_MODULE || h->type == OPVM_REC_MODULE_FREE) {
		assert_int_equal(len, (sizeof(struct opvm_rec_module) + 7) & ~7ul);
		if (h->type == OPVM_REC_MODULE)
			c->mods++, memcpy(&c->last_mod, rec, sizeof(c->last_mod));
		else
			c->mod_frees++, memcpy(&c->last_free, rec, sizeof(c->last_free));
	}
}

struct guest {
	struct ximage x;
	struct guestmem *m;
};

static void guest_new(struct guest *g)
{
	memset(long_name, 'x', sizeof(long_name) - 1);
	assert_int_equal(ximage_build(&g->x, RAM, syms, NSYMS, VMCI_PA), 0);
	g->m = guestmem_open(getpid());
	assert_non_null(g->m);
	assert_int_equal(guestmem_add_range(g->m, 0, RAM, (uint64_t)(uintptr_t)g->x.ram), 0);
}

static void guest_free(struct guest *g)
{
	guestmem_close(g->m);
	ximage_free(&g->x);
}

/* Polls until ready or n polls; returns the stats. */
static const struct introspect_stats *run(struct introspect *in, struct capture *c, int n)
{
	for (int i = 0; i < n; i++) {
		assert_int_equal(introspect_poll(in, 1000000u * (uint64_t)(i + 1), NULL, TOOL(capture, c)), 0);
		if (introspect_get_stats(in)->state != INTROSPECT_SEARCHING)
			break;
	}
	return introspect_get_stats(in);
}

static void test_kallsyms_from_memory(void **state)
{
	struct introspect_config cfg = { .scan_bytes = 1u << 20 };	/* several polls */
	struct capture *c = calloc(1, sizeof(*c));
	const struct introspect_stats *st;
	struct introspect *in;
	struct guest g;
	char line[300];

	guest_new(&g);
	in = introspect_new(g.m, &cfg);
	assert_non_null(in);
	st = run(in, c, 20);
	assert_int_equal(st->state, INTROSPECT_READY);
	assert_int_equal(st->vmcoreinfo_gpa, VMCI_PA);
	assert_int_equal(st->pgd_gpa, XI_PGD_PA);
	assert_string_equal(st->release, "6.1.0-test");
	assert_int_equal(st->nr_syms, NSYMS);
	assert_int_equal(st->text_addr, XI_KERNEL_VA);
	assert_int_equal(st->ksyms_sent, 6);		/* T, t, W */
	assert_int_equal(st->ksyms_other, 3 + 1);	/* data, and the 199-byte name */
	assert_int_equal(st->ksyms_bad, 0);
	assert_int_equal(c->ends, 1);
	assert_int_equal(c->end_nr, 6);
	assert_int_equal(c->ok, 6);
	assert_int_equal(c->bad + c->capped, 0);
	assert_int_equal(c->seq_ok, c->records + c->ends);
	c->text[c->len] = '\0';
	snprintf(line, sizeof(line), "%016llx t __do_sys_getpid\n",
		 (unsigned long long)(XI_KERNEL_VA + 0x1000));
	assert_non_null(strstr(c->text, line));
	snprintf(line, sizeof(line), "%016llx T secondary_startup_64\n",
		 (unsigned long long)(XI_KERNEL_VA + 0x60));
	assert_non_null(strstr(c->text, line));
	assert_non_null(strstr(c->text, " W weak_fn\n"));
	assert_null(strstr(c->text, "sys_call_table"));
	/* once ready, polls do nothing more */
	run(in, c, 3);
	assert_int_equal(c->ends, 1);
	introspect_free(in);
	guest_free(&g);
	free(c);
}

/* session.json "introspect" as introspection describes it: the mode alone
 * without an introspector; the search's state, and no "kernel" before the
 * release is known; then the kernel, in the shape of session.json's own
 * "kernel" (the collector uses it as is while opvm.ko is silent). */
static void test_to_json(void **state)
{
	struct introspect_config cfg = { .scan_bytes = 1u << 20 };
	struct capture *c = calloc(1, sizeof(*c));
	struct introspect *in;
	json_t *j, *k;
	struct guest g;

	j = introspect_to_json(NULL, INTROSPECT_OFF);
	assert_non_null(j);
	assert_int_equal(json_object_size(j), 1);
	assert_string_equal(json_string_value(json_object_get(j, "mode")), "off");
	json_decref(j);

	guest_new(&g);
	in = introspect_new(g.m, &cfg);
	assert_non_null(in);
	j = introspect_to_json(in, INTROSPECT_AUTO);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "mode")), "auto");
	assert_string_equal(json_string_value(json_object_get(j, "state")), "searching");
	assert_null(json_object_get(j, "kernel"));
	assert_true(json_is_object(json_object_get(json_object_get(j, "processes"), "when")));
	assert_false(json_is_true(json_object_get(json_object_get(j, "mappings"), "read")));
	json_decref(j);

	assert_int_equal(run(in, c, 20)->state, INTROSPECT_READY);
	j = introspect_to_json(in, INTROSPECT_ONLY);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "mode")), "only");
	assert_string_equal(json_string_value(json_object_get(j, "state")), "ready");
	assert_string_equal(json_string_value(json_object_get(j, "kernel_text_hex")),
			    "0xffffffff81000000");
	assert_int_equal(json_integer_value(json_object_get(j, "kallsyms_syms")), NSYMS);
	k = json_object_get(j, "kernel");
	assert_true(json_is_object(k));
	assert_string_equal(json_string_value(json_object_get(k, "release")), "6.1.0-test");
	assert_string_equal(json_string_value(json_object_get(k, "source")), "introspection");
	assert_string_equal(json_string_value(json_object_get(k, "anchor_name")), "_stext");
	assert_string_equal(json_string_value(json_object_get(k, "anchor_addr_hex")),
			    "0xffffffff81000000");
	assert_string_equal(json_string_value(json_object_get(k, "text_addr_hex")),
			    "0xffffffff81000000");
	/* above INT64_MAX: a real, exact for a 2 MiB-aligned address */
	assert_true((uint64_t)json_number_value(json_object_get(k, "text_addr")) == XI_KERNEL_VA);
	json_decref(j);
	introspect_free(in);
	guest_free(&g);
	free(c);
}

static void test_vmcoreinfo_parse(void **state)
{
	struct vmcoreinfo vi;
	char big[8192];
	const char *t = "OSRELEASE=6.1.0/../x\nKERNELOFFSET=zz\nNUMBER(phys_base)=-5\n"
			"SYMBOL(swapper_pg_dir)=ffffffffffffffffff\nSYMBOL(_stext)=10\n=\n\n==";

	assert_int_equal(vmcoreinfo_parse(t, strlen(t), &vi), 0);
	assert_string_equal(vi.release, "6.1.0_.._x");	/* no '/' survives */
	assert_false(vi.have & VMCI_OFFSET);		/* not hex */
	assert_int_equal(vi.phys_base, (uint64_t)-5);
	assert_false(vi.have & VMCI_PGD);		/* overflows */
	assert_int_equal(vi.stext, 0x10);
	assert_false(vi.have & VMCI_KALLSYMS);
	assert_int_equal(vmcoreinfo_parse("nothing", 7, &vi), -ENOENT);
	/* no NUL, no newline, longer than a page: bounded */
	memset(big, 'A', sizeof(big));
	memcpy(big, "OSRELEASE=", 10);
	assert_int_equal(vmcoreinfo_parse(big, sizeof(big), &vi), 0);
	assert_int_equal(strlen(vi.release), sizeof(vi.release) - 1);
	/* BUILD-ID: 2..40 hex digits, an even count, else none */
	t = "OSRELEASE=6.1\nBUILD-ID=6a2b4ac77585b8cf102cba771300e573c8489b69\n";
	assert_int_equal(vmcoreinfo_parse(t, strlen(t), &vi), 0);
	assert_int_equal(vi.build_id_len, 20);
	assert_int_equal(vi.build_id[0], 0x6a);
	assert_int_equal(vi.build_id[19], 0x69);
	t = "OSRELEASE=6.1\nBUILD-ID=6a2b4ac77585b8cf102cba771300e573c8489b6900\n";
	assert_int_equal(vmcoreinfo_parse(t, strlen(t), &vi), 0);
	assert_int_equal(vi.build_id_len, 0);		/* too long */
	t = "OSRELEASE=6.1\nBUILD-ID=6a2\nX";
	assert_int_equal(vmcoreinfo_parse(t, strlen(t), &vi), 0);
	assert_int_equal(vi.build_id_len, 0);		/* odd */
	t = "OSRELEASE=6.1\nBUILD-ID=6a2g\n";
	assert_int_equal(vmcoreinfo_parse(t, strlen(t), &vi), 0);
	assert_int_equal(vi.build_id_len, 0);		/* not hex */
}

/* A kallsyms table that lies, read through the synthetic guest. */
static int count_sym(void *arg, uint64_t addr, char type, const char *name, size_t len)
{
	(*(unsigned *)arg)++;
	assert_true(len >= 1 && len <= KALLSYMS_NAME_MAX);
	return 0;
}

static int kread(void *arg, uint64_t va, void *buf, size_t len)
{
	return guestmem_read_virt(arg, XI_PGD_PA, va, buf, len) ? -EFAULT : 0;
}

static void test_lying_tables(void **state)
{
	struct guest g;
	struct unwind_mem um;
	struct kallsyms_addrs a;
	struct kallsyms_result res;
	uint32_t huge = 0xffffffffu, many = 1000000;
	uint16_t bad_idx = 0xffff;
	unsigned n = 0;
	char err[160];
	uint8_t ff[4096];

	guest_new(&g);
	um = (struct unwind_mem){ kread, g.m };
	a = (struct kallsyms_addrs){ .names = g.x.names, .num_syms = g.x.num_syms,
				     .token_table = g.x.token_table,
				     .token_index = g.x.token_index, .offsets = g.x.offsets,
				     .relative_base = g.x.relative_base };
	assert_int_equal(kallsyms_decode(&um, &a, count_sym, &n, &res, err, sizeof(err)), 0);
	assert_int_equal(n, NSYMS);
	/* a huge count is refused outright */
	xi_put(&g.x, g.x.num_syms, &huge, 4);
	assert_int_equal(kallsyms_decode(&um, &a, count_sym, &n, &res, err, sizeof(err)),
			 -EINVAL);
	/* a count past the names: the walk stops at the end of RAM, bounded */
	xi_put(&g.x, g.x.num_syms, &many, 4);
	memset(ff, 0x7f, sizeof(ff));	/* names of 127 bytes each from here on */
	for (uint64_t va = g.x.end_va; va + sizeof(ff) <= XI_KERNEL_VA + RAM - XI_KERNEL_PA;
	     va += sizeof(ff))
		xi_put(&g.x, va, ff, sizeof(ff));
	n = 0;
	assert_int_equal(kallsyms_decode(&um, &a, count_sym, &n, &res, err, sizeof(err)), 0);
	assert_true(res.decoded < many);
	assert_true(res.bytes_read <= KALLSYMS_READ_MAX);
	/* a token index outside its table: those names are refused */
	xi_put(&g.x, g.x.token_index + 2 * 'T', &bad_idx, 2);
	n = 0;
	assert_int_equal(kallsyms_decode(&um, &a, count_sym, &n, &res, err, sizeof(err)), 0);
	assert_true(res.bad >= 5);
	/* tables outside guest RAM, or in the user half */
	a.names = 0xffffffff9f000000ull;
	a.token_index = 0x1000;
	assert_int_equal(kallsyms_decode(&um, &a, count_sym, &n, &res, err, sizeof(err)),
			 -EFAULT);
	guest_free(&g);
}

/* Pages that only look like VMCOREINFO, and a VMCOREINFO whose page-table
 * root maps nothing: refused and counted, sampling never waits on it. */
static void test_lying_vmcoreinfo(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));
	const struct introspect_stats *st;
	struct introspect *in;
	struct guest g;
	char *p;

	guest_new(&g);
	/* a decoy before the real page: its root is a page of zeros */
	p = (char *)g.x.ram + 0x500000;
	snprintf(p, 4096, "OSRELEASE=evil\nSYMBOL(swapper_pg_dir)=ffffffff80e05000\n"
		 "NUMBER(phys_base)=%lld\n", (long long)XI_PHYS_BASE);
	/* and one whose root lies outside RAM */
	p = (char *)g.x.ram + 0x501000;
	snprintf(p, 4096, "OSRELEASE=evil\nSYMBOL(swapper_pg_dir)=ffffffffff000000\n"
		 "NUMBER(phys_base)=0\n");
	in = introspect_new(g.m, NULL);
	assert_non_null(in);
	st = run(in, c, 5);
	assert_int_equal(st->state, INTROSPECT_READY);
	assert_int_equal(st->vmcoreinfo_gpa, VMCI_PA);
	assert_int_equal(st->refused, 2);
	assert_int_equal(c->ends, 1);
	introspect_free(in);
	/* no VMCOREINFO at all: every pass counted, each bounded */
	memset(g.x.ram + VMCI_PA, 0, 4096);
	memset(g.x.ram + 0x500000, 0, 8192);
	in = introspect_new(g.m, NULL);
	st = run(in, c, 4);
	assert_int_equal(st->state, INTROSPECT_SEARCHING);
	assert_true(st->passes >= 1);
	assert_true(st->scanned_bytes <= 4ull * RAM);
	introspect_free(in);
	guest_free(&g);
	free(c);
}

/* A guest without VMCOREINFO is searched less and less often after ten
 * passes; its OS starting (introspect_news.os_started) ends the back-off. */
static void test_search_backoff(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));
	const struct introspect_stats *st;
	uint8_t page[4096];
	struct introspect *in;
	struct guest g;

	guest_new(&g);
	memcpy(page, g.x.ram + VMCI_PA, sizeof(page));
	memset(g.x.ram + VMCI_PA, 0, sizeof(page));
	in = introspect_new(g.m, NULL);
	assert_non_null(in);
	for (uint64_t t = 1; t <= 60; t++)	/* a poll a second for a minute */
		assert_int_equal(introspect_poll(in, t * 1000, NULL, TOOL(capture, c)), 0);
	st = introspect_get_stats(in);
	/* ten a second, then 1, 2, 4, 8, 16 s apart */
	assert_int_equal(st->passes, 15);
	memcpy(g.x.ram + VMCI_PA, page, sizeof(page));	/* the kernel starts */
	introspect_poll(in, 61000, NULL, TOOL(capture, c));
	assert_int_equal(st->state, INTROSPECT_SEARCHING);	/* waits till 73 s */
	introspect_poll(in, 62000, NEWS(.os_started = true), TOOL(capture, c));
	assert_int_equal(st->state, INTROSPECT_READY);
	introspect_free(in);
	guest_free(&g);
	free(c);
}

/* ---- processes ------------------------------------------------------------ */

#define RAM_T	(16u << 20)

static void tguest_new_ram(struct guest *g, unsigned n, size_t ram)
{
	struct xi_sym s[NSYMS + XT_NSYMS];
	uint32_t len;
	void *btf = xt_btf(&len);

	assert_non_null(btf);
	free(btf);
	memset(long_name, 'x', sizeof(long_name) - 1);
	memcpy(s, syms, sizeof(syms));
	xt_syms(s + NSYMS, len);
	assert_int_equal(ximage_build(&g->x, ram, s, NSYMS + XT_NSYMS, VMCI_PA), 0);
	assert_int_equal(xt_tasks(&g->x, n), (int)len);
	g->m = guestmem_open(getpid());
	assert_non_null(g->m);
	assert_int_equal(guestmem_add_range(g->m, 0, ram, (uint64_t)(uintptr_t)g->x.ram), 0);
}

static void tguest_new(struct guest *g, unsigned n)
{
	tguest_new_ram(g, n, RAM_T);
}

static uint64_t pgd_pa(unsigned i)
{
	return XT_PGD_VA + (uint64_t)i * 4096 - XI_KERNEL_VA + XI_KERNEL_PA;
}

/* Kernel stack pointers name their tasks (boot samples): init_task's
 * stack is swapper/0's, task i's its own (every 10th a kernel thread); a
 * pointer in no stack, or a stack that lies, names none. */
static void stacks_check(struct introspect *in, struct guest *g, struct capture *c)
{
	uint32_t tgid = 1;
	bool kth = false;

	assert_int_equal(introspect_task_by_sp(in, XT_STACK_VA + 0x3f00, &tgid, &kth), 0);
	assert_int_equal(tgid, 0);
	assert_true(kth);
	assert_int_equal(introspect_task_by_sp(in, XT_STACK_VA + 6 * 16384 + 8, &tgid, &kth), 0);
	assert_int_equal(tgid, 105);
	assert_false(kth);
	assert_int_equal(introspect_task_by_sp(in, XT_STACK_VA + 10 * 16384 + 16383, &tgid,
					       &kth), 0);
	assert_int_equal(tgid, 109);
	assert_true(kth);
	assert_int_equal(introspect_task_by_sp(in, XT_STACK_VA + (XT_MAX + 1) * 16384 + 64,
					       &tgid, &kth), -ENOENT);
	assert_int_equal(introspect_get_stats(in)->stacks, XT_MAX + 1);
	/* task 7's stack unaligned, task 8's a user address: both refused at
	 * the next walk's index */
	xi_put(&g->x, XT_TASK_VA + 7 * XT_SIZE + XT_STACK,
	       &(uint64_t){ XT_STACK_VA + 8 * 16384 + 8 }, 8);
	xi_put(&g->x, XT_TASK_VA + 8 * XT_SIZE + XT_STACK, &(uint64_t){ 0x7fff0000c000 }, 8);
	assert_int_equal(introspect_poll(in, 10500000, NULL, TOOL(capture, c)), 0);
	assert_int_equal(introspect_task_by_sp(in, XT_STACK_VA + 8 * 16384 + 16, &tgid, &kth),
			 -ENOENT);
	assert_int_equal(introspect_get_stats(in)->stacks, XT_MAX - 1);
	assert_int_equal(introspect_get_stats(in)->stacks_bad, 2);
	xi_put(&g->x, XT_TASK_VA + 7 * XT_SIZE + XT_STACK,
	       &(uint64_t){ XT_STACK_VA + 8 * 16384 }, 8);
	xi_put(&g->x, XT_TASK_VA + 8 * XT_SIZE + XT_STACK,
	       &(uint64_t){ XT_STACK_VA + 9 * 16384 }, 8);
}

static void test_processes(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));
	const struct introspect_stats *st;
	struct introspect *in;
	struct guest g;
	uint64_t next, pgd = XT_PGD_VA + 200 * 4096;

	tguest_new(&g, XT_MAX);
	in = introspect_new(g.m, NULL);
	assert_non_null(in);
	st = run(in, c, 3);
	assert_int_equal(st->state, INTROSPECT_READY);
	assert_true(st->btf_bytes > 0);
	/* no `modules` in its kallsyms: modules not read, and said why */
	assert_null(st->modules);
	assert_non_null(strstr(st->modules_error, "CONFIG_KALLSYMS_ALL"));
	assert_int_equal(introspect_poll(in, 10000000, NULL, TOOL(capture, c)), 0);
	assert_int_equal(st->procs_live, 1);
	assert_int_equal(st->tasks, XT_MAX);
	assert_int_equal(c->procs, XT_MAX);
	assert_int_equal(c->p105.ppid, 100);
	assert_int_equal(c->p105.cr3, pgd_pa(5));
	assert_string_equal(c->p105.comm, "proc5");
	stacks_check(in, &g, c);
	/* an unchanged list sends nothing */
	introspect_poll(in, 11000000, NULL, TOOL(capture, c));
	assert_int_equal(c->procs + c->execs + c->exits, XT_MAX);
	/* task 50 exits, task 60 execs (new address space, new name) */
	next = XT_TASK_VA + 51 * XT_SIZE + XT_TASKS;
	xi_put(&g.x, XT_TASK_VA + 49 * XT_SIZE + XT_TASKS, &next, 8);
	xi_put(&g.x, XT_MM_VA + 60 * 0x100 + XM_PGD, &pgd, 8);
	xi_put(&g.x, XT_TASK_VA + 60 * XT_SIZE + XT_COMM, "newprog", 8);
	introspect_poll(in, 12000000, NULL, TOOL(capture, c));
	assert_int_equal(c->exits, 1);
	assert_int_equal(c->last_exit, 150);
	assert_int_equal(c->execs, 1);
	assert_int_equal(c->last_exec.tgid, 160);
	assert_int_equal(c->last_exec.cr3, pgd_pa(200));
	assert_string_equal(c->last_exec.comm, "newprog");
	assert_int_equal(c->seq_ok, c->records + c->ends + c->procs + c->execs + c->exits +
				    c->cookies + c->maps + c->munmaps);
	/* opvm.ko speaks: introspection sends nothing more */
	xi_put(&g.x, XT_TASK_VA + 49 * XT_SIZE + XT_TASKS,
	       &(uint64_t){ XT_TASK_VA + 50 * XT_SIZE + XT_TASKS }, 8);
	introspect_poll(in, 13000000, NEWS(.module_active = true), TOOL(capture, c));
	assert_int_equal(c->procs, XT_MAX);
	introspect_free(in);
	guest_free(&g);
	free(c);
}

/* What the tool is told besides records: the search's progress at every
 * poll, and each walk's processes (also once opvm.ko speaks, when no
 * record goes), so that a consumer never reads the statistics. */
struct told {
	struct capture *c;
	unsigned progress, walked;
	struct introspect_progress last;
	uint64_t walks;
	size_t nr_tasks;
	struct introspect_task t5;	/* tgid 105's, as told */
	unsigned current;		/* introspect_tool.current calls */
	bool known;
	uint32_t nr;
};

static void told_current(void *arg, const struct kcurrent_info *ci, bool known)
{
	struct told *t = arg;

	t->current++;
	t->known = known;
	t->nr = ci->nr;
}

static void told_record(void *arg, const void *rec, size_t len)
{
	capture(((struct told *)arg)->c, rec, len);
}

static void told_walked(void *arg, const struct introspect_walk *w)
{
	struct told *t = arg;

	t->walked++;
	t->walks = w->walks;
	t->nr_tasks = w->nr_tasks;
	for (size_t i = 0; i < w->nr_tasks; i++) {
		if (i)
			assert_true(w->tasks[i - 1].tgid < w->tasks[i].tgid);
		if (w->tasks[i].tgid == 105)
			t->t5 = w->tasks[i];
	}
}

static void told_progress(void *arg, const struct introspect_progress *p)
{
	struct told *t = arg;

	t->progress++;
	t->last = *p;
	t->last.release = NULL;		/* valid during the call only */
	assert_non_null(p->release);
}

static void test_tool(void **state)
{
	struct told t = { .c = calloc(1, sizeof(*t.c)) };
	const struct introspect_tool tool = { .arg = &t, .record = told_record,
					      .walked = told_walked, .progress = told_progress,
					      .current = told_current };
	const struct introspect_config cfg = { .nr_cpus = 2 };
	struct introspect *in;
	struct guest g;
	unsigned polls = 0;

	tguest_new(&g, XT_MAX);
	in = introspect_new(g.m, &cfg);
	assert_non_null(in);
	assert_int_equal(introspect_poll(in, 1, NULL, &(const struct introspect_tool){ 0 }), -EINVAL);
	do {
		assert_int_equal(introspect_poll(in, 1000000u * ++polls, NULL, &tool), 0);
		assert_int_equal(t.progress, polls);
		if (t.last.state == INTROSPECT_SEARCHING)
			assert_true(t.last.procs_expected);
	} while (t.last.state == INTROSPECT_SEARCHING && polls < 3);
	assert_int_equal(t.last.state, INTROSPECT_READY);
	assert_true(t.last.ksyms_sent);
	while (!t.last.procs_live && polls < 6)
		introspect_poll(in, 1000000u * ++polls, NULL, &tool);
	assert_true(t.last.procs_live);
	assert_false(t.last.procs_expected);
	assert_int_equal(t.walked, t.last.walks);
	assert_int_equal(t.walks, introspect_get_stats(in)->walks);
	assert_int_equal(t.nr_tasks, XT_MAX);
	assert_int_equal(t.t5.cr3, pgd_pa(5));
	assert_string_equal(t.t5.comm, "proc5");
	assert_int_equal(t.c->procs, XT_MAX);
	/* the current-task pointers: told once found, then only on change */
	assert_int_equal(t.current, 1);
	assert_true(t.known);
	assert_int_equal(t.nr, 2);
	/* opvm.ko speaks: no more process records, the walks still told */
	introspect_poll(in, 1000000u * ++polls, NEWS(.module_active = true), &tool);
	assert_int_equal(t.walked, t.last.walks);
	assert_int_equal(t.nr_tasks, XT_MAX);
	assert_int_equal(t.c->procs, XT_MAX);
	assert_int_equal(t.current, 1);
	/* a new consumer: told again; a per-CPU base lost: told so */
	introspect_current_again(in);
	introspect_poll(in, 1000000u * ++polls, NULL, &tool);
	assert_int_equal(t.current, 2);
	xi_put(&g.x, XT_PCPU_OFF_VA + 8, &(uint64_t){ 0x10000 }, 8);
	introspect_poll(in, 1000000u * ++polls, NULL, &tool);
	assert_int_equal(t.current, 3);		/* CPU 1's is gone */
	assert_true(t.known);
	xi_put(&g.x, XT_PCPU_OFF_VA, &(uint64_t){ 0 }, 8);
	introspect_poll(in, 1000000u * ++polls, NULL, &tool);
	assert_int_equal(t.current, 4);
	assert_false(t.known);
	assert_int_equal(t.nr, 0);
	introspect_free(in);
	guest_free(&g);
	free(t.c);
}

/* A reboot (the VMCOREINFO page changes): every process announced goes,
 * the search starts over and finds the kernel again. */
static void test_reboot(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));
	const struct introspect_stats *st;
	struct introspect *in;
	struct guest g;
	char saved[4096];

	tguest_new(&g, 20);
	in = introspect_new(g.m, NULL);
	st = run(in, c, 3);
	assert_int_equal(c->procs, 20);
	memcpy(saved, g.x.ram + VMCI_PA, sizeof(saved));
	g.x.ram[VMCI_PA + 12] ^= 1;
	introspect_poll(in, 20000000, NULL, TOOL(capture, c));
	assert_int_equal(st->state, INTROSPECT_SEARCHING);
	assert_int_equal(st->reboots, 1);
	assert_int_equal(c->exits, 20);
	memcpy(g.x.ram + VMCI_PA, saved, sizeof(saved));
	introspect_poll(in, 21000000, NULL, TOOL(capture, c));
	assert_int_equal(st->state, INTROSPECT_READY);
	assert_int_equal(c->procs, 40);
	assert_int_equal(c->ends, 2);
	assert_int_equal(st->ksyms_sent, 6);
	introspect_free(in);
	guest_free(&g);
	free(c);
}

static int tread(void *arg, uint64_t va, void *buf, size_t len)
{
	return guestmem_read_virt(arg, XI_PGD_PA, va, buf, len) ? -EFAULT : 0;
}

static int tv2p(void *arg, uint64_t va, uint64_t *pa)
{
	return guestmem_virt_to_phys(arg, XI_PGD_PA, va, pa);
}

/* A list that lies: a cycle that misses the head, a pointer outside RAM,
 * one into user space, a pgd that translates to nothing. */
static void test_lying_tasks(void **state)
{
	struct ktask *out = calloc(1000, sizeof(*out));
	struct kbtf_offsets o;
	struct ktasks_stats st = { 0 };
	struct ktasks_mem km;
	struct guest g;
	uint32_t len;
	void *btf = xt_btf(&len);
	uint64_t v;
	size_t n;
	char err[160];

	assert_int_equal(kbtf_offsets(btf, len, &o, err, sizeof(err)), 0);
	assert_int_equal(o.task_tasks, XT_TASKS);
	assert_int_equal(o.task_comm, XT_COMM);
	assert_int_equal(o.mm_pgd, XM_PGD);
	assert_int_equal(kbtf_offsets(btf, 16, &o, err, sizeof(err)), -EINVAL);
	free(btf);
	tguest_new(&g, XT_MAX);
	km = (struct ktasks_mem){ .read = { tread, g.m }, .v2p = tv2p, .arg = g.m };
	assert_int_equal(kbtf_offsets(g.x.ram + XT_BTF_VA - XI_KERNEL_VA + XI_KERNEL_PA, len,
				      &o, err, sizeof(err)), 0);
	/* the cycle: task 119 back to task 5; the cap ends it */
	v = XT_TASK_VA + 5 * XT_SIZE + XT_TASKS;
	xi_put(&g.x, XT_TASK_VA + 119 * XT_SIZE + XT_TASKS, &v, 8);
	assert_int_equal(ktasks_walk(&km, &o, XT_INIT_VA, out, 1000, &n, &st), 0);
	assert_int_equal(st.cut, 1);
	assert_int_equal(n, XT_MAX);
	assert_true(st.dups < 2 * XT_MAX);	/* found early, not at the cap */
	/* a pointer outside guest RAM */
	v = 0xffffffffdead0000ull;
	xi_put(&g.x, XT_TASK_VA + 30 * XT_SIZE + XT_TASKS, &v, 8);
	assert_int_equal(ktasks_walk(&km, &o, XT_INIT_VA, out, 1000, &n, &st), 0);
	assert_int_equal(st.bad_ptr, 1);
	assert_int_equal(n, 31);
	/* one into user space */
	v = 0x1000;
	xi_put(&g.x, XT_TASK_VA + 10 * XT_SIZE + XT_TASKS, &v, 8);
	assert_int_equal(ktasks_walk(&km, &o, XT_INIT_VA, out, 1000, &n, &st), 0);
	assert_int_equal(st.bad_ptr, 2);
	assert_int_equal(n, 11);
	/* an mm whose pgd maps nothing: the process stays, without a CR3 */
	v = 0xffffffff9f000000ull;
	xi_put(&g.x, XT_MM_VA + 3 * 0x100 + XM_PGD, &v, 8);
	assert_int_equal(ktasks_walk(&km, &o, XT_INIT_VA, out, 1000, &n, &st), 0);
	assert_int_equal(st.no_pgd, 1);
	assert_int_equal(out[3].tgid, 103);
	assert_int_equal(out[3].cr3, 0);
	/* init_task unreadable */
	assert_int_equal(ktasks_walk(&km, &o, 0xffffffff9f000000ull, out, 1000, &n, &st), -EFAULT);
	guest_free(&g);
	free(out);
}

/* ---- cgroups: kernfs nodes kn(i), their cgroups and css_sets ---------- */

#define XKN(i)		(XCG_VA + 0x1000 + (uint64_t)(i) * 0x80)
#define XKN_STR(i)	(XCG_VA + 0x8000 + (uint64_t)(i) * 0x200)
#define XCGRP(i)	(XCG_VA + 0x4000 + (uint64_t)(i) * 0x100)
#define XCSET(i)	(XCG_VA + 0x6000 + (uint64_t)(i) * 0x40)

/* Node i named name (NULL: the root's ""), under parent (-1: none),
 * with its cgroup and a css_set pointing there. */
static void xcg_node(struct guest *g, unsigned i, int parent, const char *name)
{
	uint64_t p = parent < 0 ? 0 : XKN(parent), np = XKN_STR(i);
	uint64_t kn = XKN(i), cg = XCGRP(i);

	xi_put(&g->x, np, name ? name : "", name ? strlen(name) + 1 : 1);
	xi_put(&g->x, kn + XKN_PARENT, &p, 8);
	xi_put(&g->x, kn + XKN_NAME, &np, 8);
	xi_put(&g->x, cg + XCG_KN, &kn, 8);
	xi_put(&g->x, XCSET(i) + XCS_DFL, &cg, 8);
}

static void xcg_task(struct guest *g, unsigned task, unsigned node)
{
	xi_put(&g->x, XT_TASK_VA + task * XT_SIZE + XT_CGROUPS, &(uint64_t){ XCSET(node) }, 8);
}

static int cg_path(const struct ktasks_mem *km, const struct kbtf_offsets *o, unsigned i,
		   char *out, size_t cap, int *cut, struct ktasks_stats *st)
{
	return ktasks_cgroup_path(km, o, XKN(i), out, cap, cut, st);
}

/* A tree of cgroups read from guest memory, then one that lies: a loop,
 * a chain too deep, names too long or with a '/', pointers that lead
 * nowhere.  Each costs a counter and that path, never the walk. */
static void test_cgroups(void **state)
{
	struct ktask *out = calloc(100, sizeof(*out));
	struct ktasks_stats st = { 0 };
	struct ktasks_mem km;
	struct kbtf_offsets o;
	struct guest g;
	char err[160], path[2048], big[400];
	uint32_t len;
	size_t n;
	int cut;

	xt_cgroups = 1;
	tguest_new(&g, 20);
	free(xt_btf(&len));
	xt_cgroups = 0;
	km = (struct ktasks_mem){ .read = { tread, g.m }, .v2p = tv2p, .arg = g.m };
	assert_int_equal(kbtf_offsets(g.x.ram + XT_BTF_VA - XI_KERNEL_VA + XI_KERNEL_PA, len,
				      &o, err, sizeof(err)), 0);
	assert_true(o.has_cgroup);
	assert_int_equal(o.task_cgroups, XT_CGROUPS);
	xcg_node(&g, 0, -1, NULL);
	xcg_node(&g, 1, 0, "opvm-a");
	xcg_node(&g, 2, 0, "kubepods.slice");
	xcg_node(&g, 3, 2, "kubepods-pod1.slice");
	xcg_node(&g, 4, 3, "cri-containerd-1.scope");
	for (unsigned i = 0; i < 20; i++)
		xcg_task(&g, i, i % 3 ? i % 3 == 1 ? 1 : 4 : 0);
	assert_int_equal(ktasks_walk(&km, &o, XT_INIT_VA, out, 100, &n, &st), 0);
	assert_int_equal(n, 20);
	assert_int_equal(out[7].cgroup_kn, XKN(1));
	assert_int_equal(out[8].cgroup_kn, XKN(4));
	assert_int_equal(out[9].cgroup_kn, XKN(0));
	assert_int_equal(cg_path(&km, &o, 0, path, sizeof(path), &cut, &st), 1);
	assert_string_equal(path, "/");
	assert_int_equal(cg_path(&km, &o, 4, path, sizeof(path), &cut, &st), 58);
	assert_string_equal(path, "/kubepods.slice/kubepods-pod1.slice/cri-containerd-1.scope");
	assert_int_equal(cut, 0);
	/* cut at the byte cap, said so */
	assert_int_equal(cg_path(&km, &o, 4, path, 20, &cut, &st), 19);
	assert_string_equal(path, "/kubepods.slice/kub");
	assert_int_equal(cut, 1);
	assert_int_equal(st.cgroup_cut, 1);
	assert_int_equal(st.cgroup_bad, 0);
	/* a loop (5 <-> 6), a chain deeper than the cap (10 .. 80) */
	xcg_node(&g, 5, 6, "a");
	xcg_node(&g, 6, 5, "b");
	assert_int_equal(cg_path(&km, &o, 5, path, sizeof(path), &cut, &st), -ELOOP);
	xcg_node(&g, 10, 0, "d");
	for (unsigned i = 11; i <= 10 + KTASKS_CGROUP_DEPTH; i++)
		xcg_node(&g, i, (int)i - 1, "d");
	assert_int_equal(cg_path(&km, &o, 10 + KTASKS_CGROUP_DEPTH, path, sizeof(path), &cut,
				 &st), -ELOOP);
	assert_int_equal(cg_path(&km, &o, 9 + KTASKS_CGROUP_DEPTH, path, sizeof(path), &cut,
				 &st), 2 * KTASKS_CGROUP_DEPTH);
	assert_int_equal(st.cgroup_bad, 2);
	/* a name past NAME_MAX, unterminated: its first 255 bytes; a '/' in one */
	memset(big, 'x', sizeof(big));
	xi_put(&g.x, XKN_STR(7), big, sizeof(big));
	xi_put(&g.x, XKN(7) + XKN_PARENT, &(uint64_t){ XKN(0) }, 8);
	xi_put(&g.x, XKN(7) + XKN_NAME, &(uint64_t){ XKN_STR(7) }, 8);
	assert_int_equal(cg_path(&km, &o, 7, path, sizeof(path), &cut, &st), 256);
	xcg_node(&g, 8, 1, "../x");
	assert_int_equal(cg_path(&km, &o, 8, path, sizeof(path), &cut, &st), 12);
	assert_string_equal(path, "/opvm-a/..?x");
	/* pointers to nowhere: a name in user space, a parent outside RAM */
	xi_put(&g.x, XKN(8) + XKN_NAME, &(uint64_t){ 0x1000 }, 8);
	assert_int_equal(cg_path(&km, &o, 8, path, sizeof(path), &cut, &st), -EFAULT);
	xi_put(&g.x, XKN(8) + XKN_PARENT, &(uint64_t){ 0xffffffffdead0000ull }, 8);
	assert_int_equal(cg_path(&km, &o, 8, path, sizeof(path), &cut, &st), -EFAULT);
	assert_int_equal(st.cgroup_bad, 4);
	/* a task whose css_set lies keeps its place in the walk, no cgroup */
	xi_put(&g.x, XT_TASK_VA + 4 * XT_SIZE + XT_CGROUPS, &(uint64_t){ 0x1000 }, 8);
	xi_put(&g.x, XCSET(4) + XCS_DFL, &(uint64_t){ 0xffffffffdead0000ull }, 8);
	assert_int_equal(ktasks_walk(&km, &o, XT_INIT_VA, out, 100, &n, &st), 0);
	assert_int_equal(n, 20);
	assert_int_equal(out[4].cgroup_kn, 0);
	assert_int_equal(out[8].cgroup_kn, 0);
	assert_int_equal(out[7].cgroup_kn, XKN(1));
	assert_int_equal(st.cgroup_bad, 4 + 1 + 6);	/* task 4, node 4's six */
	guest_free(&g);
	free(out);
}

/* Through introspection: a CGROUP after each new process, and again when
 * one moves; none for an unchanged walk. */
static void test_cgroup_records(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));
	struct introspect *in;
	struct guest g;

	xt_cgroups = 1;
	tguest_new(&g, 20);
	xt_cgroups = 0;
	xcg_node(&g, 0, -1, NULL);
	xcg_node(&g, 1, 0, "opvm-a");
	xcg_node(&g, 2, 0, "opvm-b");
	for (unsigned i = 0; i < 20; i++)
		xcg_task(&g, i, i == 5 ? 1 : 0);
	in = introspect_new(g.m, NULL);
	assert_non_null(in);
	run(in, c, 3);
	assert_int_equal(introspect_poll(in, 10000000, NULL, TOOL(capture, c)), 0);
	assert_int_equal(c->procs, 20);
	assert_int_equal(c->cgroups, 20);
	introspect_poll(in, 11000000, NULL, TOOL(capture, c));
	assert_int_equal(c->cgroups, 20);
	xcg_task(&g, 5, 2);	/* echo 105 > /opvm-b/cgroup.procs */
	introspect_poll(in, 12000000, NULL, TOOL(capture, c));
	assert_int_equal(c->cgroups, 21);
	assert_int_equal(c->cgroup_tgid, 105);
	assert_string_equal(c->cgroup_path, "/opvm-b");
	assert_int_equal(introspect_get_stats(in)->cgroups_sent, 21);
	introspect_free(in);
	guest_free(&g);
	free(c);
}

/* Each CPU's current task, through __per_cpu_offset[] and current_task:
 * the idle task, a process, a thread of it; then pointers that lie. */
static void test_current_task(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));
	const struct introspect_stats *st;
	struct ktask_cur cur;
	struct introspect *in;
	struct guest g;
	uint32_t tid = 999;
	uint64_t v;

	tguest_new(&g, XT_MAX);
	in = introspect_new(g.m, NULL);
	assert_non_null(in);
	assert_int_equal(introspect_current(in, 0, &cur), -ENOENT);	/* not found yet */
	st = run(in, c, 3);
	assert_int_equal(st->state, INTROSPECT_READY);
	assert_int_equal(introspect_current(in, 0, &cur), 0);
	assert_int_equal(cur.task, XT_INIT_VA);
	assert_int_equal(cur.tid, 0);
	assert_int_equal(cur.cr3, 0);
	assert_string_equal(cur.comm, "swapper/0");
	assert_int_equal(introspect_current(in, 1, &cur), 0);
	assert_int_equal(cur.tgid, 103);
	assert_int_equal(cur.tid, 103);
	assert_int_equal(cur.cr3, pgd_pa(3));
	assert_string_equal(cur.comm, "proc3");
	/* a thread of process 103 (not on the process list) */
	v = XT_TASK_VA + (XT_MAX + 1) * XT_SIZE;
	xi_put(&g.x, v + XT_PID, &tid, 4);
	xi_put(&g.x, v + XT_TGID, &(uint32_t){ 103 }, 4);
	xi_put(&g.x, v + XT_MM, &(uint64_t){ XT_MM_VA + 3 * 0x100 }, 8);
	xt_current(&g.x, 1, v);
	assert_int_equal(introspect_current(in, 1, &cur), 0);
	assert_int_equal(cur.tid, 999);
	assert_int_equal(cur.tgid, 103);
	assert_int_equal(cur.cr3, pgd_pa(3));
	/* lies: a current task in user space, outside RAM; a per-CPU base
	 * in user space or 0; a CPU beyond the cap: refused, counted */
	xt_current(&g.x, 1, 0x1000);
	assert_int_equal(introspect_current(in, 1, &cur), -EINVAL);
	xt_current(&g.x, 1, 0xffffffffdead0000ull);
	assert_int_equal(introspect_current(in, 1, &cur), -EFAULT);
	xi_put(&g.x, XT_PCPU_OFF_VA + 8, &(uint64_t){ 0x10000 }, 8);
	assert_int_equal(introspect_current(in, 1, &cur), -EINVAL);
	assert_int_equal(introspect_current(in, KTASKS_MAX_CPUS, &cur), -EINVAL);
	assert_int_equal(introspect_current(in, 5, &cur), -EINVAL);	/* base 0 */
	assert_int_equal(st->current_bad, 5);
	assert_int_equal(st->current_reads, 8);
	introspect_free(in);
	guest_free(&g);
	free(c);
}

/* ---- mappings --------------------------------------------------------------- */

/* Every user process's two executable file mappings, with paths across a
 * mount and build-ids read through its own page tables; nothing again
 * while nothing changes; a change sends MUNMAP and MMAP; an exec resends. */
static void test_mappings(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));
	const struct introspect_stats *st;
	struct introspect *in;
	struct guest g;
	uint8_t bid[20];
	uint32_t seven = 7;
	uint64_t users = XT_MAX - XT_MAX / 10, pgd = XT_PGD_VA + 119 * 4096;

	tguest_new_ram(&g, XT_MAX, XV_RAM);
	xv_maps(&g.x, XT_MAX);
	in = introspect_new(g.m, NULL);
	assert_non_null(in);
	st = run(in, c, 3);
	assert_int_equal(st->state, INTROSPECT_READY);
	assert_non_null(st->maps);
	assert_int_equal(c->cookies, 2);
	assert_string_equal(c->cookie_path[0], "/usr/bin/prog");
	assert_string_equal(c->cookie_path[1], "/lib/libc.so.6");
	memset(bid, XV_BID_PROG, sizeof(bid));
	assert_int_equal(c->cookie_bid_len[0], 20);
	assert_memory_equal(c->cookie_bid[0], bid, 20);
	memset(bid, XV_BID_LIBC, sizeof(bid));
	assert_memory_equal(c->cookie_bid[1], bid, 20);
	assert_true(c->cookie_id[0] >= KVMAS_COOKIE_BASE);
	assert_int_equal(c->maps, 2 * users);
	assert_int_equal(c->map105[0].start, 0x401000);
	assert_int_equal(c->map105[0].end, 0x500000);
	assert_int_equal(c->map105[0].pgoff, 0x1000);
	assert_int_equal(c->map105[0].prot, 5);
	assert_int_equal(c->map105[0].cookie, c->cookie_id[0]);
	assert_int_equal(c->map105[1].start, 0x7f0000001000ull);
	assert_int_equal(c->map105[1].cookie, c->cookie_id[1]);
	assert_int_equal(st->maps->tree_bad + st->maps->tree_cut + st->maps->vma_bad +
			 st->maps->path_bad + st->maps->buildid_missing, 0);
	/* nothing changed: nothing read, nothing sent */
	introspect_poll(in, 10000000, NULL, TOOL(capture, c));
	assert_int_equal(c->maps, 2 * users);
	assert_int_equal(st->maps->procs_unchanged, users);
	/* process 5's libc text grows (a new map count): MUNMAP + MMAP */
	xi_put64(&g.x, XV_VMA(5, 3) + XVMA_END, 0x7f0000101000ull);
	xi_put64(&g.x, XV_VMA(5, 4) + XVMA_START, 0x7f0000101000ull);
	xi_put64(&g.x, XV_NODE(5, 2) + 8 + 8, 0x7f0000100fffull);
	xi_put(&g.x, XT_MM_VA + 5 * 0x100 + XM_MAP_COUNT, &seven, 4);
	introspect_poll(in, 11000000, NULL, TOOL(capture, c));
	assert_int_equal(c->munmaps, 1);
	assert_int_equal(c->last_munmap.tgid, 105);
	assert_int_equal(c->last_munmap.end, 0x7f0000100000ull);
	assert_int_equal(c->maps, 2 * users + 1);
	assert_int_equal(c->last_map.end, 0x7f0000101000ull);
	/* process 60 execs (another address space): its maps are sent again */
	xi_put64(&g.x, XT_MM_VA + 60 * 0x100 + XM_PGD, pgd);
	introspect_poll(in, 12000000, NULL, TOOL(capture, c));
	assert_int_equal(c->execs, 1);
	assert_int_equal(c->maps, 2 * users + 3);
	assert_int_equal(c->cookies, 2);
	assert_int_equal(c->seq_ok, c->records + c->ends + c->procs + c->execs + c->exits +
				    c->cookies + c->maps + c->munmaps);
	introspect_free(in);
	guest_free(&g);
	free(c);
}

/* A file whose ELF header did not read at the first walk (its page not
 * yet resident: a process just exec'd): its COOKIE goes out without a
 * build-id, the walk is repeated, and once the header reads the COOKIE
 * goes out again under the same id with it; a header that never reads is
 * tried KVMAS_BID_TRIES walks, then left. */
static void test_mappings_late_build_id(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));
	const struct introspect_stats *st;
	struct introspect *in;
	struct guest g;
	uint8_t bid[20];
	uint64_t t = 20000000;

	tguest_new_ram(&g, XT_MAX, XV_RAM);
	xv_maps(&g.x, XT_MAX);
	g.x.ram[XV_PROG_PA] = 0;		/* prog's header: not an ELF yet */
	in = introspect_new(g.m, NULL);
	assert_non_null(in);
	st = run(in, c, 3);
	assert_int_equal(st->state, INTROSPECT_READY);
	assert_int_equal(c->cookies, 2);
	assert_string_equal(c->cookie_path[0], "/usr/bin/prog");
	assert_int_equal(c->cookie_bid_len[0], 0);
	assert_int_equal(st->maps->buildid_missing, 1);
	/* not read: the walk is repeated (the processes that map it) */
	introspect_poll(in, t += 1000000, NULL, TOOL(capture, c));
	assert_int_equal(c->cookies, 2);
	assert_true(st->maps->procs_read > 0);
	/* the page is resident now: the same id, with its build-id */
	xv_elf(&g.x, XV_PROG_PA, XV_BID_PROG);
	introspect_poll(in, t += 1000000, NULL, TOOL(capture, c));
	assert_int_equal(c->cookies, 3);
	assert_string_equal(c->cookie_path[1], "/usr/bin/prog");
	assert_int_equal(c->cookie_id[1], c->cookie_id[0]);
	memset(bid, XV_BID_PROG, sizeof(bid));
	assert_int_equal(c->cookie_bid_len[1], 20);
	assert_memory_equal(c->cookie_bid[1], bid, 20);
	assert_int_equal(st->maps->buildid_late, 1);
	/* then nothing more: every process unchanged */
	introspect_poll(in, t += 1000000, NULL, TOOL(capture, c));
	assert_int_equal(c->cookies, 3);
	introspect_free(in);
	guest_free(&g);

	/* a header that never reads: KVMAS_BID_TRIES walks, then left */
	memset(c, 0, sizeof(*c));
	tguest_new_ram(&g, XT_MAX, XV_RAM);
	xv_maps(&g.x, XT_MAX);
	g.x.ram[XV_PROG_PA] = 0;
	in = introspect_new(g.m, NULL);
	assert_non_null(in);
	st = run(in, c, 3);
	for (unsigned i = 0; i < KVMAS_BID_TRIES + 4; i++)
		introspect_poll(in, t += 1000000, NULL, TOOL(capture, c));
	assert_int_equal(c->cookies, 2);
	assert_int_equal(st->maps->buildid_late, 0);
	{
		uint64_t read = st->maps->procs_read;

		introspect_poll(in, t += 1000000, NULL, TOOL(capture, c));
		assert_int_equal(st->maps->procs_read, read);	/* given up */
	}
	introspect_free(in);
	guest_free(&g);
	free(c);
}

/* Trees and names that lie: a node that is its own child, pivots out of
 * order, a node outside RAM, a dense node, a VMA not where the tree says,
 * a dentry chain that loops.  Each is refused and counted; the other
 * processes keep their mappings; nothing grows past its cap. */
static void test_lying_maps(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));
	const struct introspect_stats *st;
	struct introspect *in;
	struct guest g;
	const uint64_t loop_piv[] = { UINT64_MAX };
	const uint64_t loop_slot[] = { XV_ENODE(XV_NODE(1, 0), 2) };
	uint64_t users = XT_MAX - XT_MAX / 10;

	tguest_new_ram(&g, XT_MAX, XV_RAM);
	xv_maps(&g.x, XT_MAX);
	/* 1: a range_64 node whose only child is itself */
	memset(g.x.ram + xi_pa(XV_NODE(1, 0)), 0, 256);
	xv_node(&g.x, XV_NODE(1, 0), 15, loop_piv, 1, loop_slot, 1);
	xi_put64(&g.x, XT_MM_VA + 1 * 0x100 + XM_MT + 8, XV_ENODE(XV_NODE(1, 0), 2) | 2);
	/* 2: leaf A's pivots out of order */
	xi_put64(&g.x, XV_NODE(2, 1) + 8 + 16, 0x300000);
	/* 3: leaf B outside RAM; 4: leaf B a dense node */
	xi_put64(&g.x, XV_NODE(3, 0) + 80 + 8, XV_ENODE(0xffffffffdead0000ull, 1));
	xi_put64(&g.x, XV_NODE(4, 0) + 80 + 8, XV_ENODE(XV_NODE(4, 2), 0));
	/* 6: its prog text VMA claims another start */
	xi_put64(&g.x, XV_VMA(6, 1) + XVMA_START, 0x402000);
	/* 7: its libc text is another file, whose dentry chain loops */
	xi_put64(&g.x, XV_FILE(0) + 0x100 * 2 + XF_PATH, XV_MOUNT(0) + XMNT_MNT);
	xi_put64(&g.x, XV_FILE(0) + 0x100 * 2 + XF_PATH + 8, XV_DENTRY(7));
	xv_dentry(&g.x, 7, 8, "a");
	xv_dentry(&g.x, 8, 7, "b");
	xi_put64(&g.x, XV_VMA(7, 3) + XVMA_FILE, XV_FILE(2));
	/* 8: a root that is not a node */
	xi_put64(&g.x, XT_MM_VA + 8 * 0x100 + XM_MT + 8, XV_VMA(8, 0));
	in = introspect_new(g.m, NULL);
	st = run(in, c, 3);
	assert_int_equal(st->state, INTROSPECT_READY);
	assert_non_null(st->maps);
	assert_int_equal(st->tasks, XT_MAX);
	assert_int_equal(st->maps->tree_cut, 1);	/* 1: the depth cap */
	assert_true(st->maps->nodes < 2 * users * 3 + KVMAS_DEPTH_MAX + 1);
	assert_int_equal(st->maps->tree_bad, 4);	/* 2, 3, 4, 8 */
	assert_int_equal(st->maps->vma_bad, 1);		/* 6 */
	assert_int_equal(st->maps->path_bad, 1);	/* 7 */
	/* the rest: both maps; 1, 2 (its walk stops at the bad pivot) and 8
	 * none, 3 and 4 prog's (leaf A), 6 libc's, 7 prog's */
	assert_int_equal(c->maps, 2 * (users - 7) + 4);
	assert_int_equal(c->cookies, 2);
	/* the guest keeps lying: the same work again only when its mm moves */
	introspect_poll(in, 10000000, NULL, TOOL(capture, c));
	assert_int_equal(st->maps->tree_bad, 4);
	introspect_free(in);
	guest_free(&g);
	free(c);
}

/* Before 6.1: the same mappings from the list of vm_next (mm->mmap), and
 * lists that lie: one that loops back to its head, one that goes back
 * down, one that leaves RAM, one VMA that links to itself. */
static void test_vma_list(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));
	const struct introspect_stats *st;
	struct introspect *in;
	struct guest g;
	uint64_t users = XT_MAX - XT_MAX / 10;

	xt_vma_list = 1;
	tguest_new_ram(&g, XT_MAX, XV_RAM);
	xv_maps(&g.x, XT_MAX);
	/* 1: its last VMA links back to its first (a cycle) */
	xi_put64(&g.x, XV_VMA(1, 5) + XVMA_NEXT, XV_VMA(1, 0));
	/* 2: its libc text links back to its prog text */
	xi_put64(&g.x, XV_VMA(2, 3) + XVMA_NEXT, XV_VMA(2, 1));
	/* 3: the prog text links outside RAM */
	xi_put64(&g.x, XV_VMA(3, 1) + XVMA_NEXT, 0xffffffffdead0000ull);
	/* 4: a VMA that links to itself */
	xi_put64(&g.x, XV_VMA(4, 2) + XVMA_NEXT, XV_VMA(4, 2));
	in = introspect_new(g.m, NULL);
	assert_non_null(in);
	st = run(in, c, 3);
	xt_vma_list = 0;
	assert_int_equal(st->state, INTROSPECT_READY);
	assert_non_null(st->maps);
	assert_string_equal(st->maps->walk, "vma_list");
	assert_int_equal(c->cookies, 2);
	assert_string_equal(c->cookie_path[0], "/usr/bin/prog");
	assert_string_equal(c->cookie_path[1], "/lib/libc.so.6");
	assert_int_equal(c->map105[0].start, 0x401000);
	assert_int_equal(c->map105[0].pgoff, 0x1000);
	assert_int_equal(c->map105[1].start, 0x7f0000001000ull);
	assert_int_equal(st->maps->tree_bad, 4);	/* 1, 2, 3, 4 */
	assert_int_equal(st->maps->nodes, 0);
	/* each lying list stopped within its own six VMAs and a step */
	assert_true(st->maps->vmas <= 6 * users + 4);
	/* 1 and 2 keep both maps (the walk stops after them), 3 and 4 prog's */
	assert_int_equal(c->maps, 2 * users - 2);
	assert_int_equal(st->maps->vma_bad + st->maps->path_bad + st->maps->buildid_missing, 0);
	introspect_free(in);
	guest_free(&g);
	free(c);
}

/* What a sampler gets (introspect_current_info) and the cache it names
 * a pointer with (kcurrent): the pointer's physical address per CPU, a
 * task read once and then from the cache until it ages, pointers that lie
 * refused and counted. */
/* ---- modules ----------------------------------------------------------------- */

/* A guest with processes and n modules (introspect-image.h's xk_*), and
 * the symbols extra[0..nx) (nx <= 2) besides. */
static void kguest_new_syms(struct guest *g, unsigned n, const struct xi_sym *extra, size_t nx)
{
	struct xi_sym s[NSYMS + XT_NSYMS + 3];
	uint32_t len;
	void *btf = xt_btf(&len);

	assert_non_null(btf);
	assert_true(nx <= 2);
	free(btf);
	memset(long_name, 'x', sizeof(long_name) - 1);
	memcpy(s, syms, sizeof(syms));
	xt_syms(s + NSYMS, len);
	s[NSYMS + XT_NSYMS] = (struct xi_sym){ "modules", 'D', XK_HEAD_VA };
	if (nx)
		memcpy(s + NSYMS + XT_NSYMS + 1, extra, nx * sizeof(*extra));
	assert_int_equal(ximage_build(&g->x, XV_RAM, s, NSYMS + XT_NSYMS + 1 + nx, VMCI_PA), 0);
	assert_int_equal(xt_tasks(&g->x, 20), (int)len);
	xk_modules(&g->x, n);
	g->m = guestmem_open(getpid());
	assert_non_null(g->m);
	assert_int_equal(guestmem_add_range(g->m, 0, XV_RAM, (uint64_t)(uintptr_t)g->x.ram), 0);
}

static void kguest_new(struct guest *g, unsigned n)
{
	kguest_new_syms(g, n, NULL, 0);
}

/* Lines of text[from..len) that name a module. */
static unsigned mod_lines(const struct capture *c, size_t from)
{
	unsigned n = 0;

	for (const char *p = c->text + from; (p = strstr(p, "\t[mod")) && p < c->text + c->len; p++)
		n++;
	return n;
}

/* The modules of a 6.1 or a 6.4 guest (BTF says which): MODULE records,
 * their symbols as a transfer of the modules only; one unloaded (FREE,
 * the symbols again, not before MODSYMS_MIN_MS), one loaded; nothing once
 * opvm.ko speaks. */
static void modules_one(int mem)
{
	struct capture *c = calloc(1, sizeof(*c));
	const struct introspect_stats *st;
	struct introspect *in;
	struct guest g;
	size_t from;

	xk_mem = mem;
	kguest_new(&g, 3);
	in = introspect_new(g.m, NULL);
	st = run(in, c, 3);
	assert_int_equal(st->state, INTROSPECT_READY);
	assert_non_null(st->modules);
	assert_string_equal(st->modules_layout, mem ? "mem" : "core_layout");
	assert_int_equal(st->nr_modules, 3);
	assert_int_equal(c->mods, 3);
	assert_string_equal(c->last_mod.name, "mod2");
	assert_int_equal(c->last_mod.base, XK_TEXT(2));
	assert_int_equal(c->last_mod.size, XK_TEXT_SIZE);
	assert_int_equal(c->ends, 2);		/* vmlinux's, then the modules' */
	assert_int_equal(c->mod_ends, 1);
	assert_int_equal(c->end_nr, 9);
	assert_int_equal(mod_lines(c, 0), 9);
	assert_non_null(strstr(c->text, " T mod1_work\t[mod1]\n"));
	assert_non_null(strstr(c->text, " t mod2_end\t[mod2]\n"));
	assert_null(strstr(c->text, "mod0_data"));
	assert_int_equal(st->modules->syms, 9);
	assert_int_equal(st->modules->refused + st->modules->cut + st->modules->bad_ptr +
			 st->modules->syms_outside + st->modules->syms_bad, 0);
	/* unchanged: nothing */
	introspect_poll(in, 5000000, NULL, TOOL(capture, c));
	assert_int_equal(c->mods + c->mod_frees + c->mod_ends, 4);
	/* mod1 unloaded: FREE, and the symbols again */
	xi_put64(&g.x, XK_MOD(0) + 8, XK_MOD(2) + 8);
	from = c->len;
	introspect_poll(in, 5001000, NULL, TOOL(capture, c));
	assert_int_equal(c->mod_frees, 1);
	assert_string_equal(c->last_free.name, "mod1");
	assert_int_equal(c->mod_ends, 2);
	assert_int_equal(mod_lines(c, from), 6);
	assert_null(strstr(c->text + from, "mod1_"));
	assert_int_equal(st->modules_freed, 1);
	/* mod1 back: MODULE at once, its symbols not before MODSYMS_MIN_MS */
	xi_put64(&g.x, XK_MOD(0) + 8, XK_MOD(1) + 8);
	introspect_poll(in, 5002000, NULL, TOOL(capture, c));
	assert_int_equal(c->mods, 4);
	assert_int_equal(c->mod_ends, 2);
	from = c->len;
	introspect_poll(in, 5003500, NULL, TOOL(capture, c));
	assert_int_equal(c->mod_ends, 3);
	assert_int_equal(mod_lines(c, from), 9);
	/* mod1 gone again within 2 s: the session's end sends what is owed */
	xi_put64(&g.x, XK_MOD(0) + 8, XK_MOD(2) + 8);
	introspect_poll(in, 5004000, NULL, TOOL(capture, c));
	assert_int_equal(c->mod_ends, 3);
	from = c->len;
	introspect_poll(in, 5004100, NEWS(.final = true), TOOL(capture, c));
	assert_int_equal(c->mod_ends, 4);
	assert_int_equal(mod_lines(c, from), 6);
	introspect_poll(in, 5004200, NEWS(.final = true), TOOL(capture, c));	/* nothing more owed */
	assert_int_equal(c->mod_ends, 4);
	xi_put64(&g.x, XK_MOD(0) + 8, XK_MOD(1) + 8);
	introspect_poll(in, 5004500, NULL, TOOL(capture, c));
	/* a module named twice: the second dropped */
	xk_module(&g.x, 5, "mod0", 0);
	xi_put64(&g.x, XK_MOD(2) + 8, XK_MOD(5) + 8);
	introspect_poll(in, 5004800, NULL, TOOL(capture, c));
	assert_int_equal(st->module_dups, 1);
	assert_int_equal(st->nr_modules, 3);
	/* opvm.ko speaks: no more module records */
	xi_put64(&g.x, XK_MOD(2) + 8, XK_MOD(1) + 8);
	introspect_poll(in, 5005000, NEWS(.module_active = true), TOOL(capture, c));
	assert_int_equal(c->mods, 5);
	assert_int_equal(c->seq_ok, c->records + c->ends + c->procs + c->execs + c->exits +
				    c->cookies + c->maps + c->munmaps + c->mods + c->mod_frees);
	introspect_free(in);
	guest_free(&g);
	free(c);
	xk_mem = 0;
}

/* A module whose symbols do not read: announced, and no empty transfer. */
static void modules_nosyms(void)
{
	struct capture *c = calloc(1, sizeof(*c));
	const struct introspect_stats *st;
	struct introspect *in;
	struct guest g;

	kguest_new(&g, 1);
	xi_put64(&g.x, XK_MOD(0) + xk_kallsyms_off(), XK_VA + 0x1ff000 + 0x1000);
	in = introspect_new(g.m, NULL);
	st = run(in, c, 3);
	assert_int_equal(c->mods, 1);
	assert_int_equal(c->mod_ends, 0);
	assert_int_equal(st->modsyms_transfers, 0);
	assert_int_equal(st->modules->tables_bad, 1);
	introspect_free(in);
	guest_free(&g);
	free(c);
}

static void test_modules(void **state)
{
	modules_one(0);
	modules_one(1);
	modules_nosyms();
}

static int sym_count(void *arg, const struct kmod *m, uint64_t addr, char type,
		     const char *name, size_t len)
{
	assert_true(addr >= m->base && addr < m->base + m->size);
	assert_true(len >= 1 && len <= OPVM_KSYM_NAME_MAX);
	assert_non_null(strchr("tTwW", type));
	(void)name;
	(*(unsigned *)arg)++;
	return 0;
}

/* ---- when the lists are walked ----------------------------------------------- */

/* The probe's words: the kernel's fork and thread counts. */
#define XW_FORKS_VA	(XI_KERNEL_VA + 0x6fd000)
#define XW_THREADS_VA	(XI_KERNEL_VA + 0x6fd010)

/* A guest with 20 processes, two modules and the probe's words, total_forks
 * at forks_va (misaligned: it never reads). */
static void wguest_new(struct guest *g, uint64_t forks_va)
{
	const struct xi_sym probe[] = { { "total_forks", 'B', forks_va },
					{ "nr_threads", 'B', XW_THREADS_VA } };

	kguest_new_syms(g, 2, probe, ARRAY_SIZE(probe));
	xi_put64(&g->x, XW_FORKS_VA, 1000);
	xi_put(&g->x, XW_THREADS_VA, &(uint32_t){ 40 }, 4);
}

/* Polls at *t + dt (*t moves on); whether the lists were walked. */
static bool wpoll(struct introspect *in, struct capture *c, uint64_t *t, uint64_t dt)
{
	uint64_t walks = introspect_get_stats(in)->walks;

	*t += dt;
	assert_int_equal(introspect_poll(in, *t, NULL, TOOL(capture, c)), 0);
	return introspect_get_stats(in)->walks != walks;
}

/*
 * Without opvm.ko the lists are walked when something changed, not at
 * every poll: at each of the first 10 polls (the boot), then when the
 * kernel's fork or thread count or its newest module moved, when a sample
 * waits for a walk (an exec changes no count), at most every 500 ms and,
 * while such walks find nothing, less and less often down to every 4 s,
 * and every 10 s whatever.  A probe that does not read: every poll walks.
 */
static void test_walk_on_change(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));
	const struct introspect_stats *st;
	uint64_t t = 1000000, gap;
	struct introspect *in;
	struct guest g;

	(void)state;
	xk_mem = 0;
	wguest_new(&g, XW_FORKS_VA);
	in = introspect_new(g.m, NULL);
	st = run(in, c, 1);
	assert_int_equal(st->state, INTROSPECT_READY);
	assert_string_equal(st->probe, "total_forks,nr_threads,modules");
	while (st->walks_boot < 10)
		assert_true(wpoll(in, c, &t, 1000));
	assert_int_equal(c->procs, 20);
	assert_int_equal(c->mods, 2);
	/* nothing changed: no walk, the probe read (three words) */
	assert_false(wpoll(in, c, &t, 1000));
	assert_false(wpoll(in, c, &t, 1000));
	assert_int_equal(st->polls_quiet, 2);
	/* process 105 execs: no count moves, no walk, until one of its
	 * samples waits for it */
	xi_put64(&g.x, XT_MM_VA + 5 * 0x100 + XM_PGD, XT_PGD_VA + 200 * 4096);
	xi_put(&g.x, XT_TASK_VA + 5 * XT_SIZE + XT_COMM, "newprog", 8);
	assert_false(wpoll(in, c, &t, 1000));
	assert_int_equal(c->execs, 0);
	introspect_walk_wanted(in);
	assert_true(wpoll(in, c, &t, 1000));
	assert_int_equal(c->execs, 1);
	assert_int_equal(c->last_exec.tgid, 105);
	assert_int_equal(st->walks_wanted, 1);
	/* asked again at once: not before 500 ms; walks that find nothing
	 * come at 1, 2, then 4 s, no less often */
	for (gap = 500; gap <= 8000; gap *= 2) {
		introspect_walk_wanted(in);
		assert_false(wpoll(in, c, &t, 100));
		assert_false(wpoll(in, c, &t, (gap < 4000 ? gap : 4000) - 101));
		assert_true(wpoll(in, c, &t, 1));
	}
	assert_int_equal(st->walks_wanted, 6);
	/* one that finds something (106 execs): back to 500 ms */
	xi_put(&g.x, XT_TASK_VA + 6 * XT_SIZE + XT_COMM, "other", 6);
	introspect_walk_wanted(in);
	assert_true(wpoll(in, c, &t, 4000));
	assert_int_equal(c->execs, 2);
	introspect_walk_wanted(in);
	assert_true(wpoll(in, c, &t, 500));
	/* a fork: the next poll walks, however soon */
	xi_put64(&g.x, XW_FORKS_VA, 1001);
	assert_true(wpoll(in, c, &t, 10));
	assert_int_equal(st->walks_changed, 1);
	assert_false(wpoll(in, c, &t, 1000));
	/* an exit (110 leaves the list): the thread count drops */
	xi_put64(&g.x, XT_TASK_VA + 9 * XT_SIZE + XT_TASKS, XT_TASK_VA + 11 * XT_SIZE + XT_TASKS);
	assert_false(wpoll(in, c, &t, 1000));
	assert_int_equal(c->exits, 0);
	xi_put(&g.x, XW_THREADS_VA, &(uint32_t){ 39 }, 4);
	assert_true(wpoll(in, c, &t, 1000));
	assert_int_equal(c->exits, 1);
	assert_int_equal(c->last_exit, 110);
	/* a module loaded: it is the list's newest */
	xk_module(&g.x, 2, "mod2", XK_MOD(0));
	xi_put64(&g.x, XK_HEAD_VA, XK_MOD(2) + 8);
	assert_true(wpoll(in, c, &t, 1000));
	assert_int_equal(c->mods, 3);
	assert_string_equal(c->last_mod.name, "mod2");
	assert_int_equal(st->walks_changed, 3);
	/* nothing at all: the floor, 10 s after the last walk */
	for (int i = 0; i < 9; i++)
		assert_false(wpoll(in, c, &t, 1000));
	assert_false(wpoll(in, c, &t, 999));
	assert_true(wpoll(in, c, &t, 1));
	assert_int_equal(st->walks_floor, 1);
	assert_int_equal(st->walks_unprobed + st->probe_bad, 0);
	introspect_free(in);
	guest_free(&g);
	/* total_forks misaligned: the probe never reads, each poll walks */
	memset(c, 0, sizeof(*c));
	wguest_new(&g, XW_FORKS_VA + 4);
	in = introspect_new(g.m, NULL);
	st = run(in, c, 1);
	for (int i = 0; i < 12; i++)
		assert_true(wpoll(in, c, &t, 1000));
	assert_int_equal(st->walks_unprobed, 3);
	assert_int_equal(st->probe_bad, 3);
	introspect_free(in);
	guest_free(&g);
	free(c);
}

/* Symbol tables that lie: a huge count, a name offset far out, a name that
 * does not end, a text symbol outside the text, tables in user space. */
static void lying_syms(const struct unwind_mem *um, const struct kbtf_mod_offsets *o,
		       struct guest *g, struct kmod *out)
{
	struct kmods_stats st = { 0 };
	char x[200];
	unsigned n = 0;

	xi_put(&g->x, XK_KS(0) + 8, &(uint32_t){ UINT32_MAX }, 4);
	xi_put(&g->x, XK_SYMTAB(0) + 2 * 24, &(uint32_t){ 0x7fffffff }, 4);
	memset(x, 'x', sizeof(x));
	xi_put(&g->x, XK_STRTAB(0) + 1, x, sizeof(x));
	xi_put64(&g->x, XK_SYMTAB(0) + 4 * 24 + 8, XK_TEXT(0) + XK_TEXT_SIZE);
	assert_int_equal(kmods_syms(um, o, &out[0], sym_count, &n, &st), 0);
	assert_int_equal(n, 0);
	assert_int_equal(st.syms_cut, UINT32_MAX - KMODS_SYMS_MAX);
	assert_true(st.pages_unread > 0);	/* the entries past RAM */
	assert_true(st.syms_bad >= 2);
	assert_true(st.syms_outside >= 1);
	/* module 1's typetab in user space; module 2's mod_kallsyms unread */
	xi_put64(&g->x, XK_KS(1) + 24, 0x1000);
	assert_int_equal(kmods_syms(um, o, &out[1], sym_count, &n, &st), -EFAULT);
	out[2].kallsyms = XK_VA + 0x1ff000 + 0x1000;
	assert_int_equal(kmods_syms(um, o, &out[2], sym_count, &n, &st), -EFAULT);
	assert_int_equal(st.tables_bad, 2);
	/* module 3's are fine */
	assert_int_equal(kmods_syms(um, o, &out[3], sym_count, &n, &st), 0);
	assert_int_equal(n, 3);
}

/* A list of 2600 entries, none a module (no name ends): the walk stops at
 * twice KMODS_MAX entries, whatever it kept. */
static void refused_list(struct kmod *out)
{
	struct kmods_stats st = { 0 };
	struct kbtf_mod_offsets o;
	struct unwind_mem um;
	struct guest g;
	char err[160], bad[56];
	uint32_t len;
	size_t n;

	free(xt_btf(&len));
	kguest_new(&g, 0);
	um = (struct unwind_mem){ tread, g.m };
	assert_int_equal(kbtf_mod_offsets(g.x.ram + xi_pa(XT_BTF_VA), len, &o, err, sizeof(err)),
			 0);
	memset(bad, 'a', sizeof(bad));
	xi_put64(&g.x, XK_HEAD_VA, XK_VA + 8);
	for (unsigned i = 0; i < 2600; i++) {
		uint64_t e = XK_VA + (uint64_t)i * 0x300;

		xi_put64(&g.x, e + 8, i + 1 < 2600 ? e + 0x300 + 8 : XK_HEAD_VA);
		xi_put(&g.x, e + XK_NAME, bad, sizeof(bad));
	}
	assert_int_equal(kmods_walk(&um, &o, XK_HEAD_VA, out, KMODS_MAX, &n, &st), 0);
	assert_int_equal(n, 0);
	assert_int_equal(st.cut, 1);
	assert_int_equal(st.refused, 2 * KMODS_MAX);
	guest_free(&g);
}

/* Lists that lie: a cycle that misses the head, pointers outside RAM and
 * into user space, a name that does not end, text outside the module
 * space or too large, a module still being loaded. */
static void test_lying_modules(void **state)
{
	struct kmod *out = calloc(KMODS_MAX, sizeof(*out));
	struct kmods_stats st = { 0 };
	struct kbtf_mod_offsets o;
	struct unwind_mem um;
	struct guest g;
	uint32_t len;
	void *btf = xt_btf(&len);
	char err[160], bad[56];
	size_t n;

	assert_int_equal(kbtf_mod_offsets(btf, len, &o, err, sizeof(err)), 0);
	assert_int_equal(o.mod_name, XK_NAME);
	assert_int_equal(o.text_size, XK_LAYOUT_61 + 12);
	assert_int_equal(kbtf_mod_offsets(btf, 16, &o, err, sizeof(err)), -EINVAL);
	free(btf);
	kguest_new(&g, 10);
	um = (struct unwind_mem){ tread, g.m };
	assert_int_equal(kbtf_mod_offsets(g.x.ram + xi_pa(XT_BTF_VA), len, &o, err,
					  sizeof(err)), 0);
	assert_int_equal(kmods_walk(&um, &o, XK_HEAD_VA, out, KMODS_MAX, &n, &st), 0);
	assert_int_equal(n, 10);
	/* the cycle: module 9 back to module 2 */
	xi_put64(&g.x, XK_MOD(9) + 8, XK_MOD(2) + 8);
	assert_int_equal(kmods_walk(&um, &o, XK_HEAD_VA, out, KMODS_MAX, &n, &st), 0);
	assert_int_equal(st.cut, 1);
	assert_true(n < 40);	/* found early, not at the cap */
	/* a pointer outside RAM, then one into user space */
	xi_put64(&g.x, XK_MOD(6) + 8, XK_VA + 0x1f00008);
	assert_int_equal(kmods_walk(&um, &o, XK_HEAD_VA, out, KMODS_MAX, &n, &st), 0);
	assert_int_equal(st.bad_ptr, 1);
	assert_int_equal(n, 7);
	xi_put64(&g.x, XK_MOD(6) + 8, 0x1008);
	assert_int_equal(kmods_walk(&um, &o, XK_HEAD_VA, out, KMODS_MAX, &n, &st), 0);
	assert_int_equal(st.bad_ptr, 2);
	/* names and texts that lie, and a module still unformed */
	memset(bad, 'a', sizeof(bad));
	xi_put(&g.x, XK_MOD(1) + XK_NAME, bad, sizeof(bad));
	xi_put(&g.x, XK_MOD(2) + XK_NAME, "a\nb", 4);
	xi_put64(&g.x, XK_MOD(3) + XK_LAYOUT_61, XI_KERNEL_VA);
	xi_put(&g.x, XK_MOD(4) + XK_LAYOUT_61 + 12, &(uint32_t){ UINT32_MAX }, 4);
	xi_put(&g.x, XK_MOD(5), &(uint32_t){ 3 }, 4);
	assert_int_equal(kmods_walk(&um, &o, XK_HEAD_VA, out, KMODS_MAX, &n, &st), 0);
	assert_int_equal(st.refused, 4);
	assert_int_equal(st.unformed, 1);
	assert_int_equal(n, 2);
	assert_string_equal(out[0].name, "mod0");
	assert_string_equal(out[1].name, "mod6");
	/* the head unreadable */
	assert_int_equal(kmods_walk(&um, &o, XI_KERNEL_VA + 0x1f000000, out, KMODS_MAX, &n, &st),
			 -EFAULT);
	xk_modules(&g.x, 10);
	assert_int_equal(kmods_walk(&um, &o, XK_HEAD_VA, out, KMODS_MAX, &n, &st), 0);
	lying_syms(&um, &o, &g, out);
	guest_free(&g);
	refused_list(out);
	free(out);
}

static void test_current_cache(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));
	struct kcurrent_info *ci = calloc(1, sizeof(*ci));
	const struct kcurrent_stats *ks;
	struct ktask_cur cur;
	struct introspect *in;
	struct kcurrent *k;
	struct guest g;
	uint64_t ptr;

	tguest_new(&g, XT_MAX);
	in = introspect_new(g.m, NULL);
	assert_int_equal(introspect_current_info(in, 2, ci), -ENOENT);	/* not found yet */
	assert_int_equal(ci->nr, 0);
	run(in, c, 3);
	/* 4 vCPUs, the kernel brought up 2: the others have no area */
	assert_int_equal(introspect_current_info(in, 4, ci), 0);
	assert_int_equal(ci->nr, 4);
	assert_int_equal(ci->slot_pa[0], XT_PCPU_VA + XT_CUR_OFF - XI_KERNEL_VA + XI_KERNEL_PA);
	assert_int_equal(ci->slot_pa[1], ci->slot_pa[0] + 0x40000);
	assert_int_equal(ci->slot_pa[2], 0);
	assert_int_equal(ci->slot_pa[3], 0);
	assert_int_equal(ci->off.task_pid, XT_PID);
	assert_int_equal(introspect_current_info(in, 100000, ci), 0);
	assert_int_equal(ci->nr, KCURRENT_MAX_CPUS);

	/* the sampler's side: the word in the stop, then the cache */
	k = kcurrent_new(g.m, ci, 1000);
	assert_non_null(k);
	ks = kcurrent_get_stats(k);
	assert_int_equal(guestmem_read(g.m, ci->slot_pa[1], &ptr, 8), 0);
	assert_int_equal(kcurrent_task(k, ptr, true, 0, &cur), 0);
	assert_int_equal(cur.tgid, 103);
	assert_int_equal(cur.cr3, pgd_pa(3));
	assert_false(cur.kthread);
	assert_int_equal(guestmem_read(g.m, ci->slot_pa[0], &ptr, 8), 0);
	assert_int_equal(kcurrent_task(k, ptr, false, 0, &cur), 0);
	assert_int_equal(cur.tid, 0);			/* swapper/0: idle */
	assert_true(cur.kthread);
	assert_int_equal(ks->misses, 2);
	/* cached, checked by its pid and tgid */
	assert_int_equal(kcurrent_task(k, XT_TASK_VA + 3 * XT_SIZE, true, 999, &cur), 0);
	assert_int_equal(cur.tgid, 103);
	assert_int_equal(ks->hits, 1);
	/* the task_struct freed and taken by another task: read again */
	xi_put(&g.x, XT_TASK_VA + 3 * XT_SIZE + XT_TGID, &(uint32_t){ 777 }, 4);
	assert_int_equal(kcurrent_task(k, XT_TASK_VA + 3 * XT_SIZE, true, 999, &cur), 0);
	assert_int_equal(cur.tgid, 777);
	assert_int_equal(ks->misses, 3);
	/* aged: read again (mm may have changed: exec) */
	assert_int_equal(kcurrent_task(k, XT_TASK_VA + 3 * XT_SIZE, true, 2000, &cur), 0);
	assert_int_equal(ks->misses, 4);
	/* a kernel thread in user mode exec'd: read again */
	assert_int_equal(kcurrent_task(k, XT_INIT_VA, false, 1, &cur), 0);
	assert_int_equal(ks->hits, 2);
	assert_int_equal(kcurrent_task(k, XT_INIT_VA, true, 1, &cur), 0);
	assert_int_equal(ks->misses, 5);
	/* lies: user space, unaligned, outside RAM, 0 */
	assert_int_equal(kcurrent_task(k, 0x1000, false, 0, &cur), -EINVAL);
	assert_int_equal(kcurrent_task(k, XT_TASK_VA + 3, false, 0, &cur), -EINVAL);
	assert_int_equal(kcurrent_task(k, 0xffffffffdead0000ull, false, 0, &cur), -EFAULT);
	assert_int_equal(kcurrent_task(k, 0, false, 0, &cur), -EINVAL);
	assert_int_equal(ks->bad, 4);
	/* a per-CPU base that lies: that CPU has no pointer, the other has */
	xi_put(&g.x, XT_PCPU_OFF_VA + 8, &(uint64_t){ 0x10000 }, 8);
	assert_int_equal(introspect_current_info(in, 2, ci), 0);
	assert_int_not_equal(ci->slot_pa[0], 0);
	assert_int_equal(ci->slot_pa[1], 0);
	xi_put(&g.x, XT_PCPU_OFF_VA, &(uint64_t){ 0 }, 8);
	assert_int_equal(introspect_current_info(in, 2, ci), -ENOENT);
	assert_int_equal(ci->nr, 0);
	assert_null(kcurrent_new(NULL, ci, 1));
	kcurrent_free(k);
	kcurrent_free(NULL);
	introspect_free(in);
	guest_free(&g);
	free(ci);
	free(c);
}

static void test_modes(void **state)
{
	enum introspect_mode m;

	assert_int_equal(introspect_parse_mode("only", &m), 0);
	assert_int_equal(m, INTROSPECT_ONLY);
	assert_string_equal(introspect_mode_name(m), "only");
	assert_int_equal(introspect_parse_mode("off", &m), 0);
	assert_int_equal(introspect_parse_mode("auto", &m), 0);
	assert_int_equal(introspect_parse_mode("yes", &m), -EINVAL);
	assert_int_equal(introspect_parse_mode(NULL, &m), -EINVAL);
	assert_null(introspect_new(NULL, NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kallsyms_from_memory),
		cmocka_unit_test(test_to_json),
		cmocka_unit_test(test_vmcoreinfo_parse),
		cmocka_unit_test(test_lying_tables),
		cmocka_unit_test(test_lying_vmcoreinfo),
		cmocka_unit_test(test_search_backoff),
		cmocka_unit_test(test_current_cache),
		cmocka_unit_test(test_modes),
		cmocka_unit_test(test_processes),
		cmocka_unit_test(test_tool),
		cmocka_unit_test(test_lying_tasks),
		cmocka_unit_test(test_cgroups),
		cmocka_unit_test(test_cgroup_records),
		cmocka_unit_test(test_current_task),
		cmocka_unit_test(test_reboot),
		cmocka_unit_test(test_mappings),
		cmocka_unit_test(test_mappings_late_build_id),
		cmocka_unit_test(test_lying_maps),
		cmocka_unit_test(test_vma_list),
		cmocka_unit_test(test_modules),
		cmocka_unit_test(test_lying_modules),
		cmocka_unit_test(test_walk_on_change),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
