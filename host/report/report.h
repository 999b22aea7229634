/* SPDX-License-Identifier: MIT */
/*
 * The report model shared by `opvm report`, `opvm annotate` and
 * `opvm export`: a session's sample trees (host/collect/store.h) read, filtered,
 * merged and resolved to symbols (symbols/symres.h) into rows of
 *   {guest, app, image, tgid, tid, cpu, symbol} -> samples.
 *
 * Reading never trusts the session: a sample file that does not parse is
 * skipped and counted, a session.json that does not parse leaves its
 * guest's header fields unknown.
 *
 * Output (host/report/report-text.c, report-json.c, report-diff.c,
 * report-export.c, report-annotate.c) goes to a FILE the caller gives;
 * nothing here prints messages.
 */
#ifndef OPVM_REPORT_H
#define OPVM_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "host/collect/stats.h"
#include "host/collect/store.h"
#include "symbols/symres.h"

/* Which fields stay apart (opreport's --merge, inverted). */
enum report_keep {
	REPORT_KEEP_GUEST	= 1u << 0,
	REPORT_KEEP_LIB		= 1u << 1,	/* libraries per application */
	REPORT_KEEP_KERNEL	= 1u << 2,	/* kernel per application */
	REPORT_KEEP_THREAD	= 1u << 3,	/* tgid, tid */
	REPORT_KEEP_CPU		= 1u << 4,
	REPORT_KEEP_CGROUP	= 1u << 5,	/* the process's cgroup */
	REPORT_KEEP_DEFAULT	= REPORT_KEEP_GUEST | REPORT_KEEP_LIB | REPORT_KEEP_KERNEL,
	REPORT_KEEP_ALL		= 0x3f,
};
/* "guest,lib,kernel,thread,cpu,cgroup,all,none" -> mask.  0 or -EINVAL. */
int report_parse_keep(const char *spec, unsigned *out);

enum report_sort {
	REPORT_SORT_SAMPLES,
	REPORT_SORT_SYMBOL,
	REPORT_SORT_IMAGE,
	REPORT_SORT_APP,
	REPORT_SORT_CGROUP,	/* rows per cgroup (implies REPORT_KEEP_CGROUP) */
};
int report_parse_sort(const char *s, enum report_sort *out);

#define REPORT_MAX_FILTERS	32

/* A profile specification (opreport's "guest:web01 image:/bin/ls tgid:42");
 * each term may hold a comma-separated list, terms of one kind are OR'd,
 * kinds are AND'd.  guest and image accept shell globs; image matches the
 * full path or the basename. */
struct report_filter {
	const char *guest[REPORT_MAX_FILTERS];
	size_t nr_guest;
	const char *image[REPORT_MAX_FILTERS];
	size_t nr_image;
	const char *event[REPORT_MAX_FILTERS];
	size_t nr_event;
	int64_t tgid[REPORT_MAX_FILTERS], tid[REPORT_MAX_FILTERS], cpu[REPORT_MAX_FILTERS];
	size_t nr_tgid, nr_tid, nr_cpu;
};
/* Adds one "kind:value[,value...]" term.  The strings must outlive the
 * filter.  Returns 0 or -EINVAL (unknown kind, bad number, too many). */
int report_filter_add(struct report_filter *f, char *term);

/* The applications idle and boot samples are filed under whatever the
 * separation (host/collect/attribution.h), as reports name them. */
#define REPORT_APP_IDLE		STORE_APP_IDLE
#define REPORT_APP_BOOT		STORE_APP_BOOT
/* A process's anonymous memory, as the store names it; the image a row
 * named by the process's perf map shows instead (JIT code has no binary:
 * docs/runtimes.md). */
#define REPORT_IMAGE_ANON	"{anon}"
#define REPORT_IMAGE_JIT	"[jit]"

enum report_exclude {
	REPORT_EXCLUDE_IDLE = 1u << 0,	/* the idle task */
	REPORT_EXCLUDE_BOOT = 1u << 1,	/* before the kernel's own mapping */
};
/* "idle,boot" into enum report_exclude bits.  0 or -EINVAL. */
int report_parse_exclude(const char *list, unsigned *out);

struct report_opts {
	const char *session_dir;	/* default "./opvm_data" */
	unsigned exclude;		/* enum report_exclude */
	const char *which;		/* "current" (default) or "previous" */
	/* range: the windows (host/collect/store.h) that overlap
	 * [since_ms, until_ms), Unix ms, instead of which */
	int range;
	int64_t since_ms, until_ms;
	unsigned keep;			/* enum report_keep */
	struct report_filter filter;
	int symbols;			/* resolve symbols (-l) */
	int details;			/* keep per-address counts (-d, annotate) */
	const char *only_symbol;	/* details only for this symbol (may be NULL) */
	struct symres *res;		/* caller's; needed when symbols is set;
					 * must outlive the report (rows point
					 * at its symbol names and images) */
	enum report_sort sort;		/* the rows' order (report_sort()) */
};

