// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the guest-facing parsers of the built-in KVM VMM:
 * the virtio-mmio console (vmm/kvm/kvm-virtio.c), whose rings a hostile guest
 * controls.  (The channel bytes it sinks are the collector's to decode:
 * tests/fuzz/fuzz-decoder.c covers that one path.)
 *
 * Input: the first 16 KiB become guest RAM (rings, descriptors, buffers),
 * the rest is a list of 8-byte MMIO operations {u16 offset, u8 flags,
 * u8 pad, u32 value} (flags bit 0: write).  Guest RAM is an exactly-sized
 * heap buffer, so ASan sees any access outside it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/kvm/kvm.h"

#define RAM	16384

static size_t sunk;

static void irq(void *arg)
{
	(void)arg;
}

static void sink(const void *buf, size_t len, void *arg)
{
	const volatile uint8_t *p = buf;

	(void)arg;
	/* touch every byte handed to us */
	for (size_t i = 0; i < len; i++)
		sunk += p[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *ram = calloc(1, RAM);
	struct kvm_virtio_con *vc;
	size_t n = size < RAM ? size : RAM;

	if (!ram)
		return 0;
	memcpy(ram, data, n);
	vc = kvm_virtio_con_new(ram, RAM, irq, sink, NULL);
	if (vc) {
		for (size_t off = n; off + 8 <= size; off += 8) {
			uint16_t reg;
			uint32_t v;

			memcpy(&reg, data + off, 2);
			memcpy(&v, data + off + 4, 4);
			kvm_virtio_con_mmio(vc, reg & 0x1ff, &v, 4, data[off + 2] & 1);
			/* 1-byte config-space reads too */
			if (data[off + 2] & 2) {
				uint8_t b;

				kvm_virtio_con_mmio(vc, 0x100 + (reg & 0xf), &b, 1, 0);
			}
		}
		kvm_virtio_con_free(vc);
	}
	free(ram);

	return 0;
}
