/* SPDX-License-Identifier: MIT */
/*
 * Symbol resolution for sample files: finds the binary behind each sampled
 * image and turns sample offsets into symbols.
 *
 * Where binaries come from, in order:
 *   user images  <session>/.build-id/xx/yyyy... (the session's build-id
 *                cache, by the build-id the sample file carries), the
 *                files fetched from the guest (fetch_cache/<guest>/xx/yyyy,
 *                host/collect/fetch.h), each
 *                --guest-root for that guest (the guest path resolved inside
 *                the root, symlinks included, with openat2(RESOLVE_IN_ROOT):
 *                a guest path can never reach outside the root), then
 *                debuginfod by build-id when DEBUGINFOD_URLS is set, then
 *                the binary's .dynsym as read from guest memory
 *                (fetch_cache/<guest>/xx/yyyy.memsyms, host/collect/fetch.h);
 *   vmlinux      --vmlinux, --system-map/--kallsyms, then in each guest root,
 *                then <session>/guests/<guest>/kallsyms (what the guest sent,
 *                host/collect/fetch.h), then on the host
 *                /usr/lib/debug/boot/vmlinux-<release>,
 *                /boot/vmlinux-<release>, /boot/System.map-<release>;
 *   modules      <name>.ko under lib/modules/<release>/ of the guest roots
 *                (and of the host), '-' and '_' alike, then the module's
 *                lines of <session>/guests/<guest>/kallsyms rebased on the
 *                base in kallsyms.modules beside it (host/collect/fetch.h).
 * A binary whose build-id differs from the sample file's is never used: the
 * image is marked SIMAGE_MISMATCH and the next candidate is tried.
 *
 * Every binary is opened once per resolver however many guests, processes
 * or sample files refer to it (cached by device and inode).
 *
 * Sample offsets (docs/session-json.md): user images hold file offsets,
 * modules offsets from the core text base, vmlinux run-time addresses
 * (minus the KASLR slide = link-time), anonymous images virtual addresses.
 */
#ifndef OPVM_SYMRES_H
#define OPVM_SYMRES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "symbols/elfimage.h"
#include "symbols/perfmap.h"

struct symres;
struct simage;

struct symres_root {
	const char *guest;	/* NULL: every guest */
	const char *dir;
};

struct symres_config {
	const char *session_dir;	/* for <session>/.build-id; may be NULL */
	const struct symres_root *roots;
	size_t nr_roots;
	const char *vmlinux;		/* may be NULL */
	const char *system_map;		/* System.map or kallsyms text; may be NULL */
	const char *source_dir;		/* extra place for source files; may be NULL */
	int no_host_kernel;		/* 1: never look in the host's /boot */
	int no_debuginfod;		/* 1: never ask debuginfod */
	const char *fetch_cache;	/* binaries fetched from the guests:
					 * DIR/<guest>/xx/yyyy; may be NULL */
	/* Called about once a second while a debuginfod transfer runs past a
	 * second (done and total in bytes, total 0 when unknown), on the
	 * resolving thread; may be NULL.  Printing is the caller's. */
	void (*progress)(void *arg, const char *build_id, uint64_t done, uint64_t total);
	void *progress_arg;
};

/* What debuginfod did for one resolver (symbols/symres-dbgd.c). */
struct symres_dbgd_stats {
	uint64_t asked;		/* requests made: one per build-id and kind at most */
	uint64_t found;		/* files accepted */
	uint64_t not_found;	/* no server had it (or a cached negative answer) */
	uint64_t wrong_build;	/* refused: the file's build-id was another */
	uint64_t too_big;	/* refused: over the size cap */
	uint64_t timed_out;	/* a server stopped answering (then no more asked) */
	uint64_t skipped;	/* not asked: a server had timed out before */
	uint64_t failed;	/* other errors */
	uint64_t bytes;		/* bytes of the files accepted */
};
const struct symres_dbgd_stats *symres_dbgd_stats(const struct symres *r);

