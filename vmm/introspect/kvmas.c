// SPDX-License-Identifier: MIT
/*
 * Executable mappings from guest memory (vmm/introspect/kvmas.h).
 *
 * The maple tree (lib/maple_tree.c, include/linux/maple_tree.h): a node is
 * 256 bytes, 256-aligned; a pointer to one ("enode") carries the node
 * type in bits 3-6 and, at the root (mt->ma_root), bit 1.  Types:
 * maple_leaf_64 (1) and maple_range_64 (2) hold 15 pivots at +8 and 16
 * slots at +128; maple_arange_64 (3) 9 pivots at +8 and 10 slots at +80
 * (then gaps).  Slot i covers [pivot[i-1] + 1, pivot[i]] (the node's min
 * for i = 0, its max for the last slot); a zero pivot after the first ends
 * the node.  In a leaf of mm->mm_mt a slot is a vm_area_struct covering
 * exactly [vm_start, vm_end - 1].
 *
 * Before 6.1: mm->mmap, the VMAs linked by vm_next in ascending order, not
 * overlapping.  A VMA that does not start at or after the last one's end
 * ends the walk as a bad node would (a cycle cannot go on ascending), and
 * the caps on VMAs hold as for the tree.
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "guest-kmod/opvm_proto.h"
#include "lib/array.h"
#include "lib/sample.h"
#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/x86.h"
#include "vmm/introspect/klist.h"
#include "vmm/introspect/kvmas.h"

#define NODE_SIZE	256u
#define NODE_MASK	255ull
#define MT_LEAF_64	1u
#define MT_RANGE_64	2u
#define MT_ARANGE_64	3u
#define VM_READ		0x1ull
#define VM_WRITE	0x2ull
#define VM_EXEC		0x4ull
#define VMA_SPAN_MAX	1024u
#define NAME_MAX_BYTES	255u
#define PHNUM_MAX	64u
#define NOTE_MAX	4096u

struct kvmap {
	uint64_t start, end, pgoff, cookie;
	uint32_t prot;
};

struct kvproc {
	uint32_t tgid;
	uint64_t cr3, mm;
	uint64_t key[3];		/* map_count, exec_vm, tree root */
	bool keyed;			/* key valid: maps are current */
	char comm[17];
	struct kvmap *maps;
	uint32_t nr;
};

struct kvfile {
	uint64_t dentry, inode, id;
	uint8_t bid_tries;	/* refreshes left to read its build-id (0:
				 * read, or given up) */
	uint64_t bid_refresh;	/* the refresh that last tried */
};

struct kvmas {
	struct kbtf_vma_offsets o;
	uint32_t vlo, vhi;		/* the span of vm_area_struct read */
	struct kvproc *procs;
	size_t nr_procs, cap_procs;
	struct kvfile *files;
	size_t nr_files;
	uint64_t next_cookie;
	struct kvmap scratch[KVMAS_EXEC_MAX];
	union {
		struct opvm_rec_cookie c;
		uint8_t bytes[sizeof(struct opvm_rec_cookie) + KVMAS_PATH_MAX + 8];
	} rec;
	struct kvmas_stats st;
	/* during one refresh */
	const struct kvmas_mem *mem;
	kvmas_emit_fn emit;
	void *emit_arg;
	uint64_t budget;		/* VMAs left in this refresh */
	size_t unsettled;		/* processes the last refresh left to
					 * the next (budget, build-id) */
};

/* One tree walk of one process. */
struct walk {
	struct kvmas *v;
	uint64_t cr3;
	uint32_t nodes, vmas, n;
	bool stop;
	bool bid_retry;		/* a file's build-id is still to be read */
};

static bool kptr(uint64_t p)
{
	return klist_ptr(p, 65536);
}

static int kread(const struct kvmas *v, uint64_t va, void *buf, size_t len)
{
	return v->mem->kread.read(v->mem->kread.arg, va, buf, len);
}

static int kread64(const struct kvmas *v, uint64_t va, uint64_t *out)
{
	uint8_t b[8];

	if (!kptr(va) || kread(v, va, b, 8))
		return -EFAULT;
	*out = bytes_le64(b);
	return 0;
}

