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
 *    (i8042 command 0xfe on port 0x64, port 0x92 bit 0, port 0xcf9 0x06);
 * and the HELLO sniffer that finds the current-task slot array in the
 * channel stream, so the sampling path can read slots without asking the
 * collector thread.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "guest-kmod/opvm_proto.h"
#include "vmm/kvm-priv.h"

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
 * describes them (vmm/kvm-acpi.c): nothing ever raises an SCI, control
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

	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		int err = kvm_vm_add_pio(vm, &devs[i]);

		if (err)
			return err;
	}
	return 0;
}

/*
 * HELLO sniffer.  The stream is hostile: it may be garbage, records may be
 * split anywhere, lengths may lie.  We only frame records (magic, length
 * within the protocol's bounds, 8-byte multiple), skip everything that is
 * not a HELLO without buffering it, and accept a HELLO whose fields are
 * plausible.  Whatever the guest says, the sampler bounds-checks each slot
 * against guest RAM before reading it.
 */
int kvm_hello_sniff(struct kvm_hello_sniffer *hs, const void *buf, size_t len,
		    uint64_t *slot_pa, uint32_t *nr, uint32_t *slot_size)
{
	const uint8_t *p = buf;
	const size_t hdr_sz = sizeof(struct opvm_rec_hdr);
	int found = 0;

	while (len) {
		struct opvm_rec_hdr h;
		size_t want, n;

		if (hs->skip) {
			n = hs->skip < len ? (size_t)hs->skip : len;
			hs->skip -= n;
			p += n;
			len -= n;
			continue;
		}
		want = hdr_sz;
		if (hs->have >= hdr_sz) {
			memcpy(&h, hs->buf, hdr_sz);
			want = h.len;
		}
		n = want - hs->have;
		if (n > len)
			n = len;
		memcpy(hs->buf + hs->have, p, n);
		hs->have += (uint32_t)n;
		p += n;
		len -= n;
		if (hs->have < want)
			continue;
		if (want == hdr_sz) {
			memcpy(&h, hs->buf, hdr_sz);
			if (h.magic != OPVM_PROTO_MAGIC || h.len < hdr_sz ||
			    h.len > OPVM_REC_MAX || h.len % OPVM_REC_ALIGN) {
				/* Lost framing: slide one byte and look again. */
				memmove(hs->buf, hs->buf + 1, --hs->have);
				continue;
			}
			if (h.type != OPVM_REC_HELLO || h.len < sizeof(struct opvm_rec_hello) ||
			    h.len > sizeof(hs->buf)) {
				hs->skip = h.len - hdr_sz;
				hs->have = 0;
			}
			/* else: a HELLO, keep accumulating up to h.len */
			if (h.len == hdr_sz)
				hs->have = 0;
			continue;
		}
		/* A complete HELLO. */
		{
			struct opvm_rec_hello hello;

			memcpy(&hello, hs->buf, sizeof(hello));
			hs->have = 0;
			if (hello.version != OPVM_PROTO_VERSION || !hello.nr_cpus ||
			    hello.nr_cpus > 4096 || hello.slot_size < sizeof(struct opvm_slot) ||
			    hello.slot_size > 4096)
				continue;
			*slot_pa = hello.slot_pa;
			*nr = hello.nr_cpus;
			*slot_size = hello.slot_size;
			found = 1;
		}
	}
	return found;
}
