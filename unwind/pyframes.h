/* SPDX-License-Identifier: MIT */
/*
 * CPython frames read from outside the interpreter, over the same
 * guest-memory read callback as the stack walkers (unwind.h): from
 * _PyRuntime through the interpreters to the thread state whose native
 * thread id is the sampled thread's, then its current frame chain, each
 * frame named by its code object (qualified name, file, line from the
 * location table).
 *
 * Supported: CPython 3.13 by the offsets it publishes in _Py_DebugOffsets
 * at the start of _PyRuntime (cookie "xdebugpy"), 3.11 and 3.12 by one
 * table of offsets per minor version, checked against the binary's
 * Py_Version.  Everything read is hostile: pointers must be canonical
 * user addresses, aligned; objects must carry the type the binary's own
 * PyCode_Type/PyUnicode_Type/PyBytes_Type say; strings
 * are bounded, compact only, decoded to UTF-8 with control characters
 * replaced; chains are cut at a depth, at a loop, at a frame that does not
 * read.  A guest can still make its own frames say anything it likes: the
 * names are the guest's word, never a host path.
 */
#ifndef OPVM_UNWIND_PYFRAMES_H
#define OPVM_UNWIND_PYFRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "unwind/unwind.h"

#define PYFRAMES_MAX_DEPTH	64	/* Python frames kept, innermost first */
#define PYFRAMES_NAME_MAX	128	/* bytes of a qualified name (UTF-8, NUL) */
#define PYFRAMES_FILE_MAX	192	/* bytes of a file name */
#define PYFRAMES_MAX_THREADS	256	/* thread states looked at per read */
#define PYFRAMES_MAX_STRLEN	4096	/* longer names are refused, not cut */

/* What the interpreter's binary says, from its dynamic symbols
 * (pyframes_dynsym()): run-time addresses, 0 when absent. */
struct pyframes_target {
	uint64_t runtime;		/* &_PyRuntime */
	uint64_t code_type;		/* &PyCode_Type */
	uint64_t unicode_type;		/* &PyUnicode_Type */
	uint64_t bytes_type;		/* &PyBytes_Type */
	uint64_t version;		/* Py_Version's value (PY_VERSION_HEX) */
};

/* Where the fields are, for one CPython minor version; all offsets in
 * bytes from the start of their object. */
struct pyframes_layout {
	uint32_t version;		/* PY_VERSION_HEX it was chosen for */
	uint16_t rt_interp_head;	/* _PyRuntimeState.interpreters.head */
	uint16_t is_next, is_threads_head; /* PyInterpreterState */
	uint16_t ts_next, ts_interp, ts_native_tid; /* PyThreadState */
	uint16_t ts_frame;		/* ->cframe (3.11, 3.12) or
					 * ->current_frame (3.13) */
	uint16_t cf_current;		/* _PyCFrame.current_frame; 0xffff:
					 * no _PyCFrame (3.13) */
	uint16_t fr_previous, fr_code, fr_instr, fr_owner; /* _PyInterpreterFrame */
	uint8_t owner_cstack;		/* owner of C-stack shim frames, skipped;
					 * 0xff: none (3.11) */
	uint8_t owner_max;		/* larger owners are bad frames */
	uint16_t ob_type;		/* PyObject.ob_type */
	uint16_t co_filename, co_qualname, co_linetable, co_firstlineno;
	uint16_t co_code;		/* co_code_adaptive: instruction 0 */
	uint16_t str_length, str_state;	/* PyASCIIObject */
	uint16_t str_ascii_size;	/* sizeof(PyASCIIObject): ASCII data */
	uint16_t str_compact_size;	/* sizeof(PyCompactUnicodeObject) */
	uint16_t bytes_size, bytes_sval; /* PyBytesObject ob_size, ob_sval */
};