struct kvmas *kvmas_new(const struct kbtf_vma_offsets *o)
{
	const uint32_t f[] = { o->vma_start, o->vma_end, o->vma_flags, o->vma_pgoff, o->vma_file,
			       o->list ? o->vma_next : o->vma_file };
	struct kvmas *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->o = *o;
	v->vlo = UINT32_MAX;
	for (size_t i = 0; i < ARRAY_SIZE(f); i++) {
		v->vlo = f[i] < v->vlo ? f[i] : v->vlo;
		v->vhi = f[i] + 8 > v->vhi ? f[i] + 8 : v->vhi;
	}
	v->files = calloc(KVMAS_FILES_MAX, sizeof(*v->files));
	if (!v->files || v->vhi - v->vlo > VMA_SPAN_MAX) {
		int err = v->files ? EINVAL : ENOMEM;

		free(v->files);
		free(v);
		errno = err;
		return NULL;
	}
	v->next_cookie = KVMAS_COOKIE_BASE;
	v->st.walk = o->list ? "vma_list" : "maple_tree";
	return v;
}

static void procs_clear(struct kvmas *v)
{
	for (size_t i = 0; i < v->nr_procs; i++)
		free(v->procs[i].maps);
	v->nr_procs = 0;
}

void kvmas_reset(struct kvmas *v)
{
	if (!v)
		return;
	procs_clear(v);
	v->unsettled = 0;
	v->nr_files = 0;
}

void kvmas_free(struct kvmas *v)
{
	if (!v)
		return;
	procs_clear(v);
	free(v->procs);
	free(v->files);
	free(v);
}

size_t kvmas_unsettled(const struct kvmas *v)
{
	return v->unsettled;
}

const struct kvmas_stats *kvmas_get_stats(const struct kvmas *v)
{
	return &v->st;
}

/* ---- files: path and build-id -> COOKIE ------------------------------------ */

/* The name of dentry d (one component, '/' and NUL made '?') before the
 * path built so far at buf[*pos..]; false: it could not be read. */
static bool name_prepend(struct kvmas *v, uint64_t d, char *buf, size_t *pos)
{
	uint8_t q[16];
	char name[NAME_MAX_BYTES];
	uint32_t len;
	uint64_t p;

	if (kread(v, d + v->o.dentry_name, q, sizeof(q)))
		return false;
	len = bytes_le32(q + v->o.qstr_len);
	p = bytes_le64(q + v->o.qstr_name);
	if (!len || len > NAME_MAX_BYTES || len + 1 > *pos || !kptr(p & ~7ull) ||
	    kread(v, p, name, len))
		return false;
	for (uint32_t i = 0; i < len; i++)
		if (name[i] == '/' || !name[i])
			name[i] = '?';
	*pos -= len;
	memcpy(buf + *pos, name, len);
	buf[--*pos] = '/';
	return true;
}

/*
 * The path of (mnt, dentry) into buf[*pos..KVMAS_PATH_MAX): each dentry's
 * name up its d_parent chain to its file system's root, then (with the
 * mount offsets) from the mount point in the parent mount, up to the
 * mount that is its own parent.  false: cut (depth, length, unreadable).
 */
static bool path_build(struct kvmas *v, uint64_t mnt, uint64_t d, char *buf, size_t *pos)
{
	const struct kbtf_vma_offsets *o = &v->o;
	uint64_t mount = mnt - o->mount_mnt, parent, root;

	*pos = KVMAS_PATH_MAX;
	for (unsigned depth = 0;; depth++) {
		if (depth == KVMAS_PATH_DEPTH)
			return false;
		if (kread64(v, d + o->dentry_parent, &parent))
			return false;
		if (parent != d) {
			if (!name_prepend(v, d, buf, pos))
				return false;
			d = parent;
			continue;
		}
		/* a file system's root: the mount point it hangs on, if any */
		if (!o->has_mount || !kptr(mnt) ||
		    kread64(v, mnt + o->vfsmount_root, &root) || root != d ||
		    kread64(v, mount + o->mount_parent, &parent) || parent == mount)
			break;
		if (kread64(v, mount + o->mount_mountpoint, &d) || !kptr(parent))
			return false;
		mount = parent;
		mnt = mount + o->mount_mnt;
	}
	if (*pos == KVMAS_PATH_MAX)
		buf[--*pos] = '/';
	return true;
}

