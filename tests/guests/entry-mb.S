/* SPDX-License-Identifier: MIT */
/* Multiboot entry of the synthetic guest for QEMU (`-kernel guest-mb.bin`,
 * -accel kvm): QEMU's loader enters in 32-bit protected mode without
 * paging; this switches to long mode on an identity map of the first GiB
 * (2 MiB pages) and jumps to _start (entry.S), as the built-in VMM would
 * have entered it.  The a.out-kludge header gives the load addresses, so
 * the image is a flat binary (objcopy -O binary) linked at 1 MiB. */
#define MB_MAGIC	0x1badb002
#define MB_FLAGS	0x00010002	/* address fields, memory info */

	.section .text.mb, "ax"
	.code32
	.balign 4
mb_header:
	.long MB_MAGIC
	.long MB_FLAGS
	.long -(MB_MAGIC + MB_FLAGS)
	.long mb_header			/* header_addr */
	.long __mb_load			/* load_addr */
	.long __mb_load_end		/* load_end_addr */
	.long __mb_bss_end		/* bss_end_addr */
	.long mb_entry			/* entry_addr */

	.globl mb_entry
mb_entry:
	cli
	mov %ebx, %esi			/* multiboot info */
	lea mb_stack_top, %esp
	/* pd: 512 x 2 MiB identity, pdpt[0] -> pd, pml4[0] -> pdpt */
	lea mb_pd, %edi
	mov $0x83, %eax			/* present, writable, 2 MiB */
	mov $512, %ecx
1:	mov %eax, (%edi)
	movl $0, 4(%edi)
	add $0x200000, %eax
	add $8, %edi
	loop 1b
	lea mb_pd, %eax
	or $3, %eax
	mov %eax, mb_pdpt
	lea mb_pdpt, %eax
	or $3, %eax
	mov %eax, mb_pml4
	lea mb_pml4, %eax
	mov %eax, %cr3
	mov %cr4, %eax
	or $0x20, %eax			/* PAE */
	mov %eax, %cr4
	mov $0xc0000080, %ecx		/* EFER.LME */
	rdmsr
	or $0x100, %eax
	wrmsr
	mov %cr0, %eax
	or $0x80000001, %eax		/* PG | PE */
	mov %eax, %cr0
	lgdt mb_gdtr
	ljmp $0x08, $mb_long

	.code64
mb_long:
	mov %esi, %esi			/* upper half: undefined after the switch */
	mov $0x10, %eax
	mov %eax, %ds
	mov %eax, %es
	mov %eax, %ss
	/* guest RAM size: 1 MiB + mem_upper KiB (info flags bit 0) */
	mov $(64 << 20), %rdi
	cmpl $0x336ec578, (%rsi)	/* a PVH start_info: no memory map read */
	je 2f
	testl $1, (%rsi)
	jz 2f
	mov 8(%rsi), %edi
	shl $10, %rdi
	add $0x100000, %rdi
2:	mov %rdi, %rsi
	jmp _start

	.balign 8
mb_gdt:
	.quad 0
	.quad 0x00af9a000000ffff		/* 64-bit code */
	.quad 0x00cf92000000ffff		/* data */
mb_gdtr:
	.word mb_gdtr - mb_gdt - 1
	.long mb_gdt

	/* PVH entry (the same 32-bit state as multiboot, start_info in %ebx,
	 * unused): lets QEMU's microvm machine boot the ELF directly with
	 * qboot, without SeaBIOS, which is slow on a nested KVM. */
	.section .note.Xen, "a", @note
	.balign 4
	.long 4, 4, 18			/* namesz, descsz, XEN_ELFNOTE_PHYS32_ENTRY */
	.asciz "Xen"
	.long mb_entry

	.section .bss.mb, "aw", @nobits
	.balign 4096
mb_pml4:	.space 4096
mb_pdpt:	.space 4096
mb_pd:		.space 4096
		.space 4096
mb_stack_top:
	.section .note.GNU-stack, "", @progbits
