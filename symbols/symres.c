// SPDX-License-Identifier: MIT
/*
 * Symbol resolution: finding guest binaries and caching them.
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

#include "lib/util.h"
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
	char reason[256];
	char warn[384];		/* a source that disagreed and was not
				 * believed (simage_warning()), or "" */
	const char *path;	/* owned by binfile/kmapfile */
	struct elfimage *elf;	/* owned by binfile */
	struct ksyms *ks;	/* owned by kmapfile */
	uint64_t slide;
	uint8_t build_id[64];
	size_t build_id_len;
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
};

/* ---- small helpers ---------------------------------------------------------- */

/* A kernel release from a guest: [A-Za-z0-9._+-], 1..64 bytes, no "..". */
static int release_ok(const char *rel)
{
	size_t n = 0;

	if (!rel || !*rel || strstr(rel, ".."))
		return 0;
	for (const char *p = rel; *p; p++, n++) {
		if (n >= 64)
			return 0;
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
		      *p == '+' || *p == '-'))
			return 0;
	}
	return 1;
}

static int root_matches(const struct symres_root *root, const char *guest)
{
	return !root->guest || (guest && !strcmp(root->guest, guest));
}

/* Cleared when the kernel has no openat2() (before Linux 5.6).  Tests set
 * OPVM_NO_OPENAT2=1 to exercise the fallback. */
static int have_openat2 = 1;

/*
 * Without openat2: one component at a time below rootfd, each opened with
 * O_NOFOLLOW, and ".." refused.  Stricter than RESOLVE_IN_ROOT (a symlink
 * anywhere on the way fails with ELOOP instead of being resolved inside the
 * root), never wider.
 */
static int open_walk(int rootfd, const char *path, int flags)
{
	char comp[256];
	int dfd = rootfd, fd;

	for (;;) {
		size_t n = strcspn(path, "/");
		const char *next = path + n;

		while (*next == '/')
			next++;
		if (n >= sizeof(comp) || (n == 2 && !strncmp(path, "..", 2))) {
			fd = -(n >= sizeof(comp) ? ENAMETOOLONG : EXDEV);
			break;
		}
		memcpy(comp, path, n);
		comp[n] = '\0';
		if (!*next) {
			fd = openat(dfd, comp, flags | O_NOFOLLOW);
			fd = fd < 0 ? -errno : fd;
			break;
		}
		fd = openat(dfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			fd = -errno;
			break;
		}
		if (dfd != rootfd)
			close(dfd);
		dfd = fd;
		path = next;
	}
	if (dfd != rootfd)
		close(dfd);
	return fd;
}

/* Opens path inside the root directory fd: absolute symlinks and ".." stay
 * inside the root (openat2 RESOLVE_IN_ROOT, else open_walk()).  Regular
 * files only (a FIFO would block).  The fd, or -errno. */
static int open_in_root(int rootfd, const char *path, int dir)
{
	int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (dir ? O_DIRECTORY : 0);
	struct open_how how = {
		.flags = (uint64_t)flags,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	const char *no2 = getenv("OPVM_NO_OPENAT2");
	struct stat st;
	int fd = -ENOSYS;

	while (*path == '/')
		path++;
	if (!*path)
		path = ".";
	if (have_openat2 && !(no2 && *no2 == '1')) {
		fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
		if (fd < 0)
			fd = -errno;
		if (fd == -ENOSYS)
			have_openat2 = 0;
	}
	if (fd == -ENOSYS)
		fd = open_walk(rootfd, path, flags);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))) {
		close(fd);
		return -EINVAL;
	}
	if (!dir) {
		int fl = fcntl(fd, F_GETFL);

		if (fl >= 0)
			fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	}
	return fd;
}

static int open_host_file(const char *path)
{
	return util_open_regular(path, 0);
}

/* ---- life cycle ----------------------------------------------------------- */