/* Notes at [va, va + len) of the process: NT_GNU_BUILD_ID into bid. */
static int note_build_id(struct kvmas *v, uint64_t cr3, uint64_t va, uint64_t len,
			 uint8_t *bid)
{
	uint8_t note[NOTE_MAX];
	size_t off = 0;

	if (len > NOTE_MAX)
		len = NOTE_MAX;
	if (len < 12 || v->mem->uread(v->mem->arg, cr3, va, note, len))
		return 0;
	while (off + 12 <= len) {
		uint32_t nsz = bytes_le32(note + off), dsz = bytes_le32(note + off + 4);
		uint32_t type = bytes_le32(note + off + 8);
		uint64_t name = off + 12, desc = name + ((nsz + 3ull) & ~3ull);

		if (nsz > len || dsz > len || desc + dsz > len)
			break;
		if (type == 3 && nsz == 4 && !memcmp(note + name, "GNU", 4) && dsz &&
		    dsz <= OPVM_BUILD_ID_MAX) {
			memcpy(bid, note + desc, dsz);
			return (int)dsz;
		}
		off = desc + ((dsz + 3ull) & ~3ull);
	}
	return 0;
}

/* The build-id of the ELF file whose offset 0 the process maps at base:
 * its header, program headers and PT_NOTEs, bounded.  Returns its length
 * (0: none read). */
static int build_id_read(struct kvmas *v, uint64_t cr3, uint64_t base, uint8_t *bid)
{
	uint8_t eh[64], ph[PHNUM_MAX * 56];
	uint64_t phoff;
	uint32_t phnum;
	int n = 0;

	if (base >= OPVM_USER_TOP || v->mem->uread(v->mem->arg, cr3, base, eh, sizeof(eh)) ||
	    memcmp(eh, "\177ELF\2\1", 6))
		return 0;
	phoff = bytes_le64(eh + 32);
	phnum = eh[56] | (uint32_t)eh[57] << 8;
	if ((eh[54] | eh[55] << 8) != 56 || !phnum || phnum > PHNUM_MAX || phoff > 65536 ||
	    v->mem->uread(v->mem->arg, cr3, base + phoff, ph, phnum * 56u))
		return 0;
	for (uint32_t i = 0; i < phnum && !n; i++) {
		const uint8_t *p = ph + i * 56u;

		if (bytes_le32(p) == 4 /* PT_NOTE */ && bytes_le64(p + 8) < (1ull << 32))
			n = note_build_id(v, cr3, base + bytes_le64(p + 8), bytes_le64(p + 32), bid);
	}
	return n;
}

/* COOKIE id for the file of (mnt, d) mapped at base in the process, its
 * build-id read from that mapping.  Returns the build-id's length (0:
 * none read), or -1 when the path does not read (nothing sent). */
static int cookie_send(struct kvmas *v, uint64_t cr3, uint64_t mnt, uint64_t d,
		       uint64_t id, uint64_t base)
{
	struct opvm_rec_cookie *c = &v->rec.c;
	char *path = (char *)(c + 1);
	char buf[KVMAS_PATH_MAX];
	size_t pos;

	memset(c, 0, sizeof(*c));
	if (!path_build(v, mnt, d, buf, &pos)) {
		v->st.path_bad++;
		return -1;
	}
	c->build_id_len = (uint8_t)build_id_read(v, cr3, base, c->build_id);
	c->cookie = htole64(id);
	c->path_len = htole16((uint16_t)(KVMAS_PATH_MAX - pos));
	memcpy(path, buf + pos, KVMAS_PATH_MAX - pos);
	v->emit(v->emit_arg, c, OPVM_REC_COOKIE, sizeof(*c) + KVMAS_PATH_MAX - pos);
	v->st.cookies_sent++;
	return c->build_id_len;
}

/* A known file whose build-id did not read (its header page was not yet
 * resident: a process just exec'd): read again once a refresh, through
 * the first process walked that maps it, and on success its COOKIE again
 * under the same id, which the host takes as an update.  KVMAS_BID_TRIES
 * refreshes at most, then it stays without. */
