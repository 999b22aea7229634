// SPDX-License-Identifier: MIT
/*
 * Capstone wrapper: keeps the handle and one cs_insn buffer per disasm so
 * that a long listing does not allocate per instruction.
 */
#include <capstone/capstone.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "symbols/disasm.h"

struct disasm {
	csh cs;
	cs_insn *insn;
};

struct disasm *disasm_new(void)
{
	struct disasm *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &d->cs) != CS_ERR_OK) {
		free(d);
		errno = ENOSYS;
		return NULL;
	}
	d->insn = cs_malloc(d->cs);
	if (!d->insn) {
		cs_close(&d->cs);
		free(d);
		errno = ENOMEM;
		return NULL;
	}
	return d;
}

void disasm_free(struct disasm *d)
{
	if (!d)
		return;
	cs_free(d->insn, 1);
	cs_close(&d->cs);
	free(d);
}

int disasm_range(struct disasm *d, const uint8_t *buf, size_t len, uint64_t addr,
		 int (*fn)(const struct disasm_insn *insn, void *arg), void *arg)
{
	const uint8_t *code = buf;
	size_t left = len;
	uint64_t pc = addr;
	struct disasm_insn out;
	int ret;

	while (left > 0) {
		const uint8_t *before = code;

		if (cs_disasm_iter(d->cs, &code, &left, &pc, d->insn)) {
			out.addr = d->insn->address;
			out.size = d->insn->size;
			if (d->insn->op_str[0])
				snprintf(out.text, sizeof(out.text), "%s %s",
					 d->insn->mnemonic, d->insn->op_str);
			else
				snprintf(out.text, sizeof(out.text), "%s", d->insn->mnemonic);
		} else {
			out.addr = pc;
			out.size = 1;
			snprintf(out.text, sizeof(out.text), "(bad) .byte 0x%02x", *before);
			code = before + 1;
			left--;
			pc++;
		}
		ret = fn(&out, arg);
		if (ret)
			return ret;
	}
	return 0;
}