struct symres *symres_new(const struct symres_config *cfg)
{
	struct symres *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
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
	r->images_cap = 256;
	r->images = calloc(r->images_cap, sizeof(*r->images));
	if (!r->images)
		goto fail;
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
	for (size_t i = 0; i < r->images_cap; i++) {
		if (r->images && r->images[i]) {
			free(r->images[i]->key);
			free(r->images[i]->guest);
			free(r->images[i]->release);
			free(r->images[i]);
		}
	}
	free(r->images);
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
	if (r->dbgd)
		debuginfod_end(r->dbgd);
	free(r->session_dir);
	free(r->vmlinux);
	free(r->system_map);
	free(r->fetch_cache);
	free(r->source_dir);
	free(r);
}

/* ---- binaries ------------------------------------------------------------- */

/* Takes fd.  Returns the shared binfile for it, or NULL with a reason. */
static struct binfile *bin_get(struct symres *r, int fd, const char *path,
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

static void bin_debug_symbols(struct symres *r, struct binfile *b, const char *guest);

/* Tries one candidate file (fd, owned).  Returns 1 if si now uses it. */
static int try_candidate(struct symres *r, struct simage *si, int fd, const char *path,
			 const char *guest)
{
	struct binfile *b;
	const uint8_t *bid;
	size_t len;
	char reason[256];

	if (fd < 0)
		return 0;
	b = bin_get(r, fd, path, reason, sizeof(reason));
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

		util_hex(si->build_id, si->build_id_len, want);
		util_hex(bid, len, got);
		si->state = SIMAGE_MISMATCH;
		snprintf(si->reason, sizeof(si->reason),
			 "%s has build-id %.40s, samples are of %.40s", path, got, want);
		return 0;
	}
	/* A stripped binary: its debug info may have the symbols. */
	bin_debug_symbols(r, b, guest);
	if (!elfimage_nr_syms(b->elf)) {
		if (si->state != SIMAGE_MISMATCH) {
			si->state = SIMAGE_BAD;
			snprintf(si->reason, sizeof(si->reason), "%s has no symbols (stripped: "
				 "put its debug file under usr/lib/debug/.build-id or set "
				 "DEBUGINFOD_URLS)", path);
		}
		return 0;
	}
	si->elf = b->elf;
	si->path = b->path;
	si->state = SIMAGE_OK;
	si->reason[0] = '\0';
	return 1;
}

static debuginfod_client *dbgd(struct symres *r)
{
	const char *urls = getenv("DEBUGINFOD_URLS");

	if (r->no_debuginfod || !urls || !*urls)
		return NULL;
	if (!r->dbgd_tried) {
		r->dbgd_tried = 1;
		r->dbgd = debuginfod_begin();
	}
	return r->dbgd;
}

/* guest names a directory the store made: one component, not . or .. */
static int guest_component(const char *guest)
{
	return guest && *guest && !strchr(guest, '/') && strcmp(guest, ".") &&
	       strcmp(guest, "..");
}