/* Samples at one image address (details). */
struct report_addr {
	uint64_t addr;
	uint64_t count;
};

/* Most windows one report reads (a day of 10 s windows is 8640). */
#define REPORT_MAX_WINDOWS	16384

/* What every output names a row or frame without a symbol. */
#define NO_SYMBOLS	"(no symbols)"

struct report_row {
	const char *guest;		/* "all" when merged */
	const char *app;
	const char *image;
	int kernel;
	int python;			/* 1: symbol is a Python function (a
					 * frame read from the guest's
					 * interpreter; image is that), not
					 * the image's own */
	const char *file;		/* python: the function's file (interned),
					 * first_line its first line, line the
					 * sampled one (stacks only; 0: none) */
	uint32_t first_line, line;
	int frame;			/* 1: symbol is a function of a stripped
					 * binary named by address, its bounds
					 * from .eh_frame ("gzip+0x4a10") */
	int64_t tgid, tid, cpu;		/* -1: merged */
	const char *cgroup;		/* interned cgroup path; NULL: none, or
					 * merged (REPORT_KEEP_CGROUP) */
	const char *symbol;		/* NULL: no symbols (or not asked) */
	uint64_t sym_addr, sym_size;	/* image addresses, when symbol != NULL */
	struct simage *img;		/* resolver's image (NULL without symbols) */
	uint64_t samples;
	double percent;
	struct report_addr *addrs;	/* details, sorted by addr */
	size_t nr_addrs;
	int unresolved_offsets;		/* addrs hold raw sample offsets */
};

/* A window of the report's samples (samples/<which>: current/, or each
 * window of a --since/--until range) in which a guest has files.  Its
 * Python frame table and its stack table are its own: an id of one
 * window's table means nothing in another. */
struct report_gwin {
	const char *which;		/* interned */
	struct store_pyread *py;	/* report_guest_python() */
	int py_loaded;
};

/* What one guest's session.json said. */
struct report_guest {
	char *name;
	char *samples;			/* its samples/ directory, or NULL */
	struct report_gwin *wins;	/* the windows it has files in, oldest
					 * first */
	size_t nr_wins;
	char *mode;			/* NULL if unknown */
	char *separate;			/* what run/attach kept apart ("lib",
					 * "lib,thread", ...), NULL if unknown */
	unsigned rate_hz;
	unsigned vcpus;
	double duration_s;
	char *start;
	char *from_exec;		/* --from-exec NAME, or NULL */
	double started_after_s;		/* when it came; < 0: never */
	int no_python;			/* --no-python: no Python frames read */
	char *event;			/* first event */
	uint64_t event_count;
	int have_stats;
	struct opvm_stats stats;
	char *kernel_release;		/* NULL if the guest never said HELLO */
	uint64_t text_addr, anchor_addr;
	char *anchor_name;
	uint8_t kernel_build_id[20];	/* vmlinux's (introspection), or none */
	size_t kernel_build_id_len;
	uint64_t ksyms_mismatch;	/* session.json fetch.ksyms.slide_mismatch */
	char kernel_warn[384];		/* simage_warning() of its kernel, or "" */
	uint64_t total;			/* samples in this report */
	char meta_err[64];		/* why session.json was not read, or "" */
};

/* An image the report could not resolve, or a stripped one whose
 * functions are named by address (state SIMAGE_OK, frame_samples), for
 * the footer. */
struct report_problem {
	const char *guest;
	const char *image;
	enum simage_state state;
	const char *reason;		/* what went wrong, or would name it */
	uint64_t samples;		/* its samples without a real name */
	uint64_t frame_samples;		/* of which: in .eh_frame functions */
	const uint8_t *build_id;	/* the resolver's; NULL if none */
	size_t build_id_len;
};

struct report {
	struct report_row *rows;
	size_t nr_rows;
	struct report_guest *guests;
	size_t nr_guests;
	struct report_problem *problems;
	size_t nr_problems;

	const char *event;		/* the event reported on */
	uint64_t event_count;
	char **other_events;		/* events present but not reported */
	size_t nr_other_events;

	uint64_t total;			/* samples in the rows */
	uint64_t lost;			/* lost_overflow, all guests */
	uint64_t throttled;
	uint64_t unresolved;		/* samples in rows without a symbol */
	uint64_t outside_kernel;	/* of which: vmlinux samples below the
					 * kernel's half of the address space
					 * (firmware, boot loader, decompressor) */
	uint64_t mismatch_samples;	/* of which: images with another build-id */
	uint64_t frame_samples;		/* samples in functions named only by
					 * their .eh_frame bounds (not in
					 * unresolved: they have a row each) */
	uint64_t excluded_idle;		/* left out by --exclude idle */
	uint64_t excluded_boot;		/* left out by --exclude boot */
	size_t mismatches;		/* images with a build-id mismatch */
	size_t files, skipped_files, bad_files;
	unsigned keep;
	int symbols;