/* What the guest said about its kernel (session.json "kernel"). */
struct symres_kernel {
	const char *release;		/* may be NULL */
	uint64_t text_addr;		/* run-time _text, 0 if unknown */
	const char *anchor_name;	/* may be NULL */
	uint64_t anchor_addr;
	const uint8_t *build_id;	/* vmlinux's, for debuginfod; may be NULL */
	size_t build_id_len;
};

enum simage_state {
	SIMAGE_OK,		/* symbols available */
	SIMAGE_NOT_FOUND,	/* no binary found */
	SIMAGE_MISMATCH,	/* only binaries with another build-id found */
	SIMAGE_BAD,		/* found but unusable (corrupt, no symbols) */
	SIMAGE_ANON,		/* anonymous memory: no file to look in */
};

/* Copies what it needs from cfg.  Returns NULL and sets errno. */
struct symres *symres_new(const struct symres_config *cfg);
void symres_free(struct symres *r);	/* NULL-safe; frees every simage */

/*
 * The resolved image for one sampled image of one guest; cached, so calling
 * again with the same arguments is cheap and returns the same pointer.
 * image is the store's (unmangled) image name; kernel says {kern}; the
 * build-id is the sample file's (may be NULL).  k may be NULL.  Never fails
 * but for ENOMEM (NULL): a missing binary is a state, not an error.
 */
struct simage *symres_image(struct symres *r, const char *guest, const char *image,
			    int kernel, const uint8_t *build_id, size_t build_id_len,
			    const struct symres_kernel *k);

/* A user image symres_image() did not find (SIMAGE_NOT_FOUND), looked
 * for again if a file of its build-id (or its debug file) is now in the
 * fetch cache (the guest sent it meanwhile: a collector's lookups,
 * host/collect/fetch.h); one stat() otherwise.  An image named without a
 * binary (its debug file, symbols from guest memory) takes the binary as
 * its simage_file() once it is there.  guest and image as given to
 * symres_image().  Returns 1 if si is SIMAGE_OK now. */
int symres_image_recheck(struct symres *r, struct simage *si, const char *guest,
			 const char *image);

/*
 * The JIT code of process tgid in guest: its anonymous memory named by the
 * perf map the collector fetched from the guest
 * (<session>/guests/<guest>/perfmaps/<tgid>.map, host/collect/fetch.h;
 * symbols/perfmap.h; docs/runtimes.md), read once per resolver.  Offsets
 * are virtual addresses, as in every anonymous image.  SIMAGE_ANON when
 * the session has no map of it (or no session_dir); SIMAGE_OK with no
 * symbol for a map with no valid line.  NULL on ENOMEM only.
 */
struct simage *symres_jit_image(struct symres *r, const char *guest, int64_t tgid);
/* 1 for a symres_jit_image() image that has a map. */
int simage_is_jit(const struct simage *si);
/* What its map's parser refused and counted (symbols/perfmap.h), or NULL
 * for any other image. */
const struct perfmap_stats *simage_perfmap_stats(const struct simage *si);
/* Up to len code bytes of a JIT image at addr (its jitdump's): how many,
 * or -1 (not JIT code, or named by a perf map, which has none). */
long simage_jit_code(const struct simage *si, uint64_t addr, uint8_t *buf, size_t len);

enum simage_state simage_state(const struct simage *si);
/* 1 for the kernel image itself (vmlinux), not modules. */
int simage_is_kernel(const struct simage *si);
/* Host file the symbols come from, or NULL. */
const char *simage_path(const struct simage *si);
/* A user image's own file (its build-id checked), with symbols or not, or
 * NULL: what an unwinder needs (.eh_frame), which a stripped executable
 * keeps although it has no symbol to name (SIMAGE_BAD). */
const char *simage_file(const struct simage *si);
/* A source that disagreed with what the guest's module said and was not
 * believed (a kallsyms that moves the kernel away from HELLO's slide), as
 * one line for the report, or NULL. */
const char *simage_warning(const struct simage *si);
/* What the resolver could not do that the user asked for (DEBUGINFOD_URLS
 * set and libdebuginfod missing, once it was needed; files a server sent
 * that were refused, a server that stopped answering), as one line for the
 * report's warnings, or NULL.  Valid until the next call. */
