// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for introspection's parsers of guest memory
 * (vmm/introspect/): the VMCOREINFO text and the kallsyms decoder over a
 * memory image the input makes up.  The input's first 48 bytes are six
 * little-endian u64 offsets into the image (names, num_syms, token_table,
 * token_index, offsets, relative_base; each taken modulo twice the image's
 * size, so some point outside it); the rest is memory at guest address
 * 0xffffffff81000000, and is also parsed as VMCOREINFO text.  Decoding must
 * stay within its caps, pass only bounded names, and never read outside
 * what the callback allows.  The same image is walked as a task list
 * (init_task and the struct offsets from the same six numbers) and parsed
 * as BTF: walks must stop at their cap, results be unique and sorted,
 * and each task's cgroup path (css_set, cgroup, kernfs nodes at offsets
 * from the same numbers) bounded, terminated and rooted at '/'.
 * It is also read as per-CPU areas (__per_cpu_offset[] and a current-task
 * pointer somewhere in it): each CPU's current task must come back with a
 * terminated name, a kernel task address and a page-aligned CR3, or be
 * refused.
 *
 * Its last 4 KiB are a process's mm (at -0x100) and what its maple tree
 * leads to, with fixed struct offsets, user addresses from 0x400000 read
 * from that trailer: the mappings walk (vmm/introspect/kvmas.h) must stay
 * within its caps and send only well-formed records.
 *
 * The image is also searched for kallsyms tables by their shape
 * (kallsyms_find(), as for kernels before 6.0): the search must stay
 * within its caps, and tables it finds decode within theirs.  The trailer
 * is walked a second time as a list of vm_next (before 6.1).
 *
 * The image is also the module space (seen at MODBASE as well) and walked
 * as the list of loadable modules (vmm/introspect/kmods.h) from the head
 * the sixth offset gives, with Debian 12's struct module offsets: the walk
 * must stop at its cap, pass only modules with a terminated name and text
 * inside the module space, and their symbols only inside that text, with
 * bounded names.
 *
 * Seeds: tests/fuzz/corpus/introspect/ (tests/fuzz/gen-introspect-seed.py).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "guest-kmod/opvm_proto.h"
#include "vmm/introspect/kallsyms.h"
#include "vmm/introspect/kbtf.h"
#include "vmm/introspect/kmods.h"
#include "vmm/introspect/ktasks.h"
#include "vmm/introspect/kvmas.h"
#include "vmm/introspect/vmcoreinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BASE	0xffffffff81000000ull

struct mem {
	const uint8_t *p;
	size_t len;
	unsigned reads, max_reads;
};

static int mem_read(void *arg, uint64_t gva, void *buf, size_t len)
{
	struct mem *m = arg;

	if (++m->reads > (m->max_reads ? m->max_reads : 1000000))
		__builtin_trap();	/* a walk without bound */
	if (gva < BASE || gva - BASE > m->len || len > m->len - (gva - BASE))
		return -1;
	memcpy(buf, m->p + (gva - BASE), len);
	return 0;
}

static int v2p(void *arg, uint64_t va, uint64_t *pa)
{
	struct mem *m = arg;

	if (va < BASE || va - BASE >= m->len)
		return -1;
	*pa = va - BASE;
	return 0;
}

/* The image as a task list: offsets from the header's numbers. */
static void tasks(struct mem *m, const uint64_t *off)
{
	struct ktasks_mem km = { .read = { mem_read, m }, .v2p = v2p, .arg = m };
	struct kbtf_offsets o = {
		.task_tasks = (uint32_t)(off[0] % 2048), .task_pid = (uint32_t)(off[1] % 2048),
		.task_tgid = (uint32_t)(off[2] % 2048), .task_comm = (uint32_t)(off[3] % 2048),
		.task_mm = (uint32_t)(off[4] % 2048), .task_real_parent = (uint32_t)(off[5] % 2048),
		.mm_pgd = (uint32_t)(off[0] % 512),
		/* the cgroup chain: task -> css_set -> cgroup -> kernfs nodes */
		.has_cgroup = 1, .task_cgroups = (uint32_t)(off[5] % 4096),
		.cset_dfl_cgrp = (uint32_t)(off[4] % 256), .cgrp_kn = (uint32_t)(off[3] % 256),
		.kn_parent = (uint32_t)(off[2] % 128), .kn_name = (uint32_t)(off[1] % 128),
	};
	struct ktasks_stats st = { 0 };
	struct ktask out[64];
	size_t n;

	if (ktasks_walk(&km, &o, BASE + off[1] % (m->len + 1), out, 64, &n, &st))
		return;
	for (size_t i = 1; i < n; i++)
		if (out[i - 1].tgid >= out[i].tgid)
			__builtin_trap();
	if (n > 64 || (n && out[0].comm[16]))
		__builtin_trap();
	/* each task's cgroup path: bounded, terminated, rooted */
	for (size_t i = 0; i < n; i++) {
		char path[160];
		int cut, len = ktasks_cgroup_path(&km, &o, out[i].cgroup_kn, path,
						  sizeof(path), &cut, &st);

		if (len >= (int)sizeof(path) || (len >= 0 && (path[0] != '/' || path[len])))
			__builtin_trap();
	}
	/* the same memory as per-CPU areas: CPU i's current task */
	uint64_t slots[8];
	struct ktask_cur cur;

	if (ktasks_current_slots(&km, BASE + off[2] % (m->len + 1), off[3] % (m->len + 1), 8,
				 slots))
		return;
	/* a pointer read in a sampler's stop (vmm/introspect/kcurrent.h) */
	if (!ktasks_task(&km, &o, BASE + off[4] % (m->len + 1), &cur) &&
	    (cur.comm[16] || (cur.cr3 & 4095) || (cur.kthread && cur.cr3)))
		__builtin_trap();
	for (unsigned i = 0; i < 8; i++)
		if (!ktasks_current(&km, &o, slots[i], &cur) &&
		    (cur.comm[16] || cur.task < 0xffff800000000000ull || (cur.cr3 & 4095)))
			__builtin_trap();
}

