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
#include "lib/errbuf.h"
#include "vmm/introspect/kbtf.h"

#define NEST_MAX	8

/* Byte offset of member name in composite type id (anonymous members
 * searched), or -1; *type (if not NULL) gets the member's type id. */
static long member_find(const struct btf *b, uint32_t id, const char *name, int depth,
			uint32_t *type)
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
			if (strcmp(n, name))
				continue;
			if (type)
				*type = m->type;
			return (long)(bits / 8);
		}
		sub = member_find(b, btf__resolve_type(b, m->type), name, depth + 1, type);
		if (sub >= 0)
			return (long)(bits / 8) + sub;
	}
	return -1;
}

static long member_off(const struct btf *b, uint32_t id, const char *name, int depth)
{
	return member_find(b, id, name, depth, NULL);
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
		errbuf_set(err, errlen, "the guest's BTF has no struct %s", sname);
		return -EINVAL;
	}
	*size = t->size;
	for (size_t i = 0; i < n; i++) {
		long off = member_off(b, (uint32_t)id, w[i].name, 0);

		if (off < 0 || (uint64_t)off + w[i].width > t->size) {
			errbuf_set(err, errlen, "struct %s.%s: %s in the guest's BTF", sname,
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
		errbuf_set(err, errlen, "BTF of %zu bytes (at most %zu)", len, KBTF_MAX_BYTES);
		return -EINVAL;
	}
	*b = btf__new(data, (uint32_t)len);
	if (!*b) {
		rc = errno == ENOMEM ? -ENOMEM : -EINVAL;
		errbuf_set(err, errlen, "the guest's BTF does not parse (%s)", strerror(errno));
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
			errbuf_set(err, errlen, "struct mm_struct has neither mm_mt nor mmap "
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

#undef W
#define W(f, n, w) { n, offsetof(struct kbtf_mod_offsets, f), w }

/* The value of enumerator name of enum ename, or def when there is none. */
static long enum_value(const struct btf *b, const char *ename, const char *name, long def)
{
	int32_t id = btf__find_by_name_kind(b, ename, BTF_KIND_ENUM);
	const struct btf_type *t = id > 0 ? btf__type_by_id(b, (uint32_t)id) : NULL;
	const struct btf_enum *e;

	if (!t)
		return def;
	e = btf_enum(t);
	for (unsigned i = 0; i < btf_vlen(t); i++, e++)
		if (!strcmp(btf__name_by_offset(b, e->name_off), name))
			return e->val;
	return def;
}

/* 6.4 on: struct module_memory mem[MOD_MEM_NUM_TYPES]; off: mem's offset,
 * type its array type.  The text's base and size into o. */
static int mod_mem(const struct btf *b, long off, uint32_t type, struct kbtf_mod_offsets *o)
{
	const struct btf_type *at = btf__type_by_id(b, btf__resolve_type(b, type));
	const struct btf_array *a;
	long idx = enum_value(b, "mod_mem_type", "MOD_TEXT", 0), base, size;
	int64_t esz;
	uint32_t et;

	if (!at || !btf_is_array(at))
		return -EINVAL;
	a = btf_array(at);
	esz = btf__resolve_size(b, a->type);
	et = (uint32_t)btf__resolve_type(b, a->type);
	if (esz <= 0 || esz > 4096 || idx < 0 || (uint64_t)idx >= a->nelems)
		return -EINVAL;
	off += idx * (long)esz;
	base = member_off(b, et, "base", 0);
	size = member_off(b, et, "size", 0);
	if (base < 0 || size < 0)
		return -EINVAL;
	o->layout = "mem";
	o->text_base = (uint32_t)(off + base);
	o->text_size = (uint32_t)(off + size);
	return 0;
}

/* Where a module's core text is: 6.1's core_layout.base and .text_size,
 * or 6.4's mem[MOD_TEXT].base and .size. */
static int mod_text(const struct btf *b, uint32_t mid, struct kbtf_mod_offsets *o,
		    char *err, size_t errlen)
{
	uint32_t type = 0;
	long off = member_find(b, mid, "core_layout", 0, &type), base, size;
	int rc = -EINVAL;

	if (off >= 0) {
		uint32_t lt = (uint32_t)btf__resolve_type(b, type);

		base = member_off(b, lt, "base", 0);
		size = member_off(b, lt, "text_size", 0);
		if (base >= 0 && size >= 0) {
			o->layout = "core_layout";
			o->text_base = (uint32_t)(off + base);
			o->text_size = (uint32_t)(off + size);
			rc = 0;
		}
	} else if ((off = member_find(b, mid, "mem", 0, &type)) >= 0) {
		rc = mod_mem(b, off, type, o);
	}
	if (!rc && ((uint64_t)o->text_base + 8 > o->mod_size ||
		    (uint64_t)o->text_size + 4 > o->mod_size))
		rc = -EINVAL;
	if (rc)
		errbuf_set(err, errlen, "struct module: no usable core_layout or mem[MOD_TEXT] "
			    "in the guest's BTF");
	return rc;
}

/* char name[MODULE_NAME_LEN]: its offset and length. */
static int mod_name(const struct btf *b, uint32_t mid, struct kbtf_mod_offsets *o,
		    char *err, size_t errlen)
{
	uint32_t type = 0;
	long off = member_find(b, mid, "name", 0, &type);
	const struct btf_type *t = off >= 0 ? btf__type_by_id(b, btf__resolve_type(b, type)) :
					      NULL;
	uint32_t n = t && btf_is_array(t) ? btf_array(t)->nelems : 0;

	if (!n || n > 256 || (uint64_t)off + n > o->mod_size) {
		errbuf_set(err, errlen, "struct module.name: not a char array in the guest's BTF");
		return -EINVAL;
	}
	o->mod_name = (uint32_t)off;
	o->name_len = n;
	return 0;
}

static int mod_offsets(const struct btf *b, struct kbtf_mod_offsets *o, char *err,
		       size_t errlen)
{
	static const struct want mod[] = { W(mod_state, "state", 4), W(mod_list, "list", 16) };
	static const struct want ks[] = { W(mod_kallsyms, "kallsyms", 8) };
	static const struct want mks[] = { W(ks_symtab, "symtab", 8), W(ks_num, "num_symtab", 4),
					   W(ks_strtab, "strtab", 8) };
	static const struct want tt[] = { W(ks_typetab, "typetab", 8) };
	int32_t mid = btf__find_by_name_kind(b, "module", BTF_KIND_STRUCT);
	uint32_t sz;
	int rc;

	rc = vma_struct(b, "module", &o->mod_size, mod, 2, o, err, errlen);
	if (!rc)
		rc = mod_name(b, (uint32_t)mid, o, err, errlen);
	if (!rc)
		rc = mod_text(b, (uint32_t)mid, o, err, errlen);
	if (rc)
		return rc;
	/* without CONFIG_KALLSYMS: modules known, their symbols not */
	o->has_kallsyms = !vma_struct(b, "module", &sz, ks, 1, o, NULL, 0) &&
			  !vma_struct(b, "mod_kallsyms", &sz, mks, 3, o, NULL, 0);
	/* older kernels kept no typetab: the type then comes from st_info */
	o->has_typetab = o->has_kallsyms && !vma_struct(b, "mod_kallsyms", &sz, tt, 1, o, NULL, 0);
	return 0;
}

int kbtf_mod_offsets(const void *data, size_t len, struct kbtf_mod_offsets *out,
		     char *err, size_t errlen)
{
	struct btf *b;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = btf_open(data, len, &b, err, errlen);
	if (rc)
		return rc;
	rc = mod_offsets(b, out, err, errlen);
	btf__free(b);
	return rc;
}
