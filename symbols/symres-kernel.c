// SPDX-License-Identifier: MIT
/*
 * Symbol resolution for the guest kernel (vmlinux, System.map, kallsyms
 * fetched from the guest) and its modules (the lib/modules index).  The
 * rules for guest names are in symbols/symres.c.
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
#include "lib/fs.h"
#include "symbols/ksyms.h"
#include "symbols/symres.h"
#include "symbols/symres-priv.h"

/* ---- kernel ------------------------------------------------------------- */

static int ks_lookup(const void *src, const char *name, uint64_t *addr)
{
	return ksyms_addr(src, name, addr);
}

static int elf_lookup(const void *src, const char *name, uint64_t *addr)
{
	return elfimage_symbol_value(src, name, addr);
}

/* Keeps ks (freed with r) under key; NULL (ks freed) on ENOMEM. */
static struct ksyms *kmap_add(struct symres *r, struct ksyms *ks, const char *key)
{
	struct kmapfile *k = realloc(r->kmaps, (r->nr_kmaps + 1) * sizeof(*k));

	if (!k) {
		ksyms_free(ks);
		return NULL;
	}
	r->kmaps = k;
	r->kmaps[r->nr_kmaps].ks = ks;
	r->kmaps[r->nr_kmaps].path = strdup(key);
	if (!r->kmaps[r->nr_kmaps].path) {
		ksyms_free(ks);
		return NULL;
	}
	return r->kmaps[r->nr_kmaps++].ks;
}

static struct ksyms *kmap_get(struct symres *r, int fd, const char *path, char *reason,
			      size_t rlen)
{
	char procpath[64];
	struct ksyms *ks;

	for (size_t i = 0; i < r->nr_kmaps; i++) {
		if (!strcmp(r->kmaps[i].path, path)) {
			close(fd);
			return r->kmaps[i].ks;
		}
	}
	/* Read through the fd we resolved (inside the root) by its /proc name. */
	snprintf(procpath, sizeof(procpath), "/proc/self/fd/%d", fd);
	ks = ksyms_open(procpath, reason, rlen);
	close(fd);
	if (!ks) {
		/* name the file the user knows, not the descriptor's /proc name */
		size_t n = strlen(procpath);
		char tmp[256];

		if (!strncmp(reason, procpath, n)) {
			snprintf(tmp, sizeof(tmp), "%s%s", path, reason + n);
			snprintf(reason, rlen, "%s", tmp);
		}
		return NULL;
	}
	return kmap_add(r, ks, path);
}

/*
 * The slide for a kernel symbol source.  With both references (the guest
 * module sends _text and an exported anchor), both must give the same
 * slide: a map of another kernel build fails this check instead of
 * silently naming the wrong functions.  Returns 0, -ENOENT (no reference
 * known to the source) or -ESTALE (references disagree).
 */
static int kernel_slide(const struct symres_kernel *k,
			int (*lookup)(const void *src, const char *name, uint64_t *addr),
			const void *src, uint64_t *slide)
{
	uint64_t s1, s2, link;
	int r1 = -ENOENT, r2 = -ENOENT;

	if (!k)
		return -ENOENT;
	if (k->text_addr && lookup(src, "_text", &link) == 0) {
		s1 = k->text_addr - link;
		r1 = 0;
	}
	if (k->anchor_name && *k->anchor_name && k->anchor_addr &&
	    lookup(src, k->anchor_name, &link) == 0) {
		s2 = k->anchor_addr - link;
		r2 = 0;
	}
	if (r1 == 0 && r2 == 0 && s1 != s2)
		return -ESTALE;
	if (r1 == 0) {
		*slide = s1;
		return 0;
	}
	if (r2 == 0) {
		*slide = s2;
		return 0;
	}
	return -ENOENT;
}

/*
 * The guest's own kallsyms (fetched) is in run-time addresses: the slide
 * opvm.ko's HELLO gives it is 0 whatever its lines say.  A kallsyms whose
 * _text or anchor sit elsewhere (a lying relay, or a table of another boot)
 * would move every kernel sample to names the guest chose: opvm.ko's
 * addresses are kept and the disagreement said (simage_warning()).
 * Returns the slide to use.
 */