static void resolve_user(struct symres *r, struct simage *si, const char *guest,
			 const char *image)
{
	char bidhex[129], path[4096];
	debuginfod_client *c;

	if (si->build_id_len && r->session_dir) {
		static const char *const fmts[] = { "%s/.build-id/%.2s/%s", "%s/.build-id/%.2s/%s/elf" };

		util_hex(si->build_id, si->build_id_len, bidhex);
		for (size_t i = 0; i < 2; i++) {
			snprintf(path, sizeof(path), fmts[i], r->session_dir, bidhex, bidhex + 2);
			if (try_candidate(r, si, open_host_file(path), path, guest))
				return;
		}
	}
	if (si->build_id_len >= 2 && r->fetch_cache && guest_component(guest)) {
		util_hex(si->build_id, si->build_id_len, bidhex);
		snprintf(path, sizeof(path), "%s/%s/%.2s/%s", r->fetch_cache, guest, bidhex,
			 bidhex + 2);
		if (try_candidate(r, si, open_host_file(path), path, guest))
			return;
	}
	for (size_t i = 0; i < r->nr_roots; i++) {
		if (!root_matches(&r->roots[i], guest) || r->root_fds[i] < 0)
			continue;
		snprintf(path, sizeof(path), "%s%s%s", r->roots[i].dir,
			 image[0] == '/' ? "" : "/", image);
		if (try_candidate(r, si, open_in_root(r->root_fds[i], image, 0), path, guest))
			return;
	}
	if (si->build_id_len && (c = dbgd(r))) {
		char *dpath = NULL;
		int fd = debuginfod_find_executable(c, si->build_id, (int)si->build_id_len, &dpath);

		if (fd >= 0 && try_candidate(r, si, fd, dpath ? dpath : "debuginfod", guest)) {
			free(dpath);
			return;
		}
		free(dpath);
	}
	if (si->state == SIMAGE_NOT_FOUND)
		snprintf(si->reason, sizeof(si->reason),
			 "%s not found: give --guest-root DIR (the guest's root file system)%s",
			 image, si->build_id_len ? " or set DEBUGINFOD_URLS" : "");
}

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
		if (!try_candidate(r, si, fd, path, si->guest))
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

	if (!r->session_dir || !guest_component(guest))
		return 0;
	snprintf(path, sizeof(path), "%s/guests/%s/kallsyms", r->session_dir, guest);
	return try_kernel(r, si, open_host_file(path), path, 0, 1, k);
}

static void resolve_kernel(struct symres *r, struct simage *si, const char *guest,
			   const struct symres_kernel *k)
{
	const char *rel = k && release_ok(k->release) ? k->release : NULL;
	static const char *const elf_fmts[] = {
		"/usr/lib/debug/boot/vmlinux-%s", "/boot/vmlinux-%s",
	};
	char path[4096];

	if (r->vmlinux && try_kernel(r, si, open_host_file(r->vmlinux), r->vmlinux, 1, 0, k))
		return;
	if (r->system_map &&
	    try_kernel(r, si, open_host_file(r->system_map), r->system_map, 0, 0, k))
		return;
	if (rel) {
		for (size_t i = 0; i < r->nr_roots; i++) {
			char rp[128];

			if (!root_matches(&r->roots[i], guest) || r->root_fds[i] < 0)
				continue;
			for (size_t f = 0; f < 2; f++) {
				snprintf(rp, sizeof(rp), elf_fmts[f], rel);
				snprintf(path, sizeof(path), "%s%s", r->roots[i].dir, rp);
				if (try_kernel(r, si, open_in_root(r->root_fds[i], rp, 0),
					       path, 1, 0, k))
					return;
			}
			snprintf(rp, sizeof(rp), "/boot/System.map-%s", rel);
			snprintf(path, sizeof(path), "%s%s", r->roots[i].dir, rp);
			if (try_kernel(r, si, open_in_root(r->root_fds[i], rp, 0), path, 0, 0, k))
				return;
			/* A map kept beside the root (an image build's output
			 * directory): checked against the guest's two anchors. */
			snprintf(path, sizeof(path), "%s/../System.map-%s", r->roots[i].dir, rel);
			if (try_kernel(r, si, open_host_file(path), path, 0, 0, k))
				return;
			snprintf(path, sizeof(path), "%s/../System.map", r->roots[i].dir);
			if (try_kernel(r, si, open_host_file(path), path, 0, 0, k))
				return;
		}
		if (try_fetched_kallsyms(r, si, guest, k))
			return;
		if (!r->no_host_kernel) {
			for (size_t f = 0; f < 2; f++) {
				snprintf(path, sizeof(path), elf_fmts[f], rel);
				if (try_kernel(r, si, open_host_file(path), path, 1, 0, k))
					return;
			}
			snprintf(path, sizeof(path), "/boot/System.map-%s", rel);
			if (try_kernel(r, si, open_host_file(path), path, 0, 0, k))
				return;
		}
	}
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
	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		size_t l = strlen(sfx[i]);

		if (n > l && !strcmp(file + n - l, sfx[i]))
			stem = n - l;
	}
	if (!stem || mi->nr >= SYMRES_MAX_MODULES)
		return 0;
	if (mi->nr == *cap) {
		size_t nc = *cap ? *cap * 2 : 256;
		struct modentry *p = realloc(mi->mods, nc * sizeof(*p));

		if (!p)
			return -ENOMEM;
		mi->mods = p;
		*cap = nc;
	}
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
	dfd = rootfd >= 0 ? open_in_root(rootfd, dir, 1)
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
	int fd = util_open_regular(path, 0), ret = -ENOENT;
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

	if (!r->session_dir || !guest_component(guest))
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