	/* Call chains (report_stacks_load(), sessions recorded with -g): the
	 * stacks of the reported event, filtered like the rows (guest, leaf
	 * image, --exclude; not thread or cpu, which a stack does not keep). */
	struct report_stack *stacks;
	size_t nr_stacks;
	uint64_t stacks_total;		/* samples in them */
	size_t stack_guests;		/* guests with a stack table */
	size_t stack_errors;		/* tables that did not read */
	char stack_err[128];		/* the first one's reason */
	char res_warn[384];		/* symres_warning() once loaded, or "" */
	struct symres_dbgd_stats dbgd;	/* what debuginfod did, once loaded */

	struct report_priv *priv;
};

/* One frame of a stack: the image and offset sync filed it under, and its
 * symbol (NULL: none).  Callers' addresses are return addresses: their
 * symbol is looked up at offset - 1. */
struct report_frame {
	const char *image;		/* interned */
	int kernel;
	int python;			/* a Python frame: offset its id, symbol
					 * report_python_label()'s, file and
					 * lines its own */
	const char *file;		/* Python frames: interned, else NULL */
	uint32_t line, first_line;
	uint64_t offset;
	const char *symbol;		/* NULL: no symbol */
	int frame;			/* as report_row's */
	uint64_t sym_addr;
	struct simage *img;		/* NULL without symbols */
};

struct report_stack {
	const char *guest, *app;	/* interned; app as rows name it */
	uint64_t samples;
	unsigned nr;
	struct report_frame *frames;	/* leaf first */
};

/* The Python frame table (store.h, "Python frames") of g's window g->wins[win],
 * read on first use; NULL when it has none (or it does not read). */
const struct store_pyread *report_guest_python(struct report_guest *g, size_t win);
/* g's window g->wins[win] as a path into buf[len]: buf, or NULL (unknown,
 * or too long). */
const char *report_guest_window_dir(const struct report_guest *g, size_t win, char *buf,
				    size_t len);
/* A Python frame as rows and stacks name it: "qualname (file:first line)"
 * into buf[len]: buf. */
const char *report_python_label(char *buf, size_t len, const struct store_pyframe *f);
/* The rule that puts a stack's Python frames in place of the interpreter's
 * eval loop (docs/runtimes.md), on frames f[0..n) as the stack table keeps
 * them (native leaf first, then the Python frames, innermost first),
 * symbols resolved: reorders f and returns the frames kept. */
unsigned report_python_merge(struct report_frame *f, unsigned n);

/* Keeps o->res's symres_warning() in r->res_warn (the first one), for the
 * footer and JSON's warnings: called once the loading asked it for images. */
void report_note_symres(struct report *r, const struct report_opts *o);
/* The resolver's image of a sample file's or a stack frame's (image,
 * kernel, build-id) in guest g: for a process's anonymous memory (tgid >
 * 0), its JIT code named by that process's perf map and jitdump
 * (symres_jit_image()); else symres_image() with g's kernel facts.  The
 * one place both choose.  NULL on ENOMEM. */
struct simage *report_image(struct symres *res, const struct report_guest *g, const char *image,
			    int kernel, int64_t tgid, const uint8_t *bid, size_t bid_len);
/* Reads every guest's stack table into r (report-stacks.c), after
 * report_load() with the same options.  0 or -ENOMEM; a table that does
 * not read is counted in stack_errors. */
int report_stacks_load(struct report *r, const struct report_opts *o);
/* The report's copy of s (NULL on ENOMEM); lives as long as r. */
const char *report_intern(struct report *r, const char *s);

/* Reads the session, its rows in o->sort's order.  Returns NULL, sets errno
 * and writes a reason to err on failure (ENOENT: no samples at all). */
struct report *report_load(const struct report_opts *o, char *err, size_t errlen);
void report_free(struct report *r);	/* NULL-safe */

/* Sorts rows (ties broken by samples, symbol, image, app, guest, ids so
 * that output is deterministic). */
void report_sort(struct report *r, enum report_sort how);

/* ---- outputs ---------------------------------------------------------- */

struct report_print_opts {
	double threshold;		/* percent; rows below are not shown */
	int width;			/* columns, default 80 */
	int long_names;			/* full paths instead of basenames */
	int details;			/* -d */
	int depth;			/* summary: 1 guests, 2 +applications,
					 * 3 (default, 0) +images */
};

/* opreport -c: each function with its callers above and callees below
 * (report-callgraph.c).  0 or -errno. */
int report_print_callgraph(FILE *f, const struct report *r, const struct report_print_opts *po);

