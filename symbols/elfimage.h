/* SPDX-License-Identifier: MIT */
/*
 * One ELF binary (executable, shared object, vmlinux or kernel module) as the
 * report needs it: function symbols sorted by address, the build-id, the
 * mapping from file offsets to addresses, section bytes for disassembly and,
 * on demand, the DWARF line table.
 *
 * Binaries come from a guest: every header, table and string is checked
 * before use, and a corrupt file is an error (NULL + errno, a reason in err),
 * never a crash.  libelf and libdw do the parsing.
 *
 * Addresses: for ET_EXEC/ET_DYN (and vmlinux) an address is the link-time
 * virtual address.  For ET_REL (kernel modules) it is the offset from the
 * start of the module's core text as the kernel lays it out (executable,
 * non-init sections in section-header order, each aligned), which is what
 * the store keeps for module samples.
 */
#ifndef OPVM_ELFIMAGE_H
#define OPVM_ELFIMAGE_H

#include <stddef.h>
#include <stdint.h>

struct elfimage;

struct elfsym {
	uint64_t addr;
	uint64_t size;		/* never 0 after loading (guessed if absent) */
	const char *name;	/* owned by the image */
};

/* In syms[0..n), sorted by address: the index of the last symbol starting
 * at or below addr, if addr is inside it, or -1.  (elfimage_lookup() and
 * ksyms_lookup() share it.) */
long elfsym_lookup(const struct elfsym *syms, size_t n, uint64_t addr);

/* One row of the DWARF line table. */
struct elfline {
	uint64_t addr;
	const char *file;	/* full path as DWARF says (comp_dir joined) */
	uint32_t line;
};

/* Opens path read-only.  On failure returns NULL, sets errno (ENOEXEC for
 * "not a usable ELF file") and writes a one-line reason to err if non-NULL.
 * A compressed ELF (a kernel bzImage, a .ko.xz) is unpacked first. */
struct elfimage *elfimage_open(const char *path, char *err, size_t errlen);
/* Takes ownership of fd (closed on failure too).  name is for messages. */
struct elfimage *elfimage_open_fd(int fd, const char *name, char *err, size_t errlen);
/* Parses len bytes at buf, which must outlive the image (fuzzing, tests). */
struct elfimage *elfimage_open_mem(const void *buf, size_t len, char *err, size_t errlen);
void elfimage_close(struct elfimage *img);	/* NULL-safe */

const char *elfimage_name(const struct elfimage *img);
int elfimage_is_module(const struct elfimage *img);	/* ET_REL */

/* Build-id bytes (NULL and *len 0 when the file has none). */
const uint8_t *elfimage_build_id(const struct elfimage *img, size_t *len);

/* File offset (as a user sample stores it) -> address, through PT_LOAD
 * headers.  ET_REL: the identity.  Returns 0 or -ENOENT. */
int elfimage_offset_to_addr(const struct elfimage *img, uint64_t off, uint64_t *addr);

/* The reverse: address -> file offset (ET_REL: the identity). */
int elfimage_addr_to_offset(const struct elfimage *img, uint64_t addr, uint64_t *off);

/* The link-time addresses of the executable PT_LOAD segments, [*start,
 * *end), and the file offset at *start.  0, or -ENOENT (none: ET_REL). */
int elfimage_exec_span(const struct elfimage *img, uint64_t *start, uint64_t *end,
		       uint64_t *off);
size_t elfimage_nr_syms(const struct elfimage *img);
const struct elfsym *elfimage_sym(const struct elfimage *img, size_t i);
/* Index of the symbol containing addr, or -1. */
long elfimage_lookup(const struct elfimage *img, uint64_t addr);
/* elfimage_offset_to_addr() then elfimage_lookup(): the symbol's index,
 * or -1 with *addr set, or -2 when the offset is in no segment. */
long elfimage_lookup_offset(const struct elfimage *img, uint64_t off, uint64_t *addr);
/* elfimage_lookup_offset() of n offsets: idx[k] the symbol or -1. */
void elfimage_lookup_offsets(const struct elfimage *img, const uint64_t *offs, long *idx,
			     size_t n);
/* Index of the first symbol whose name equals name, or -1. */
long elfimage_find(const struct elfimage *img, const char *name);