const char *symres_warning(struct symres *r);
/* One line saying why the state is not SIMAGE_OK, or for an image whose
 * functions are named by their .eh_frame bounds (simage_nr_frames()),
 * what would name them ("" otherwise). */
const char *simage_reason(const struct simage *si);
/* How many of a user image's symbols are functions named by address from
 * its .eh_frame (symbols/elfimage.h, elfimage_frame_symbols()): a
 * stripped binary's, whose code no symbol names. */
size_t simage_nr_frames(const struct simage *si);
/* 1 when s, a symbol of si, is one of those. */
int simage_sym_frame(const struct simage *si, const struct elfsym *s);
/* The image's build-id: the sample file's, else its binary's (NULL and
 * *len 0 when neither has one). */
const uint8_t *simage_build_id(const struct simage *si, size_t *len);
/* The ELF behind the image, NULL when symbols come from a System.map. */
struct elfimage *simage_elf(const struct simage *si);

/* The ELF with the image's code: simage_elf(), or for a kernel whose
 * symbols come from a System.map, a stripped or compressed vmlinux found by
 * symres_want_code() (NULL until then). */
struct elfimage *simage_code(const struct simage *si);
/* Finds code for a System.map kernel: --vmlinux, boot/vmlinux-<release> or
 * boot/vmlinuz-<release> in the guest roots, a vmlinuz beside a root, the
 * host's /boot.  A candidate must hold "Linux version <release> " at the
 * map's linux_banner.  Decompressing a vmlinuz takes a second or two, so
 * only annotate asks.  Returns 0 or -ENOENT. */
int symres_want_code(struct symres *r, struct simage *si);

/* Sample offset -> image address (link-time).  Returns 0 or -ENOENT. */
int simage_addr(const struct simage *si, uint64_t offset, uint64_t *addr);
/* Symbol index for a sample offset, or -1 (unresolved); *addr (may be
 * NULL) receives the image address. */
long simage_lookup(const struct simage *si, uint64_t offset, uint64_t *addr);
/* simage_lookup() of n offsets: idx[k] the symbol or -1. */
void simage_lookup_batch(const struct simage *si, const uint64_t *offs, long *idx, size_t n);
size_t simage_nr_syms(const struct simage *si);
const struct elfsym *simage_sym(const struct simage *si, size_t i);
/* Index of the symbol named name, or -1. */
long simage_find(const struct simage *si, const char *name);

/* Loads DWARF lines for si, looking for separate debug info (guest root
 * /usr/lib/debug/.build-id, the session's build-id cache, debuginfod) if
 * the binary has none.  Returns 0 or -ENOENT. */
int symres_want_lines(struct symres *r, struct simage *si, const char *guest);

/* Opens a source file named by DWARF (guest data: hostile): inside the
 * guest's roots, then inside source_dir (the whole path, then ever shorter
 * tails of it), resolved so that neither ".." nor a symlink leaves the
 * directory; never the path itself on the host.  Regular files only.
 * used[usedlen] (may be NULL/0) receives the host file used, or on failure
 * why none was.  Returns NULL and sets errno. */
FILE *symres_open_source(struct symres *r, const char *guest, const char *path,
			 char *used, size_t usedlen);

/* Copies the ELF file at path into <session_dir>/.build-id/xx/yyyy (its
 * build-id), where reports look first.  The file must be a usable ELF with
 * a build-id (-ENOEXEC, -ENODATA).  out (may be NULL) receives the cache
 * path.  An existing entry is replaced.  Returns 0 or -errno. */
int symres_import(const char *session_dir, const char *path, char *out, size_t outlen);

/* Whether path is a plain (not compressed) ELF that elfimage can read,
 * whose GNU build-id is bid: 0, -ESTALE (another build-id), -ENODATA (none),
 * -ENOEXEC (not such an ELF) or another -errno.  For files a guest sent. */
int symres_check_build_id(const char *path, const uint8_t *bid, size_t bid_len);

#endif /* OPVM_SYMRES_H */
