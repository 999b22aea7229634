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
	uint32_t mm_size;
	uint32_t mm_pgd;		/* pgd_t *pgd */
};

/* Finds the offsets in BTF bytes data[0..len).  Returns 0, -EINVAL (not
 * BTF, or a member missing or outside its struct: err says which) or
 * -ENOMEM. */
int kbtf_offsets(const void *data, size_t len, struct kbtf_offsets *out,
		 char *err, size_t errlen);

#endif /* OPVM_KBTF_H */