/* ---- the mappings walk over the trailer ---- */
#define TRAILER		4096u
#define USER_BASE	0x400000ull

static int uread(void *arg, uint64_t cr3, uint64_t va, void *buf, size_t len)
{
	struct mem *m = arg;
	uint64_t off = va - USER_BASE + (m->len - TRAILER);

	(void)cr3;
	if (va < USER_BASE || va - USER_BASE >= TRAILER || len > m->len - off)
		return -1;
	memcpy(buf, m->p + off, len);
	return 0;
}

struct rec_check {
	unsigned n;
};

static void on_rec(void *arg, void *rec, unsigned type, size_t len)
{
	struct rec_check *c = arg;

	if (len > OPVM_REC_MAX || ++c->n > 4 * KVMAS_EXEC_MAX + KVMAS_FILES_MAX)
		__builtin_trap();
	if (type == OPVM_REC_COOKIE) {
		const struct opvm_rec_cookie *r = rec;

		if (!r->cookie || r->build_id_len > OPVM_BUILD_ID_MAX ||
		    r->path_len > KVMAS_PATH_MAX || sizeof(*r) + r->path_len != len ||
		    memchr(r + 1, '\0', r->path_len))
			__builtin_trap();
	} else if (type == OPVM_REC_MMAP) {
		const struct opvm_rec_mmap *r = rec;

		if (r->start >= r->end || r->end > 0x0000800000000000ull || !r->cookie)
			__builtin_trap();
	} else if (type != OPVM_REC_MUNMAP) {
		__builtin_trap();
	}
}

static void maps(struct mem *m, int list)
{
	struct kbtf_vma_offsets o = {
		.mm_mt = 0x10, .mt_root = 8, .mm_map_count = 0, .mm_exec_vm = 8,
		.vma_start = 0, .vma_end = 8, .vma_flags = 0x20, .vma_pgoff = 0x28,
		.vma_file = 0x30, .file_path = 0, .path_mnt = 0, .path_dentry = 8,
		.dentry_parent = 0, .dentry_name = 8, .dentry_inode = 0x18,
		.qstr_len = 4, .qstr_name = 8, .has_mount = 1, .mount_parent = 0,
		.mount_mountpoint = 8, .mount_mnt = 0x10, .vfsmount_root = 0,
	};
	struct kvmas_mem km = { .kread = { mem_read, m }, .uread = uread, .arg = m };
	struct ktask t = { .tgid = 1, .cr3 = 0x1000, .mm = BASE + m->len - 0x100 };
	struct kvmas *v;
	struct rec_check c = { 0 };

	o.list = list;
	o.mm_mmap = 0x18;	/* where the tree's root is otherwise */
	o.vma_next = 0x10;
	if (m->len < TRAILER || !(v = kvmas_new(&o)))
		return;
	m->reads = 0;
	m->max_reads = 4000000;		/* 16384 VMAs, each a new file: ~2M */
	kvmas_refresh(v, &km, &t, 1, on_rec, &c);
	const struct kvmas_stats *st = kvmas_get_stats(v);

	if (st->nodes > KVMAS_NODES_MAX || st->vmas > KVMAS_VMAS_MAX ||
	    st->exec_maps > KVMAS_EXEC_MAX)
		__builtin_trap();
	kvmas_free(v);
	m->max_reads = 0;
}

/* ---- the module list: the image seen at MODBASE too ---- */
#define MODBASE	0xffffffffc0000000ull

