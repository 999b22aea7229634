/* SPDX-License-Identifier: MIT */
/* Entry, interrupt stubs and the embedded user program of the synthetic
 * guest.  The VMM enters _start in long mode, CPL 0, identity-mapped. */
#define PUSH_REGS \
	push %rax; push %rbx; push %rcx; push %rdx; push %rsi; push %rdi; \
	push %rbp; push %r8; push %r9; push %r10; push %r11; push %r12; \
	push %r13; push %r14; push %r15
#define POP_REGS \
	pop %r15; pop %r14; pop %r13; pop %r12; pop %r11; pop %r10; pop %r9; \
	pop %r8; pop %rbp; pop %rdi; pop %rsi; pop %rdx; pop %rcx; pop %rbx; \
	pop %rax

	.section .text.start, "ax"
	.globl _start
_start:
	lea boot_stack_top(%rip), %rsp
	mov %rsi, %rdi			/* guest RAM size */
	call kmain
1:	hlt
	jmp 1b

	.text
	/* The "yield" system call is ud2 from ring 3 (#UD, vector 6): the
	 * software-assisted KVM this runs on turns int $n into #UD and does
	 * not enter LSTAR in ring 0, but delivers exceptions faithfully. */
	.globl isr_syscall
isr_syscall:
	PUSH_REGS
	mov %rsp, %rdi
	cld
	call syscall_handler
	POP_REGS
	iretq

	/* enter_frame(struct frame *f): switch to f (on the kernel stack)
	 * and return to the context it describes. */
	.globl enter_frame
enter_frame:
	mov %rdi, %rsp
	POP_REGS
	iretq

	/* Exceptions 0-31: report the vector and stop. */
	.globl fault_stubs
	.balign 16
fault_stubs:
	.set v, 0
	.rept 32
	.balign 16
	mov $v, %edi
	jmp fault_common
	.set v, v + 1
	.endr
fault_common:
	mov (%rsp), %rsi		/* error code or RIP, for the message */
	call fault_handler
2:	hlt
	jmp 2b

	.section .user, "a"
	.balign 4096
	.globl user_blob, user_blob_end
user_blob:
	.incbin USER_ELF
user_blob_end:
	.balign 4096

	.bss
	.balign 16
	.space 16384
boot_stack_top:
	.space 16384
	.globl kstack_top
kstack_top:
	.section .note.GNU-stack, "", @progbits