/* Value of the symbol called name in the symbol tables, whatever its type
 * (e.g. "_text", which shares its address with a function).  Returns 0 or
 * -ENOENT. */
int elfimage_symbol_value(const struct elfimage *img, const char *name, uint64_t *value);

/* Copies len bytes of allocated, file-backed section contents at addr into
 * buf.  Returns the number of bytes copied (may be short at a section end),
 * or -errno. */
long elfimage_read(const struct elfimage *img, uint64_t addr, void *buf, size_t len);

/* 1 when the file has a full symbol table (.symtab), not only .dynsym. */
int elfimage_has_symtab(const struct elfimage *img);

/* At most this many functions an image from .eh_frame; a label is cut
 * at ELFIMAGE_MAX_LABEL bytes. */
#define ELFIMAGE_MAX_FRAMES	(1u << 19)
#define ELFIMAGE_MAX_LABEL	48

/* What elfimage_frame_symbols() found. */
struct elfimage_frames {
	size_t fdes;		/* FDEs whose range decoded */
	size_t refused;		/* .eh_frame entries that did not */
	size_t added;		/* symbols added */
	int cut;		/* 1: more FDEs than ELFIMAGE_MAX_FRAMES */
};

/*
 * Names the code no symbol covers by its functions' bounds from .eh_frame
 * (symbols/ehframe.h), for a stripped binary: one symbol per FDE whose
 * start no symbol covers and that lies in an executable section, cut
 * where the next symbol starts (elfimage_sym_frame() says which), named
 * "<label>+0x<addr>": addr is the function's link-time address (in a
 * shared object or PIE its offset from the load base), what addr2line
 * and objdump take.  ET_EXEC and ET_DYN only; done once per image (a
 * later call returns the first's count and st).  Symbol pointers and
 * indices taken before the call are invalid after it.  st may be NULL.
 * Returns the number of symbols added, or -ENOMEM.
 */
long elfimage_frame_symbols(struct elfimage *img, const char *label,
			    struct elfimage_frames *st);
/* How many of the image's symbols are .eh_frame bounds. */
size_t elfimage_nr_frame_syms(const struct elfimage *img);
/* 1 when s, one of img's symbols, is such a function named by address.
 * (Kept apart from struct elfsym: a field there made the report's lookup
 * loop 12 % more instructions, by its stride.) */
int elfimage_sym_frame(const struct elfimage *img, const struct elfsym *s);
/* 1 for a detached debug file opened as the image itself (no binary
 * found): symbols and lines, no code bytes, file offsets rebuilt from its
 * program headers as GNU ld lays a binary out (symbols/elfimage.c). */
int elfimage_is_debug_only(const struct elfimage *img);
/* 1 when the symbols came from MiniDebugInfo (.gnu_debugdata). */
int elfimage_has_minidebug(const struct elfimage *img);
/* The GNU build-id of the ELF open at fd (not taken), read without loading
 * symbols: 0, -ENOEXEC (not an ELF), -ENODATA (none) or -ENOSPC (longer
 * than cap). */
int elfimage_peek_build_id(int fd, uint8_t *out, size_t cap, size_t *len);
/* 1 when the file at fd (not taken) starts as an ELF; 0 for anything
 * else, such as a compressed one elfimage_open_fd() would unpack. */
int elfimage_fd_is_plain(int fd);

/* 1 when the file carries a DWARF line table. */
int elfimage_has_lines(struct elfimage *img);
/* Uses path's DWARF (a separate debug file) for line lookups and, with
 * take_symbols, its symbol table when img has only .dynsym.  The debug
 * file's build-id must match when both have one (-ESTALE).  With
 * take_symbols, symbol pointers and indices taken before the call are
 * invalid after it.  Returns 0 or -errno. */
int elfimage_attach_debug(struct elfimage *img, const char *path, int take_symbols);
/* Line-table row covering addr: the last row at or below addr in the same
 * sequence.  Loads the table on first use.  Returns 0, -ENOENT or -errno. */
int elfimage_line(struct elfimage *img, uint64_t addr, struct elfline *out);
/* All rows in [lo, hi), in address order; returns the count or -errno. */
long elfimage_lines(struct elfimage *img, uint64_t lo, uint64_t hi,
		    int (*fn)(const struct elfline *l, void *arg), void *arg);

#endif /* OPVM_ELFIMAGE_H */
