// SPDX-License-Identifier: MIT
/*
 * The built-in VMM's board: the machine kvm.c creates (VM, interrupt
 * controller, RAM, vCPUs) with its devices plugged in: the COM1 console
 * (kvm-serial.c), the opvm channel, debug-exit, PM and reset ports
 * (kvm-chan.c), and the virtio-mmio console (kvm-virtio.c).  Above kvm.c,
 * so that the core never calls up into the devices.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include "lib/errbuf.h"
#include "vmm/kvm/kvm-priv.h"

static void serial_dev_add(struct kvm_vm *vm)
{
	struct kvm_dev d = { .base = 0x3f8, .len = 8, .io = kvm_serial_io,
			     .priv = &vm->serial };

	kvm_vm_add_pio(vm, &d);
}

static void virtio_irq(void *arg)
{
	struct kvm_vm *vm = arg;
	struct kvm_irq_level lvl = { .irq = KVM_VIRTIO_CON_IRQ, .level = 1 };

	/* Edge-triggered ISA line, as kvmtool's virtio-mmio does. */
	ioctl(vm->vm_fd, KVM_IRQ_LINE, &lvl);
	lvl.level = 0;
	ioctl(vm->vm_fd, KVM_IRQ_LINE, &lvl);
}

static void virtio_sink(const void *buf, size_t len, void *arg)
{
	kvm_vm_chan_write(arg, buf, len);
}

static void virtio_mmio_io(struct kvm_dev *dev, uint64_t addr, void *data,
			   uint32_t len, int is_write)
{
	kvm_virtio_con_mmio(dev->priv, addr - dev->base, data, len, is_write);
}

struct kvm_vm *kvm_vm_new(const struct kvm_vm_config *cfg, char *why, size_t whylen)
{
	struct kvm_vm *vm = kvm_vm_create(cfg, why, whylen);
	struct kvm_dev d;
	int err;

	if (!vm)
		return NULL;
	serial_dev_add(vm);
	err = kvm_misc_devices_add(vm);
	if (err)
		goto fail;
	vm->vcon = kvm_virtio_con_new(vm->mem, vm->mem_size, virtio_irq, virtio_sink, vm);
	if (!vm->vcon) {
		err = -errno;
		errbuf_set(why, whylen, "virtio console: %s", strerror(errno));
		goto fail;
	}
	d = (struct kvm_dev){ .base = KVM_VIRTIO_CON_BASE, .len = KVM_VIRTIO_CON_SIZE,
			      .io = virtio_mmio_io, .priv = vm->vcon };
	kvm_vm_add_mmio(vm, &d);
	return vm;

fail:
	kvm_vm_free(vm);
	errno = -err;
	return NULL;
}