static uint64_t runtime_slide(struct simage *si, const char *path, int ret, uint64_t slide,
			      const struct symres_kernel *k)
{
	char how[96];

	if (ret != -ESTALE && (ret || !slide))
		return 0;
	if (ret)
		snprintf(how, sizeof(how), "its _text and %.40s give different slides",
			 k->anchor_name);
	else
		snprintf(how, sizeof(how), "it moves the kernel by 0x%llx",
			 (unsigned long long)slide);
	snprintf(si->warn, sizeof(si->warn), "the guest's kallsyms disagrees with opvm.ko's "
		 "HELLO (%s): kernel samples are named with opvm.ko's addresses (%.80s)",
		 how, path);
	return 0;
}

/* One kernel candidate: vmlinux ELF (is_elf) or a symbol map; runtime: a
 * map in run-time addresses (the guest's own kallsyms). */
static int try_kernel(struct symres *r, struct simage *si, int fd, const char *path,
		      int is_elf, int runtime, const struct symres_kernel *k)
{
	uint64_t slide = 0;
	int have_ref = k && (k->text_addr || (k->anchor_name && k->anchor_addr));
	int ret;

	if (fd < 0)
		return 0;
	if (is_elf) {
		if (!symres_try_candidate(r, si, fd, path, si->guest))
			return 0;
		ret = kernel_slide(k, elf_lookup, si->elf, &slide);
	} else {
		char reason[256];
		struct ksyms *ks = kmap_get(r, fd, path, reason, sizeof(reason));

		if (!ks) {
			/* Debian's /boot/System.map-* is a one-line placeholder */
			si->state = SIMAGE_BAD;
			snprintf(si->reason, sizeof(si->reason), "%.140s; give --system-map FILE "
				 "(the real one, or the guest's /proc/kallsyms read as root) "
				 "or --vmlinux FILE", reason);
			return 0;
		}
		si->ks = ks;
		for (size_t i = 0; i < r->nr_kmaps; i++)
			if (r->kmaps[i].ks == ks)
				si->path = r->kmaps[i].path;
		si->state = SIMAGE_OK;
		si->reason[0] = '\0';
		ret = kernel_slide(k, ks_lookup, ks, &slide);
		if (runtime) {
			slide = runtime_slide(si, path, ret, slide, k);
			ret = 0;
		}
	}
	if (ret == -ESTALE) {
		/* Not this kernel: try the next candidate. */
		si->state = SIMAGE_MISMATCH;
		si->elf = NULL;
		si->ks = NULL;
		si->path = NULL;
		snprintf(si->reason, sizeof(si->reason),
			 "%s is not the guest's kernel (_text and %s give different KASLR "
			 "slides)", path, k->anchor_name);
		return 0;
	}
	/* Without a reference the map is taken as-is: right for a kallsyms
	 * copied from the same boot, and for kernels without KASLR. */
	si->slide = ret ? 0 : slide;
	if (ret && have_ref)
		snprintf(si->reason, sizeof(si->reason),
			 "%s does not name the guest's anchor symbol: KASLR slide unknown", path);
	return 1;
}

/* The symbols the guest sent itself (host/collect/fetch.h): its
 * kallsyms, kept beside its samples.  guest is a directory name the store
 * made; anything else is not looked up. */
static int try_fetched_kallsyms(struct symres *r, struct simage *si, const char *guest,
				const struct symres_kernel *k)
{
	char path[4096];

	if (!r->session_dir || !symres_guest_component(guest))
		return 0;
	snprintf(path, sizeof(path), "%s/guests/%s/kallsyms", r->session_dir, guest);
	return try_kernel(r, si, symres_open_host_file(path), path, 0, 1, k);
}

/* debuginfod's vmlinux (its debuginfo: symbols and DWARF) for k's
 * build-id; 1 when si uses it. */