/* One Python frame, innermost first. */
struct pyframe {
	char name[PYFRAMES_NAME_MAX];	/* co_qualname */
	char file[PYFRAMES_FILE_MAX];	/* co_filename */
	uint32_t line;			/* 0: not known */
	uint32_t first_line;		/* co_firstlineno; 0: not known */
	uint64_t code;			/* the code object's address */
	uint64_t frame;			/* the _PyInterpreterFrame's */
	uint64_t instr;			/* its instruction pointer */
};

/* What reads found and why they failed, counted. */
struct pyframes_stats {
	uint64_t reads;			/* pyframes_read() calls */
	uint64_t chains;		/* ... that found frames */
	uint64_t frames;		/* frames named */
	uint64_t no_thread;		/* no thread state of that tid */
	uint64_t idle;			/* the thread runs no Python frame */
	uint64_t bad_runtime;		/* _PyRuntime/interpreters unreadable or forged */
	uint64_t loops;			/* a frame or thread seen twice */
	uint64_t depth_cut;		/* chains cut at the depth */
	uint64_t bad_frame;		/* a frame unreadable or with a bad owner */
	uint64_t bad_code;		/* a code object unreadable or of a wrong type */
	uint64_t bad_string;		/* a name refused: type, layout, length */
	uint64_t unreadable;		/* chains cut at a page that did not read */
	uint64_t truncated;		/* names cut to fit */
	uint64_t changed;		/* frames dropped by pyframes_validate() */
	uint64_t bytes;			/* guest bytes read */
	uint64_t layout_published;	/* layouts from _Py_DebugOffsets */
	uint64_t layout_table;		/* ... from the version table */
	uint64_t bad_offsets;		/* _Py_DebugOffsets refused: forged */
};

/*
 * The layout for t.  When _PyRuntime (t->runtime) begins with the cookie
 * of _Py_DebugOffsets, every offset is taken from that block (its version
 * must be Py_Version's, each offset must lie inside its structure's
 * declared size and what is read of it; st->layout_published), else 3.11
 * and 3.12 come from the version table (st->layout_table).  0, -ENOTSUP
 * (a version without a layout: before 3.11, after 3.13), -EFAULT
 * (unreadable) or -EINVAL (forged: a 3.13 without the block, a block
 * refused; st->bad_offsets).
 */
int pyframes_layout(const struct unwind_mem *m, const struct pyframes_target *t,
		    struct pyframes_layout *out, struct pyframes_stats *st);

/*
 * The frames of thread tid (its native thread id: the guest's tid) into
 * out[0..max), innermost first.  Returns how many (0: none, see *st).
 */
unsigned pyframes_read(const struct unwind_mem *m, const struct pyframes_target *t,
		       const struct pyframes_layout *l, uint32_t tid, struct pyframe *out,
		       unsigned max, struct pyframes_stats *st);

/*
 * For a guest that kept running while out[0..n) was read (the perf
 * sampler): reads the chain again, frame, code and instruction pointers
 * only, and keeps the outermost frames that are the same in both reads
 * (the same frame, code object and, for callers, call site); the inner
 * ones that changed are dropped (st->changed).  Returns the
 * frames kept, moved to out[0..).  Call right after pyframes_read().
 */
unsigned pyframes_validate(const struct unwind_mem *m, const struct pyframes_target *t,
			   const struct pyframes_layout *l, uint32_t tid, struct pyframe *out,
			   unsigned n, struct pyframes_stats *st);

/*
 * The symbols of t from the dynamic symbol table of the ELF executable
 * mapped at base (the address of its first page, file offset 0), read
 * through m: its program headers, PT_DYNAMIC, DT_GNU_HASH, DT_SYMTAB,
 * DT_STRTAB, and Py_Version's value.  0, -ENOENT (no _PyRuntime: not a
 * CPython with libpython linked in), -EFAULT, -EINVAL (not a sane ELF).
 * Bounded: at most a few KiB read.
 */
int pyframes_dynsym(const struct unwind_mem *m, uint64_t base, struct pyframes_target *t);

/* "work (/srv/app.py:12)" into buf; returns its length (cut to len). */
size_t pyframe_format(const struct pyframe *f, char *buf, size_t len);

#endif /* OPVM_UNWIND_PYFRAMES_H */