static void resolve_module(struct symres *r, struct simage *si, const char *guest,
			   const char *image, const struct symres_kernel *k)
{
	const char *rel = k && release_ok(k->release) ? k->release : NULL;
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
			 : (!root_matches(&r->roots[i], guest) || rootfd < 0))
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
			fd = host ? open_host_file(path) : open_in_root(rootfd, mi->mods[j].relpath, 0);
			if (try_candidate(r, si, fd, path, guest))
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

/* ---- images --------------------------------------------------------------- */

static int is_anon(const char *image)
{
	return !*image || image[0] == '{' || image[0] == '[' ||
	       !strcmp(image, "anon") || !strncmp(image, "//anon", 6);
}

static int images_grow(struct symres *r)
{
	size_t cap = r->images_cap * 2;
	struct simage **t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < r->images_cap; i++) {
		struct simage *si = r->images[i];
		size_t h;

		if (!si)
			continue;
		for (h = util_hash_str(si->key) & (cap - 1); t[h]; h = (h + 1) & (cap - 1))
			;
		t[h] = si;
	}
	free(r->images);
	r->images = t;
	r->images_cap = cap;
	return 0;
}

int symres_image_recheck(struct symres *r, struct simage *si, const char *guest,
			 const char *image)
{
	char bidhex[129], path[4096];
	struct stat sb;

	if (si->kind != SK_USER || si->state != SIMAGE_NOT_FOUND || si->build_id_len < 2 ||
	    !r->fetch_cache || !guest_component(guest))
		return si->state == SIMAGE_OK;
	util_hex(si->build_id, si->build_id_len, bidhex);
	snprintf(path, sizeof(path), "%s/%s/%.2s/%s", r->fetch_cache, guest, bidhex, bidhex + 2);
	if (stat(path, &sb) || !S_ISREG(sb.st_mode))
		return 0;
	si->reason[0] = '\0';
	resolve_user(r, si, guest, image);
	return si->state == SIMAGE_OK;
}

