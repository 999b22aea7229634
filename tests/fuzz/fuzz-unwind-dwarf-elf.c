// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the DWARF unwinder's other hostile input: the ELF
 * file (unwind/dwarf-cfi.c checks its headers and PT_LOADs, libdwfl parses its
 * .eh_frame, .eh_frame_hdr and .debug_frame).  The guest root opvm reads
 * the files from is the guest's, so any bytes may come.
 *
 * Input: a 16-byte header (ip offset into the file's mapping, the ELF's
 * length), the ELF bytes, then the stack window (up to 8 KiB).  The file
 * is a memfd, mapped at BASE with file offset 0 for every pc in 16 MiB; a
 * new context each input (its cache is by path, and memfd paths repeat).
 * The walk must return 1..max pcs with pcs[0] = ip, and never fault.
 *
 * Seeds: tests/fuzz/corpus/unwind-dwarf-elf/.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "unwind/dwarf-cfi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BASE	0x7f0000000000ull
#define SPAN	(16ull << 20)

static char path[64];

static int find_memfd(void *arg, uint64_t pc, struct unwind_dwarf_image *out)
{
	if (pc < BASE || pc >= BASE + SPAN)
		return -ENOENT;
	*out = (struct unwind_dwarf_image){ path, BASE, BASE + SPAN, 0 };
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct unwind_regs r = { .sp = 0x7ffff0000000ull, .cpl = 3 };
	uint64_t hdr[2], pcs[UNWIND_MAX_DEPTH];
	struct unwind_dwarf *u;
	enum unwind_stop why;
	size_t elf_len;
	unsigned n;
	int fd;

	if (size < sizeof(hdr))
		return 0;
	memcpy(hdr, data, sizeof(hdr));
	data += sizeof(hdr);
	size -= sizeof(hdr);
	elf_len = (uint32_t)hdr[1] < size ? (uint32_t)hdr[1] : size;
	fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
	if (fd < 0 || write(fd, data, elf_len) != (ssize_t)elf_len)
		__builtin_trap();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	data += elf_len;
	size -= elf_len;
	if (size > UNWIND_DWARF_WINDOW)
		size = UNWIND_DWARF_WINDOW;
	r.ip = BASE + hdr[0] % SPAN;
	r.bp = r.sp + (hdr[1] >> 32) % UNWIND_DWARF_WINDOW;
	u = unwind_dwarf_new();
	if (!u)
		__builtin_trap();
	n = unwind_dwarf(u, &r, data, size, find_memfd, NULL, pcs, UNWIND_MAX_DEPTH, &why);
	if (n < 1 || n > UNWIND_MAX_DEPTH || pcs[0] != r.ip)
		__builtin_trap();
	unwind_dwarf_free(u);
	close(fd);
	return 0;
}
