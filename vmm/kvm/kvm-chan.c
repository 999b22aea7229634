// SPDX-License-Identifier: MIT
/*
 * Small port-I/O devices of the built-in VMM:
 *  - the synthetic guests' channel port (KVM_CHAN_PORT): bytes written there
 *    are org.opvm.0 channel bytes, exactly as Linux's opvm.ko sends them over
 *    the virtio console;
 *  - the debug-exit port (KVM_DEBUG_EXIT_PORT): a synthetic guest ends the
 *    run with a status;
 *  - the CPU-time port (KVM_CPUTIME_PORT): a synthetic guest reads its vCPU
 *    thread's CPU time, to measure its own ground truth;
 *  - power off (KVM_PM_PORT, value 0x2000, as QEMU's PIIX4 PM) and reset
 *    (i8042 command 0xfe on port 0x64, port 0x92 bit 0, port 0xcf9 0x06).
 * The channel bytes go to the collector unread: it alone decodes them and
 * passes HELLO back to the sampler (guest_hello, vmm/sampler.h).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "vmm/kvm/kvm-priv.h"
#include "lib/array.h"

static uint32_t val_of(const void *data, uint32_t len)
{
	uint32_t v = 0;

	memcpy(&v, data, len < 4 ? len : 4);
	return v;
}

static void chan_io(struct kvm_dev *dev, uint64_t addr, void *data, uint32_t len,
		    int is_write)
{
	if (is_write)
		kvm_vm_chan_write(dev->priv, data, len);
	else
		memset(data, 0, len);
}

static void chan_burst(struct kvm_dev *dev, const void *data, uint32_t n)
{
	kvm_vm_chan_write(dev->priv, data, n);
}

static void debug_exit_io(struct kvm_dev *dev, uint64_t addr, void *data, uint32_t len,
			  int is_write)
{
	if (!is_write) {
		memset(data, 0, len);
		return;
	}
	kvm_vm_set_state(dev->priv, KVM_VM_POWEROFF, (int)(val_of(data, len) & 0xff), NULL);
}

/* Runs on the vCPU thread that trapped, so the thread CPU clock is that
 * vCPU's: the same clock a task-clock sampling event counts. */
static void cputime_io(struct kvm_dev *dev, uint64_t addr, void *data, uint32_t len,
		       int is_write)
{
	struct timespec ts;
	uint32_t us;

	if (is_write)
		return;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	us = (uint32_t)((uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
	memcpy(data, &us, len < 4 ? len : 4);
}

/*
 * ACPI PM1a event (status, enable) and control blocks, as the FADT
 * describes them (vmm/kvm/kvm-acpi.c): nothing ever raises an SCI, control
 * reads say SCI_EN (ACPI mode), and SLP_EN in a control write powers off.
 */
static void pm_io(struct kvm_dev *dev, uint64_t addr, void *data, uint32_t len,
		  int is_write)
{
	if (!is_write) {
		memset(data, 0, len);
		if (addr == KVM_PM_PORT)
			*(uint8_t *)data = 1;		/* SCI_EN */
		return;
	}
	if (addr == KVM_PM_PORT && (val_of(data, len) & 0x2000))
		kvm_vm_set_state(dev->priv, KVM_VM_POWEROFF, 0, NULL);
}

static void reset_io(struct kvm_dev *dev, uint64_t addr, void *data, uint32_t len,
		     int is_write)
{
	uint32_t v;

	if (!is_write) {
		/* i8042 status/data: output and input buffers empty, so the
		 * guest's keyboard-controller reset loop goes ahead. */
		memset(data, 0, len);
		return;
	}
	v = val_of(data, len);
	if ((addr == 0x64 && (v & 0xff) == 0xfe) || (addr == 0x92 && (v & 1)) ||
	    (addr == 0xcf9 && (v & 0x04)))
		kvm_vm_set_state(dev->priv, KVM_VM_RESET, -1, "guest reset");
}

int kvm_misc_devices_add(struct kvm_vm *vm)
{
	const struct kvm_dev devs[] = {
		{ .base = KVM_CHAN_PORT, .len = 1, .io = chan_io, .burst = chan_burst,
		  .priv = vm },
		{ .base = KVM_DEBUG_EXIT_PORT, .len = 4, .io = debug_exit_io, .priv = vm },
		{ .base = KVM_PM_PORT - 4, .len = 6, .io = pm_io, .priv = vm },
		{ .base = KVM_CPUTIME_PORT, .len = 4, .io = cputime_io, .priv = vm },
		{ .base = 0x60, .len = 5, .io = reset_io, .priv = vm },
		{ .base = 0x92, .len = 1, .io = reset_io, .priv = vm },
		{ .base = 0xcf9, .len = 1, .io = reset_io, .priv = vm },
	};

	for (size_t i = 0; i < ARRAY_SIZE(devs); i++) {
		int err = kvm_vm_add_pio(vm, &devs[i]);

		if (err)
			return err;
	}
	return 0;
}
