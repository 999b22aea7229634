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
#include <sys/types.h>

#include "symbols/ksyms.h"
#include "symbols/symres.h"

#define SYMRES_MAX_DEPTH	8	/* lib/modules/<rel>/kernel/drivers/... */
#define SYMRES_MAX_MODULES	100000

enum simage_kind { SK_USER, SK_MODULE, SK_KERNEL, SK_ANON };

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

	struct simage **images;	/* open-addressed by key hash */
	size_t images_cap, nr_images;
	struct binfile *bins;
	size_t nr_bins;
	struct kmapfile *kmaps;
	size_t nr_kmaps;
	struct modindex *modidx;
	size_t nr_modidx;
	debuginfod_client *dbgd;
	int dbgd_tried;
	int dbgd_missing;	/* DEBUGINFOD_URLS asked, libdebuginfod did not load */
};

int symres_try_candidate(struct symres *r, struct simage *si, int fd, const char *path,
			 const char *guest);
int symres_guest_component(const char *guest);
int symres_open_host_file(const char *path);
int symres_release_ok(const char *rel);
int symres_root_matches(const struct symres_root *root, const char *guest);
int symres_open_in_root(int rootfd, const char *path, int dir);
/* The debuginfod client when DEBUGINFOD_URLS asks for one and
 * libdebuginfod loads (dlopen on first use: most reports never need it,
 * and linking it costs every start its curl and TLS libraries); NULL
 * otherwise. */
debuginfod_client *symres_dbgd(struct symres *r);
/* libdebuginfod's calls, on a client symres_dbgd() returned. */
int symres_dbgd_find_executable(debuginfod_client *c, const unsigned char *bid, int len,
				char **path);
int symres_dbgd_find_debuginfo(debuginfod_client *c, const unsigned char *bid, int len,
			       char **path);
void symres_dbgd_end(debuginfod_client *c);
void symres_resolve_kernel(struct symres *r, struct simage *si, const char *guest,
			   const struct symres_kernel *k);
void symres_resolve_module(struct symres *r, struct simage *si, const char *guest,
			   const char *image, const struct symres_kernel *k);
void symres_bin_debug_symbols(struct symres *r, struct binfile *b, const char *guest);

struct binfile *symres_bin_get(struct symres *r, int fd, const char *path,
			       char *reason, size_t rlen);
void symres_resolve_user(struct symres *r, struct simage *si, const char *guest,
			 const char *image);

#endif /* OPVM_SYMRES_PRIV_H */
