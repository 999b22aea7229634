// SPDX-License-Identifier: MIT
/*
 * What the resolver's files share, from the top down: symres.c (life
 * cycle, images), symres-kernel.c (kernel, modules), symres-user.c (user
 * binaries), symres-debug.c (debug files, sources, build-id cache) and
 * symres-root.c (guest names, guest roots, debuginfod).  Not for use
 * outside symbols/.
 */
#ifndef OPVM_SYMRES_PRIV_H
#define OPVM_SYMRES_PRIV_H

#include <elfutils/debuginfod.h>
#include <stdbool.h>
#include <sys/types.h>

#include "symbols/ksyms.h"
#include "symbols/perfmap.h"
#include "symbols/symres.h"
#include "lib/strset.h"

#define SYMRES_MAX_DEPTH	8	/* lib/modules/<rel>/kernel/drivers/... */
#define SYMRES_MAX_MODULES	100000

enum simage_kind { SK_USER, SK_MODULE, SK_KERNEL, SK_ANON, SK_JIT };

/* One opened binary, shared by every simage that uses it. */
struct binfile {
	dev_t dev;
	ino_t ino;
	struct elfimage *elf;
	char *path;
	int debug_tried;	/* separate debug symbols looked for */
};

struct kmapfile {
	char *path;
	struct ksyms *ks;
};

struct simage {
	char *key;		/* guest \1 image \1 kernel \1 build-id */
	enum simage_kind kind;
	enum simage_state state;
	char reason[512];
	char warn[384];		/* a source that disagreed and was not
				 * believed (simage_warning()), or "" */
	const char *path;	/* owned by binfile/kmapfile */
	const char *file;	/* simage_file(), owned by binfile */
	struct elfimage *elf;	/* owned by binfile */
	struct ksyms *ks;	/* owned by kmapfile */
	struct perfmap *pm;	/* SK_JIT's, owned by the image */
	uint64_t slide;
	uint8_t build_id[64];
	size_t build_id_len;
	/* A user image's basename: what its .eh_frame functions are named
	 * after (elfimage_frame_symbols()). */
	char label[ELFIMAGE_MAX_LABEL + 1];
	int lines_tried;
	/* Kernel from a System.map: code bytes from a stripped or compressed
	 * vmlinux, found on demand (annotate). */
	struct elfimage *code;	/* owned by binfile */
	int code_tried;
	char *guest, *release;
};

struct modentry {
	char *name;		/* normalised: '-' -> '_', no ".ko" */
	char *relpath;		/* inside the root */
};

struct modindex {
	char *root;
	char *release;
	struct modentry *mods;
	size_t nr;
};

struct symres {
	char *session_dir;
	struct symres_root *roots;
	size_t nr_roots;
	int *root_fds;
	char *vmlinux, *system_map, *source_dir, *fetch_cache;
	int no_host_kernel, no_debuginfod;

	struct strset images;	/* struct simage by its key */
	struct binfile *bins;
	size_t nr_bins;
	struct kmapfile *kmaps;
	size_t nr_kmaps;
	struct modindex *modidx;
	size_t nr_modidx;
	debuginfod_client *dbgd;
	int dbgd_tried;
	int dbgd_missing;	/* DEBUGINFOD_URLS asked, libdebuginfod did not load */
	int dbgd_down;		/* a server timed out: ask no more */
	int dbgd_last_err;	/* the last failure's -errno */
	int dbgd_null;		/* /dev/null for the client's verbose fd, or -1 */
	uint64_t dbgd_max;	/* size cap, bytes */
	unsigned dbgd_timeout_s;
	struct dbgd_memo *dbgd_memo;	/* every answer, by build-id and kind */
	size_t nr_dbgd_memo, dbgd_memo_cap;
	struct symres_dbgd_stats dbgd_stats;
	char dbgd_warn[384];
	void (*progress)(void *arg, const char *build_id, uint64_t done, uint64_t total);
	void *progress_arg;
};

struct dbgd_memo {
	uint8_t bid[64];
	uint8_t len, kind;
	int err;		/* 0: found, at path */
	char *path;
};

/* The image of key (malloc'd; taken: kept by a new image, freed
 * otherwise), or a new one of that key (*fresh set), zeroed, not in the
 * table yet: the caller fills it in and puts it there.  NULL: ENOMEM. */
struct simage *symres_image_of(struct symres *r, char *key, bool *fresh);
/* si (its key set) into the resolver's table, which owns it from then
 * on: 0, or -ENOMEM (si is not freed). */
int symres_image_put(struct symres *r, struct simage *si);

int symres_try_candidate(struct symres *r, struct simage *si, int fd, const char *path,
			 const char *guest);
int symres_guest_component(const char *guest);
int symres_open_host_file(const char *path);
int symres_release_ok(const char *rel);
int symres_root_matches(const struct symres_root *root, const char *guest);
int symres_open_in_root(int rootfd, const char *path, int dir);
enum { SYMRES_DBGD_EXECUTABLE, SYMRES_DBGD_DEBUGINFO };
/* A file by build-id from debuginfod (symres-dbgd.c): asked once per
 * resolver, checked (its build-id, its size), counted.  The fd (owned by
 * the caller) and *path (malloc'd, the client's cache file), or -errno
 * (-ENOENT when no server is set or none has it). */
int symres_dbgd_find(struct symres *r, const uint8_t *bid, size_t len, int kind, char **path);
/* Ends the client, if any (symres_free()). */
void symres_dbgd_end(struct symres *r);
void symres_resolve_kernel(struct symres *r, struct simage *si, const char *guest,
			   const struct symres_kernel *k);
void symres_resolve_module(struct symres *r, struct simage *si, const char *guest,
			   const char *image, const struct symres_kernel *k);
/* symres_each_debug_file()'s callback: owns fd; 1 when it took the file. */
typedef int (*symres_take_fn)(struct symres *r, void *arg, int fd, const char *path);
int symres_each_debug_file(struct symres *r, const uint8_t *bid, size_t len,
			   const char *guest, symres_take_fn take, void *arg);
void symres_bin_debug_symbols(struct symres *r, struct binfile *b, const char *guest);

struct binfile *symres_bin_get(struct symres *r, int fd, const char *path,
			       char *reason, size_t rlen);
void symres_resolve_user(struct symres *r, struct simage *si, const char *guest,
			 const char *image);

#endif /* OPVM_SYMRES_PRIV_H */
