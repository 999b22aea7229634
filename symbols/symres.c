// SPDX-License-Identifier: MIT
/*
 * Symbol resolution: finding guest binaries and caching them.  This file
 * holds the resolver's life cycle and images; user binaries are in
 * symres-user.c, the guest kernel and its modules in symres-kernel.c,
 * debug files, sources and the build-id cache in symres-debug.c, the
 * helpers they all use in symres-root.c.
 *
 * Names that come from a guest (image paths, module names, the kernel
 * release) are hostile.  They are only ever resolved inside a guest root
 * with openat2(RESOLVE_IN_ROOT), or checked against a strict character set
 * before they become part of a host path.
 */
#include <dirent.h>
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/array.h"
#include "lib/hex.h"
#include "symbols/ksyms.h"
#include "symbols/symres.h"
#include "symbols/symres-priv.h"

/* ---- life cycle ----------------------------------------------------------- */

struct symres *symres_new(const struct symres_config *cfg)
{
	struct symres *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->dbgd_null = -1;
	if (cfg->session_dir && !(r->session_dir = strdup(cfg->session_dir)))
		goto fail;
	if (cfg->vmlinux && !(r->vmlinux = strdup(cfg->vmlinux)))
		goto fail;
	if (cfg->fetch_cache && !(r->fetch_cache = strdup(cfg->fetch_cache)))
		goto fail;
	if (cfg->system_map && !(r->system_map = strdup(cfg->system_map)))
		goto fail;
	if (cfg->source_dir && !(r->source_dir = strdup(cfg->source_dir)))
		goto fail;
	r->progress = cfg->progress;
	r->progress_arg = cfg->progress_arg;
	r->no_host_kernel = cfg->no_host_kernel;
	r->no_debuginfod = cfg->no_debuginfod;
	if (cfg->nr_roots) {
		r->roots = calloc(cfg->nr_roots, sizeof(*r->roots));
		r->root_fds = calloc(cfg->nr_roots, sizeof(*r->root_fds));
		if (!r->roots || !r->root_fds)
			goto fail;
		for (size_t i = 0; i < cfg->nr_roots; i++) {
			r->root_fds[i] = -1;
			r->roots[i].dir = strdup(cfg->roots[i].dir);
			r->roots[i].guest = cfg->roots[i].guest ? strdup(cfg->roots[i].guest) : NULL;
			r->nr_roots = i + 1;
			if (!r->roots[i].dir || (cfg->roots[i].guest && !r->roots[i].guest))
				goto fail;
			r->root_fds[i] = open(cfg->roots[i].dir,
					      O_PATH | O_DIRECTORY | O_CLOEXEC);
		}
	}
	r->images.key_off = STRSET_MEMBER(struct simage, key);
	return r;
fail:
	symres_free(r);
	errno = ENOMEM;
	return NULL;
}

void symres_free(struct symres *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->images.cap; i++) {
		struct simage *si = r->images.slot[i];

		if (si) {
			free(si->key);
			free(si->guest);
			free(si->release);
			perfmap_free(si->pm);
			free(si);
		}
	}
	strset_free(&r->images);
	for (size_t i = 0; i < r->nr_bins; i++) {
		elfimage_close(r->bins[i].elf);
		free(r->bins[i].path);
	}
	free(r->bins);
	for (size_t i = 0; i < r->nr_kmaps; i++) {
		ksyms_free(r->kmaps[i].ks);
		free(r->kmaps[i].path);
	}
	free(r->kmaps);
	for (size_t i = 0; i < r->nr_modidx; i++) {
		for (size_t j = 0; j < r->modidx[i].nr; j++) {
			free(r->modidx[i].mods[j].name);
			free(r->modidx[i].mods[j].relpath);
		}
		free(r->modidx[i].mods);
		free(r->modidx[i].root);
		free(r->modidx[i].release);
	}
	free(r->modidx);
	for (size_t i = 0; i < r->nr_roots; i++) {
		free((char *)r->roots[i].dir);
		free((char *)r->roots[i].guest);
		if (r->root_fds && r->root_fds[i] >= 0)
			close(r->root_fds[i]);
	}
	free(r->roots);
	free(r->root_fds);
	symres_dbgd_end(r);
	for (size_t i = 0; i < r->nr_dbgd_memo; i++)
		free(r->dbgd_memo[i].path);
	free(r->dbgd_memo);
	free(r->session_dir);
	free(r->vmlinux);
	free(r->system_map);
	free(r->fetch_cache);
	free(r->source_dir);
	free(r);
}