static void file_bid_retry(struct walk *w, struct kvfile *f, uint64_t mnt, uint64_t base)
{
	struct kvmas *v = w->v;
	uint8_t bid[OPVM_BUILD_ID_MAX];

	if (!f->bid_tries)
		return;
	if (f->bid_refresh == v->st.refreshes) {
		w->bid_retry = true;	/* tried in this refresh already */
		return;
	}
	f->bid_refresh = v->st.refreshes;
	if (--f->bid_tries && !build_id_read(v, w->cr3, base, bid)) {
		w->bid_retry = true;
		return;
	}
	if (f->bid_tries && cookie_send(v, w->cr3, mnt, f->dentry, f->id, base) > 0) {
		f->bid_tries = 0;
		v->st.buildid_late++;
	}
}

/* The cookie of the file of (mnt, dentry, inode), mapped at base in the
 * process: known, or a new one whose COOKIE goes out now.  0: unreadable. */
static uint64_t file_cookie(struct walk *w, uint64_t mnt, uint64_t d, uint64_t inode,
			    uint64_t base)
{
	struct kvmas *v = w->v;
	int n;

	for (size_t i = 0; i < v->nr_files; i++)
		if (v->files[i].dentry == d && v->files[i].inode == inode) {
			file_bid_retry(w, &v->files[i], mnt, base);
			return v->files[i].id;
		}
	if (v->nr_files == KVMAS_FILES_MAX) {
		v->nr_files = 0;	/* new ids from now on: old ones stay valid */
		v->st.files_full++;
	}
	n = cookie_send(v, w->cr3, mnt, d, v->next_cookie, base);
	if (n < 0)
		return 0;
	if (!n) {
		v->st.buildid_missing++;
		w->bid_retry = true;
	}
	v->files[v->nr_files++] = (struct kvfile){ d, inode, v->next_cookie,
						   n ? 0 : KVMAS_BID_TRIES, v->st.refreshes };
	return v->next_cookie++;
}

/* ---- the maple tree --------------------------------------------------------- */

/* The VMA in a leaf slot covering [first, last]: kept if it maps a file
 * executable.  pre: its bytes [vlo, vhi) when the caller read them. */
static void vma_entry(struct walk *w, uint64_t vma, uint64_t first, uint64_t last,
		      const uint8_t *pre)
{
	struct kvmas *v = w->v;
	const struct kbtf_vma_offsets *o = &v->o;
	uint8_t buf[VMA_SPAN_MAX], fp[16];
	const uint8_t *b = pre ? pre : buf;
	uint64_t start, end, flags, file, mnt, d, inode;

	if (++w->vmas > KVMAS_VMAS_MAX || !v->budget) {
		v->st.tree_cut++;
		w->stop = true;
		return;
	}
	v->budget--;
	v->st.vmas++;
	if (!pre && (!kptr(vma) || kread(v, vma + v->vlo, buf, v->vhi - v->vlo))) {
		v->st.vma_bad++;
		return;
	}
	start = bytes_le64(b + o->vma_start - v->vlo);
	end = bytes_le64(b + o->vma_end - v->vlo);
	flags = bytes_le64(b + o->vma_flags - v->vlo);
	file = bytes_le64(b + o->vma_file - v->vlo);
	if (start != first || end - 1 != last || end > OPVM_USER_TOP) {
		v->st.vma_bad++;
		return;
	}
	if (!(flags & VM_EXEC) || !file)
		return;
	if (w->n == KVMAS_EXEC_MAX) {
		v->st.tree_cut++;
		w->stop = true;
		return;
	}
	if (!kptr(file) || kread(v, file + o->file_path, fp, 16)) {
		v->st.vma_bad++;
		return;
	}
	mnt = bytes_le64(fp + o->path_mnt);
	d = bytes_le64(fp + o->path_dentry);
	if (!kptr(d) || kread64(v, d + o->dentry_inode, &inode)) {
		v->st.vma_bad++;
		return;
	}
	struct kvmap *m = &v->scratch[w->n];

	m->start = start;
	m->end = end;
	m->pgoff = bytes_le64(b + o->vma_pgoff - v->vlo) << OPVM_PAGE_SHIFT;
	m->prot = (flags & VM_READ ? 1 : 0) | (flags & VM_WRITE ? 2 : 0) | 4;
	m->cookie = file_cookie(w, mnt, d, inode, start - m->pgoff);
	if (m->cookie)
		w->n++;
}

/* The node enode covering [min, max], depth levels down: its slots in
 * order, children first.  Stops the walk (w->stop) at what does not hold. */
