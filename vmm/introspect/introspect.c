// SPDX-License-Identifier: MIT
/*
 * Introspection (vmm/introspect/introspect.h): the state machine that
 * finds the kernel in guest memory and turns what it reads into records
 * of the wire format.
 *
 *   searching   VMCOREINFO not found yet: scan scan_bytes of RAM per poll,
 *               a full pass every retry_ms at most (it appears at the
 *               kernel's subsys_initcall, a second or so into boot)
 *   ready       found and kallsyms sent (or refused: counted)
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest-kmod/opvm_proto.h"
#include "lib/array.h"
#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/hash.h"
#include "lib/hex.h"
#include "lib/x86.h"
#include "vmm/guest/guestmem.h"
#include "vmm/introspect/introspect.h"
#include "vmm/introspect/kallsyms.h"
#include "vmm/introspect/kbtf.h"
#include "vmm/introspect/kcurrent.h"
#include "vmm/introspect/kmods.h"
#include "vmm/introspect/ktasks.h"
#include "vmm/introspect/kvmas.h"
#include "vmm/introspect/memsyms.h"
#include "vmm/introspect/vmcoreinfo.h"

/* A whole pass per poll for guests up to 1 GiB: the page appears a second
 * or so into boot, and every sync that passes without it files the first
 * programs' samples without a process (scanning reads ~0.2 ms a MiB). */
#define SCAN_BYTES_DEFAULT	((uint64_t)1 << 30)
#define RETRY_MS_DEFAULT	1000u
/* A guest that shows no VMCOREINFO after this many passes since its OS
 * started (or since the search did: not Linux, a kernel without it, or
 * firmware still waiting) is searched less and less often, up to once a
 * minute, so it costs the host almost nothing.  A pass of a 1 GiB guest
 * costs ~0.2 s of CPU: each one a second for long would be most of what
 * profiling an idle guest costs.  The OS's start seen in the samples
 * (introspect_news.os_started) or opvm.ko's HELLO ends the back-off. */
#define RETRY_BACKOFF_PASSES	10
#define RETRY_MS_MAX		64000u
/*
 * When the lists are walked (walk_due()).  A walk a second was ~950 guest
 * reads a second for 56 tasks, the largest part of a TCG guest's sampler
 * CPU after the stops, a cost per guest whatever it does.  At every poll
 * for the first WALK_BOOT_WALKS walks after the kernel was found (the
 * boot: init, its modules and first programs); then, while opvm.ko speaks,
 * only for the cross-check (introspect_tool.walked) every WALK_FLOOR_MS;
 * without it when the probe changed (a fork, an exit, a module loaded),
 * when a sample waits for the walk (an exec forks nothing), at most every
 * WANT_MIN_MS and, while those walks find nothing, at most every
 * WANT_MAX_MS, and every WALK_FLOOR_MS whatever (a cgroup move).
 */
#define WALK_BOOT_WALKS		10
#define WALK_FLOOR_MS		10000u
#define WANT_MIN_MS		500u
#define WANT_MAX_MS		4000u

/* Why a poll walks the lists (walk_due()), counted in introspect_stats. */
enum walk_why {
	WALK_NOT = 0,
	WALK_BOOT,		/* the first WALK_BOOT_WALKS after the kernel was found */
	WALK_UNPROBED,		/* no probe, or it did not read */
	WALK_CHANGED,		/* the probe differs from the last walk's */
	WALK_WANTED,		/* a sample waits, or a build-id is to be read */
	WALK_FLOOR,		/* none for WALK_FLOOR_MS */
};
/* __START_KERNEL_map: where x86-64 maps the kernel image, phys_base on */
#define PHYS_LIMIT		(1ull << 52)	/* x86-64's physical address width */

struct introspect {
	struct guestmem *m;
	struct introspect_config cfg;
	uint64_t cursor;		/* scan position (guest-physical) */
	uint64_t pass_ms;		/* when the current pass started */
	bool waiting;			/* a pass found nothing: wait retry_ms */
	uint64_t passes_base;		/* st.passes when the OS last started:
					 * the back-off counts from there */
	struct vmcoreinfo vi;
	uint32_t seq;			/* of the records emitted */
	struct introspect_stats st;
	/* the KSYMS record being filled */
	union {
		struct opvm_rec_ksyms k;
		uint8_t bytes[OPVM_REC_MAX];
	} rec;
	unsigned long used;
	const struct introspect_tool *tool;	/* this poll's */
	/* symbols the task walk needs, from kallsyms */
	uint64_t start_btf, stop_btf, init_task;
	/* each CPU's current task: __per_cpu_offset[] and the per-CPU
	 * variable's offset (current_task, 6.1; pcpu_hot, 6.2 and later,
	 * whose first member it is) */
	uint64_t per_cpu_offset, current_task, pcpu_hot;
	uint64_t idle_threads;		/* per-CPU: each CPU's idle task */
	/* kernel stacks of the last walk's tasks (introspect_task_by_sp()),
	 * made at the first lookup after a walk */
	struct kstack *stacks;
	size_t nr_stacks;
	uint64_t stacks_walk;		/* st.walks they were made at */
	bool have_offsets;		/* BTF gave them */
	bool module_active;		/* opvm.ko speaks: no process records */
	/* when to walk (walk_due()): the probe's words (kallsyms) and their
	 * guest-physical addresses (the kernel image does not move), what
	 * they read before the last walk, when it began */
	uint64_t forks_va, threads_va;
	uint64_t probe_pa[3];		/* 0: not translated yet */
	struct walk_probe {
		uint64_t forks, threads, mod_newest;
	} probe;
	bool probe_ok;			/* probe holds the last walk's */
	bool want;			/* a sample waits for a walk */
	uint64_t want_gap_ms;		/* between two walks for it */
	uint64_t walk_ms;		/* when the last walk began */
	uint64_t walks_base;		/* st.walks when the kernel was found */
	uint64_t walk_walks;		/* st.walks after the last walk */
	struct kbtf_offsets off;
	struct kvmas *vmas;		/* NULL: mappings not read */
	/* the last walk (sorted by tgid) and the one being made */
	struct ktask *tasks, *walk;
	size_t nr_tasks;
	struct introspect_task *told;	/* tasks as introspect_tool.walked
					 * gets them, KTASKS_MAX, or NULL */
	/* what introspect_tool.current was told last; NULL: nothing */
	struct kcurrent_info *cur_told;
	struct ktasks_stats wst;
	/* loadable modules: the list head (kallsyms), the offsets (BTF), the
	 * last walk (sorted by name) and the one being made */
	uint64_t modules_head;
	bool have_mods;
	struct kbtf_mod_offsets moff;
	struct kmod *mods, *mwalk;
	size_t nr_mods;
	struct kmods_stats mst;
	uint64_t mods_sig;		/* of the set whose symbols went out */
	uint64_t mods_walked_sig;	/* of the last walk's set */
	uint64_t modsyms_ms;		/* when they went */
	uint64_t modsyms_n;		/* in the transfer being made */
	uint8_t vmci_page[OPVM_PAGE_SIZE];	/* as found: a change means a reboot */
};