/* ---- images --------------------------------------------------------------- */

static int is_anon(const char *image)
{
	return !*image || image[0] == '{' || image[0] == '[' ||
	       !strcmp(image, "anon") || !strncmp(image, "//anon", 6);
}

/* si is named (by its debug file or by symbols read from guest memory)
 * but has no file to unwind with: take the binary if the guest has sent
 * it since.  The names stay as they are: the report, run later, resolves
 * afresh with every file. */
static int recheck_file(struct symres *r, struct simage *si, const char *guest)
{
	char bidhex[129], path[4096], reason[256];
	struct binfile *b;
	const uint8_t *bid;
	size_t len;
	int fd;

	hex_encode(si->build_id, si->build_id_len, bidhex);
	snprintf(path, sizeof(path), "%s/%s/%.2s/%s", r->fetch_cache, guest, bidhex, bidhex + 2);
	fd = symres_open_host_file(path);
	if (fd < 0)
		return 0;
	b = symres_bin_get(r, fd, path, reason, sizeof(reason));
	if (!b || elfimage_is_debug_only(b->elf))
		return 0;
	bid = elfimage_build_id(b->elf, &len);
	if (!bid || len != si->build_id_len || memcmp(bid, si->build_id, len))
		return 0;
	si->file = b->path;
	return 1;
}

int symres_image_recheck(struct symres *r, struct simage *si, const char *guest,
			 const char *image)
{
	static const char *const endings[] = { "", ".debug", ".memsyms" };
	char bidhex[129], path[4096];
	struct stat sb;
	size_t n;

	if (si->kind != SK_USER || si->build_id_len < 2 || !r->fetch_cache ||
	    !symres_guest_component(guest))
		return si->state == SIMAGE_OK;
	if (si->state == SIMAGE_OK) {
		if (!si->file)
			recheck_file(r, si, guest);
		return 1;
	}
	if (si->state != SIMAGE_NOT_FOUND)
		return 0;
	hex_encode(si->build_id, si->build_id_len, bidhex);
	/* the binary, its debug file (which stands in for it), or its symbols
	 * read from guest memory: whichever the cache has */
	for (n = 0; n < ARRAY_SIZE(endings); n++) {
		snprintf(path, sizeof(path), "%s/%s/%.2s/%s%s", r->fetch_cache, guest, bidhex,
			 bidhex + 2, endings[n]);
		if (!stat(path, &sb) && S_ISREG(sb.st_mode))
			break;
	}
	if (n == ARRAY_SIZE(endings))
		return 0;
	si->reason[0] = '\0';
	symres_resolve_user(r, si, guest, image);
	return si->state == SIMAGE_OK;
}

struct simage *symres_image(struct symres *r, const char *guest, const char *image,
			    int kernel, const uint8_t *build_id, size_t build_id_len,
			    const struct symres_kernel *k)
{
	char bidhex[129], *key;
	struct simage *si;
	bool fresh;

	if (build_id_len > sizeof(si->build_id))
		build_id_len = 0;
	hex_encode(build_id, build_id ? build_id_len : 0, bidhex);
	/* A kernel's placement is part of its identity: two boots of one guest
	 * (a differential report, previous/) have different KASLR slides. */
	if (asprintf(&key, "%s\1%s\1%d\1%s\1%s\1%llx\1%s\1%llx", guest ? guest : "", image,
		     kernel, bidhex, kernel && k && k->release ? k->release : "",
		     kernel && k ? (unsigned long long)k->text_addr : 0ull,
		     kernel && k && k->anchor_name ? k->anchor_name : "",
		     kernel && k ? (unsigned long long)k->anchor_addr : 0ull) < 0)
		return NULL;
	si = symres_image_of(r, key, &fresh);
	if (!si || !fresh)
		return si;
	si->state = SIMAGE_NOT_FOUND;
	if (build_id && build_id_len) {
		memcpy(si->build_id, build_id, build_id_len);
		si->build_id_len = build_id_len;
	}
	if (kernel && (!strcmp(image, "vmlinux") || !strcmp(image, "[kernel.kallsyms]"))) {
		si->kind = SK_KERNEL;
		si->guest = guest ? strdup(guest) : NULL;
		si->release = k && symres_release_ok(k->release) ? strdup(k->release) : NULL;
		/* The sample file's build-id, if any, is vmlinux's; System.map
		 * has none to check. */
		symres_resolve_kernel(r, si, guest, k);
	} else if (kernel) {
		si->kind = SK_MODULE;
		symres_resolve_module(r, si, guest, image, k);
	} else if (is_anon(image)) {
		si->kind = SK_ANON;
		si->state = SIMAGE_ANON;
		snprintf(si->reason, sizeof(si->reason), "%s: anonymous memory", image);
	} else {
		const char *b = strrchr(image, '/');

		si->kind = SK_USER;
		snprintf(si->label, sizeof(si->label), "%s", b && b[1] ? b + 1 : image);
		symres_resolve_user(r, si, guest, image);
	}

	if (symres_image_put(r, si)) {
		free(si->key);
		free(si);
		return NULL;
	}
	return si;
}

