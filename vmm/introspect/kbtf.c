// SPDX-License-Identifier: MIT
/*
 * Guest struct offsets from its BTF (vmm/introspect/kbtf.h), by libbpf.
 * Members may sit in anonymous structs and unions (randomized_struct_fields
 * and friends): those are searched too, a few levels deep.
 */
#include <errno.h>
#include <string.h>

#include <bpf/btf.h>

#include "lib/array.h"
#include "lib/util.h"
#include "vmm/introspect/kbtf.h"

#define NEST_MAX	8

/* Byte offset of member name in composite type id (anonymous members
 * searched), or -1. */
static long member_off(const struct btf *b, uint32_t id, const char *name, int depth)
{
	const struct btf_type *t = btf__type_by_id(b, id);
	const struct btf_member *m;

	if (!t || depth > NEST_MAX || !btf_is_composite(t))
		return -1;
	m = btf_members(t);
	for (unsigned i = 0; i < btf_vlen(t); i++, m++) {
		const char *n = btf__name_by_offset(b, m->name_off);
		uint32_t bits = btf_member_bit_offset(t, i);
		long sub;

		if (bits % 8)
			continue;	/* a bit field is never what we want */
		if (n && *n) {
			if (!strcmp(n, name))
				return (long)(bits / 8);
			continue;
		}
		sub = member_off(b, btf__resolve_type(b, m->type), name, depth + 1);
		if (sub >= 0)
			return (long)(bits / 8) + sub;
	}
	return -1;
}

struct want {
	const char *name;
	size_t off;		/* in struct kbtf_offsets */
	uint32_t width;		/* bytes the walk reads there */
};

static int struct_offsets(const struct btf *b, const char *sname, uint32_t *size,
			  const struct want *w, size_t n, struct kbtf_offsets *out,
			  char *err, size_t errlen)
{
	int32_t id = btf__find_by_name_kind(b, sname, BTF_KIND_STRUCT);
	const struct btf_type *t = id > 0 ? btf__type_by_id(b, (uint32_t)id) : NULL;

	if (!t) {
		util_seterr(err, errlen, "the guest's BTF has no struct %s", sname);
		return -EINVAL;
	}
	*size = t->size;
	for (size_t i = 0; i < n; i++) {
		long off = member_off(b, (uint32_t)id, w[i].name, 0);

		if (off < 0 || (uint64_t)off + w[i].width > t->size) {
			util_seterr(err, errlen, "struct %s.%s: %s in the guest's BTF", sname,
				    w[i].name, off < 0 ? "not found" : "outside the struct");
			return -EINVAL;
		}
		memcpy((char *)out + w[i].off, &(uint32_t){ (uint32_t)off }, sizeof(uint32_t));
	}
	return 0;
}


/* The cgroup chain's members (kbtf.h), all or none: 0 or -EINVAL. */
static int cgroup_offsets(const struct btf *b, struct kbtf_offsets *out)
{
	static const struct want task[] = {
		{ "cgroups", offsetof(struct kbtf_offsets, task_cgroups), 8 },
	};
	static const struct want cset[] = {
		{ "dfl_cgrp", offsetof(struct kbtf_offsets, cset_dfl_cgrp), 8 },
	};
	static const struct want cgrp[] = {
		{ "kn", offsetof(struct kbtf_offsets, cgrp_kn), 8 },
	};
	static const struct want kn[] = {
		{ "parent", offsetof(struct kbtf_offsets, kn_parent), 8 },
		{ "name", offsetof(struct kbtf_offsets, kn_name), 8 },
	};
	uint32_t sz;

	if (struct_offsets(b, "task_struct", &sz, task, 1, out, NULL, 0) ||
	    struct_offsets(b, "css_set", &sz, cset, 1, out, NULL, 0) ||
	    struct_offsets(b, "cgroup", &sz, cgrp, 1, out, NULL, 0) ||
	    struct_offsets(b, "kernfs_node", &sz, kn, 2, out, NULL, 0))
		return -EINVAL;
	return 0;
}

/* The guest's BTF bytes parsed by libbpf, bounded.  0 or -errno. */
static int btf_open(const void *data, size_t len, struct btf **b, char *err, size_t errlen)
{
	int rc;

	if (!len || len > KBTF_MAX_BYTES) {
		util_seterr(err, errlen, "BTF of %zu bytes (at most %zu)", len, KBTF_MAX_BYTES);
		return -EINVAL;
	}
	*b = btf__new(data, (uint32_t)len);
	if (!*b) {
		rc = errno == ENOMEM ? -ENOMEM : -EINVAL;
		util_seterr(err, errlen, "the guest's BTF does not parse (%s)", strerror(errno));
		return rc;
	}
	return 0;
}

