// SPDX-License-Identifier: MIT
/*
 * Symbol resolution for user binaries: the guest root or the build-id
 * cache, opened binaries shared between images.  The rules for guest names
 * are in symbols/symres.c.
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

#include "lib/hex.h"
#include "symbols/ksyms.h"
#include "symbols/symres.h"
#include "symbols/symres-priv.h"

/* ---- binaries ------------------------------------------------------------- */

/* Takes fd.  Returns the shared binfile for it, or NULL with a reason. */
struct binfile *symres_bin_get(struct symres *r, int fd, const char *path,
			       char *reason, size_t rlen)
{
	struct binfile *b;
	struct stat st;
	char err[256];

	if (fstat(fd, &st)) {
		snprintf(reason, rlen, "%s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	for (size_t i = 0; i < r->nr_bins; i++) {
		if (r->bins[i].dev == st.st_dev && r->bins[i].ino == st.st_ino) {
			close(fd);
			return &r->bins[i];
		}
	}
	b = realloc(r->bins, (r->nr_bins + 1) * sizeof(*b));
	if (!b) {
		close(fd);
		snprintf(reason, rlen, "out of memory");
		return NULL;
	}
	r->bins = b;
	b = &r->bins[r->nr_bins];
	b->elf = elfimage_open_fd(fd, path, err, sizeof(err));
	if (!b->elf) {
		snprintf(reason, rlen, "%s", err);
		return NULL;
	}
	b->path = strdup(path);
	if (!b->path) {
		elfimage_close(b->elf);
		return NULL;
	}
	b->dev = st.st_dev;
	b->ino = st.st_ino;
	b->debug_tried = 0;
	r->nr_bins++;
	return b;
}

/*
 * What would name a stripped binary (si->reason): its debug file by
 * build-id, from the guest (its debug package installed there), a
 * debuginfod server or a guest root.  path: the file, for a binary with
 * no symbol at all and no .eh_frame to split it by (NULL: one whose
 * functions are named by their .eh_frame bounds).
 */
static void stripped_hint(struct symres *r, struct simage *si, struct elfimage *elf,
			  const char *path)
{
	const uint8_t *bid = si->build_id;
	size_t len = si->build_id_len, sz = sizeof(si->reason), n;
	char hex[129];

	if (!len)
		bid = elfimage_build_id(elf, &len);
	if (path)
		n = (size_t)snprintf(si->reason, sz, "%s has no symbols and no .eh_frame", path);
	else
		n = (size_t)snprintf(si->reason, sz, "stripped");
	if (n >= sz)
		return;
	if (!bid || !len) {
		snprintf(si->reason + n, sz - n, "; without a build-id only its unstripped "
			 "file names it: give --guest-root DIR");
		return;
	}
	hex_encode(bid, len, hex);
	snprintf(si->reason + n, sz - n, ": install its debug package in the guest, %s or "
		 "give --guest-root DIR holding usr/lib/debug/.build-id/%.2s/%s.debug",
		 r->dbgd ? "add a debuginfod that has it to DEBUGINFOD_URLS" :
		 "set DEBUGINFOD_URLS", hex, hex + 2);
}

/* Tries one candidate file (fd, owned).  Returns 1 if si now uses it. */
int symres_try_candidate(struct symres *r, struct simage *si, int fd, const char *path,
			 const char *guest)
{
	struct binfile *b;
	const uint8_t *bid;
	size_t len;
	char reason[256];

	if (fd < 0)
		return 0;
	b = symres_bin_get(r, fd, path, reason, sizeof(reason));
	if (!b) {
		if (si->state == SIMAGE_NOT_FOUND) {
			si->state = SIMAGE_BAD;
			snprintf(si->reason, sizeof(si->reason), "%s", reason);
		}
		return 0;
	}
	bid = elfimage_build_id(b->elf, &len);
	if (si->build_id_len && bid &&
	    (len != si->build_id_len || memcmp(bid, si->build_id, len))) {
		char want[129], got[129];

		hex_encode(si->build_id, si->build_id_len, want);
		hex_encode(bid, len, got);
		si->state = SIMAGE_MISMATCH;
		snprintf(si->reason, sizeof(si->reason),
			 "%s has build-id %.40s, samples are of %.40s", path, got, want);
		return 0;
	}
	/* A debug file standing in for its binary has no .eh_frame bytes to
	 * unwind with. */
	if (!si->file && !elfimage_is_debug_only(b->elf))
		si->file = b->path;
	/* A stripped binary: its debug info may have the symbols. */
	symres_bin_debug_symbols(r, b, guest);
	/* Still stripped: its functions by their .eh_frame bounds (on the
	 * binary's first image, before any report uses its indices). */
	if (si->kind == SK_USER && !elfimage_has_symtab(b->elf))
		elfimage_frame_symbols(b->elf, si->label, NULL);
	if (!elfimage_nr_syms(b->elf)) {
		if (si->state != SIMAGE_MISMATCH) {
			si->state = SIMAGE_BAD;
			stripped_hint(r, si, b->elf, path);
		}
		return 0;
	}
	si->elf = b->elf;
	si->path = b->path;
	si->state = SIMAGE_OK;
	si->reason[0] = '\0';
	if (elfimage_nr_frame_syms(b->elf))
		stripped_hint(r, si, b->elf, NULL);
	return 1;
}

/*
 * The last resort: the binary's dynamic symbols as the collector read them
 * from guest memory (host/collect/fetch.h: <fetch_cache>/<guest>/xx/
 * <rest>.memsyms, a small ELF of .dynsym and the build-id), when no file of
 * the binary was found.  A debug file of its build-id still replaces its
 * symbols (symres_try_candidate()).  It is not the binary: no code, no
 * .eh_frame, so it never becomes simage_file().  Returns 1 if si uses it.
 */
static int try_memsyms(struct symres *r, struct simage *si, const char *guest)
{
	const char *file = si->file;
	char bidhex[129], path[4096];
	int ok;

	if (si->build_id_len < 2 || !r->fetch_cache || !symres_guest_component(guest))
		return 0;
	hex_encode(si->build_id, si->build_id_len, bidhex);
	snprintf(path, sizeof(path), "%s/%s/%.2s/%s.memsyms", r->fetch_cache, guest, bidhex,
		 bidhex + 2);
	ok = symres_try_candidate(r, si, symres_open_host_file(path), path, guest);
	si->file = file;
	return ok;
}

struct debug_cand {
	struct simage *si;
	const char *guest;
};

static int take_debug_only(struct symres *r, void *arg, int fd, const char *path)
{
	struct debug_cand *d = arg;

	return symres_try_candidate(r, d->si, fd, path, d->guest);
}

void symres_resolve_user(struct symres *r, struct simage *si, const char *guest,
			 const char *image)
{
	struct debug_cand dc = { .si = si, .guest = guest };
	char bidhex[129], path[4096];

	if (si->build_id_len && r->session_dir) {
		static const char *const fmts[] = { "%s/.build-id/%.2s/%s", "%s/.build-id/%.2s/%s/elf" };

		hex_encode(si->build_id, si->build_id_len, bidhex);
		for (size_t i = 0; i < 2; i++) {
			snprintf(path, sizeof(path), fmts[i], r->session_dir, bidhex, bidhex + 2);
			if (symres_try_candidate(r, si, symres_open_host_file(path), path, guest))
				return;
		}
	}
	if (si->build_id_len >= 2 && r->fetch_cache && symres_guest_component(guest)) {
		hex_encode(si->build_id, si->build_id_len, bidhex);
		snprintf(path, sizeof(path), "%s/%s/%.2s/%s", r->fetch_cache, guest, bidhex,
			 bidhex + 2);
		if (symres_try_candidate(r, si, symres_open_host_file(path), path, guest))
			return;
	}
	for (size_t i = 0; i < r->nr_roots; i++) {
		if (!symres_root_matches(&r->roots[i], guest) || r->root_fds[i] < 0)
			continue;
		snprintf(path, sizeof(path), "%s%s%s", r->roots[i].dir,
			 image[0] == '/' ? "" : "/", image);
		if (symres_try_candidate(r, si, symres_open_in_root(r->root_fds[i], image, 0), path, guest))
			return;
	}
	/* No binary: its debug file stands in (symbols, lines, the binary's
	 * layout from its program headers), then debuginfod's executable. */
	if (si->build_id_len && symres_each_debug_file(r, si->build_id, si->build_id_len,
						       guest, take_debug_only, &dc))
		return;
	if (si->build_id_len) {
		char *dpath = NULL;
		int fd = symres_dbgd_find(r, si->build_id, si->build_id_len,
					  SYMRES_DBGD_EXECUTABLE, &dpath);

		if (fd >= 0 && symres_try_candidate(r, si, fd, dpath ? dpath : "debuginfod", guest)) {
			free(dpath);
			return;
		}
		free(dpath);
	}
	if (try_memsyms(r, si, guest))
		return;
	if (si->state == SIMAGE_NOT_FOUND)
		snprintf(si->reason, sizeof(si->reason),
			 "%s not found: give --guest-root DIR (the guest's root file system)%s",
			 image, si->build_id_len ? " or set DEBUGINFOD_URLS" : "");
}