int introspect_parse_mode(const char *s, enum introspect_mode *out)
{
	static const char *const names[] = { "auto", "off", "only" };

	for (unsigned i = 0; i < 3; i++) {
		if (s && !strcmp(s, names[i])) {
			*out = (enum introspect_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *introspect_mode_name(enum introspect_mode m)
{
	return m == INTROSPECT_OFF ? "off" : m == INTROSPECT_ONLY ? "only" : "auto";
}

const char *introspect_state_name(enum introspect_state s)
{
	return s == INTROSPECT_READY ? "ready" : s == INTROSPECT_FAILED ? "failed" : "searching";
}

struct introspect *introspect_new(struct guestmem *m, const struct introspect_config *cfg)
{
	struct introspect *in;

	if (!m) {
		errno = EINVAL;
		return NULL;
	}
	in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	in->m = m;
	if (cfg)
		in->cfg = *cfg;
	if (!in->cfg.scan_bytes)
		in->cfg.scan_bytes = SCAN_BYTES_DEFAULT;
	if (!in->cfg.retry_ms)
		in->cfg.retry_ms = RETRY_MS_DEFAULT;
	in->want_gap_ms = WANT_MIN_MS;
	return in;
}

void introspect_free(struct introspect *in)
{
	if (!in)
		return;
	free(in->tasks);
	free(in->told);
	free(in->cur_told);
	free(in->walk);
	free(in->stacks);
	free(in->mods);
	free(in->mwalk);
	kvmas_free(in->vmas);
	free(in);
}

static void hello_seen(struct introspect *in)
{
	if (in->module_active)
		return;
	in->module_active = true;
	/* a HELLO says a kernel runs, so its VMCOREINFO is there: the next
	 * poll scans at once, whatever the back-off of a long boot */
	if (in->st.state == INTROSPECT_SEARCHING)
		in->waiting = false;
}

static void os_started(struct introspect *in)
{
	/* VMCOREINFO appears a second or so after a kernel starts: passes
	 * once a second again, from this poll on */
	if (in->st.state != INTROSPECT_SEARCHING)
		return;
	in->passes_base = in->st.passes;
	in->waiting = false;
}

const struct introspect_stats *introspect_get_stats(const struct introspect *in)
{
	return &in->st;
}

/* Header and padding of a record built in place, then out it goes. */
static void emit(struct introspect *in, void *rec, unsigned type, size_t len)
{
	struct opvm_rec_hdr *h = rec;
	size_t padded = (len + OPVM_REC_ALIGN - 1) & ~(size_t)(OPVM_REC_ALIGN - 1);

	memset((uint8_t *)rec + len, 0, padded - len);
	h->magic = htole16(OPVM_PROTO_MAGIC);
	h->type = htole16((uint16_t)type);
	h->len = htole32((uint32_t)padded);
	h->seq = htole32(in->seq++);
	h->reserved = 0;
	in->tool->record(in->tool->arg, rec, padded);
	if (type == OPVM_REC_KSYMS)
		in->st.ksyms_records++;
}

/* ---- kernel memory ------------------------------------------------------ */

/* unwind_mem read over the kernel's page tables (arg: the introspector). */
static int kread(void *arg, uint64_t va, void *buf, size_t len)
{
	struct introspect *in = arg;

	if (va < OPVM_KERNEL_HALF || va + len < va)
		return -EFAULT;
	return guestmem_read_virt(in->m, in->st.pgd_gpa, va, buf, len) ? -EFAULT : 0;
}

/* ---- kallsyms -> KSYMS ---------------------------------------------------- */

static void ksyms_flush(struct introspect *in)
{
	if (!in->rec.k.nr)
		return;
	in->rec.k.nr = htole32(in->rec.k.nr);
	in->rec.k.bytes = htole16(in->rec.k.bytes);
	emit(in, &in->rec, OPVM_REC_KSYMS, in->used);
	memset(&in->rec.k, 0, sizeof(in->rec.k));
	in->used = sizeof(in->rec.k);
}

static int ksym_one(void *arg, uint64_t addr, char type, const char *name, size_t len)
{
	struct introspect *in = arg;

	static const struct {
		const char *name;
		size_t off;
	} wanted[] = {
		{ "_text", offsetof(struct introspect, st.text_addr) },
		{ "__start_BTF", offsetof(struct introspect, start_btf) },
		{ "__stop_BTF", offsetof(struct introspect, stop_btf) },
		{ "init_task", offsetof(struct introspect, init_task) },
		{ "__per_cpu_offset", offsetof(struct introspect, per_cpu_offset) },
		{ "current_task", offsetof(struct introspect, current_task) },
		{ "pcpu_hot", offsetof(struct introspect, pcpu_hot) },
		{ "idle_threads", offsetof(struct introspect, idle_threads) },
		{ "modules", offsetof(struct introspect, modules_head) },
		{ "total_forks", offsetof(struct introspect, forks_va) },
		{ "nr_threads", offsetof(struct introspect, threads_va) },
	};

	for (size_t i = 0; i < ARRAY_SIZE(wanted); i++) {
		uint64_t *v = (uint64_t *)((char *)in + wanted[i].off);

		if (strlen(wanted[i].name) == len && !memcmp(name, wanted[i].name, len) && !*v)
			*v = addr;
	}
	if (in->cfg.no_ksyms)
		return 0;
	/* Text symbols, as the relay sends, and vmlinux's ORC tables: with
	 * them the samplers walk kernel stacks with no System.map. */
	if (!type || (!strchr("tTwW", type) && opvm_ksyms_table(name, len) < 0) ||
	    len > OPVM_KSYM_NAME_MAX || !addr) {
		in->st.ksyms_other++;
		return 0;
	}
	if (opvm_ksyms_add(&in->rec.k, &in->used, addr, type, name, len)) {
		ksyms_flush(in);
		if (opvm_ksyms_add(&in->rec.k, &in->used, addr, type, name, len)) {
			in->st.ksyms_other++;
			return 0;
		}
	}
	in->st.ksyms_sent++;
	return 0;
}

static void ksyms_send(struct introspect *in, uint64_t t0)
{
	struct unwind_mem um = { kread, in };
	struct kallsyms_addrs a = {
		.names = in->vi.ks_names, .num_syms = in->vi.ks_num_syms,
		.token_table = in->vi.ks_token_table, .token_index = in->vi.ks_token_index,
		.offsets = in->vi.ks_offsets, .relative_base = in->vi.ks_relative_base,
		.addresses = in->vi.ks_addresses, .stext = in->vi.stext,
	};
	struct kallsyms_result res;
	struct opvm_rec_ksyms_end e;
	int rc;

	memset(&in->rec.k, 0, sizeof(in->rec.k));
	in->used = sizeof(in->rec.k);
	in->st.ksyms_sent = in->st.ksyms_other = 0;
	rc = kallsyms_decode(&um, &a, ksym_one, in, &res, in->st.last_error,
			     sizeof(in->st.last_error));
	in->st.nr_syms = res.nr_syms;
	in->st.ksyms_bad = res.bad;
	in->st.ksyms_unsorted = res.unsorted;
	in->st.ksyms_bytes_read = res.bytes_read;
	if (rc) {
		in->st.refused++;
		return;
	}
	if (in->cfg.no_ksyms)
		return;
	ksyms_flush(in);
	memset(&e, 0, sizeof(e));
	e.nr_syms = htole64(in->st.ksyms_sent);
	emit(in, &e, OPVM_REC_KSYMS_END, sizeof(e));
	in->st.kallsyms_ms = clk_now_ms() - t0;
}

/* ---- BTF and the task list ----------------------------------------------- */

/* The offsets the mappings need (kvmas.h), from the same BTF: without
 * them, processes are still walked. */
static void maps_setup(struct introspect *in, const void *btf, size_t len)
{
	struct kbtf_vma_offsets vo;

	if (in->vmas)
		return;		/* kept across a reboot: the same offsets */
	if (kbtf_vma_offsets(btf, len, &vo, in->st.maps_error, sizeof(in->st.maps_error)))
		return;
	in->vmas = kvmas_new(&vo);
	if (!in->vmas)
		snprintf(in->st.maps_error, sizeof(in->st.maps_error),
			 "cannot set up the mapping reader: %s", strerror(errno));
	in->st.maps = in->vmas ? kvmas_get_stats(in->vmas) : NULL;
}

/* The offsets the module list needs (kmods.h), from the same BTF, and its
 * head from kallsyms: without them, modules are not read. */
static void mods_setup(struct introspect *in, const void *btf, size_t len)
{
	if (!in->modules_head) {
		snprintf(in->st.modules_error, sizeof(in->st.modules_error),
			 "no `modules` in the guest's kallsyms (a kernel without "
			 "CONFIG_KALLSYMS_ALL): module code is not named; load opvm.ko in "
			 "the guest to name it");
		return;
	}
	if (!in->mods)
		in->mods = calloc(KMODS_MAX, sizeof(*in->mods));
	if (!in->mwalk)
		in->mwalk = calloc(KMODS_MAX, sizeof(*in->mwalk));
	if (!in->mods || !in->mwalk ||
	    kbtf_mod_offsets(btf, len, &in->moff, in->st.modules_error,
			     sizeof(in->st.modules_error)))
		return;
	in->have_mods = true;
	in->st.modules = &in->mst;
	in->st.modules_layout = in->moff.layout;
	in->st.modules_error[0] = '\0';
}

/* The guest's BTF, read out of its memory for libbpf: the offsets the
 * task walk needs.  Refused (counted, last_error) when it is missing,
 * too big or does not parse. */
static void btf_load(struct introspect *in)
{
	uint64_t len = in->stop_btf - in->start_btf;
	void *buf;
	int rc;

	if (!in->start_btf || !in->init_task || in->stop_btf <= in->start_btf ||
	    len > KBTF_MAX_BYTES) {
		snprintf(in->st.last_error, sizeof(in->st.last_error),
			 "no usable BTF (__start_BTF..__stop_BTF) or init_task in kallsyms: "
			 "processes are not read");
		return;
	}
	buf = malloc(len);
	if (!in->tasks)		/* kept across a reboot */
		in->tasks = calloc(KTASKS_MAX, sizeof(*in->tasks));
	if (!in->walk)
		in->walk = calloc(KTASKS_MAX, sizeof(*in->walk));
	if (!buf || !in->tasks || !in->walk) {
		free(buf);
		return;
	}
	rc = kread(in, in->start_btf, buf, len);
	if (!rc)
		rc = kbtf_offsets(buf, len, &in->off, in->st.last_error,
				  sizeof(in->st.last_error));
	else
		snprintf(in->st.last_error, sizeof(in->st.last_error),
			 "cannot read the BTF at %#llx", (unsigned long long)in->start_btf);
	if (!rc)
		maps_setup(in, buf, len);
	if (!rc)
		mods_setup(in, buf, len);
	free(buf);
	if (rc) {
		in->st.refused++;
		return;
	}
	in->have_offsets = true;
	in->st.btf_bytes = len;
}

static int v2p(void *arg, uint64_t va, uint64_t *pa)
{
	struct introspect *in = arg;

	return guestmem_virt_to_phys(in->m, in->st.pgd_gpa, va, pa);
}

static void proc_emit(struct introspect *in, const struct ktask *t, unsigned type)
{
	struct opvm_rec_proc r;

	memset(&r, 0, sizeof(r));
	r.tgid = htole32(t->tgid);
	r.ppid = htole32(t->ppid);
	r.cr3 = htole64(t->cr3);
	memcpy(r.comm, t->comm, sizeof(r.comm));
	emit(in, &r, type, sizeof(r));
}

/* CGROUP for t: its cgroup node's path (ktasks_cgroup_path()). */
static void cgroup_emit(struct introspect *in, const struct ktask *t)
{
	struct ktasks_mem km = { .read = { kread, in }, .v2p = v2p, .arg = in };
	struct {
		struct opvm_rec_cgroup c;
		char path[OPVM_CGROUP_PATH_MAX + 1 + 7];
	} r;
	int n, cut;

	if (!t->cgroup_kn)
		return;
	memset(&r, 0, sizeof(r));
	n = ktasks_cgroup_path(&km, &in->off, t->cgroup_kn, r.path, OPVM_CGROUP_PATH_MAX + 1,
			       &cut, &in->wst);
	if (n <= 0)
		return;
	r.path[n] = '\0';	/* the padding stays zero */
	r.c.tgid = htole32(t->tgid);
	r.c.path_len = htole16((uint16_t)n);
	r.c.flags = htole16(cut ? OPVM_CGROUP_TRUNCATED : 0);
	emit(in, &r, OPVM_REC_CGROUP, sizeof(r.c) + (size_t)n);
	in->st.cgroups_sent++;
}

static void exit_emit(struct introspect *in, uint32_t tgid)
{
	struct opvm_rec_exit r;

	memset(&r, 0, sizeof(r));
	r.tgid = htole32(tgid);
	r.tid = htole32(tgid);
	emit(in, &r, OPVM_REC_PROC_EXIT, sizeof(r));
}

/* The new walk against the last one, both sorted by tgid: records for
 * what appeared, changed address space or name (exec), or went. */
static void tasks_diff(struct introspect *in, const struct ktask *nw, size_t n)
{
	size_t i = 0, j = 0;

	while (i < in->nr_tasks || j < n) {
		const struct ktask *o = i < in->nr_tasks ? &in->tasks[i] : NULL;
		const struct ktask *w = j < n ? &nw[j] : NULL;

		if (o && (!w || o->tgid < w->tgid)) {
			exit_emit(in, o->tgid);
			in->st.exits_sent++;
			i++;
		} else if (w && (!o || w->tgid < o->tgid)) {
			proc_emit(in, w, OPVM_REC_PROC);
			cgroup_emit(in, w);
			in->st.procs_sent++;
			j++;
		} else if (o && w) {
			if (o->cr3 != w->cr3 || strcmp(o->comm, w->comm)) {
				proc_emit(in, w, OPVM_REC_EXEC);
				in->st.execs_sent++;
			}
			/* moved (cgroup.procs) since the last walk */
			if (o->cgroup_kn != w->cgroup_kn)
				cgroup_emit(in, w);
			i++;
			j++;
		}
	}
}

static int uread(void *arg, uint64_t cr3, uint64_t va, void *buf, size_t len)
{
	struct introspect *in = arg;

	if (va >= OPVM_KERNEL_HALF || va + len < va || va + len > OPVM_KERNEL_HALF)
		return -EFAULT;
	return guestmem_read_virt(in->m, cr3, va, buf, len) ? -EFAULT : 0;
}

static void maps_emit(void *arg, void *rec, unsigned type, size_t len)
{
	emit(arg, rec, type, len);
}

/* One walk; with send, its differences go out as records (without: a
 * walk for the cross-check while opvm.ko speaks). */
static void tasks_refresh(struct introspect *in, bool send)
{
	struct ktasks_mem km = { .read = { kread, in }, .v2p = v2p, .arg = in };
	int64_t t0 = clk_now_ns();
	struct ktask *swap;
	size_t n;

	if (ktasks_walk(&km, &in->off, in->init_task, in->walk, KTASKS_MAX, &n, &in->wst)) {
		in->st.walk_failed++;
		return;
	}
	if (send)
		tasks_diff(in, in->walk, n);
	if (send && in->vmas) {
		struct kvmas_mem vm = { .kread = { kread, in }, .uread = uread, .arg = in };

		kvmas_refresh(in->vmas, &vm, in->walk, n, maps_emit, in);
	}
	swap = in->tasks;
	in->tasks = in->walk;
	in->walk = swap;
	in->nr_tasks = n;
	in->st.tasks = n;
	in->st.walks = in->wst.walks;
	in->st.walks_cut = in->wst.cut;
	in->st.walks_bad_ptr = in->wst.bad_ptr;
	in->st.task_dups = in->wst.dups;
	in->st.cgroups_bad = in->wst.cgroup_bad;
	in->st.cgroups_cut = in->wst.cgroup_cut;
	in->st.refresh_us = (uint64_t)(clk_now_ns() - t0) / 1000;
	if (send)
		in->st.procs_live = 1;
}

/* ---- loadable modules -> MODULE, MODULE_FREE, KSYMS ------------------------ */

/* The transfers of the modules' symbols: at most one per this many ms (a
 * guest that loads and unloads modules in a loop costs one every 2 s),
 * and at most this many symbols in one. */
#define MODSYMS_MIN_MS		2000u
#define MODSYMS_MAX		(1u << 20)

static void mod_emit(struct introspect *in, const struct kmod *m, unsigned type)
{
	struct opvm_rec_module r;

	memset(&r, 0, sizeof(r));
	r.base = htole64(m->base);
	r.size = htole64(m->size);
	memcpy(r.name, m->name, strlen(m->name));	/* < KMODS_NAME_MAX */
	emit(in, &r, type, sizeof(r));
}

/* By name, then by address: which of two with one name is kept does not
 * depend on qsort. */
static int cmp_mod(const void *a, const void *b)
{
	const struct kmod *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x->mod > y->mod) - (x->mod < y->mod);
}

/* Sorts w[0..n) by name and drops a name seen twice (a lie: counted). */
static size_t mods_unique(struct introspect *in, struct kmod *w, size_t n)
{
	size_t k = 0;

	qsort(w, n, sizeof(*w), cmp_mod);
	for (size_t i = 0; i < n; i++) {
		if (k && !strcmp(w[k - 1].name, w[i].name)) {
			in->st.module_dups++;
			continue;
		}
		w[k++] = w[i];
	}
	return k;
}

/* The new walk against the last one, both sorted by name: MODULE for what
 * appeared or moved, MODULE_FREE for what went. */
static void mods_diff(struct introspect *in, const struct kmod *nw, size_t n)
{
	size_t i = 0, j = 0;

	while (i < in->nr_mods || j < n) {
		const struct kmod *o = i < in->nr_mods ? &in->mods[i] : NULL;
		const struct kmod *w = j < n ? &nw[j] : NULL;
		int c = !o ? 1 : !w ? -1 : strcmp(o->name, w->name);

		if (c < 0) {
			mod_emit(in, o, OPVM_REC_MODULE_FREE);
			in->st.modules_freed++;
			i++;
			continue;
		}
		if (c > 0 || o->base != w->base || o->size != w->size) {
			mod_emit(in, w, OPVM_REC_MODULE);
			in->st.modules_sent++;
		}
		i += c == 0;
		j++;
	}
}

/* FNV-1a of the set (names, texts): a change means new symbols to send. */
static uint64_t mods_sig(const struct kmod *m, size_t n)
{
	uint64_t h = HASH_FNV_BASIS;

	for (size_t i = 0; i < n; i++) {
		const uint64_t v[3] = { m[i].base, m[i].size, m[i].mod };

		h = hash_fnv1a(h, v, sizeof(v));
		h = hash_fnv1a(h, m[i].name, strlen(m[i].name));
	}
	return h;
}

static int modsym_one(void *arg, const struct kmod *m, uint64_t addr, char type,
		      const char *name, size_t len)
{
	struct introspect *in = arg;

	if (in->modsyms_n >= MODSYMS_MAX) {
		in->mst.syms_cut++;
		return 1;
	}
	if (opvm_ksyms_add(&in->rec.k, &in->used, addr, type, name, len)) {
		ksyms_flush(in);
		memcpy(in->rec.k.module, m->name, strlen(m->name));
		if (opvm_ksyms_add(&in->rec.k, &in->used, addr, type, name, len))
			return 0;
	}
	in->modsyms_n++;
	return 0;
}

/* One transfer of every module's text symbols: KSYMS records named by
 * module, then a KSYMS_END of the modules only (fetch.h keeps vmlinux's
 * lines of <guest>/kallsyms, as for opvm.ko's "kmod" walk). */
static void modsyms_send(struct introspect *in)
{
	struct unwind_mem um = { kread, in };
	struct opvm_rec_ksyms_end e;

	in->modsyms_n = 0;
	for (size_t i = 0; i < in->nr_mods && in->modsyms_n < MODSYMS_MAX; i++) {
		ksyms_flush(in);
		memset(&in->rec.k, 0, sizeof(in->rec.k));
		in->used = sizeof(in->rec.k);
		memcpy(in->rec.k.module, in->mods[i].name, strlen(in->mods[i].name));
		kmods_syms(&um, &in->moff, &in->mods[i], modsym_one, in, &in->mst);
	}
	ksyms_flush(in);
	if (!in->modsyms_n)
		return;		/* none read: the last transfer's lines stay */
	memset(&e, 0, sizeof(e));
	e.nr_syms = htole64(in->modsyms_n);
	e.flags = htole32(OPVM_KSYMS_MODULES_ONLY);
	emit(in, &e, OPVM_REC_KSYMS_END, sizeof(e));
	in->st.modsyms_transfers++;
	in->st.modsyms_sent += in->modsyms_n;
}

/* With walk, one walk of the module list and the records of what
 * changed; then their symbols again when the last walk's set changed (at
 * most every MODSYMS_MIN_MS: a transfer owed is made at a later poll,
 * walk or not). */
static void mods_refresh(struct introspect *in, uint64_t now, bool walk)
{
	struct unwind_mem um = { kread, in };
	int64_t t0 = clk_now_ns();
	struct kmod *swap;
	uint64_t sig;
	size_t n;

	if (!in->have_mods || in->module_active)
		return;
	if (walk && !kmods_walk(&um, &in->moff, in->modules_head, in->mwalk, KMODS_MAX, &n,
				&in->mst)) {
		n = mods_unique(in, in->mwalk, n);
		in->st.modules_walk_us = (uint64_t)(clk_now_ns() - t0) / 1000;
		mods_diff(in, in->mwalk, n);
		swap = in->mods;
		in->mods = in->mwalk;
		in->mwalk = swap;
		in->nr_mods = n;
		in->st.nr_modules = n;
		in->mods_walked_sig = n ? mods_sig(in->mods, n) : 0;	/* none: nothing to send */
	}
	sig = in->mods_walked_sig;
	if (in->cfg.no_ksyms || sig == in->mods_sig ||
	    (in->modsyms_ms && now - in->modsyms_ms < MODSYMS_MIN_MS))
		return;
	in->mods_sig = sig;
	in->modsyms_ms = now ? now : 1;
	modsyms_send(in);
	in->st.modsyms_us = (uint64_t)(clk_now_ns() - t0) / 1000;
}

/* The session's end (introspect_news.final): the modules' symbols still
 * owed, from the last walk. */
static void finish(struct introspect *in)
{
	if (in->st.state != INTROSPECT_READY || !in->have_mods || in->module_active ||
	    in->cfg.no_ksyms || !in->nr_mods || mods_sig(in->mods, in->nr_mods) == in->mods_sig)
		return;
	in->mods_sig = mods_sig(in->mods, in->nr_mods);
	modsyms_send(in);
}

static void news_take(struct introspect *in, const struct introspect_news *n)
{
	if (n->relay_ksyms)
		in->cfg.no_ksyms = 1;
	if (n->module_active)
		hello_seen(in);
	if (n->os_started)
		os_started(in);
}

/* ---- finding the kernel --------------------------------------------------- */

static void walk_done(struct introspect *in, uint64_t now, enum walk_why why,
		      const struct walk_probe *pr, uint32_t seq);

/* VMCOREINFO found at gpa: work out the kernel page-table root and check
 * that it maps what VMCOREINFO points at.  false: refused (counted). */
static bool kernel_found(struct introspect *in, uint64_t gpa)
{
	uint64_t pgd, probe, pa;

	/* phys_base is signed (load address less the virtual slide): the sum
	 * wraps, and what it gives must be a page inside physical space */
	pgd = in->vi.swapper_pg_dir - OPVM_KERNEL_MAP + in->vi.phys_base;
	if (in->vi.swapper_pg_dir < OPVM_KERNEL_MAP || pgd >= PHYS_LIMIT ||
	    (pgd & OPVM_PAGE_MASK)) {
		snprintf(in->st.last_error, sizeof(in->st.last_error),
			 "VMCOREINFO at %#llx: no usable page-table root (%#llx, phys_base %#llx)",
			 (unsigned long long)gpa, (unsigned long long)in->vi.swapper_pg_dir,
			 (unsigned long long)in->vi.phys_base);
		return false;
	}
	guestmem_set_paging_levels(in->m, in->vi.l5 ? 5 : 4);
	/* the root must map itself where VMCOREINFO says it is */
	probe = in->vi.swapper_pg_dir;
	if (guestmem_virt_to_phys(in->m, pgd, probe, &pa) || pa != pgd) {
		snprintf(in->st.last_error, sizeof(in->st.last_error),
			 "VMCOREINFO at %#llx: its page tables do not map the kernel",
			 (unsigned long long)gpa);
		return false;
	}
	if (guestmem_read(in->m, gpa, in->vmci_page, sizeof(in->vmci_page)))
		return false;
	in->st.vmcoreinfo_gpa = gpa;
	in->st.pgd_gpa = pgd;
	in->st.kernel_offset = in->vi.kernel_offset;
	in->st.stext = in->vi.stext;
	snprintf(in->st.release, sizeof(in->st.release), "%s", in->vi.release);
	hex_encode(in->vi.build_id, in->vi.build_id_len, in->st.build_id);
	return true;
}

/* Before 6.0 VMCOREINFO lists no kallsyms tables: they are searched for
 * by shape in the kernel image, from _stext (or _text: the default
 * physical start, 16 MiB, plus the KASLR slide). */
static int kallsyms_search(struct introspect *in)
{
	struct unwind_mem um = { kread, in };
	struct kallsyms_find_result fr;
	struct kallsyms_addrs a;
	uint64_t start = in->vi.stext ? in->vi.stext : OPVM_KERNEL_MAP + (16u << 20) + in->vi.kernel_offset;

	int rc = kallsyms_find(&um, start, KALLSYMS_FIND_MAX, &a, &fr, in->st.last_error,
			       sizeof(in->st.last_error));

	in->st.kallsyms_search_bytes = fr.scanned;
	in->st.kallsyms_search_candidates = fr.candidates;
	if (rc)
		return -1;
	in->st.kallsyms_from = "search";
	in->vi.ks_names = a.names;
	in->vi.ks_num_syms = a.num_syms;
	in->vi.ks_token_table = a.token_table;
	in->vi.ks_token_index = a.token_index;
	in->vi.ks_offsets = a.offsets;
	in->vi.ks_relative_base = a.relative_base;
	in->vi.ks_addresses = 0;
	return 0;
}

static uint64_t retry_ms(const struct introspect *in)
{
	uint64_t ms = in->cfg.retry_ms, passes = in->st.passes - in->passes_base;

	for (uint64_t p = RETRY_BACKOFF_PASSES; p < passes && ms < RETRY_MS_MAX; p++)
		ms *= 2;
	return ms < RETRY_MS_MAX ? ms : RETRY_MS_MAX;
}

static void search(struct introspect *in, uint64_t now, uint64_t t0)
{
	uint64_t gpa = 0;
	int rc;

	if (in->waiting && now - in->pass_ms < retry_ms(in))
		return;
	if (in->waiting || !in->pass_ms) {
		in->waiting = false;
		in->pass_ms = now;
	}
	rc = vmcoreinfo_find(in->m, &in->cursor, in->cfg.scan_bytes, &in->vi, &gpa,
			     &in->st.scanned_bytes);
	if (rc == -ENOENT) {
		in->st.passes++;
		in->waiting = true;
		return;
	}
	if (rc <= 0)
		return;
	if (!kernel_found(in, gpa)) {
		in->st.refused++;
		in->cursor = gpa + OPVM_PAGE_SIZE;	/* go on past it */
		return;
	}
	in->st.state = INTROSPECT_READY;
	if (!(in->vi.have & VMCI_KALLSYMS) && kallsyms_search(in)) {
		in->st.refused++;
		return;
	}
	in->st.kallsyms_from = in->st.kallsyms_from ? in->st.kallsyms_from : "vmcoreinfo";
	ksyms_send(in, t0);
	btf_load(in);
	in->st.probe = !in->forks_va || !in->threads_va ? NULL :
		       in->have_mods ? "total_forks,nr_threads,modules" : "total_forks,nr_threads";
	in->walks_base = in->st.walks;
	/* the first walk now: the samples waiting in the rings are filed
	 * right after this poll, and should find their processes */
	mods_refresh(in, now, true);
	if (in->have_offsets) {
		tasks_refresh(in, !in->module_active);
		walk_done(in, now, WALK_BOOT, NULL, in->seq);
	}
}

/*
 * The guest rebooted (or wrote over its VMCOREINFO page): nothing read so
 * far holds, the kernel may sit elsewhere.  The processes announced go
 * (PROC_EXIT), and the search starts over.
 */
static bool rebooted(struct introspect *in)
{
	uint8_t page[OPVM_PAGE_SIZE];

	/* a page that does not read is a guest gone (QEMU quit before the
	 * last sync), not one rebooted: what was read still holds */
	if (guestmem_read(in->m, in->st.vmcoreinfo_gpa, page, sizeof(page)) ||
	    !memcmp(page, in->vmci_page, sizeof(page)))
		return false;
	if (!in->module_active)
		tasks_diff(in, NULL, 0);
	in->nr_tasks = 0;
	if (!in->module_active)
		mods_diff(in, NULL, 0);
	in->nr_mods = in->st.nr_modules = 0;
	in->have_mods = false;
	in->modules_head = in->mods_sig = in->mods_walked_sig = in->modsyms_ms = 0;
	in->forks_va = in->threads_va = 0;
	in->st.probe = NULL;
	memset(in->probe_pa, 0, sizeof(in->probe_pa));
	in->probe_ok = in->want = false;
	kvmas_reset(in->vmas);
	in->have_offsets = false;
	in->start_btf = in->stop_btf = in->init_task = in->st.text_addr = 0;
	in->per_cpu_offset = in->current_task = in->pcpu_hot = 0;
	in->st.state = INTROSPECT_SEARCHING;
	in->st.reboots++;
	in->st.kallsyms_from = NULL;
	in->st.vmcoreinfo_gpa = in->st.pgd_gpa = 0;
	in->st.procs_live = 0;
	in->cursor = 0;
	in->pass_ms = 0;
	in->waiting = false;
	in->passes_base = in->st.passes;	/* a new boot: no back-off */
	return true;
}

/* The walk just made, to the tool (introspect_tool.walked). */
static void walked_tell(struct introspect *in, const struct introspect_tool *t)
{
	struct introspect_walk w = { .walks = in->st.walks };

	if (!in->told)
		in->told = malloc(KTASKS_MAX * sizeof(*in->told));
	for (size_t i = 0; in->told && in->tasks && i < in->nr_tasks; i++) {
		in->told[i] = (struct introspect_task){ .tgid = in->tasks[i].tgid,
							.cr3 = in->tasks[i].cr3 };
		memcpy(in->told[i].comm, in->tasks[i].comm, sizeof(in->told[i].comm));
	}
	w.tasks = in->told;
	w.nr_tasks = in->told && in->tasks ? in->nr_tasks : 0;
	t->walked(t->arg, &w);
}

/* Where the search stands, to the tool (introspect_tool.progress). */
static void progress_tell(const struct introspect *in, const struct introspect_tool *t)
{
	const struct introspect_stats *st = &in->st;
	struct introspect_progress p = {
		.state = st->state,
		/* searching during boot, or found and its processes not walked
		 * yet (BTF read): the first walk is a sync or two away */
		.procs_expected = (st->state == INTROSPECT_SEARCHING &&
				   st->passes - in->passes_base < RETRY_BACKOFF_PASSES) ||
				  (st->state == INTROSPECT_READY && st->btf_bytes && !st->procs_live),
		.procs_live = st->procs_live,
		.maps = st->maps != NULL,
		.walks = st->walks,
		.ksyms_sent = st->ksyms_sent != 0,
		.release = st->release,
	};

	t->progress(t->arg, &p);
}

static bool current_same(const struct kcurrent_info *a, const struct kcurrent_info *b)
{
	return a->nr == b->nr && a->pgd_gpa == b->pgd_gpa &&
	       !memcmp(&a->off, &b->off, sizeof(a->off)) &&
	       !memcmp(a->slot_pa, b->slot_pa, a->nr * sizeof(a->slot_pa[0]));
}

/* Where each CPU's current-task pointer is, to the tool when it changes
 * (found, or lost at a reboot): a sampler then names the task of every
 * kernel sample, and cross-checks opvm.ko's slots. */
static void current_tell(struct introspect *in, const struct introspect_tool *t)
{
	struct kcurrent_info ci;

	if (introspect_current_info(in, in->cfg.nr_cpus, &ci))
		ci.nr = 0;
	if (in->cur_told ? current_same(&ci, in->cur_told) : !ci.nr)
		return;
	if (!in->cur_told && !(in->cur_told = malloc(sizeof(*in->cur_told))))
		return;
	*in->cur_told = ci;
	t->current(t->arg, &ci, ci.nr != 0);
}

void introspect_current_again(struct introspect *in)
{
	if (!in)
		return;
	free(in->cur_told);
	in->cur_told = NULL;
}

/* The probe's words, each read at its guest-physical address (translated
 * once: the kernel image does not move).  0, or -EFAULT: not all read. */
static int probe_read(struct introspect *in, struct walk_probe *pr)
{
	const uint64_t va[3] = { in->forks_va, in->threads_va,
				 in->have_mods ? in->modules_head : 0 };
	uint64_t *out[3] = { &pr->forks, &pr->threads, &pr->mod_newest };
	const size_t len[3] = { 8, 4, 8 };	/* nr_threads is an int */

	memset(pr, 0, sizeof(*pr));
	if (!in->st.probe)
		return -EFAULT;
	for (unsigned i = 0; i < 3; i++) {
		uint8_t b[8];

		if (!va[i])
			continue;	/* no modules list: forks and threads */
		/* aligned: never across a page */
		if (!in->probe_pa[i] && ((va[i] & (len[i] - 1)) || v2p(in, va[i], &in->probe_pa[i])))
			return -EFAULT;
		if (guestmem_read(in->m, in->probe_pa[i], b, len[i]))
			return -EFAULT;
		*out[i] = len[i] == 8 ? bytes_le64(b) : bytes_le32(b);
	}
	return 0;
}

/* Whether this poll walks the lists, and why (the rules above
 * WALK_BOOT_WALKS); *pr: the probe, read first (it is what the walk is
 * made against), valid when *probed. */
static enum walk_why walk_due(struct introspect *in, uint64_t now, struct walk_probe *pr,
			      bool *probed)
{
	uint64_t since = now - in->walk_ms;
	bool boot = in->st.walks - in->walks_base < WALK_BOOT_WALKS;

	*probed = false;
	if (in->module_active)
		return boot ? WALK_BOOT : since >= WALK_FLOOR_MS ? WALK_FLOOR : WALK_NOT;
	*probed = !probe_read(in, pr);
	if (boot)
		return WALK_BOOT;
	if (!*probed) {
		if (in->st.probe)
			in->st.probe_bad++;
		return WALK_UNPROBED;
	}
	if (!in->probe_ok || memcmp(pr, &in->probe, sizeof(*pr)))
		return WALK_CHANGED;
	if ((in->want || (in->vmas && kvmas_unsettled(in->vmas))) && since >= in->want_gap_ms)
		return WALK_WANTED;
	return since >= WALK_FLOOR_MS ? WALK_FLOOR : WALK_NOT;
}

/* A poll's walk made (or not: WALK_NOT), against the probe pr (NULL:
 * none); seq: the records' sequence before it.  A walk for a waiting
 * sample that sent nothing (the sample waits for what no walk brings:
 * code outside every file mapping) doubles the time to the next such
 * walk; a walk that sent something brings it back to WANT_MIN_MS. */
static void walk_done(struct introspect *in, uint64_t now, enum walk_why why,
		      const struct walk_probe *pr, uint32_t seq)
{
	uint64_t *count[] = { &in->st.polls_quiet, &in->st.walks_boot, &in->st.walks_unprobed,
			      &in->st.walks_changed, &in->st.walks_wanted, &in->st.walks_floor };

	(*count[why])++;
	if (why == WALK_NOT)
		return;
	in->walk_ms = now;
	in->want = false;
	if (in->seq != seq)
		in->want_gap_ms = WANT_MIN_MS;
	else if (why == WALK_WANTED)
		in->want_gap_ms = in->want_gap_ms * 2 < WANT_MAX_MS ? in->want_gap_ms * 2 :
								     WANT_MAX_MS;
	/* a walk that failed is made again at the next poll */
	in->probe_ok = pr && in->st.walks != in->walk_walks;
	if (pr)
		in->probe = *pr;
	in->walk_walks = in->st.walks;
}

/* Modules first: a task's record may file the samples waiting in the
 * rings, and those in a module just loaded need it. */
static void lists_poll(struct introspect *in, uint64_t now)
{
	struct walk_probe pr;
	uint32_t seq = in->seq;
	bool probed;
	enum walk_why why = walk_due(in, now, &pr, &probed);

	mods_refresh(in, now, why != WALK_NOT);
	if (why != WALK_NOT)
		tasks_refresh(in, !in->module_active);
	walk_done(in, now, why, probed ? &pr : NULL, seq);
}

void introspect_walk_wanted(struct introspect *in)
{
	if (in)
		in->want = true;
}

int introspect_poll(struct introspect *in, uint64_t now_ms, const struct introspect_news *news,
		    const struct introspect_tool *t)
{
	uint64_t walks;

	if (!in || !t || !t->record)
		return -EINVAL;
	in->tool = t;
	if (news)
		news_take(in, news);
	if (news && news->final) {
		finish(in);
		in->tool = NULL;
		return 0;
	}
	walks = in->st.walks;
	if (in->st.state == INTROSPECT_SEARCHING)
		search(in, now_ms, clk_now_ms());
	else if (in->st.state == INTROSPECT_READY && !rebooted(in) && in->have_offsets)
		lists_poll(in, now_ms);
	if (t->walked && in->st.walks != walks)
		walked_tell(in, t);
	if (t->progress)
		progress_tell(in, t);
	/* the per-CPU areas do not move: looked for again after a walk (a
	 * CPU brought up forks its threads) or a reboot, or for a new
	 * consumer */
	if (t->current && (in->st.walks != walks || !in->cur_told ||
			   in->st.state != INTROSPECT_READY))
		current_tell(in, t);
	in->tool = NULL;	/* the caller's: nothing is emitted between polls */
	return 0;
}

int introspect_current(struct introspect *in, unsigned cpu, struct ktask_cur *out)
{
	struct ktasks_mem km = { .read = { kread, in }, .v2p = v2p, .arg = in };
	uint64_t off = in->current_task ? in->current_task : in->pcpu_hot, slot;
	int rc;

	if (!in->have_offsets || !in->per_cpu_offset || !off) {
		memset(out, 0, sizeof(*out));
		return -ENOENT;
	}
	/* one CPU's base: __per_cpu_offset[cpu] */
	rc = cpu < KTASKS_MAX_CPUS ? ktasks_current_slots(&km, in->per_cpu_offset +
							  (uint64_t)cpu * 8, off, 1, &slot) :
				     -EINVAL;
	if (!rc)
		rc = ktasks_current(&km, &in->off, slot, out);
	in->st.current_reads++;
	if (rc)
		in->st.current_bad++;
	return rc;
}

int introspect_current_info(struct introspect *in, unsigned nr_cpus, struct kcurrent_info *out)
{
	struct ktasks_mem km = { .read = { kread, in }, .v2p = v2p, .arg = in };
	uint64_t off = in->current_task ? in->current_task : in->pcpu_hot;
	unsigned found = 0;

	memset(out, 0, sizeof(*out));
	if (in->st.state != INTROSPECT_READY || !in->have_offsets || !in->per_cpu_offset || !off)
		return -ENOENT;
	out->nr = nr_cpus < KCURRENT_MAX_CPUS ? nr_cpus : KCURRENT_MAX_CPUS;
	out->pgd_gpa = in->st.pgd_gpa;
	out->off = in->off;
	/* CPU by CPU: one the kernel never brought up has no area */
	for (unsigned i = 0; i < out->nr; i++) {
		uint64_t slot, pa;

		if (ktasks_current_slots(&km, in->per_cpu_offset + (uint64_t)i * 8, off, 1,
					 &slot) ||
		    v2p(in, slot, &pa) || (pa & 7))
			continue;
		out->slot_pa[i] = pa;
		found++;
	}
	if (!found) {
		out->nr = 0;
		return -ENOENT;
	}
	return 0;
}

/* The stack index of the last walk (ktasks_stacks()). */
static void stacks_make(struct introspect *in)
{
	struct ktasks_mem km = { .read = { kread, in }, .v2p = v2p, .arg = in };
	uint64_t idle[KTASKS_MAX_CPUS];
	unsigned nr_idle = 0;

	if (!in->stacks && !(in->stacks = calloc(KTASKS_MAX_STACKS, sizeof(*in->stacks))))
		return;
	/* CPU by CPU until one has no area or no idle task (not possible,
	 * or never brought up) */
	while (in->idle_threads && in->per_cpu_offset && nr_idle < KTASKS_MAX_CPUS) {
		uint64_t t;

		if (ktasks_current_slots(&km, in->per_cpu_offset + (uint64_t)nr_idle * 8,
					 in->idle_threads, 1, &idle[nr_idle]) ||
		    kread(in, idle[nr_idle], &t, 8) || !t)
			break;
		nr_idle++;
	}
	in->nr_stacks = ktasks_stacks(&km, &in->off, in->init_task, idle, nr_idle, in->tasks,
				      in->nr_tasks, in->stacks, &in->st.stacks_bad);
	in->st.stacks = in->nr_stacks;
	in->stacks_walk = in->st.walks;
}

int introspect_task_by_sp(struct introspect *in, uint64_t sp, uint32_t *tgid, bool *kthread)
{
	const struct kstack *k;

	if (!in || in->st.state != INTROSPECT_READY || !in->have_offsets || !in->st.walks)
		return -ENOENT;
	if (!in->stacks || in->stacks_walk != in->st.walks)
		stacks_make(in);
	in->st.sp_lookups++;
	k = in->stacks ? ktasks_stack_find(in->stacks, in->nr_stacks, sp) : NULL;
	if (!k)
		return -ENOENT;
	in->st.sp_named++;
	*tgid = k->tgid;
	*kthread = k->kthread;
	return 0;
}

/* ---- user binaries' dynamic symbols ------------------------------------------ */

struct upage {
	struct guestmem *m;
	uint64_t cr3;
};

/* memsyms_mem's page read through the process's page tables: a page it
 * does not map (not resident, or never touched) is -ENOENT. */
static int upage_read(void *arg, uint64_t va, void *page)
{
	const struct upage *u = arg;
	uint64_t gpa;
	int rc;

	if (va >= OPVM_KERNEL_HALF)
		return -EFAULT;
	rc = guestmem_virt_to_phys(u->m, u->cr3, va, &gpa);
	if (rc)
		return rc == -ENOENT ? -ENOENT : -EFAULT;
	return guestmem_read(u->m, gpa, page, OPVM_PAGE_SIZE) ? -EFAULT : 0;
}

static void memsyms_count(struct introspect *in, int rc, const struct memsyms_result *r)
{
	struct introspect_memsyms *s = &in->st.memsyms;

	s->pages += r->pages_read;
	s->pages_absent += r->pages_absent;
	s->syms += rc ? 0 : r->kept;
	s->syms_absent += r->absent;
	s->syms_bad += r->bad;
	s->plt += rc ? 0 : r->plt_ranges;
	s->plt_stubs += rc ? 0 : r->plt_stubs;
	s->plt_refused += r->plt_refused + r->plt_unverified;
	if (!rc)
		s->files++;
	else if (rc == -EINVAL)
		s->refused++;
	else if (rc == -ENOENT)
		s->absent++;
	else if (rc == -ENODATA)
		s->empty++;
	else if (rc == -E2BIG)
		s->budget++;
	if (rc == -EINVAL && r->why)
		snprintf(s->last_refusal, sizeof(s->last_refusal), "%s", r->why);
}

int introspect_image_syms_current(const void *head, size_t len)
{
	return memsyms_current(head, len);
}

int introspect_image_syms(struct introspect *in, uint64_t cr3, const struct introspect_map *exec,
			  const uint8_t *bid, size_t bid_len, void **out, size_t *len)
{
	const struct memsyms_map map = { .start = exec->start, .end = exec->end,
					 .pgoff = exec->pgoff };
	struct upage u = { in->m, cr3 };
	struct memsyms_mem mem = { upage_read, &u };
	uint64_t used = in->st.memsyms.pages + in->st.memsyms.pages_absent;
	struct memsyms_limits lim = { 0 };
	struct memsyms_result r;
	int64_t t0 = clk_now_ns();
	int rc;

	*out = NULL;
	*len = 0;
	if (used >= INTROSPECT_MEMSYMS_PAGES ||
	    in->st.memsyms.files + in->st.memsyms.refused >= INTROSPECT_MEMSYMS_FILES) {
		in->st.memsyms.budget++;
		return -ENOSPC;
	}
	lim.max_pages = INTROSPECT_MEMSYMS_PAGES - used < MEMSYMS_MAX_PAGES ?
			(uint32_t)(INTROSPECT_MEMSYMS_PAGES - used) : MEMSYMS_MAX_PAGES;
	rc = memsyms_read(&mem, &map, bid, bid_len, &lim, out, len, &r);
	memsyms_count(in, rc, &r);
	in->st.memsyms.us += (uint64_t)(clk_now_ns() - t0) / 1000;
	return rc;
}