/* Header lines: how the samples were taken. */
void report_print_header(FILE *f, const struct report *r);
/* Footer: totals, losses, unresolved, mismatches, warnings past 0.01 %. */
void report_print_footer(FILE *f, const struct report *r);
/* guest -> application -> image summary. */
void report_print_summary(FILE *f, const struct report *r, const struct report_print_opts *po);
/* Symbol table (-l), with per-address lines when po->details. */
void report_print_symbols(FILE *f, const struct report *r, const struct report_print_opts *po);
/* One JSON object (the stable contract in docs/reports.md).  0 or -errno. */
int report_print_json(FILE *f, const struct report *r, const struct report_print_opts *po);

/* Differential report: rows of b against rows of a (same keys). */
void report_print_diff(FILE *f, const struct report *a, const struct report *b,
		       const struct report_print_opts *po);
int report_print_diff_json(FILE *f, const struct report *a, const struct report *b,
			   const struct report_print_opts *po);

/* ---- annotate (host/report/report-annotate.c) ---------------------------------- */

struct annotate_opts {
	int assembly;
	int source;
	double threshold;		/* symbols below this percent are skipped */
	size_t max_bytes;		/* per symbol, default 64 KiB */
};

/* Annotates every row that has a symbol and details.  Returns the number
 * of symbols annotated, or -errno; a one-line reason for symbols that could
 * not be annotated goes to note (may be NULL) via fn. */
long report_annotate(FILE *f, struct report *r, struct symres *res,
		     const struct annotate_opts *ao,
		     void (*note)(const char *msg, void *arg), void *arg);

/* ---- export, one file per format (host/report/export-*.c) ---------------------- */

/* Writes a gzip'd pprof profile.proto: a location per address when r kept
 * details, with DWARF lines and source files found through res (may be
 * NULL: one location per symbol, no lines).  Returns 0 or -errno. */
int report_export_pprof(FILE *f, const struct report *r, struct symres *res);
/* "guest;process;image;symbol count" lines. */
int report_export_folded(FILE *f, const struct report *r);
/* speedscope's JSON file format: one "sampled" profile per guest, each
 * sample the stack process, image, symbol weighted by its count.  exporter
 * names the program ("opvm 0.1").  0 or -errno. */
int report_export_speedscope(FILE *f, const struct report *r, const char *exporter);
/* One self-contained HTML page with an interactive flame graph; with base,
 * differential (colour by growth or shrink against base). */
int report_export_html(FILE *f, const struct report *r, const struct report *base,
		       const char *title);

/* ---- export formats, one registry (host/report/export.c) ---------------- */

/* What a format writes from.  r is the profile; base the --diff baseline
 * (NULL: none); res resolves lines (may be NULL); title the page's (may be
 * NULL); exporter names the program ("opvm 0.1"). */
struct export_in {
	const struct report *r;
	const struct report *base;
	struct symres *res;
	const char *title;
	const char *exporter;
};

enum export_flags {
	EXPORT_TEXT = 1u << 0,		/* may go to stdout (else -o FILE) */
	EXPORT_DETAILS = 1u << 1,	/* wants per-address counts (report_opts.details) */
	EXPORT_DIFF = 1u << 2,		/* draws against base (--diff) */
	EXPORT_EMPTY = 1u << 3,		/* writes a profile with no sample (--empty-ok) */
	EXPORT_CGROUP = 1u << 4,	/* labels samples with their cgroup
					 * (rows kept apart by it) */
};

/* One export format.  A new one is its own file defining
 * `const struct export_ops export_NAME_ops` and one entry in
 * EXPORT_FORMATS (host/report/export.c); nothing else changes. */
struct export_ops {
	const char *name;	/* --format NAME */
	const char *ext;	/* the usual file name ending, with its dot:
				 * what `opvm export` suggests for -o */
	const char *help;	/* one clause for --help: "NAME: what it is" */
	unsigned flags;		/* enum export_flags */
	/* Writes in to f: 0 or -errno. */
	int (*write)(FILE *f, const struct export_in *in);
};

/* The formats, in --help order, NULL-terminated. */
extern const struct export_ops *const export_formats[];
/* The format called name, or NULL. */
const struct export_ops *export_find(const char *name);
/* The names of the formats that can do all of flags (enum export_flags; 0:
 * every format) joined by sep, the last two by last ("pprof, folded or
 * html"), into buf[len] (truncated): buf.  Help and messages say which
 * formats take an option from this, never from a list of their own. */
const char *export_names(char *buf, size_t len, unsigned flags, const char *sep,
			 const char *last);
/* Every format's help clause joined by "; " into buf[len]: buf. */
const char *export_help(char *buf, size_t len);

/* Short display name of a path (the basename, or the whole string). */
const char *report_basename(const char *path);

#endif /* OPVM_REPORT_H */
