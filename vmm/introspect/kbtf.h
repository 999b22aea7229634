/* SPDX-License-Identifier: MIT */
/*
 * Struct offsets of a guest kernel from its own BTF (CONFIG_DEBUG_INFO_BTF:
 * the blob between __start_BTF and __stop_BTF), parsed by libbpf from the
 * bytes read out of guest memory.  Only what the task walk needs.
 *
 * The blob is guest memory: libbpf checks its format; the offsets found
 * are checked against the struct sizes here, and whoever reads through
 * them still checks every read.
 */
#ifndef OPVM_KBTF_H
#define OPVM_KBTF_H

#include <stddef.h>
#include <stdint.h>

#define KBTF_MAX_BYTES	((size_t)64 << 20)	/* Debian 12's: 4.3 MB */

struct kbtf_offsets {
	uint32_t task_size;		/* sizeof(struct task_struct) */
	uint32_t task_tasks;		/* list_head tasks */
	uint32_t task_pid, task_tgid;
	uint32_t task_comm;		/* char comm[16] */
	uint32_t task_mm;		/* struct mm_struct *mm */
	uint32_t task_real_parent;	/* struct task_struct *real_parent */
	uint32_t task_stack;		/* void *stack: its kernel stack's base */
	uint32_t mm_size;
	uint32_t mm_pgd;		/* pgd_t *pgd */
	/* The task's default-hierarchy cgroup (optional: a kernel without
	 * CONFIG_CGROUPS has none; has_cgroup says): task_struct.cgroups ->
	 * css_set.dfl_cgrp -> cgroup.kn -> kernfs_node.name and .parent. */
	int has_cgroup;
	uint32_t task_cgroups;		/* struct css_set *cgroups */
	uint32_t cset_dfl_cgrp;		/* struct cgroup *dfl_cgrp */
	uint32_t cgrp_kn;		/* struct kernfs_node *kn */
	uint32_t kn_parent;		/* struct kernfs_node *parent */
	uint32_t kn_name;		/* const char *name */
};

/* Finds the offsets in BTF bytes data[0..len).  Returns 0, -EINVAL (not
 * BTF, or a member missing or outside its struct: err says which) or
 * -ENOMEM. */
int kbtf_offsets(const void *data, size_t len, struct kbtf_offsets *out,
		 char *err, size_t errlen);

/*
 * What reading a process's executable mappings needs (vmm/introspect/
 * kvmas.h): the maple tree of its VMAs (Linux 6.1 and later) or their
 * list (mm->mmap, vm_next: before 6.1), each VMA's
 * range, flags, offset and file, and the file's name by its dentry chain
 * and mounts.  Mount offsets are optional (struct mount is internal to
 * fs/): has_mount says whether they were found.
 */
struct kbtf_vma_offsets {
	/* before 6.1 (no mm_mt): the list mm->mmap of vm_next, ascending */
	int list;
	uint32_t mm_mmap;		/* struct vm_area_struct *mmap */
	uint32_t vma_next;		/* vm_area_struct.vm_next */
	uint32_t mm_mt;			/* struct maple_tree mm_mt */
	uint32_t mt_root;		/* maple_tree.ma_root */
	uint32_t mm_map_count;		/* int map_count */
	uint32_t mm_exec_vm;		/* unsigned long exec_vm (pages) */
	uint32_t vma_size;
	uint32_t vma_start, vma_end, vma_flags, vma_pgoff, vma_file;
	uint32_t file_size;
	uint32_t file_path;		/* struct path f_path */
	uint32_t path_mnt, path_dentry;
	uint32_t dentry_size;
	uint32_t dentry_parent, dentry_name, dentry_inode;
	uint32_t qstr_len, qstr_name;
	int has_mount;
	uint32_t mount_parent, mount_mountpoint, mount_mnt;
	uint32_t vfsmount_root;		/* struct dentry *mnt_root */
};

/* Finds them in BTF bytes data[0..len).  Returns 0, -ENOENT (neither
 * mm_mt nor mmap and vm_next) or as kbtf_offsets(). */
int kbtf_vma_offsets(const void *data, size_t len, struct kbtf_vma_offsets *out,
		     char *err, size_t errlen);

/*
 * What reading the loaded modules needs (vmm/introspect/kmods.h): struct
 * module's state, list, name and core text (6.1: core_layout.base and
 * .text_size; 6.4 and later: mem[MOD_TEXT].base and .size, MOD_TEXT's
 * value from enum mod_mem_type), and its symbols (struct mod_kallsyms:
 * symtab, num_symtab, strtab, typetab), which are optional.
 */
struct kbtf_mod_offsets {
	uint32_t mod_size;		/* sizeof(struct module) */
	uint32_t mod_state;		/* enum module_state state */
	uint32_t mod_list;		/* list_head list */
	uint32_t mod_name, name_len;	/* char name[MODULE_NAME_LEN] */
	const char *layout;		/* "core_layout" (6.1) or "mem" (6.4) */
	uint32_t text_base;		/* void *: the core text's start */
	uint32_t text_size;		/* unsigned int: its size */
	int has_kallsyms;		/* CONFIG_KALLSYMS: the members below */
	uint32_t mod_kallsyms;		/* struct mod_kallsyms *kallsyms */
	uint32_t ks_symtab, ks_num, ks_strtab;	/* in struct mod_kallsyms */
	int has_typetab;
	uint32_t ks_typetab;
};

/* Finds them in BTF bytes data[0..len).  Returns 0, or as kbtf_offsets()
 * (-EINVAL: no struct module, or no text layout that is known). */
int kbtf_mod_offsets(const void *data, size_t len, struct kbtf_mod_offsets *out,
		     char *err, size_t errlen);

#endif /* OPVM_KBTF_H */
