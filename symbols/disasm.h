/* SPDX-License-Identifier: MIT */
/*
 * x86-64 disassembly through capstone, one instruction at a time.
 */
#ifndef OPVM_DISASM_H
#define OPVM_DISASM_H

#include <stddef.h>
#include <stdint.h>

struct disasm;

struct disasm_insn {
	uint64_t addr;
	uint16_t size;
	char text[200];		/* "mnemonic operands" */
};

/* Returns NULL and sets errno (ENOSYS: capstone lacks x86). */
struct disasm *disasm_new(void);
void disasm_free(struct disasm *d);	/* NULL-safe */

/* Disassembles the len bytes of code at buf, which sit at address addr,
 * calling fn for each instruction.  Undecodable bytes come out as one
 * "(bad)" byte each so that addresses stay in step.  Returns 0 or fn's
 * nonzero value. */
int disasm_range(struct disasm *d, const uint8_t *buf, size_t len, uint64_t addr,
		 int (*fn)(const struct disasm_insn *insn, void *arg), void *arg);

#endif /* OPVM_DISASM_H */