static void mt_node(struct walk *w, uint64_t enode, uint64_t min, uint64_t max, unsigned depth)
{
	struct kvmas *v = w->v;
	unsigned type = (enode >> 3) & 15, nslots, npiv;
	uint64_t node = enode & ~NODE_MASK, first = min;
	uint8_t b[NODE_SIZE];

	if (depth > KVMAS_DEPTH_MAX || ++w->nodes > KVMAS_NODES_MAX) {
		v->st.tree_cut++;
		w->stop = true;
		return;
	}
	if (type < MT_LEAF_64 || type > MT_ARANGE_64 || !kptr(node) ||
	    kread(v, node, b, sizeof(b))) {
		v->st.tree_bad++;
		w->stop = true;
		return;
	}
	v->st.nodes++;
	nslots = type == MT_ARANGE_64 ? 10 : 16;
	npiv = nslots - 1;
	for (unsigned i = 0; i < nslots && !w->stop; i++) {
		uint64_t last = i < npiv ? bytes_le64(b + 8 + i * 8) : max;
		uint64_t slot = bytes_le64(b + 8 + npiv * 8 + i * 8);

		if (i && i < npiv && !last)
			break;		/* the node's end */
		if (last < first || last > max) {
			v->st.tree_bad++;	/* pivots out of order */
			w->stop = true;
			return;
		}
		if (slot && type == MT_LEAF_64)
			vma_entry(w, slot, first, last, NULL);
		else if (slot)
			mt_node(w, slot, first, last, depth + 1);
		if (last == max)
			break;
		first = last + 1;
	}
}

/* ---- the list of vm_next (before 6.1) ------------------------------------------ */

static void list_walk(struct walk *w, uint64_t vma)
{
	struct kvmas *v = w->v;
	uint8_t b[VMA_SPAN_MAX];
	uint64_t end = 0;

	while (vma && !w->stop) {
		uint64_t start, next;

		if (!kptr(vma) || kread(v, vma + v->vlo, b, v->vhi - v->vlo)) {
			v->st.tree_bad++;
			w->stop = true;
			return;
		}
		start = bytes_le64(b + v->o.vma_start - v->vlo);
		next = bytes_le64(b + v->o.vma_next - v->vlo);
		if (start < end) {	/* out of order, overlapping, or a cycle */
			v->st.tree_bad++;
			w->stop = true;
			return;
		}
		end = bytes_le64(b + v->o.vma_end - v->vlo);
		if (end <= start) {
			v->st.vma_bad++;
			w->stop = true;
			return;
		}
		vma_entry(w, vma, start, end - 1, b);
		vma = next;
	}
}

/* ---- processes ---------------------------------------------------------------- */

static bool map_eq(const struct kvmap *a, const struct kvmap *b)
{
	return a->start == b->start && a->end == b->end && a->pgoff == b->pgoff &&
	       a->cookie == b->cookie && a->prot == b->prot;
}

static bool map_in(const struct kvmap *m, const struct kvmap *set, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (map_eq(m, &set[i]))
			return true;
	return false;
}

/* What changed between p's maps and the new ones: MUNMAP for the ones
 * gone, then MMAP for the new. */
static void maps_send(struct kvmas *v, const struct kvproc *p, const struct kvmap *nw,
		      uint32_t n)
{
	for (uint32_t i = 0; i < p->nr; i++) {
		struct opvm_rec_munmap r = { .tgid = htole32(p->tgid) };

		if (map_in(&p->maps[i], nw, n))
			continue;
		r.start = htole64(p->maps[i].start);
		r.end = htole64(p->maps[i].end);
		v->emit(v->emit_arg, &r, OPVM_REC_MUNMAP, sizeof(r));
		v->st.munmaps_sent++;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct opvm_rec_mmap r = { .tgid = htole32(p->tgid) };

		if (map_in(&nw[i], p->maps, p->nr))
			continue;
		r.prot = htole32(nw[i].prot);
		r.start = htole64(nw[i].start);
		r.end = htole64(nw[i].end);
		r.pgoff = htole64(nw[i].pgoff);
		r.cookie = htole64(nw[i].cookie);
		v->emit(v->emit_arg, &r, OPVM_REC_MMAP, sizeof(r));
		v->st.maps_sent++;
	}
}