struct simage *symres_image(struct symres *r, const char *guest, const char *image,
			    int kernel, const uint8_t *build_id, size_t build_id_len,
			    const struct symres_kernel *k)
{
	char bidhex[129], *key;
	struct simage *si;
	size_t h;

	if (build_id_len > sizeof(si->build_id))
		build_id_len = 0;
	util_hex(build_id, build_id ? build_id_len : 0, bidhex);
	/* A kernel's placement is part of its identity: two boots of one guest
	 * (a differential report, previous/) have different KASLR slides. */
	if (asprintf(&key, "%s\1%s\1%d\1%s\1%s\1%llx\1%s\1%llx", guest ? guest : "", image,
		     kernel, bidhex, kernel && k && k->release ? k->release : "",
		     kernel && k ? (unsigned long long)k->text_addr : 0ull,
		     kernel && k && k->anchor_name ? k->anchor_name : "",
		     kernel && k ? (unsigned long long)k->anchor_addr : 0ull) < 0)
		return NULL;
	for (h = util_hash_str(key) & (r->images_cap - 1); r->images[h];
	     h = (h + 1) & (r->images_cap - 1)) {
		if (!strcmp(r->images[h]->key, key)) {
			free(key);
			return r->images[h];
		}
	}
	si = calloc(1, sizeof(*si));
	if (!si) {
		free(key);
		return NULL;
	}
	si->key = key;
	si->state = SIMAGE_NOT_FOUND;
	if (build_id && build_id_len) {
		memcpy(si->build_id, build_id, build_id_len);
		si->build_id_len = build_id_len;
	}
	if (kernel && (!strcmp(image, "vmlinux") || !strcmp(image, "[kernel.kallsyms]"))) {
		si->kind = SK_KERNEL;
		si->guest = guest ? strdup(guest) : NULL;
		si->release = k && release_ok(k->release) ? strdup(k->release) : NULL;
		/* The sample file's build-id, if any, is vmlinux's; System.map
		 * has none to check. */
		resolve_kernel(r, si, guest, k);
	} else if (kernel) {
		si->kind = SK_MODULE;
		resolve_module(r, si, guest, image, k);
	} else if (is_anon(image)) {
		si->kind = SK_ANON;
		si->state = SIMAGE_ANON;
		snprintf(si->reason, sizeof(si->reason), "%s: anonymous memory", image);
	} else {
		si->kind = SK_USER;
		resolve_user(r, si, guest, image);
	}

	if ((r->nr_images + 1) * 2 > r->images_cap && images_grow(r)) {
		free(si->key);
		free(si);
		return NULL;
	}
	for (h = util_hash_str(si->key) & (r->images_cap - 1); r->images[h];
	     h = (h + 1) & (r->images_cap - 1))
		;
	r->images[h] = si;
	r->nr_images++;
	return si;
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

const char *simage_reason(const struct simage *si)
{
	return si->reason;
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
	b = bin_get(r, fd, path, reason, sizeof(reason));
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
	if (r->vmlinux && try_code(r, si, open_host_file(r->vmlinux), r->vmlinux))
		return 0;
	if (!si->release)
		return -ENOENT;
	for (size_t i = 0; i < r->nr_roots; i++) {
		if (!root_matches(&r->roots[i], si->guest) || r->root_fds[i] < 0)
			continue;
		for (size_t f = 0; f < 2; f++) {
			snprintf(rp, sizeof(rp), fmts[f], si->release);
			snprintf(path, sizeof(path), "%s%s", r->roots[i].dir, rp);
			if (try_code(r, si, open_in_root(r->root_fds[i], rp, 0), path))
				return 0;
		}
		snprintf(path, sizeof(path), "%s/../vmlinuz-%s", r->roots[i].dir, si->release);
		if (try_code(r, si, open_host_file(path), path))
			return 0;
		snprintf(path, sizeof(path), "%s/../vmlinuz", r->roots[i].dir);
		if (try_code(r, si, open_host_file(path), path))
			return 0;
	}
	if (!r->no_host_kernel) {
		for (size_t f = 0; f < 2; f++) {
			snprintf(path, sizeof(path), fmts[f], si->release);
			if (try_code(r, si, open_host_file(path), path))
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
		*addr = offset;
		return 0;
	}
	return -ENOENT;
}

long simage_lookup(const struct simage *si, uint64_t offset, uint64_t *addr)
{
	uint64_t a;

	if (si->state != SIMAGE_OK || simage_addr(si, offset, &a))
		return -1;
	if (addr)
		*addr = a;
	if (si->ks)
		return ksyms_lookup(si->ks, a);
	return elfimage_lookup(si->elf, a);
}

size_t simage_nr_syms(const struct simage *si)
{
	if (si->state != SIMAGE_OK)
		return 0;
	return si->ks ? ksyms_nr(si->ks) : elfimage_nr_syms(si->elf);
}

const struct elfsym *simage_sym(const struct simage *si, size_t i)
{
	if (si->state != SIMAGE_OK)
		return NULL;
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

/* ---- lines and sources --------------------------------------------------- */

/*
 * Separate debug info by build-id: usr/lib/debug/.build-id/xx/yyyy.debug in
 * the guest's roots, <session>/.build-id/xx/yyyy.debug, the host's
 * /usr/lib/debug/.build-id (a build-id names one build, wherever the file
 * sits), then debuginfod.  The build-id is checked again on attach.
 * Returns 0 when one was attached.
 */
static int attach_debug(struct symres *r, struct elfimage *elf, const char *guest,
			int take_symbols)
{
	char bidhex[129], path[4096], rp[256];
	const uint8_t *bid;
	debuginfod_client *c;
	size_t len;

	bid = elfimage_build_id(elf, &len);
	if (!bid)
		return -ENOENT;
	util_hex(bid, len, bidhex);
	snprintf(rp, sizeof(rp), "/usr/lib/debug/.build-id/%.2s/%s.debug", bidhex, bidhex + 2);
	for (size_t i = 0; i < r->nr_roots; i++) {
		int fd, ok;

		if (!root_matches(&r->roots[i], guest) || r->root_fds[i] < 0)
			continue;
		fd = open_in_root(r->root_fds[i], rp, 0);
		if (fd < 0)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ok = !elfimage_attach_debug(elf, path, take_symbols);
		close(fd);
		if (ok)
			return 0;
	}
	if (r->session_dir) {
		snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", r->session_dir,
			 bidhex, bidhex + 2);
		if (!elfimage_attach_debug(elf, path, take_symbols))
			return 0;
	}
	if (!elfimage_attach_debug(elf, rp, take_symbols))
		return 0;
	if ((c = dbgd(r))) {
		char *dpath = NULL;
		int fd = debuginfod_find_debuginfo(c, bid, (int)len, &dpath), ok = 0;

		if (fd >= 0) {
			snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
			ok = !elfimage_attach_debug(elf, path, take_symbols);
			close(fd);
		}
		free(dpath);
		if (ok)
			return 0;
	}
	return -ENOENT;
}

/* A stripped binary (only .dynsym) gets its full symbol table from debug
 * info, once per binary and before any symbol of it is handed out. */
static void bin_debug_symbols(struct symres *r, struct binfile *b, const char *guest)
{
	if (b->debug_tried || elfimage_has_symtab(b->elf))
		return;
	b->debug_tried = 1;
	attach_debug(r, b->elf, guest, 1);
}

int symres_want_lines(struct symres *r, struct simage *si, const char *guest)
{
	if (!si->elf || si->state != SIMAGE_OK)
		return -ENOENT;
	if (si->lines_tried || elfimage_has_lines(si->elf))
		return elfimage_has_lines(si->elf) ? 0 : -ENOENT;
	si->lines_tried = 1;
	/* Symbols stay as they are: rows of a report point at them. */
	if (attach_debug(r, si->elf, guest, 0))
		return -ENOENT;
	return elfimage_has_lines(si->elf) ? 0 : -ENOENT;
}

/* The host file behind fd, for messages; dflt if /proc cannot say. */
static void fd_name(int fd, const char *dflt, char *out, size_t outlen)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, out, outlen ? outlen - 1 : 0);
	if (n > 0 && (size_t)n < outlen)
		out[n] = '\0';
	else
		util_seterr(out, outlen, "%s", dflt);
}