static int mod_read(void *arg, uint64_t gva, void *buf, size_t len)
{
	return mem_read(arg, gva >= MODBASE ? gva - MODBASE + BASE : gva, buf, len);
}

static int on_modsym(void *arg, const struct kmod *m, uint64_t addr, char type,
		     const char *name, size_t len)
{
	if (addr < m->base || addr >= m->base + m->size || !len || len > OPVM_KSYM_NAME_MAX ||
	    !strchr("tTwW", type) || memchr(name, '\0', len))
		__builtin_trap();
	(*(unsigned *)arg)++;
	return 0;
}

static void modules(struct mem *m, const uint64_t *off)
{
	/* Debian 12's 6.1 (its BTF): core_layout at 320, kallsyms at 544 */
	static const struct kbtf_mod_offsets o = {
		.mod_size = 896, .mod_state = 0, .mod_list = 8, .mod_name = 24, .name_len = 56,
		.layout = "core_layout", .text_base = 320, .text_size = 332, .has_kallsyms = 1,
		.mod_kallsyms = 544, .ks_symtab = 0, .ks_num = 8, .ks_strtab = 16,
		.has_typetab = 1, .ks_typetab = 24,
	};
	struct unwind_mem um = { mod_read, m };
	struct kmods_stats st = { 0 };
	static struct kmod out[KMODS_MAX];
	unsigned syms = 0;
	size_t n;

	m->reads = 0;
	m->max_reads = 4000000;
	/* the head: the sixth offset, in the module space */
	if (kmods_walk(&um, &o, MODBASE + (off[5] - BASE), out, KMODS_MAX, &n, &st))
		goto out;
	if (n > KMODS_MAX)
		__builtin_trap();
	for (size_t i = 0; i < n; i++) {
		if (!out[i].name[0] || !memchr(out[i].name, '\0', sizeof(out[i].name)) ||
		    out[i].base < MODBASE || out[i].size > KMODS_TEXT_MAX)
			__builtin_trap();
		if (i < 4)	/* each up to KMODS_SYMS_MAX entries: a few */
			kmods_syms(&um, &o, &out[i], on_modsym, &syms, &st);
	}
	if (syms != st.syms)
		__builtin_trap();
out:
	m->max_reads = 0;
}

static int on_sym(void *arg, uint64_t addr, char type, const char *name, size_t len)
{
	if (!len || len > KALLSYMS_NAME_MAX)
		__builtin_trap();
	(*(unsigned *)arg)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mem m = { 0 };
	struct unwind_mem um = { mem_read, &m };
	struct kallsyms_addrs a;
	struct kallsyms_result res;
	struct vmcoreinfo vi;
	uint64_t off[6];
	unsigned n = 0;
	char err[160];

	if (size < sizeof(off) + 1)
		return 0;
	memcpy(off, data, sizeof(off));
	m.p = data + sizeof(off);
	m.len = size - sizeof(off);
	vmcoreinfo_parse((const char *)m.p, m.len, &vi);
	if (vi.release[sizeof(vi.release) - 1])
		__builtin_trap();
	for (int i = 0; i < 6; i++)
		off[i] = BASE + off[i] % (2 * m.len);
	a = (struct kallsyms_addrs){ .names = off[0], .num_syms = off[1], .token_table = off[2],
				     .token_index = off[3], .offsets = off[4],
				     .relative_base = off[5] };
	{
		struct kbtf_offsets ko;

		struct kbtf_mod_offsets mo;

		kbtf_offsets(m.p, m.len, &ko, err, sizeof(err));
		kbtf_mod_offsets(m.p, m.len, &mo, err, sizeof(err));
	}
	m.reads = 0;
	tasks(&m, off);
	maps(&m, 0);
	maps(&m, 1);
	modules(&m, off);
	m.reads = 0;
	{
		struct kallsyms_find_result fr;
		struct kallsyms_addrs fa;
		unsigned fn = 0;

		m.max_reads = 4000000;
		if (!kallsyms_find(&um, BASE, m.len, &fa, &fr, err, sizeof(err))) {
			m.reads = 0;
			if (!kallsyms_decode(&um, &fa, on_sym, &fn, &res, err, sizeof(err)) &&
			    fn != res.decoded)
				__builtin_trap();
		}
		if (fr.candidates > KALLSYMS_FIND_CANDIDATES || fr.scanned > KALLSYMS_FIND_MAX)
			__builtin_trap();
		m.max_reads = 0;
	}
	m.reads = 0;
	if (!kallsyms_decode(&um, &a, on_sym, &n, &res, err, sizeof(err)) &&
	    (n != res.decoded || res.decoded + res.bad > res.nr_syms ||
	     res.nr_syms > KALLSYMS_MAX_SYMS || res.bytes_read > KALLSYMS_READ_MAX + 70000))
		__builtin_trap();
	return 0;
}