static int try_kernel_debuginfod(struct symres *r, struct simage *si,
				 const struct symres_kernel *k)
{
	char *dpath = NULL;
	int fd = symres_dbgd_find(r, k->build_id, k->build_id_len, SYMRES_DBGD_DEBUGINFO, &dpath);
	int ok = fd >= 0 && try_kernel(r, si, fd, dpath ? dpath : "debuginfod", 1, 0, k);

	free(dpath);
	return ok;
}

/*
 * The --vmlinux file (or the kernel opvm run booted): first when it is an
 * ELF, after every map when it is compressed.  A bzImage's vmlinux has no
 * symbol table (the kernel build strips it before compressing), so only a
 * debug file of its build-id could name anything, and finding that out
 * inflated ~40 MB: 1.3 s of CPU in every report of an `opvm run` session.
 */
static int try_vmlinux(struct symres *r, struct simage *si, const struct symres_kernel *k,
		       int first)
{
	int fd = symres_open_host_file(r->vmlinux);

	if (fd >= 0 && elfimage_fd_is_plain(fd) != first) {
		close(fd);
		return 0;
	}
	return try_kernel(r, si, fd, r->vmlinux, 1, 0, k);
}

void symres_resolve_kernel(struct symres *r, struct simage *si, const char *guest,
			   const struct symres_kernel *k)
{
	const char *rel = k && symres_release_ok(k->release) ? k->release : NULL;
	static const char *const elf_fmts[] = {
		"/usr/lib/debug/boot/vmlinux-%s", "/boot/vmlinux-%s",
	};
	char path[4096];

	if (r->vmlinux && try_vmlinux(r, si, k, 1))
		return;
	if (r->system_map &&
	    try_kernel(r, si, symres_open_host_file(r->system_map), r->system_map, 0, 0, k))
		return;
	if (rel) {
		for (size_t i = 0; i < r->nr_roots; i++) {
			char rp[128];

			if (!symres_root_matches(&r->roots[i], guest) || r->root_fds[i] < 0)
				continue;
			for (size_t f = 0; f < 2; f++) {
				snprintf(rp, sizeof(rp), elf_fmts[f], rel);
				snprintf(path, sizeof(path), "%s%s", r->roots[i].dir, rp);
				if (try_kernel(r, si, symres_open_in_root(r->root_fds[i], rp, 0),
					       path, 1, 0, k))
					return;
			}
			snprintf(rp, sizeof(rp), "/boot/System.map-%s", rel);
			snprintf(path, sizeof(path), "%s%s", r->roots[i].dir, rp);
			if (try_kernel(r, si, symres_open_in_root(r->root_fds[i], rp, 0), path, 0, 0, k))
				return;
			/* A map kept beside the root (an image build's output
			 * directory): checked against the guest's two anchors. */
			snprintf(path, sizeof(path), "%s/../System.map-%s", r->roots[i].dir, rel);
			if (try_kernel(r, si, symres_open_host_file(path), path, 0, 0, k))
				return;
			snprintf(path, sizeof(path), "%s/../System.map", r->roots[i].dir);
			if (try_kernel(r, si, symres_open_host_file(path), path, 0, 0, k))
				return;
		}
		if (try_fetched_kallsyms(r, si, guest, k))
			return;
		if (!r->no_host_kernel) {
			for (size_t f = 0; f < 2; f++) {
				snprintf(path, sizeof(path), elf_fmts[f], rel);
				if (try_kernel(r, si, symres_open_host_file(path), path, 1, 0, k))
					return;
			}
			snprintf(path, sizeof(path), "/boot/System.map-%s", rel);
			if (try_kernel(r, si, symres_open_host_file(path), path, 0, 0, k))
				return;
		}
	}
	if (r->vmlinux && try_vmlinux(r, si, k, 0))
		return;
	/* nothing else: vmlinux with its symbols by the build-id VMCOREINFO
	 * gave introspection (large: last) */
	if (k && k->build_id_len && try_kernel_debuginfod(r, si, k))
		return;
	if (si->state == SIMAGE_NOT_FOUND)
		snprintf(si->reason, sizeof(si->reason),
			 "no kernel symbols for %s: give --guest-root DIR (with "
			 "boot/System.map-%s), --system-map FILE or --vmlinux FILE",
			 rel ? rel : "this guest's kernel", rel ? rel : "RELEASE");
}