struct simage *symres_image_of(struct symres *r, char *key, bool *fresh)
{
	struct simage *si = strset_find(&r->images, key);

	*fresh = !si;
	if (!si && (si = calloc(1, sizeof(*si))))
		si->key = key;
	else
		free(key);
	return si;
}

int symres_image_put(struct symres *r, struct simage *si)
{
	return strset_add(&r->images, si);
}

const char *simage_warning(const struct simage *si)
{
	return si->warn[0] ? si->warn : NULL;
}

enum simage_state simage_state(const struct simage *si)
{
	return si->state;
}

int simage_is_kernel(const struct simage *si)
{
	return si->kind == SK_KERNEL;
}

const char *simage_path(const struct simage *si)
{
	return si->path;
}

const char *simage_file(const struct simage *si)
{
	return si->file;
}

const char *simage_reason(const struct simage *si)
{
	return si->reason;
}

size_t simage_nr_frames(const struct simage *si)
{
	return si->state == SIMAGE_OK && si->elf && si->kind == SK_USER ?
	       elfimage_nr_frame_syms(si->elf) : 0;
}

int simage_sym_frame(const struct simage *si, const struct elfsym *s)
{
	return simage_nr_frames(si) && elfimage_sym_frame(si->elf, s);
}

const uint8_t *simage_build_id(const struct simage *si, size_t *len)
{
	if (si->build_id_len) {
		*len = si->build_id_len;
		return si->build_id;
	}
	if (si->elf)
		return elfimage_build_id(si->elf, len);
	*len = 0;
	return NULL;
}

struct elfimage *simage_elf(const struct simage *si)
{
	return si->state == SIMAGE_OK ? si->elf : NULL;
}

struct elfimage *simage_code(const struct simage *si)
{
	if (si->state != SIMAGE_OK)
		return NULL;
	return si->elf ? si->elf : si->code;
}

/*
 * A code-only vmlinux is the guest's if the map's linux_banner reads
 * "Linux version <release> " in it (or, without linux_banner, if its text
 * starts at the map's _text).
 */
static int code_matches(const struct simage *si, struct elfimage *code)
{
	char want[96], got[96];
	uint64_t a;
	long n;

	if (ksyms_addr(si->ks, "linux_banner", &a) == 0) {
		if (!si->release)
			return 0;
		snprintf(want, sizeof(want), "Linux version %s ", si->release);
		n = elfimage_read(code, a, got, strlen(want));
		return n == (long)strlen(want) && !memcmp(got, want, (size_t)n);
	}
	if (ksyms_addr(si->ks, "_text", &a) == 0)
		return elfimage_read(code, a, got, 1) == 1;
	return 0;
}

static int try_code(struct symres *r, struct simage *si, int fd, const char *path)
{
	char reason[256];
	struct binfile *b;

	if (fd < 0)
		return 0;
	b = symres_bin_get(r, fd, path, reason, sizeof(reason));
	if (!b || !code_matches(si, b->elf))
		return 0;
	si->code = b->elf;
	return 1;
}

