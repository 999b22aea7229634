/* SPDX-License-Identifier: MIT */
/*
 * The built-in KVM VMM: one VM with guest RAM, an in-kernel irqchip and PIT,
 * vCPU threads, and a handful of devices (8250 UART, virtio-mmio console
 * carrying the "org.opvm.0" port, a port-I/O channel and debug-exit port for
 * synthetic test guests, power-off/reset ports).
 *
 * It boots a Linux bzImage (64-bit boot protocol, our own GDT and identity
 * page tables, zero page with e820, command line, initrd, MP table for SMP)
 * or a freestanding ELF64 test guest entered directly in long mode.
 *
 * Sampling hooks: every vCPU thread calls hooks->thread_init() once before
 * its first KVM_RUN (a sampler opens its per-thread perf events there, so the
 * overflow signal is routed to that thread) and hooks->after_run() after
 * every return from KVM_RUN, including -EINTR from the overflow signal.  On
 * that path kvm_vcpu_sample_regs() and kvm_vm_gpa() are allocation- and
 * lock-free.
 *
 * Everything the guest writes (port values, MMIO, virtqueues, channel bytes)
 * is hostile and bounds-checked before use.
 */
#ifndef OPVM_KVM_H
#define OPVM_KVM_H

#include <stddef.h>
#include <stdint.h>

#define KVM_MAX_VCPUS		64
#define KVM_MAX_MEM		(3ull << 30)	/* below the 32-bit PCI hole */

/* Port-I/O devices used only by the synthetic guests (tests/guests/). */
#define KVM_CHAN_PORT		0x07f0	/* outb/rep outsb: channel bytes */
#define KVM_DEBUG_EXIT_PORT	0x0501	/* outb/outl v: exit with status v */
#define KVM_PM_PORT		0x0604	/* outw 0x2000: power off (as QEMU's) */
#define KVM_CPUTIME_PORT	0x0508	/* inl: the reading vCPU thread's CPU
					 * time in microseconds (mod 2^32): the
					 * clock timer-mode sampling runs on, so
					 * a test guest can measure its truth */

/* virtio-mmio console: one 4 KiB window, ISA IRQ (edge). */
#define KVM_VIRTIO_CON_BASE	0xd0000000ull
#define KVM_VIRTIO_CON_SIZE	0x1000
#define KVM_VIRTIO_CON_IRQ	5

struct kvm_vm;
struct kvm_vcpu;

struct kvm_vm_config {
	uint64_t mem_bytes;	/* guest RAM, <= KVM_MAX_MEM */
	unsigned nr_vcpus;	/* 1..KVM_MAX_VCPUS */
	int console_fd;		/* 8250 output goes here; -1: discarded */
	int channel_fd;		/* org.opvm.0 bytes go here; -1: discarded.
				 * The VM owns it from kvm_vm_new() on. */
};

enum kvm_vm_state {
	KVM_VM_CREATED = 0,
	KVM_VM_RUNNING,
	KVM_VM_POWEROFF,	/* the guest powered off (or wrote debug-exit) */
	KVM_VM_RESET,		/* reboot request or triple fault */
	KVM_VM_STOPPED,		/* kvm_vm_stop() */
	KVM_VM_FAULT,		/* a vCPU failed: kvm_vm_error() says why */
};

struct kvm_vcpu_hooks {
	/* On the vCPU thread, before the first KVM_RUN.  Nonzero (-errno)
	 * aborts that vCPU and faults the VM.  May be NULL. */
	int (*thread_init)(struct kvm_vcpu *vcpu, void *arg);
	/* After every KVM_RUN return (ret is 0 or -errno, -EINTR for a
	 * signal).  Must not allocate or lock.  May be NULL. */
	void (*after_run)(struct kvm_vcpu *vcpu, int ret, void *arg);
	/* On the vCPU thread, after its last KVM_RUN.  May be NULL. */
	void (*thread_exit)(struct kvm_vcpu *vcpu, void *arg);
	void *arg;
};

/* Is KVM usable here?  Returns 0, or -errno with a one-line reason in why. */
int kvm_probe(char *why, size_t whylen);

/* Opens /dev/kvm and builds the VM (memory, irqchip, PIT, vCPUs, devices).
 * Returns NULL and sets errno; why (may be NULL) gets a one-line reason. */
struct kvm_vm *kvm_vm_new(const struct kvm_vm_config *cfg, char *why, size_t whylen);
/* Stops the vCPUs if running, frees everything.  NULL-safe. */
void kvm_vm_free(struct kvm_vm *vm);

/* Loaders; return 0 or -errno with a reason in why. */
int kvm_vm_load_bzimage(struct kvm_vm *vm, const char *kernel, const char *initrd,
			const char *cmdline, char *why, size_t whylen);
int kvm_vm_load_elf(struct kvm_vm *vm, const char *path, char *why, size_t whylen);

/* Starts one thread per vCPU.  hooks may be NULL; it is copied. */
int kvm_vm_start(struct kvm_vm *vm, const struct kvm_vcpu_hooks *hooks);
/* Asks every vCPU to leave KVM_RUN and joins the threads.  Idempotent. */
void kvm_vm_stop(struct kvm_vm *vm);
/* Blocks up to timeout_ms (-1: forever) for the guest to stop running.
 * Returns the state. */
