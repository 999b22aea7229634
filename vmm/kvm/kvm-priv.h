/* SPDX-License-Identifier: MIT */
/*
 * Internals of the built-in KVM VMM shared by vmm/kvm*.c.  Not a public
 * interface: everything outside vmm/kvm*.c goes through vmm/kvm/kvm.h.
 */
#ifndef OPVM_KVM_PRIV_H
#define OPVM_KVM_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <linux/kvm.h>

#include "vmm/kvm/kvm-desc.h"
#include "vmm/kvm/kvm.h"

#define KVM_MAX_DEVS	16

struct kvm_serial {
	uint8_t ier, lcr, mcr, scr, dll, dlm;
	int fd;				/* output; -1: none */
};

struct kvm_vcpu {
	struct kvm_vm *vm;
	unsigned index;
	int fd;
	struct kvm_run *run;		/* mmap'd shared run page */
	size_t run_size;
	pthread_t thread;
	atomic_int started;		/* read by other vCPUs when they kick */
	atomic_int tid;
	atomic_int named;		/* its thread carries KVM_DESC_VCPU_COMM */
	void *priv;
	/* Boot state set by the loader, applied by kvm_vm_start(). */
	struct kvm_regs boot_regs;
	struct kvm_sregs boot_sregs;
	int has_boot_state;
	/* KVM_CAP_SYNC_REGS: KVM copies regs and sregs into the run page at
	 * every exit, so a sample needs no GET_REGS/GET_SREGS ioctls. */
	int sync_regs;
};

struct kvm_vm {
	int sys_fd, vm_fd;
	uint8_t *mem;
	uint64_t mem_size;
	unsigned nr_vcpus;
	struct kvm_vcpu vcpus[KVM_MAX_VCPUS];
	struct kvm_vcpu_hooks hooks;

	/* Port and MMIO buses, fixed at kvm_vm_new(). */
	struct kvm_dev pio[KVM_MAX_DEVS];
	unsigned nr_pio;
	struct kvm_dev mmio[KVM_MAX_DEVS];
	unsigned nr_mmio;

	pthread_mutex_t dev_lock;	/* serialises device state across vCPUs */
	struct kvm_serial serial;
	struct kvm_virtio_con *vcon;

	/* Channel sink (org.opvm.0), written under dev_lock. */
	int chan_fd;
	atomic_uint_fast64_t chan_bytes, chan_dropped;
	/* Published HELLO slot information; see kvm_vm_slot_info(). */
	atomic_uint_fast64_t slot_pa;
	atomic_uint_fast64_t slot_meta;	/* nr | size << 32; 0 = none */

	pthread_mutex_t state_lock;
	pthread_cond_t state_cond;
	enum kvm_vm_state state;
	int exit_code;
	char error[256];
	atomic_int stopping;
	atomic_uint_fast64_t exits;
	int running_threads;

	/* Runtime descriptor for other opvm processes (kvm-desc.h). */
	struct kvm_desc desc;
	char desc_path[256];
	int published;
	int chan_copy_fd;		/* desc_path.chan, -1 */
	uint64_t chan_copied;		/* bytes in it (under dev_lock) */
};

/* vmm/kvm/kvm.c */
void kvm_vm_set_state(struct kvm_vm *vm, enum kvm_vm_state st, int code,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void kvm_vm_chan_write(struct kvm_vm *vm, const void *buf, size_t len);
int kvm_vm_add_pio(struct kvm_vm *vm, const struct kvm_dev *dev);
int kvm_vm_add_mmio(struct kvm_vm *vm, const struct kvm_dev *dev);

/* vmm/kvm/kvm-serial.c */
void kvm_serial_io(struct kvm_dev *dev, uint64_t addr, void *data, uint32_t len,
		   int is_write);
/* vmm/kvm/kvm-chan.c: channel port, debug-exit, power and reset ports. */
int kvm_misc_devices_add(struct kvm_vm *vm);
/* kvm.c: the machine without devices (kvm-board.c's kvm_vm_new() adds
 * them).  NULL + errno, why set. */
struct kvm_vm *kvm_vm_create(const struct kvm_vm_config *cfg, char *why, size_t whylen);

/* vmm/kvm/kvm-acpi.c: ACPI tables for Linux guests (virtio-mmio console
 * discovery, power-off, MADT).  Returns 0 and the RSDP's address. */
#define KVM_ACPI_BASE	0xe0000ull
#define KVM_ACPI_SIZE	0x10000ull
int kvm_acpi_write(struct kvm_vm *vm, uint64_t *rsdp);

/* vmm/kvm/kvm-boot.c */

#endif /* OPVM_KVM_PRIV_H */