/* mm's key: what changes when its mappings do. */
static int mm_key(const struct kvmas *v, uint64_t mm, uint64_t key[3])
{
	uint8_t c[4];

	if (kread(v, mm + v->o.mm_map_count, c, 4) ||
	    kread64(v, mm + v->o.mm_exec_vm, &key[1]) ||
	    kread64(v, mm + (v->o.list ? v->o.mm_mmap : v->o.mm_mt + v->o.mt_root), &key[2]))
		return -EFAULT;
	key[0] = bytes_le32(c);
	return 0;
}

/* p (carried over from the last refresh, or new and empty) for task t:
 * read again when its mm changed and the budget allows. */
static int proc_update(struct kvmas *v, struct kvproc *p, const struct ktask *t)
{
	struct walk w = { .v = v, .cr3 = t->cr3 };
	uint64_t key[3], root;
	struct kvmap *maps;

	if (!t->mm || !t->cr3 || mm_key(v, t->mm, key))
		return 0;	/* a kernel thread, or an mm that does not read */
	if (p->keyed && p->mm == t->mm && !memcmp(key, p->key, sizeof(key))) {
		v->st.procs_unchanged++;
		return 0;
	}
	if (!v->budget) {
		v->st.procs_deferred++;
		v->unsettled++;
		p->keyed = false;
		return 0;
	}
	root = key[2];
	if (v->o.list)
		list_walk(&w, root);
	/* an empty tree, or a node (internal entry, bit 1) */
	else if (root && ((root & 3) != 2 || root <= 4096))
		v->st.tree_bad++;
	else if (root)
		mt_node(&w, root, 0, UINT64_MAX, 0);
	v->st.procs_read++;
	maps_send(v, p, v->scratch, w.n);
	maps = w.n ? malloc(w.n * sizeof(*maps)) : NULL;
	if (w.n && !maps)
		return -ENOMEM;
	if (w.n)
		memcpy(maps, v->scratch, w.n * sizeof(*maps));
	free(p->maps);
	p->maps = maps;
	p->nr = w.n;
	p->mm = t->mm;
	memcpy(p->key, key, sizeof(key));
	/* a walk cut short by the budget is read again next time, and so is
	 * one with a build-id still to read */
	p->keyed = (!w.stop || v->budget) && !w.bid_retry;
	v->unsettled += !p->keyed;
	return 0;
}

int kvmas_refresh(struct kvmas *v, const struct kvmas_mem *mem, const struct ktask *t,
		  size_t n, kvmas_emit_fn emit, void *arg)
{
	int64_t t0 = clk_now_ns();
	struct kvproc *nw;
	size_t i = 0, cap = 0;
	int rc = 0;

	nw = NULL;
	if (n && array_grow(&nw, &cap, n, sizeof(*nw), n))
		return -ENOMEM;
	v->mem = mem;
	v->emit = emit;
	v->emit_arg = arg;
	v->budget = KVMAS_REFRESH_VMAS;
	v->unsettled = 0;
	v->st.exec_maps = 0;
	for (size_t j = 0; j < n; j++) {
		struct kvproc *p = &nw[j];

		while (i < v->nr_procs && v->procs[i].tgid < t[j].tgid)
			free(v->procs[i++].maps);	/* gone: PROC_EXIT sent */
		memset(p, 0, sizeof(*p));
		/* same process, same image: the model still has its maps
		 * (an EXEC, sent on a new cr3 or name, dropped them) */
		if (i < v->nr_procs && v->procs[i].tgid == t[j].tgid) {
			if (v->procs[i].cr3 == t[j].cr3 && !strcmp(v->procs[i].comm, t[j].comm))
				*p = v->procs[i], v->procs[i].maps = NULL;
			free(v->procs[i++].maps);
		}
		p->tgid = t[j].tgid;
		p->cr3 = t[j].cr3;
		memcpy(p->comm, t[j].comm, sizeof(p->comm));
		if (!rc)
			rc = proc_update(v, p, &t[j]);
		v->st.exec_maps += p->nr;
	}
	while (i < v->nr_procs)
		free(v->procs[i++].maps);
	free(v->procs);
	v->procs = nw;
	v->nr_procs = n;
	v->cap_procs = cap;
	v->st.refreshes++;
	v->st.refresh_us = (uint64_t)(clk_now_ns() - t0) / 1000;
	return rc;
}