/* ---- modules ------------------------------------------------------------ */

static void modname_norm(char *s)
{
	for (; *s; s++)
		if (*s == '-')
			*s = '_';
}

static int modidx_add(struct modindex *mi, size_t *cap, const char *rel, const char *file)
{
	static const char *const sfx[] = { ".ko", ".ko.xz", ".ko.gz", ".ko.zst" };
	size_t n = strlen(file), stem = 0;
	struct modentry *e;

	/* Compressed modules open too (elfimage unpacks them). */
	for (size_t i = 0; i < ARRAY_SIZE(sfx); i++) {
		size_t l = strlen(sfx[i]);

		if (n > l && !strcmp(file + n - l, sfx[i]))
			stem = n - l;
	}
	if (!stem || mi->nr >= SYMRES_MAX_MODULES)
		return 0;
	if (array_grow(&mi->mods, cap, mi->nr + 1, sizeof(*mi->mods), 256))
		return -ENOMEM;
	e = &mi->mods[mi->nr];
	e->name = strndup(file, stem);
	if (!e->name || asprintf(&e->relpath, "%s/%s", rel, file) < 0) {
		free(e->name);
		return -ENOMEM;
	}
	modname_norm(e->name);
	mi->nr++;
	return 0;
}

/* Walks a directory fd (taken) below the root; names are joined to rel. */
static int modidx_walk(struct modindex *mi, size_t *cap, int dfd, const char *rel, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	int ret = 0;

	if (!d) {
		close(dfd);
		return 0;
	}
	while (!ret && (de = readdir(d))) {
		unsigned char type = de->d_type;

		if (de->d_name[0] == '.')
			continue;
		/* Some file systems do not fill d_type. */
		if (type == DT_UNKNOWN) {
			struct stat st;

			if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW))
				continue;
			type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
		}
		if (type == DT_DIR && depth < SYMRES_MAX_DEPTH) {
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			char *subrel;

			if (sub < 0)
				continue;
			if (asprintf(&subrel, "%s/%s", rel, de->d_name) < 0) {
				close(sub);
				ret = -ENOMEM;
				break;
			}
			ret = modidx_walk(mi, cap, sub, subrel, depth + 1);
			free(subrel);
		} else if (type == DT_REG) {
			ret = modidx_add(mi, cap, rel, de->d_name);
		}
	}
	closedir(d);
	return ret;
}

/* Index of <root>/lib/modules/<rel> (rootfd < 0: the host's). */
static struct modindex *modidx_get(struct symres *r, int rootfd, const char *root,
				   const char *rel)
{
	struct modindex *mi;
	char dir[128];
	size_t cap = 0;
	int dfd;

	for (size_t i = 0; i < r->nr_modidx; i++)
		if (!strcmp(r->modidx[i].root, root) && !strcmp(r->modidx[i].release, rel))
			return &r->modidx[i];
	mi = realloc(r->modidx, (r->nr_modidx + 1) * sizeof(*mi));
	if (!mi)
		return NULL;
	r->modidx = mi;
	mi = &r->modidx[r->nr_modidx];
	memset(mi, 0, sizeof(*mi));
	mi->root = strdup(root);
	mi->release = strdup(rel);
	if (!mi->root || !mi->release) {
		free(mi->root);
		free(mi->release);
		return NULL;
	}
	r->nr_modidx++;
	snprintf(dir, sizeof(dir), "/lib/modules/%s", rel);
	dfd = rootfd >= 0 ? symres_open_in_root(rootfd, dir, 1)
			  : open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0)
		modidx_walk(mi, &cap, dfd, dir, 0);
	return mi;
}

/* A module's base and size from <guest>/kallsyms.modules ("BASE SIZE
 * NAME" lines in hex, written by the host from the guest's MODULE records).
 * 0 or -ENOENT. */