enum kvm_vm_state kvm_vm_wait(struct kvm_vm *vm, int timeout_ms);
enum kvm_vm_state kvm_vm_state(const struct kvm_vm *vm);
/* Debug-exit value written by a synthetic guest, or -1. */
int kvm_vm_exit_code(const struct kvm_vm *vm);
const char *kvm_vm_error(const struct kvm_vm *vm);	/* NULL if none */
unsigned kvm_vm_nr_vcpus(const struct kvm_vm *vm);
uint64_t kvm_vm_mem_bytes(const struct kvm_vm *vm);
/* Total VM exits seen by all vCPUs (for the exit-rate figure). */
uint64_t kvm_vm_exits(const struct kvm_vm *vm);
/* Channel bytes the guest sent, and bytes dropped because the reader
 * was not keeping up. */
uint64_t kvm_vm_chan_bytes(const struct kvm_vm *vm);
uint64_t kvm_vm_chan_dropped(const struct kvm_vm *vm);

/* Host pointer for guest-physical [gpa, gpa+len), or NULL if any of it is
 * outside guest RAM.  Lock-free; safe from after_run(). */
void *kvm_vm_gpa(const struct kvm_vm *vm, uint64_t gpa, uint64_t len);

/* The current-task slot array announced by the guest's HELLO record, as
 * the collector decoded it and the sampler published it (guest_hello,
 * vmm/sampler.h), atomically, so the sampling path reads it without locks.
 * kvm_vm_slot_info() returns 1 and fills the out values once one was
 * published, else 0. */
void kvm_vm_set_slots(struct kvm_vm *vm, uint64_t slot_pa, uint32_t nr,
		      uint32_t slot_size);
int kvm_vm_slot_info(const struct kvm_vm *vm, uint64_t *slot_pa,
		     uint32_t *nr, uint32_t *slot_size);

/* The guest module's task-switch rings (HELLO's switch tail): published in
 * the VMM's runtime descriptor (vmm/kvm/kvm-desc.h) for `opvm attach --pid`. */
void kvm_vm_publish_switch(struct kvm_vm *vm, uint64_t switch_pa, uint32_t stride,
			   uint32_t entries, uint32_t nr);

/* ---- per-vCPU ------------------------------------------------------------ */
unsigned kvm_vcpu_index(const struct kvm_vcpu *vcpu);
struct kvm_vm *kvm_vcpu_vm(const struct kvm_vcpu *vcpu);
/* The vCPU thread's kernel tid (valid from thread_init() on). */
int kvm_vcpu_tid(const struct kvm_vcpu *vcpu);
/* Per-vCPU pointer for the hooks' owner. */
void kvm_vcpu_set_priv(struct kvm_vcpu *vcpu, void *priv);
void *kvm_vcpu_priv(const struct kvm_vcpu *vcpu);

struct kvm_sample_regs {
	uint64_t rip;
	uint64_t cr3;
	uint8_t cpl;		/* CS.DPL */
};
/* Reads RIP, CR3 and CPL of a vCPU from its own thread (it is out of
 * KVM_RUN).  Returns 0 or -errno. */
int kvm_vcpu_sample_regs(struct kvm_vcpu *vcpu, struct kvm_sample_regs *out);

/* ---- devices (vmm/kvm-*.c), internal to the VMM but exposed for the unit
 * tests, which drive them without a guest. ------------------------------- */

/* One bus device: kvmtool/kvm-host style {base, len, io}.  io() handles an
 * access of len bytes (1, 2, 4 or 8; string port I/O is split into units)
 * at addr, with data in/out.  Runs on the vCPU thread that trapped. */
struct kvm_dev {
	uint64_t base, len;
	void (*io)(struct kvm_dev *dev, uint64_t addr, void *data, uint32_t len,
		   int is_write);
	/* A string OUT (rep outsb) of n bytes in one call; may be NULL, then
	 * io() gets each unit. */
	void (*burst)(struct kvm_dev *dev, const void *data, uint32_t n);
	void *priv;
};

/* virtio-mmio console (vmm/kvm/kvm-virtio.c).  mem/mem_size describe guest RAM
 * (gpa 0 = mem[0]); irq(arg) raises the device's interrupt; sink gets the
 * bytes the guest writes to the org.opvm.0 port. */
struct kvm_virtio_con;
struct kvm_virtio_con *kvm_virtio_con_new(uint8_t *mem, uint64_t mem_size,
					  void (*irq)(void *arg),
					  void (*sink)(const void *buf, size_t len, void *arg),
					  void *arg);
void kvm_virtio_con_free(struct kvm_virtio_con *vc);
/* MMIO access at offset off of the window. */
void kvm_virtio_con_mmio(struct kvm_virtio_con *vc, uint64_t off, void *data,
			 uint32_t len, int is_write);
/* Ports the guest driver has opened (bit i: port i), for tests. */
unsigned kvm_virtio_con_open_ports(const struct kvm_virtio_con *vc);

#endif /* OPVM_KVM_H */
