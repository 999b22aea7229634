// SPDX-License-Identifier: MIT
/*
 * Symbol resolution: separate debug files (local or debuginfod) for lines,
 * source files for annotate, and the build-id cache (symres_import).
 * The rules for guest names are in symbols/symres.c.
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

#include "lib/errbuf.h"
#include "lib/fs.h"
#include "lib/hex.h"
#include "symbols/ksyms.h"
#include "symbols/symres.h"
#include "symbols/symres-priv.h"

/* ---- lines and sources --------------------------------------------------- */

static int take_from_debuginfod(struct symres *r, const uint8_t *bid, size_t len,
				symres_take_fn take, void *arg);

/*
 * Separate debug files by build-id, in order: usr/lib/debug/.build-id/xx/
 * yyyy.debug in the guest's roots, <session>/.build-id/xx/yyyy.debug, the
 * one the guest sent (<fetch cache>/<guest>/xx/yyyy.debug,
 * host/collect/fetch.h), the host's /usr/lib/debug/.build-id (a build-id
 * names one build, wherever the file sits), then debuginfod.  take(fd,
 * path) owns fd and returns 1 when it used the file; the build-id is
 * checked again there.  Returns 1 when one was taken.
 */
int symres_each_debug_file(struct symres *r, const uint8_t *bid, size_t len,
			   const char *guest, symres_take_fn take, void *arg)
{
	char bidhex[129], path[4096], rp[256];
	int fd;

	if (!bid || !len || len > 64)
		return 0;
	hex_encode(bid, len, bidhex);
	snprintf(rp, sizeof(rp), "/usr/lib/debug/.build-id/%.2s/%s.debug", bidhex, bidhex + 2);
	for (size_t i = 0; i < r->nr_roots; i++) {
		if (!symres_root_matches(&r->roots[i], guest) || r->root_fds[i] < 0)
			continue;
		fd = symres_open_in_root(r->root_fds[i], rp, 0);
		snprintf(path, sizeof(path), "%s%s", r->roots[i].dir, rp);
		if (fd >= 0 && take(r, arg, fd, path))
			return 1;
	}
	if (r->session_dir) {
		snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", r->session_dir,
			 bidhex, bidhex + 2);
		fd = symres_open_host_file(path);
		if (fd >= 0 && take(r, arg, fd, path))
			return 1;
	}
	if (r->fetch_cache && symres_guest_component(guest)) {
		snprintf(path, sizeof(path), "%s/%s/%.2s/%s.debug", r->fetch_cache, guest,
			 bidhex, bidhex + 2);
		fd = symres_open_host_file(path);
		if (fd >= 0 && take(r, arg, fd, path))
			return 1;
	}
	fd = symres_open_host_file(rp);
	if (fd >= 0 && take(r, arg, fd, rp))
		return 1;
	return take_from_debuginfod(r, bid, len, take, arg);
}

/* debuginfod's debug file, to take(). */
static int take_from_debuginfod(struct symres *r, const uint8_t *bid, size_t len,
				symres_take_fn take, void *arg)
{
	char *dpath = NULL;
	int fd = symres_dbgd_find(r, bid, len, SYMRES_DBGD_DEBUGINFO, &dpath), ok = 0;

	if (fd >= 0)
		ok = take(r, arg, fd, dpath ? dpath : "debuginfod");
	free(dpath);
	return ok;
}

struct attach_arg {
	struct elfimage *elf;
	int take_symbols;
};

static int take_attach(struct symres *r, void *arg, int fd, const char *path)
{
	struct attach_arg *a = arg;
	char p[64];
	int ok;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	ok = !elfimage_attach_debug(a->elf, p, a->take_symbols);
	close(fd);
	return ok;
}

/* Attaches elf's separate debug file.  Returns 0 when one was attached. */
static int attach_debug(struct symres *r, struct elfimage *elf, const char *guest,
			int take_symbols)
{
	struct attach_arg a = { .elf = elf, .take_symbols = take_symbols };
	const uint8_t *bid;
	size_t len;

	bid = elfimage_build_id(elf, &len);
	if (!bid)
		return -ENOENT;
	return symres_each_debug_file(r, bid, len, guest, take_attach, &a) ? 0 : -ENOENT;
}

/* A stripped binary (only .dynsym) gets its full symbol table from debug
 * info, once per binary and before any symbol of it is handed out. */
void symres_bin_debug_symbols(struct symres *r, struct binfile *b, const char *guest)
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
		errbuf_set(out, outlen, "%s", dflt);
}

/* A source path from DWARF inside the directory dfd: the whole path, then
 * ever shorter tails of it (/build/pkg-1.0/src/x.c as src/x.c, then x.c),
 * so that --source-dir can name a copy of the tree from anywhere in it. */
static int open_source_tail(int dfd, const char *path)
{
	int fd = -ENOENT;

	for (int tries = 0; path && *path && tries < 32; tries++) {
		fd = symres_open_in_root(dfd, path, 0);
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
		if (!symres_root_matches(&r->roots[i], guest) || r->root_fds[i] < 0)
			continue;
		places++;
		fd = symres_open_in_root(r->root_fds[i], path, 0);
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
			errbuf_set(used, usedlen, "no --guest-root for this guest and no "
				    "--source-dir (a path from a guest's debug info is never "
				    "opened on the host)");
		else if (err == -EINVAL)
			errbuf_set(used, usedlen, "not a regular file where found");
		else
			errbuf_set(used, usedlen, "not in the guest root%s or --source-dir%s%s",
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
	size_t len;
	int fd, ret;

	/* a plain ELF only: elfimage would unpack a compressed file, and a
	 * file from a guest must not make the host inflate it */
	fd = fs_open_regular(path, 0);
	if (fd < 0)
		return fd;
	ret = elfimage_fd_is_plain(fd);
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
	hex_encode(bid, len, bidhex);
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
	in = fs_open_regular(path, 0);
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
