/* SPDX-License-Identifier: MIT */
/*
 * The x86-64 layout facts every room reads guests by: where the user half
 * ends and the kernel half starts, where Linux maps its kernel image, and
 * the page-table entry bits, and the size of a page.  One definition each,
 * for the guest-memory reader, the unwinders, introspection and the
 * built-in VMM's boot tables.
 */
#ifndef OPVM_X86_H
#define OPVM_X86_H

#include <stddef.h>
#include <stdint.h>

/* Addresses below this are user space (4-level paging; the canonical hole
 * follows). */
#define OPVM_USER_TOP		0x0000800000000000ull
/* Addresses from here up are the kernel's (4- and 5-level paging alike:
 * what lies between is non-canonical). */
#define OPVM_KERNEL_HALF	0xffff800000000000ull
/* Linux x86-64 maps its kernel image from here (__START_KERNEL_map). */
#define OPVM_KERNEL_MAP		0xffffffff80000000ull
/* and its loadable modules here (MODULES_VADDR .. MODULES_END) */
#define OPVM_MODULES_START	0xffffffffc0000000ull
#define OPVM_MODULES_END	0xffffffffff000000ull

/* Page-table entry bits: present, writable, page size (a 2 MiB or 1 GiB
 * page at the PD and PDPT levels), and bits 51:12, the next table or the
 * page frame. */
#define OPVM_PTE_PRESENT	0x1ull
#define OPVM_PTE_WRITE		0x2ull
#define OPVM_PTE_PS		0x80ull
#define OPVM_PTE_ADDR		0x000ffffffffff000ull

/* The 4 KiB page that guest memory is mapped, and so read, by: a read that
 * crosses a page may fail on the second one alone.  OPVM_PAGE_MASK is an
 * address's offset bits (Linux's PAGE_MASK is the others); 64-bit, so that
 * ~OPVM_PAGE_MASK keeps an address's high bits. */
#define OPVM_PAGE_SHIFT		12
#define OPVM_PAGE_SIZE		(1ull << OPVM_PAGE_SHIFT)
#define OPVM_PAGE_MASK		(OPVM_PAGE_SIZE - 1)

/* The bytes from va to the end of its page (1..OPVM_PAGE_SIZE): how much
 * one read there may take without crossing into the next page. */
static inline size_t opvm_page_rest(uint64_t va)
{
	return (size_t)(OPVM_PAGE_SIZE - (va & OPVM_PAGE_MASK));
}

#endif /* OPVM_X86_H */
