/* SPDX-License-Identifier: MIT */
/*
 * Runtime descriptor of a running built-in VMM (`opvm run --vmm=kvm`), so
 * that another opvm process can sample its guest with the perf backend
 * (`opvm attach --pid PID`): where guest RAM is in the VMM's address space,
 * and where the guest module's task-switch rings are once it said HELLO.
 * The vCPU threads are found by name (KVM_DESC_VCPU_COMM).
 *
 * The file lives in a private runtime directory (0700, owned by us:
 * /run/opvm as root, else $XDG_RUNTIME_DIR/opvm or /tmp/opvm-UID), is
 * written 0600 by rename, and read back only if owned by the reader's uid.
 * Text, one "key values" line each; a reader checks every number.
 */
#ifndef OPVM_KVM_DESC_H
#define OPVM_KVM_DESC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KVM_DESC_MAX_RAM	8
/* The VMM also copies its guest's channel stream to PATH.chan (0600), up
 * to this many bytes, for the attaching process's collector. */
#define KVM_DESC_CHAN_MAX	(16u << 20)
#define KVM_DESC_VCPU_COMM	"opvm-vcpu"	/* + index: the thread's comm */

struct kvm_desc {
	pid_t pid;
	unsigned nr_vcpus;
	unsigned nr_ram;
	struct {
		uint64_t gpa, len, hva;
	} ram[KVM_DESC_MAX_RAM];
	/* HELLO's switch tail; switch_pa 0: none yet */
	uint64_t switch_pa;
	uint32_t switch_stride, switch_entries, switch_nr;
};

/* The descriptor path of VMM process pid; creates the runtime directory
 * (0700) when create is set.  Returns 0 or -errno (-EPERM: the directory
 * is not ours or others may write it). */
int kvm_desc_path(pid_t pid, int create, char *out, size_t len);

/* Writes d to path atomically (0600).  Returns 0 or -errno. */
int kvm_desc_write(const char *path, const struct kvm_desc *d);

/* Reads path into d.  Returns 0, -EPERM (not owned by us), -EINVAL (a
 * malformed line or number) or -errno. */
int kvm_desc_read(const char *path, struct kvm_desc *d);

#endif /* OPVM_KVM_DESC_H */