/* A source path from DWARF inside the directory dfd: the whole path, then
 * ever shorter tails of it (/build/pkg-1.0/src/x.c as src/x.c, then x.c),
 * so that --source-dir can name a copy of the tree from anywhere in it. */
static int open_source_tail(int dfd, const char *path)
{
	int fd = -ENOENT;

	for (int tries = 0; path && *path && tries < 32; tries++) {
		fd = open_in_root(dfd, path, 0);
		if (fd >= 0)
			return fd;
		path = strchr(path + 1, '/');
		while (path && *path == '/')
			path++;
	}
	return fd;
}

FILE *symres_open_source(struct symres *r, const char *guest, const char *path,
			 char *used, size_t usedlen)
{
	int fd = -ENOENT, err = 0, places = 0;
	const char *where = NULL;
	FILE *f;

	/* The path comes from the guest's debug info: it is looked up inside
	 * the guest's roots and --source-dir only, never on the host as it
	 * is (a crafted binary could name /etc/shadow). */
	for (size_t i = 0; fd < 0 && i < r->nr_roots; i++) {
		if (!root_matches(&r->roots[i], guest) || r->root_fds[i] < 0)
			continue;
		places++;
		fd = open_in_root(r->root_fds[i], path, 0);
		if (fd < 0 && fd != -ENOENT)
			err = fd;
		where = r->roots[i].dir;
	}
	if (fd < 0 && r->source_dir) {
		int dfd = open(r->source_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

		places++;
		if (dfd >= 0) {
			fd = open_source_tail(dfd, path);
			if (fd < 0 && fd != -ENOENT)
				err = fd;
			close(dfd);
		}
		where = r->source_dir;
	}
	if (fd < 0) {
		if (!places)
			util_seterr(used, usedlen, "no --guest-root for this guest and no "
				    "--source-dir (a path from a guest's debug info is never "
				    "opened on the host)");
		else if (err == -EINVAL)
			util_seterr(used, usedlen, "not a regular file where found");
		else
			util_seterr(used, usedlen, "not in the guest root%s or --source-dir%s%s",
				    r->nr_roots > 1 ? "s" : "", err ? ": " : "",
				    err ? strerror(-err) : "");
		errno = err ? -err : ENOENT;
		return NULL;
	}
	fd_name(fd, where ? where : path, used, usedlen);
	f = fdopen(fd, "r");
	if (!f)
		close(fd);
	return f;
}

/* ---- build-id cache --------------------------------------------------------- */

int symres_check_build_id(const char *path, const uint8_t *bid, size_t bid_len)
{
	struct elfimage *img;
	const uint8_t *have;
	unsigned char magic[4];
	size_t len;
	int fd, ret;

	/* a plain ELF only: elfimage would unpack a compressed file, and a
	 * file from a guest must not make the host inflate it */
	fd = util_open_regular(path, 0);
	if (fd < 0)
		return fd;
	ret = pread(fd, magic, sizeof(magic), 0) == (ssize_t)sizeof(magic) &&
	      !memcmp(magic, "\177ELF", 4);
	close(fd);
	if (!ret)
		return -ENOEXEC;
	img = elfimage_open(path, NULL, 0);
	if (!img)
		return -ENOEXEC;
	have = elfimage_build_id(img, &len);
	ret = !have ? -ENODATA : len != bid_len || memcmp(have, bid, len) ? -ESTALE : 0;
	elfimage_close(img);
	return ret;
}

int symres_import(const char *session_dir, const char *path, char *out, size_t outlen)
{
	char bidhex[129], dir[4096], dst[4096], tmp[4096 + 16];
	struct elfimage *img;
	const uint8_t *bid;
	char buf[65536];
	int in = -1, fd = -1, ret;
	size_t len;
	ssize_t n;

	img = elfimage_open(path, NULL, 0);
	if (!img)
		return -ENOEXEC;
	bid = elfimage_build_id(img, &len);
	if (!bid) {
		elfimage_close(img);
		return -ENODATA;
	}
	util_hex(bid, len, bidhex);
	elfimage_close(img);
	if (snprintf(dir, sizeof(dir), "%s/.build-id", session_dir) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	snprintf(dir, sizeof(dir), "%s/.build-id/%.2s", session_dir, bidhex);
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	if (snprintf(dst, sizeof(dst), "%s/%s", dir, bidhex + 2) >= (int)sizeof(dst) ||
	    snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", dst) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	in = util_open_regular(path, 0);
	if (in < 0)
		return in;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		if (write(fd, buf, (size_t)n) != n) {
			ret = errno ? -errno : -EIO;
			goto fail;
		}
	}
	if (n < 0 || fchmod(fd, 0644) || fsync(fd)) {
		ret = -errno;
		goto fail;
	}
	if (rename(tmp, dst)) {
		ret = -errno;
		goto fail;
	}
	if (out)
		snprintf(out, outlen, "%s", dst);
	ret = 0;
	goto out;
fail:
	unlink(tmp);
out:
	if (fd >= 0)
		close(fd);
	close(in);
	return ret;
}