int symres_want_code(struct symres *r, struct simage *si)
{
	static const char *const fmts[] = { "/boot/vmlinux-%s", "/boot/vmlinuz-%s" };
	char rp[128], path[4096];

	if (si->state != SIMAGE_OK)
		return -ENOENT;
	if (si->elf || si->code)
		return 0;
	if (si->kind != SK_KERNEL || !si->ks || si->code_tried)
		return -ENOENT;
	si->code_tried = 1;
	if (r->vmlinux && try_code(r, si, symres_open_host_file(r->vmlinux), r->vmlinux))
		return 0;
	if (!si->release)
		return -ENOENT;
	for (size_t i = 0; i < r->nr_roots; i++) {
		if (!symres_root_matches(&r->roots[i], si->guest) || r->root_fds[i] < 0)
			continue;
		for (size_t f = 0; f < 2; f++) {
			snprintf(rp, sizeof(rp), fmts[f], si->release);
			snprintf(path, sizeof(path), "%s%s", r->roots[i].dir, rp);
			if (try_code(r, si, symres_open_in_root(r->root_fds[i], rp, 0), path))
				return 0;
		}
		snprintf(path, sizeof(path), "%s/../vmlinuz-%s", r->roots[i].dir, si->release);
		if (try_code(r, si, symres_open_host_file(path), path))
			return 0;
		snprintf(path, sizeof(path), "%s/../vmlinuz", r->roots[i].dir);
		if (try_code(r, si, symres_open_host_file(path), path))
			return 0;
	}
	if (!r->no_host_kernel) {
		for (size_t f = 0; f < 2; f++) {
			snprintf(path, sizeof(path), fmts[f], si->release);
			if (try_code(r, si, symres_open_host_file(path), path))
				return 0;
		}
	}
	return -ENOENT;
}

int simage_addr(const struct simage *si, uint64_t offset, uint64_t *addr)
{
	switch (si->kind) {
	case SK_USER:
		if (!si->elf)
			return -ENOENT;
		return elfimage_offset_to_addr(si->elf, offset, addr);
	case SK_KERNEL:
		*addr = offset - si->slide;
		return 0;
	case SK_MODULE:
	case SK_ANON:
	case SK_JIT:
		*addr = offset;
		return 0;
	}
	return -ENOENT;
}

long simage_lookup(const struct simage *si, uint64_t offset, uint64_t *addr)
{
	uint64_t a;

	if (si->state != SIMAGE_OK)
		return -1;
	if (si->kind == SK_USER && si->elf && !si->ks) {
		/* The common case, millions of times a report: one call. */
		long i = elfimage_lookup_offset(si->elf, offset, &a);

		if (i == -2)
			return -1;
		if (addr)
			*addr = a;
		return i;
	}
	if (simage_addr(si, offset, &a))
		return -1;
	if (addr)
		*addr = a;
	if (si->pm)
		return perfmap_lookup(si->pm, a);
	if (si->ks)
		return ksyms_lookup(si->ks, a);
	return elfimage_lookup(si->elf, a);
}

void simage_lookup_batch(const struct simage *si, const uint64_t *offs, long *idx, size_t n)
{
	if (si->state == SIMAGE_OK && si->kind == SK_USER && si->elf && !si->ks) {
		elfimage_lookup_offsets(si->elf, offs, idx, n);
		return;
	}
	for (size_t k = 0; k < n; k++)
		idx[k] = simage_lookup(si, offs[k], NULL);
}

size_t simage_nr_syms(const struct simage *si)
{
	if (si->state != SIMAGE_OK)
		return 0;
	if (si->pm)
		return perfmap_nr(si->pm);
	return si->ks ? ksyms_nr(si->ks) : elfimage_nr_syms(si->elf);
}

const struct elfsym *simage_sym(const struct simage *si, size_t i)
{
	if (si->state != SIMAGE_OK)
		return NULL;
	if (si->pm)
		return perfmap_sym(si->pm, i);
	return si->ks ? ksyms_sym(si->ks, i) : elfimage_sym(si->elf, i);
}

long simage_find(const struct simage *si, const char *name)
{
	size_t n = simage_nr_syms(si);

	for (size_t i = 0; i < n; i++) {
		const struct elfsym *s = simage_sym(si, i);

		if (s && !strcmp(s->name, name))
			return (long)i;
	}
	return -1;
}