static int fetched_module_base(const char *path, const char *name, uint64_t *base,
			       uint64_t *size)
{
	char line[160], mname[80];
	unsigned long long b, sz;
	int fd = fs_open_regular(path, 0), ret = -ENOENT;
	FILE *f;

	if (fd < 0)
		return fd;
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	while (ret && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %llx %79s", &b, &sz, mname) != 3)
			continue;
		modname_norm(mname);
		if (!strcmp(mname, name)) {
			*base = b;
			*size = sz;
			ret = 0;
		}
	}
	fclose(f);
	return ret;
}

/* A module's symbols from the guest's own kallsyms (host/collect/fetch.h),
 * rebased on the base its MODULE record gave.  1 if found. */
static int try_fetched_module(struct symres *r, struct simage *si, const char *guest,
			      const char *name)
{
	char path[4096], key[4200], reason[256];
	uint64_t base, size;
	struct ksyms *ks = NULL;

	if (!r->session_dir || !symres_guest_component(guest))
		return 0;
	snprintf(path, sizeof(path), "%s/guests/%s/kallsyms.modules", r->session_dir, guest);
	if (fetched_module_base(path, name, &base, &size))
		return 0;
	snprintf(path, sizeof(path), "%s/guests/%s/kallsyms", r->session_dir, guest);
	snprintf(key, sizeof(key), "%s [%s]", path, name);
	for (size_t i = 0; i < r->nr_kmaps && !ks; i++)
		if (!strcmp(r->kmaps[i].path, key))
			ks = r->kmaps[i].ks;
	if (!ks) {
		ks = ksyms_open_module(path, name, base, size, reason, sizeof(reason));
		if (!ks || !(ks = kmap_add(r, ks, key)))
			return 0;
	}
	si->ks = ks;
	si->slide = 0;
	si->state = SIMAGE_OK;
	si->reason[0] = '\0';
	for (size_t i = 0; i < r->nr_kmaps; i++)
		if (r->kmaps[i].ks == ks)
			si->path = r->kmaps[i].path;
	return 1;
}

void symres_resolve_module(struct symres *r, struct simage *si, const char *guest,
			   const char *image, const struct symres_kernel *k)
{
	const char *rel = k && symres_release_ok(k->release) ? k->release : NULL;
	const char *base = strrchr(image, '/');
	char name[128], path[4096];
	size_t n;

	base = base ? base + 1 : image;
	snprintf(name, sizeof(name), "%s", base);
	n = strlen(name);
	if (n > 3 && !strcmp(name + n - 3, ".ko"))
		name[n - 3] = '\0';
	modname_norm(name);
	if (!rel) {
		snprintf(si->reason, sizeof(si->reason),
			 "module %s: the guest's kernel release is unknown", name);
		return;
	}
	for (size_t i = 0; i <= r->nr_roots; i++) {
		int host = i == r->nr_roots;
		struct modindex *mi;
		int rootfd = host ? -1 : r->root_fds[i];

		if (host ? r->no_host_kernel
			 : (!symres_root_matches(&r->roots[i], guest) || rootfd < 0))
			continue;
		mi = modidx_get(r, rootfd, host ? "" : r->roots[i].dir, rel);
		if (!mi)
			return;
		for (size_t j = 0; j < mi->nr; j++) {
			int fd;

			if (strcmp(mi->mods[j].name, name))
				continue;
			snprintf(path, sizeof(path), "%s%s", host ? "" : r->roots[i].dir,
				 mi->mods[j].relpath);
			fd = host ? symres_open_host_file(path) : symres_open_in_root(rootfd, mi->mods[j].relpath, 0);
			if (symres_try_candidate(r, si, fd, path, guest))
				return;
		}
	}
	if (si->state == SIMAGE_NOT_FOUND && try_fetched_module(r, si, guest, name))
		return;
	if (si->state == SIMAGE_NOT_FOUND)
		snprintf(si->reason, sizeof(si->reason),
			 "module %s.ko not found under lib/modules/%s: give --guest-root DIR",
			 name, rel);
}