int kbtf_offsets(const void *data, size_t len, struct kbtf_offsets *out,
		 char *err, size_t errlen)
{
	static const struct want task[] = {
		{ "tasks", offsetof(struct kbtf_offsets, task_tasks), 16 },
		{ "pid", offsetof(struct kbtf_offsets, task_pid), 4 },
		{ "tgid", offsetof(struct kbtf_offsets, task_tgid), 4 },
		{ "comm", offsetof(struct kbtf_offsets, task_comm), 16 },
		{ "mm", offsetof(struct kbtf_offsets, task_mm), 8 },
		{ "real_parent", offsetof(struct kbtf_offsets, task_real_parent), 8 },
		{ "stack", offsetof(struct kbtf_offsets, task_stack), 8 },
	};
	static const struct want mm[] = {
		{ "pgd", offsetof(struct kbtf_offsets, mm_pgd), 8 },
	};
	struct btf *b;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = btf_open(data, len, &b, err, errlen);
	if (rc)
		return rc;
	rc = struct_offsets(b, "task_struct", &out->task_size, task,
			    ARRAY_SIZE(task), out, err, errlen);
	if (!rc)
		rc = struct_offsets(b, "mm_struct", &out->mm_size, mm, 1, out, err, errlen);
	if (!rc)
		out->has_cgroup = !cgroup_offsets(b, out);
	btf__free(b);
	return rc;
}

#define W(f, n, w) { n, offsetof(struct kbtf_vma_offsets, f), w }

/* One struct's members into out (a struct kbtf_vma_offsets). */
static int vma_struct(const struct btf *b, const char *sname, uint32_t *size,
		      const struct want *w, size_t n, void *out, char *err, size_t errlen)
{
	uint32_t dummy;

	return struct_offsets(b, sname, size ? size : &dummy, w, n, out, err, errlen);
}

static int vma_offsets(const struct btf *b, struct kbtf_vma_offsets *o, char *err,
		       size_t errlen)
{
	static const struct want mm[] = { W(mm_mt, "mm_mt", 16), W(mm_map_count, "map_count", 4),
					  W(mm_exec_vm, "exec_vm", 8) };
	static const struct want mt[] = { W(mt_root, "ma_root", 8) };
	static const struct want vma[] = { W(vma_start, "vm_start", 8), W(vma_end, "vm_end", 8),
					   W(vma_flags, "vm_flags", 8),
					   W(vma_pgoff, "vm_pgoff", 8), W(vma_file, "vm_file", 8) };
	static const struct want file[] = { W(file_path, "f_path", 16) };
	static const struct want path[] = { W(path_mnt, "mnt", 8), W(path_dentry, "dentry", 8) };
	static const struct want dentry[] = { W(dentry_parent, "d_parent", 8),
					      W(dentry_name, "d_name", 16),
					      W(dentry_inode, "d_inode", 8) };
	static const struct want qstr[] = { W(qstr_len, "len", 4), W(qstr_name, "name", 8) };
	static const struct want mount[] = { W(mount_parent, "mnt_parent", 8),
					     W(mount_mountpoint, "mnt_mountpoint", 8),
					     W(mount_mnt, "mnt", 8) };
	static const struct want vfsmount[] = { W(vfsmount_root, "mnt_root", 8) };
	static const struct want mm_list[] = { W(mm_mmap, "mmap", 8),
					       W(mm_map_count, "map_count", 4),
					       W(mm_exec_vm, "exec_vm", 8) };
	static const struct want vma_list[] = { W(vma_next, "vm_next", 8) };
	uint32_t sz;
	int rc;

	o->list = member_off(b, (uint32_t)btf__find_by_name_kind(b, "mm_struct", BTF_KIND_STRUCT),
			     "mm_mt", 0) < 0;
	if (o->list) {	/* before 6.1: the list of vm_next */
		rc = vma_struct(b, "mm_struct", NULL, mm_list, 3, o, err, errlen);
		if (!rc)
			rc = vma_struct(b, "vm_area_struct", &o->vma_size, vma_list, 1, o, err,
					errlen);
		if (rc) {
			util_seterr(err, errlen, "struct mm_struct has neither mm_mt nor mmap "
				    "and vm_next: mappings are not read");
			return -ENOENT;
		}
	} else {
		rc = vma_struct(b, "mm_struct", NULL, mm, 3, o, err, errlen);
		if (!rc)
			rc = vma_struct(b, "maple_tree", NULL, mt, 1, o, err, errlen);
	}
	if (!rc)
		rc = vma_struct(b, "vm_area_struct", &o->vma_size, vma, 5, o, err, errlen);
	if (!rc)
		rc = vma_struct(b, "file", &o->file_size, file, 1, o, err, errlen);
	if (!rc)
		rc = vma_struct(b, "path", &sz, path, 2, o, err, errlen);
	if (!rc)
		rc = vma_struct(b, "dentry", &o->dentry_size, dentry, 3, o, err, errlen);
	if (!rc)
		rc = vma_struct(b, "qstr", &sz, qstr, 2, o, err, errlen);
	if (rc)
		return rc;
	/* without them a path stops at its file system's root */
	o->has_mount = !vma_struct(b, "mount", NULL, mount, 3, o, NULL, 0) &&
		       !vma_struct(b, "vfsmount", NULL, vfsmount, 1, o, NULL, 0);
	return 0;
}

int kbtf_vma_offsets(const void *data, size_t len, struct kbtf_vma_offsets *out,
		     char *err, size_t errlen)
{
	struct btf *b;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = btf_open(data, len, &b, err, errlen);
	if (rc)
		return rc;
	rc = vma_offsets(b, out, err, errlen);
	btf__free(b);
	return rc;
}
