// SPDX-License-Identifier: MIT
/*
 * Sample-file store (host/collect/store.h), the writer: the per-guest tree and the
 * sample files in it.  The file format's checks, the reader, the tree walk
 * and name mangling are their own files (host/store-priv.h lists them).
 *
 * Safety of the tree: the session directory is the user's choice, but it
 * must be this user's and writable by no one else, its parents checked on
 * the way (safepath_open_session()); everything below it is reached with mkdirat()/openat() relative
 * to a directory fd, one component at a time, with O_NOFOLLOW.  Names that
 * come from the guest are mangled into single components first
 * (store_mangle()), so a guest path can never walk out of the tree, and a
 * symlink planted in the tree makes the open fail instead of being followed.
 * Files are also refused when they are not regular files with one link, so a
 * hard link to a file elsewhere is not written through either.
 *
 * Sample file layout (docs/sample-files.md):
 *
 *   [0, 256)   header, struct sfile_hdr
 *   [T, T+16C) the live table: C (power of two) slots of {offset, count}
 *
 * where hdr.table = T | log2(C), T a multiple of 64.  A slot is empty when
 * its count is zero.  Crash safety against SIGKILL of the writer (the page
 * cache survives it, so MAP_SHARED stores are never lost):
 *  - a new slot is written offset first, count second; a count is one
 *    aligned 8-byte add.  A slot seen with a nonzero count is complete.
 *  - growth builds the new table in a fresh region past the end of the file
 *    and publishes it with one aligned 8-byte store of hdr.table; the old
 *    table is left untouched until then, and is only hole-punched after.
 *  - a new file is built under a temporary name and renamed into place.
 *  - hdr.nr_entries/hdr.total are published by store_sync() (and before a
 *    file is unmapped); a reader checks that the table holds at least that
 *    much.
 *
 * Bounds: every file and directory the store creates is counted against
 * struct store_limits (disk in 4 KiB blocks: a file's live region, a
 * directory one block).  Mapped files sit on a list, most recently mapped
 * first; past max_mapped the oldest one not used since the list last went
 * by it is unmapped (second chance: sfile_add() sets sf->ref).  An unmapped
 * file keeps its counts in struct sfile and is mapped again, by the same
 * safe walk, when a sample comes for it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/collect/store-priv.h"
#include "lib/fs.h"
#include "lib/hash.h"
#include "lib/safepath.h"

/* Files mapped by all stores of the process, against vm.max_map_count. */
static uint64_t mapped_all;
static uint64_t mapped_all_max;

static inline uint64_t slot_hash(uint64_t off)
{
	return off * 0x9e3779b97f4a7c15ULL;
}

/* ---- --separate --------------------------------------------------------- */

int store_parse_separate(const char *spec, unsigned *out)
{
	unsigned m = 0;
	const char *p = spec;

	if (!spec || !out)
		return -EINVAL;
	if (!*spec)
		return -EINVAL;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);

#define IS(w) (n == sizeof(w) - 1 && memcmp(p, w, n) == 0)
		if (IS("none"))
			m |= 0;
		else if (IS("lib") || IS("library"))
			m |= OPVM_SEP_LIB;
		else if (IS("kernel"))	/* as OProfile: kernel implies lib */
			m |= OPVM_SEP_KERNEL | OPVM_SEP_LIB;
		else if (IS("thread"))
			m |= OPVM_SEP_THREAD;
		else if (IS("cpu"))
			m |= OPVM_SEP_CPU;
		else if (IS("all"))
			m |= OPVM_SEP_ALL;
		else
			return -EINVAL;
#undef IS
		if (!e)
			break;
		p = e + 1;
		if (!*p)
			return -EINVAL;
	}
	*out = m;
	return 0;
}

/* ---- directory helpers -------------------------------------------------- */

/* Opens (creating with mode if create) directory name under dfd, never
 * following a symlink.  Returns an fd or -errno. */
static int dir_openat(int dfd, const char *name, bool create, mode_t mode)
{
	int fd;

	if (create && mkdirat(dfd, name, mode) < 0 && errno != EEXIST)
		return -errno;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOTDIR ? -ELOOP : -errno;
	return fd;
}

/* Charges bytes to the disk cap (exempt: the overflow bucket, which must
 * always be able to take a sample).  Returns 0 or -EDQUOT. */
int store_disk_take(struct store *st, uint64_t bytes, bool exempt)
{
	if (!exempt && (st->stats.disk_bytes > st->lim.max_disk ||
			bytes > st->lim.max_disk - st->stats.disk_bytes))
		return -EDQUOT;
	st->stats.disk_bytes += bytes;
	return 0;
}

void store_disk_give(struct store *st, uint64_t bytes)
{
	st->stats.disk_bytes -= bytes < st->stats.disk_bytes ? bytes : st->stats.disk_bytes;
}

/* Creates directory name under dfd within the caps and opens it.  Returns
 * an fd or -errno (-EDQUOT: a cap). */
static int dir_create(struct store *st, int dfd, const char *name, bool exempt)
{
	int ret;

	if (!exempt && st->stats.dirs >= st->lim.max_dirs)
		return -EDQUOT;
	ret = store_disk_take(st, BLOCK, exempt);
	if (ret)
		return ret;
	if (mkdirat(dfd, name, st->dmode) == 0) {
		st->stats.dirs++;
	} else {
		ret = errno;
		store_disk_give(st, BLOCK);
		if (ret != EEXIST)
			return -ret;
	}
	return dir_openat(dfd, name, false, 0);
}

/* Opens the directory of relpath (all but its last component) under
 * current/, creating what is missing if create.  Sets *leaf to the last
 * component.  Returns an fd or -errno (-EDQUOT: a cap). */
static int relpath_dir(struct store *st, const char *relpath, bool create,
		       bool exempt, const char **leaf)
{
	char comp[OPVM_MANGLE_MAX];
	const char *p = relpath, *s;
	int fd = dup(st->curfd);

	if (fd < 0)
		return -errno;
	while ((s = strchr(p, '/'))) {
		size_t n = (size_t)(s - p);
		int nfd;

		if (n == 0 || n >= sizeof(comp)) {
			close(fd);
			return -EINVAL;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		nfd = dir_openat(fd, comp, false, 0);
		if (nfd == -ENOENT && create)
			nfd = dir_create(st, fd, comp, exempt);
		close(fd);
		if (nfd < 0)
			return nfd;
		fd = nfd;
		p = s + 1;
	}
	*leaf = p;
	return fd;
}

/* Removes everything under dfd (not dfd itself), never following a link.
 * depth bounds the recursion: the store's trees are 6 levels deep.  Entries
 * are removed while the directory is being read, which may make readdir()
 * skip some; passes repeat until one finds nothing to remove. */
static int tree_clear(int dfd, int depth)
{
	DIR *d;
	struct dirent *de;
	int ret = 0;
	bool removed;

	if (depth > 16)
		return -ELOOP;
	d = fs_opendir_at(dfd);
	if (!d)
		return -errno;
	do {
		removed = false;
		rewinddir(d);
		while ((de = readdir(d))) {
			struct stat sb;

			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
				if (errno == ENOENT)
					continue;
				ret = -errno;
				break;
			}
			if (S_ISDIR(sb.st_mode)) {
				int sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY |
						 O_NOFOLLOW | O_CLOEXEC);

				if (sub < 0) {
					ret = -errno;
					break;
				}
				ret = tree_clear(sub, depth + 1);
				close(sub);
				if (ret)
					break;
				if (unlinkat(dfd, de->d_name, AT_REMOVEDIR) < 0) {
					ret = -errno;
					break;
				}
			} else if (unlinkat(dfd, de->d_name, 0) < 0) {
				ret = -errno;
				break;
			}
			removed = true;
		}
	} while (!ret && removed);
	closedir(d);
	return ret;
}

/* Removes parent/name (a directory tree) without following links.  A name
 * that is a symlink or not a directory is refused.  Absent is fine. */
static int tree_remove(int parent, const char *name)
{
	struct stat sb;
	int fd, ret;

	if (fstatat(parent, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISLNK(sb.st_mode))
		return -ELOOP;
	if (!S_ISDIR(sb.st_mode))
		return -ENOTDIR;
	fd = dir_openat(parent, name, false, 0);
	if (fd < 0)
		return fd;
	ret = tree_clear(fd, 0);
	close(fd);
	if (!ret && unlinkat(parent, name, AT_REMOVEDIR) < 0)
		ret = -errno;
	return ret;
}

int store_remove_tree(const char *path)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int pfd, ret;

	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else if ((size_t)snprintf(parent, sizeof(parent), "%.*s",
				  slash == path ? 1 : (int)(slash - path), path) >= sizeof(parent))
		return -ENAMETOOLONG;
	pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	ret = tree_remove(pfd, slash ? slash + 1 : path);
	close(pfd);
	return ret;
}

/* ---- store -------------------------------------------------------------- */

static bool store_args_ok(const char *session_dir, const char *guest,
			  const struct store_event *events, size_t nr_events,
			  unsigned separate, unsigned flags)
{
	if (!session_dir || !*session_dir || !guest || !events ||
	    nr_events == 0 || nr_events > 256 || (separate & ~OPVM_SEP_ALL) ||
	    (flags & ~(STORE_APPEND | STORE_PUBLIC)))
		return false;
	for (size_t i = 0; i < nr_events; i++) {
		if (!store_event_name_ok(events[i].name))
			return false;
		/* Two events with one file name would share files. */
		for (size_t j = 0; j < i; j++) {
			if (!strcmp(events[i].name, events[j].name) &&
			    events[i].count == events[j].count &&
			    events[i].unit_mask == events[j].unit_mask)
				return false;
		}
	}
	return true;
}

/* The store's own fields, before any file is touched.  NULL: no memory. */
static struct store *store_alloc(const char *session_dir, const char *guest,
				 const struct store_event *events, size_t nr_events,
				 unsigned separate, unsigned flags, char *mg)
{
	struct store *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->curfd = -1;
	st->lockfd = -1;
	st->separate = separate;
	st->flags = flags;
	st->file_limit = OPVM_SFILE_MAX_SIZE;
	st->dmode = flags & STORE_PUBLIC ? 0777 : 0700;
	st->fmode = flags & STORE_PUBLIC ? 0666 : 0600;
	store_set_limits(st, NULL);
	st->events = calloc(nr_events, sizeof(*events));
	st->ovf = calloc(nr_events, sizeof(*st->ovf));
	st->session = strdup(session_dir);
	st->guest = strdup(guest);
	st->index_cap = 64;
	st->index = calloc(st->index_cap, sizeof(*st->index));
	store_mangle(guest, strlen(guest), mg);
	if (!st->events || !st->ovf || !st->session || !st->guest || !st->index ||
	    asprintf(&st->dir, "%s/guests/%s/samples/current", session_dir, mg) < 0) {
		st->dir = NULL;
		store_close(st);
		return NULL;
	}
	memcpy(st->events, events, nr_events * sizeof(*events));
	st->nr_events = nr_events;
	return st;
}

/* SESSION/guests/MG/samples, created as needed, opened without following
 * links and locked: one writer per guest tree (a second one, in this
 * process or another, would rotate or grow files under the first one's
 * feet).  Returns the directory's fd or -errno. */
static int samples_dir_open(struct store *st, const char *mg)
{
	int sfd, gfd = -1, gdir = -1, smp = -1, ret;

	/* the session directory walked and checked as the session did: one
	 * another user owns or may write is refused (lib/safepath.h) */
	sfd = safepath_open_session(st->session, 0755, SAFEPATH_CREATE, NULL, 0);
	if (sfd < 0)
		return sfd;
	gfd = dir_openat(sfd, "guests", true, st->dmode);
	if (gfd >= 0)
		gdir = dir_openat(gfd, mg, true, st->dmode);
	if (gdir >= 0)
		smp = dir_openat(gdir, "samples", true, st->dmode);
	ret = gfd < 0 ? gfd : gdir < 0 ? gdir : smp;
	if (smp >= 0 && flock(smp, LOCK_EX | LOCK_NB) < 0) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		close(smp);
	}
	if (gdir >= 0)
		close(gdir);
	if (gfd >= 0)
		close(gfd);
	close(sfd);
	return ret;
}

/* samples/current made anew (the last one kept as previous) or, with
 * STORE_APPEND, reused.  Returns its fd or -errno. */
static int current_open(struct store *st, int smp)
{
	struct stat sb;
	int ret;

	if (fstatat(smp, "current", &sb, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISDIR(sb.st_mode))
			return S_ISLNK(sb.st_mode) ? -ELOOP : -ENOTDIR;
		if (!(st->flags & STORE_APPEND)) {
			ret = tree_remove(smp, "previous");
			if (ret)
				return ret;
			if (renameat(smp, "current", smp, "previous") < 0)
				return -errno;
		}
	} else if (errno != ENOENT) {
		return -errno;
	}
	return dir_openat(smp, "current", true, st->dmode);
}

struct store *store_open(const char *session_dir, const char *guest,
			 const struct store_event *events, size_t nr_events,
			 unsigned separate, unsigned flags)
{
	char mg[OPVM_MANGLE_MAX];
	struct store *st;
	int smp, ret;

	if (!store_args_ok(session_dir, guest, events, nr_events, separate, flags)) {
		errno = EINVAL;
		return NULL;
	}
	st = store_alloc(session_dir, guest, events, nr_events, separate, flags, mg);
	if (!st) {
		errno = ENOMEM;
		return NULL;
	}
	smp = samples_dir_open(st, mg);
	if (smp < 0) {
		ret = smp;
		goto fail;
	}
	st->lockfd = smp;	/* held until store_close() */
	st->curfd = current_open(st, smp);
	if (st->curfd < 0) {
		ret = st->curfd;
		goto fail;
	}
	return st;
fail:
	store_close(st);
	errno = -ret;
	return NULL;
}

/* SESSION/guests/GDIR/samples as it is (nothing made), locked if lock. */
static int samples_dir_existing(const char *session_dir, const char *gdir, bool lock)
{
	int sfd, gfd = -1, gd = -1, smp = -1;

	sfd = safepath_open_session(session_dir, 0700, 0, NULL, 0);
	if (sfd < 0)
		return sfd;
	gfd = dir_openat(sfd, "guests", false, 0);
	if (gfd >= 0)
		gd = dir_openat(gfd, gdir, false, 0);
	if (gd >= 0)
		smp = dir_openat(gd, "samples", false, 0);
	if (smp >= 0 && lock && flock(smp, LOCK_EX | LOCK_NB) < 0) {
		int e = errno == EWOULDBLOCK ? -EBUSY : -errno;

		close(smp);
		smp = e;
	}
	if (gd >= 0)
		close(gd);
	if (gfd >= 0)
		close(gfd);
	close(sfd);
	return gfd < 0 ? gfd : gd < 0 ? gd : smp;
}

/* samples/current (a directory, not a link) renamed window name, in the
 * locked samples/ smp.  0 or -errno. */
static int seal_current(int smp, const char *name)
{
	struct stat sb;

	if (fstatat(smp, "current", &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISDIR(sb.st_mode))
		return S_ISLNK(sb.st_mode) ? -ELOOP : -ENOTDIR;
	if (renameat2(smp, "current", smp, name, RENAME_NOREPLACE) < 0)
		return -errno;
	return 0;
}

int store_seal_window(const char *session_dir, const char *guest, const char *name)
{
	char mg[OPVM_MANGLE_MAX];
	int64_t a, b;
	int smp, ret;

	if (!session_dir || !guest || !*guest || !name || store_window_parse(name, &a, &b))
		return -EINVAL;
	store_mangle(guest, strlen(guest), mg);
	smp = samples_dir_existing(session_dir, mg, true);
	if (smp < 0)
		return smp;
	ret = seal_current(smp, name);
	close(smp);	/* the lock with it */
	return ret;
}

static void sfile_free(struct sfile *sf);

/* Every file of the window synced and let go; the store as store_open()
 * left it, with its caps. */
static void window_drop(struct store *st)
{
	struct sfile *sf, *n;

	store_sync(st);
	for (sf = st->files; sf; sf = n) {
		n = sf->next;
		sfile_free(sf);
	}
	st->files = st->last = st->mru = st->lru = NULL;
	memset(st->index, 0, st->index_cap * sizeof(*st->index));
	st->index_nr = 0;
	memset(st->ovf, 0, st->nr_events * sizeof(*st->ovf));
	st->nr_ovf = 0;
	st->stats = (struct store_stats){ 0 };
}

int store_rotate(struct store *st, const char *name, int *sealed)
{
	int64_t a, b;

	if (!st || !name || !sealed || store_window_parse(name, &a, &b) || st->curfd < 0)
		return -EINVAL;
	window_drop(st);
	close(st->curfd);
	*sealed = seal_current(st->lockfd, name);
	/* not sealed: the new current/ keeps the old one as previous/ */
	st->curfd = current_open(st, st->lockfd);
	return st->curfd < 0 ? st->curfd : 0;
}

int store_remove_window(const char *session_dir, const char *gdir, const char *name)
{
	int64_t a, b;
	int smp, ret;

	if (!session_dir || !gdir || !name || store_window_parse(name, &a, &b) ||
	    !strcmp(gdir, ".") || !strcmp(gdir, "..") || strchr(gdir, '/'))
		return -EINVAL;
	smp = samples_dir_existing(session_dir, gdir, false);
	if (smp < 0)
		return smp;
	ret = tree_remove(smp, name);
	close(smp);
	return ret;
}

unsigned store_separate(const struct store *st)
{
	return st->separate;
}

const char *store_dir(const struct store *st)
{
	return st->dir;
}

void store_set_file_limit(struct store *st, uint64_t bytes)
{
	if (bytes > OPVM_SFILE_MAX_SIZE)
		bytes = OPVM_SFILE_MAX_SIZE;
	st->file_limit = bytes;
}

static void map_trim(struct store *st, const struct sfile *keep, unsigned room);

void store_set_limits(struct store *st, const struct store_limits *lim)
{
	struct store_limits l = lim ? *lim : (struct store_limits){ 0 };

	if (!st)
		return;
	st->lim.max_files = l.max_files ? l.max_files : OPVM_STORE_MAX_FILES;
	st->lim.max_dirs = l.max_dirs ? l.max_dirs : OPVM_STORE_MAX_DIRS;
	st->lim.max_mapped = l.max_mapped ? l.max_mapped : OPVM_STORE_MAX_MAPPED;
	st->lim.max_disk = l.max_disk ? l.max_disk : OPVM_STORE_MAX_DISK;
	map_trim(st, NULL, 0);
}

void store_get_stats(const struct store *st, struct store_stats *out)
{
	*out = st->stats;
	out->overflow_samples = 0;
	for (size_t i = 0; i < st->nr_events; i++) {
		uint64_t t = st->ovf[i] ? st->ovf[i]->total : 0;

		if (__builtin_add_overflow(out->overflow_samples, t, &out->overflow_samples))
			out->overflow_samples = UINT64_MAX;
	}
}

void store_get_limits(const struct store *st, struct store_limits *out)
{
	*out = st->lim;
}

uint64_t store_mapped_total(void)
{
	return __atomic_load_n(&mapped_all, __ATOMIC_RELAXED);
}

/* Half of vm.max_map_count: the rest is for the libraries, the rings and
 * everything else of the process. */
static uint64_t mapped_all_limit(void)
{
	uint64_t v = __atomic_load_n(&mapped_all_max, __ATOMIC_RELAXED);
	unsigned long long m = 65530;
	FILE *f;

	if (v)
		return v;
	f = fopen("/proc/sys/vm/max_map_count", "re");
	if (f) {
		if (fscanf(f, "%llu", &m) != 1 || m < 1024)
			m = 65530;
		fclose(f);
	}
	v = m / 2;
	__atomic_store_n(&mapped_all_max, v, __ATOMIC_RELAXED);
	return v;
}

static void sfile_publish(struct sfile *sf);

static void map_unlink(struct sfile *sf)
{
	struct store *st = sf->st;

	if (sf->mprev)
		sf->mprev->mnext = sf->mnext;
	else
		st->mru = sf->mnext;
	if (sf->mnext)
		sf->mnext->mprev = sf->mprev;
	else
		st->lru = sf->mprev;
	sf->mprev = sf->mnext = NULL;
}

static void map_push(struct sfile *sf)
{
	struct store *st = sf->st;

	sf->mprev = NULL;
	sf->mnext = st->mru;
	if (st->mru)
		st->mru->mprev = sf;
	else
		st->lru = sf;
	st->mru = sf;
}

/* Publishes and unmaps sf; its counts stay in struct sfile. */
static void sfile_unmap(struct sfile *sf)
{
	if (!sf->map)
		return;
	if (sf->dirty)
		sfile_publish(sf);
	munmap(sf->map, sf->map_len);
	sf->map = NULL;
	sf->tab = NULL;
	map_unlink(sf);
	sf->st->stats.mapped--;
	__atomic_sub_fetch(&mapped_all, 1, __ATOMIC_RELAXED);
}

/* Unmaps cold files until the store is within max_mapped with room more
 * to spare and the process within mapped_all_limit() (keep, the file being
 * mapped, stays).  Second chance: a file used since the last pass goes back
 * to the front once. */
static void map_trim(struct store *st, const struct sfile *keep, unsigned room)
{
	uint64_t passes = 2 * st->stats.mapped + 2;

	while (st->lru && passes--) {
		struct sfile *v = st->lru;
		bool over = st->stats.mapped + room > st->lim.max_mapped ||
			    (store_mapped_total() > mapped_all_limit() &&
			     st->stats.mapped > 1);

		if (!over || (v == keep && st->mru == v))
			break;
		if (v == keep || (v->ref && passes > st->stats.mapped)) {
			v->ref = 0;
			map_unlink(v);
			map_push(v);
			continue;
		}
		sfile_unmap(v);
		st->stats.unmaps++;
	}
}

/* Maps [0, len) of fd for sf and puts it at the front of the list. */
static int sfile_map(struct sfile *sf, int fd, size_t len)
{
	struct store *st = sf->st;
	void *m;

	/* Room first: mapping before trimming would hold max_mapped + 1
	 * files mapped for a moment (store-caps counts /proc/PID/maps). */
	map_trim(st, NULL, 1);
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	sf->map = m;
	sf->map_len = len;
	sf->ref = 1;
	map_push(sf);
	st->stats.mapped++;
	__atomic_add_fetch(&mapped_all, 1, __ATOMIC_RELAXED);
	map_trim(st, sf, 0);
	if (st->stats.mapped > st->stats.mapped_peak)
		st->stats.mapped_peak = st->stats.mapped;
	return 0;
}

static void sfile_free(struct sfile *sf)
{
	if (!sf)
		return;
	sfile_unmap(sf);
	free(sf->app);
	free(sf->cgroup);
	free(sf->image);
	free(sf->relpath);
	free(sf);
}

static void sfile_publish(struct sfile *sf)
{
	struct sfile_hdr *h = (struct sfile_hdr *)sf->map;

	/* Each is one aligned store; a reader accepts either order. */
	h->nr_entries = sf->nr;
	barrier();
	h->total = sf->total;
	sf->dirty = 0;
}

int store_sync(struct store *st)
{
	if (!st)
		return -EINVAL;
	for (struct sfile *sf = st->files; sf; sf = sf->next) {
		if (sf->dirty && sf->map)
			sfile_publish(sf);
		sf->full = false;
	}
	return 0;
}

void store_close(struct store *st)
{
	struct sfile *sf, *n;

	if (!st)
		return;
	store_sync(st);
	for (sf = st->files; sf; sf = n) {
		n = sf->next;
		sfile_free(sf);
	}
	free(st->index);
	free(st->ovf);
	if (st->curfd >= 0)
		close(st->curfd);
	if (st->lockfd >= 0)
		close(st->lockfd);
	free(st->events);
	free(st->session);
	free(st->guest);
	free(st->dir);
	free(st);
}

int store_write_meta(struct store *st, const char *json)
{
	char tmp[64];
	size_t len, done = 0;
	int fd, ret = 0;

	if (!st || !json)
		return -EINVAL;
	len = strlen(json);
	snprintf(tmp, sizeof(tmp), ".session.json.%d.tmp", (int)getpid());
	unlinkat(st->curfd, tmp, 0);
	fd = openat(st->curfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, st->fmode);
	if (fd < 0)
		return -errno;
	while (done < len) {
		ssize_t n = write(fd, json + done, len - done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		done += (size_t)n;
	}
	if (close(fd) < 0 && !ret)
		ret = -errno;
	if (!ret && renameat(st->curfd, tmp, st->curfd, "session.json") < 0)
		ret = -errno;
	if (ret)
		unlinkat(st->curfd, tmp, 0);
	return ret;
}

/* ---- sample files: writing ---------------------------------------------- */

static void sfile_set_table(struct sfile *sf, uint64_t desc)
{
	unsigned lg = (unsigned)(desc & 63);

	sf->desc = desc;
	sf->tab = (struct slot *)(sf->map + (desc & ~63ULL));
	sf->mask = (1ULL << lg) - 1;
	sf->shift = 64 - lg;
	sf->grow_at = (1ULL << lg) / 4 * 3;
}

/* Extends the file to hold [off, off+len) with real blocks: a store into a
 * hole of a MAP_SHARED mapping on a full disk is a SIGBUS, an error from
 * fallocate() is just -ENOSPC. */
static int file_reserve(int fd, uint64_t off, uint64_t len)
{
	if (fallocate(fd, 0, (off_t)off, (off_t)len) == 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != ENOSYS)
		return -errno;
	/* No fallocate here (some network file systems): sparse it is. */
	if (ftruncate(fd, (off_t)(off + len)) < 0)
		return -errno;
	return 0;
}

/* Scans the table after reopening: nr and total as the table holds them. */
static void sfile_rescan(struct sfile *sf)
{
	sf->nr = 0;
	sf->total = 0;
	for (uint64_t i = 0; i <= sf->mask; i++) {
		if (sf->tab[i].count) {
			sf->nr++;
			sf->total += sf->tab[i].count;
		}
	}
}

static int file_check(int fd, struct stat *sb)
{
	if (fstat(fd, sb) < 0)
		return -errno;
	/* A hard link to a file outside the tree would be written through. */
	if (!S_ISREG(sb->st_mode) || sb->st_nlink != 1)
		return -EPERM;
	return 0;
}

static int sfile_open_existing(struct sfile *sf, int fd, const struct store_event *ev)
{
	struct sfile_hdr h;
	struct stat sb;
	uint64_t end;
	int ret;

	ret = file_check(fd, &sb);
	if (ret)
		return ret;
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return -EBADMSG;
	ret = store_hdr_check(&h, (uint64_t)sb.st_size, NULL, 0);
	if (ret)
		return ret;
	if (strcmp(h.event, ev->name) || h.count != ev->count ||
	    h.unit_mask != ev->unit_mask)
		return -EBADMSG;
	/* A crash during growth can leave an unpublished region past the
	 * live table: drop it. */
	end = (h.table & ~63ULL) + (1ULL << (h.table & 63)) * SLOT_SIZE;
	if ((uint64_t)sb.st_size > end && ftruncate(fd, (off_t)end) < 0)
		return -errno;
	ret = sfile_map(sf, fd, end);
	if (ret)
		return ret;
	/* already on disk: counted, never refused */
	sf->disk = (end + BLOCK - 1) / BLOCK * BLOCK;
	store_disk_take(sf->st, sf->disk, true);
	sf->dev = sb.st_dev;
	sf->ino = sb.st_ino;
	sfile_set_table(sf, h.table);
	sfile_rescan(sf);
	if (sf->nr > sf->grow_at + 1)
		return -EBADMSG;
	return 0;
}

static int sfile_create(struct sfile *sf, int dfd, const char *leaf,
			const struct store_event *ev, const struct store_key *key)
{
	char tmp[OPVM_MANGLE_MAX + 32];
	size_t len = SFILE_HDR_SIZE + ((size_t)1 << SFILE_MIN_LOG2) * SLOT_SIZE;
	struct sfile_hdr *h;
	struct stat sb;
	int fd, ret;

	ret = store_disk_take(sf->st, BLOCK, sf->overflow);
	if (ret)
		return ret;
	sf->disk = BLOCK;	/* the header and the first table fit one block */
	snprintf(tmp, sizeof(tmp), ".%s.%d.tmp", leaf, (int)getpid());
	unlinkat(dfd, tmp, 0);
	fd = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    sf->st->fmode);
	if (fd < 0)
		return -errno;
	ret = file_reserve(fd, 0, len);
	if (ret)
		goto fail;
	ret = sfile_map(sf, fd, len);
	if (ret)
		goto fail;
	h = (struct sfile_hdr *)sf->map;
	memcpy(h->magic, OPVM_SFILE_MAGIC, 8);
	h->version = OPVM_SFILE_VERSION;
	h->header_size = SFILE_HDR_SIZE;
	snprintf(h->event, sizeof(h->event), "%s", ev->name);
	h->count = ev->count;
	h->unit_mask = ev->unit_mask;
	snprintf(h->guest, sizeof(h->guest), "%s", sf->st->guest);
	if (key->build_id && key->build_id_len) {
		size_t n = key->build_id_len < sizeof(h->build_id) ?
			   key->build_id_len : sizeof(h->build_id);

		memcpy(h->build_id, key->build_id, n);
		h->build_id_len = (uint32_t)n;
	}
	h->table = SFILE_HDR_SIZE | SFILE_MIN_LOG2;
	sfile_set_table(sf, h->table);
	if (fstat(fd, &sb) < 0) {
		ret = -errno;
		goto fail;
	}
	sf->dev = sb.st_dev;
	sf->ino = sb.st_ino;
	/* Appear complete or not at all. */
	if (renameat2(dfd, tmp, dfd, leaf, RENAME_NOREPLACE) < 0) {
		ret = -errno;
		goto fail;
	}
	close(fd);
	return 0;
fail:
	unlinkat(dfd, tmp, 0);
	close(fd);
	store_disk_give(sf->st, sf->disk);
	sf->disk = 0;
	return ret;
}

/* Normalises key into the file identity the separate mask implies. */
struct nkey {
	const char *app, *image;
	const char *cgroup;	/* NULL: none */
	int kernel;
	uint8_t event;
	int64_t tgid, tid, cpu;
};

static void key_normalise(const struct store *st, const struct store_key *k,
			  struct nkey *n)
{
	unsigned sep = st->separate;

	n->image = k->image;
	n->cgroup = k->cgroup;
	/* 2: Python frames, kept apart from the interpreter's own file */
	n->kernel = k->python ? 2 : !!k->kernel;
	n->app = k->app ? k->app : k->image;
	if (!k->own_app && (n->kernel == 1 ? !(sep & OPVM_SEP_KERNEL) : !(sep & OPVM_SEP_LIB)))
		n->app = k->image;
	n->event = k->event;
	n->tgid = k->tgid < 0 ? -1 : k->tgid;
	n->tid = k->tid < 0 ? -1 : k->tid;
	n->cpu = k->cpu < 0 ? -1 : k->cpu;
	if (!(sep & OPVM_SEP_THREAD)) {
		n->tid = -1;
		if (!k->own_tgid)
			n->tgid = -1;
	}
	if (!(sep & OPVM_SEP_CPU))
		n->cpu = -1;
}

/* A string hash for the file index: 8 bytes per step, and the length
 * comes out of the same pass. */
static uint64_t str_hash(const char *str, uint64_t seed)
{
	const unsigned char *p = (const unsigned char *)str;
	uint64_t h = seed ^ 0x9e3779b97f4a7c15ULL;

	for (;;) {
		uint64_t w = 0;
		int i;

		for (i = 0; i < 8 && p[i]; i++)
			w |= (uint64_t)p[i] << (i * 8);
		h = (h ^ w) * 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
		if (i < 8)
			return hash_mix64(h);
		p += 8;
	}
}

static uint64_t nkey_hash(const struct nkey *n)
{
	uint64_t h = str_hash(n->image, 0);

	if (n->app != n->image)
		h ^= str_hash(n->app, 1) * 3;
	if (n->cgroup)
		h ^= str_hash(n->cgroup, 2) * 5;
	h ^= hash_mix64((uint64_t)n->tgid * HASH_FNV_PRIME ^ (uint64_t)n->tid);
	h ^= hash_mix64(((uint64_t)n->cpu << 16) ^ (uint64_t)n->event << 1 ^
		   (uint64_t)n->kernel);
	return h;
}

static bool cgroup_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static bool nkey_eq_fields(const struct sfile *sf, const struct nkey *n)
{
	return sf->event == n->event && cgroup_eq(sf->cgroup, n->cgroup) &&
	       sf->kernel == n->kernel && sf->tgid == n->tgid &&
	       sf->tid == n->tid && sf->cpu == n->cpu &&
	       !strcmp(sf->image, n->image) && !strcmp(sf->app, n->app);
}

static bool nkey_eq(const struct sfile *sf, const struct nkey *n, uint64_t h)
{
	return sf->khash == h && sf->event == n->event && cgroup_eq(sf->cgroup, n->cgroup) &&
	       sf->kernel == n->kernel && sf->tgid == n->tgid &&
	       sf->tid == n->tid && sf->cpu == n->cpu &&
	       !strcmp(sf->image, n->image) && !strcmp(sf->app, n->app);
}

static int index_insert(struct store *st, struct sfile *sf)
{
	if ((st->index_nr + 1) * 2 > st->index_cap) {
		size_t ncap = st->index_cap * 2;
		struct sfile **ni = calloc(ncap, sizeof(*ni));

		if (!ni)
			return -ENOMEM;
		for (size_t i = 0; i < st->index_cap; i++) {
			struct sfile *o = st->index[i];
			size_t j;

			if (!o)
				continue;
			for (j = o->khash & (ncap - 1); ni[j]; j = (j + 1) & (ncap - 1))
				;
			ni[j] = o;
		}
		free(st->index);
		st->index = ni;
		st->index_cap = ncap;
	}
	size_t j;

	for (j = sf->khash & (st->index_cap - 1); st->index[j];
	     j = (j + 1) & (st->index_cap - 1))
		;
	st->index[j] = sf;
	st->index_nr++;
	return 0;
}

static void fmt_field(char *b, size_t n, int64_t v)
{
	if (v < 0)
		snprintf(b, n, "all");
	else
		snprintf(b, n, "%lld", (long long)v);
}

/* The top directory of a file of cgroup (NULL: none) into out
 * (CG_PREFIX_LEN + OPVM_MANGLE_MAX bytes). */
static void top_dir(const char *cgroup, char *out)
{
	if (!cgroup) {
		strcpy(out, ROOT_DIR);
		return;
	}
	memcpy(out, CG_PREFIX, CG_PREFIX_LEN);
	store_mangle(cgroup, strlen(cgroup), out + CG_PREFIX_LEN);
}

/* Opens or creates the file for n, whose app and image are the path
 * components mapp and mimg (mangled, or the store's own {overflow}), and
 * adds it to the store's files (and to the index unless overflow).
 * Returns NULL and sets errno (EDQUOT: a cap). */
static struct sfile *sfile_new(struct store *st, const struct nkey *n, uint64_t h,
			       const char *mapp, const char *mimg,
			       const struct store_key *key, bool overflow)
{
	const struct store_event *ev = &st->events[n->event];
	char t[24], td[24], c[24], top[CG_PREFIX_LEN + OPVM_MANGLE_MAX];
	const char *leaf;
	struct sfile *sf;
	int dfd, fd, ret;

	sf = calloc(1, sizeof(*sf));
	if (!sf)
		return NULL;
	sf->st = st;
	sf->overflow = overflow;
	sf->has_build_id = key && key->build_id_len;
	sf->khash = h;
	sf->kernel = n->kernel;
	sf->event = n->event;
	sf->tgid = n->tgid;
	sf->tid = n->tid;
	sf->cpu = n->cpu;
	sf->app = strdup(n->app);
	sf->image = strdup(n->image);
	sf->cgroup = n->cgroup ? strdup(n->cgroup) : NULL;
	fmt_field(t, sizeof(t), n->tgid);
	fmt_field(td, sizeof(td), n->tid);
	fmt_field(c, sizeof(c), n->cpu);
	top_dir(n->cgroup, top);
	if (!sf->app || !sf->image || (n->cgroup && !sf->cgroup) ||
	    asprintf(&sf->relpath, "%s/%s/" DEP_DIR "/%s/%s/%s.%llu.%u.%s.%s.%s",
		     top, mapp, n->kernel == 2 ? PY_DIR : n->kernel ? KERN_DIR : ROOT_DIR, mimg,
		     ev->name,
		     (unsigned long long)ev->count, ev->unit_mask, t, td, c) < 0) {
		sf->relpath = NULL;
		ret = -ENOMEM;
		goto fail;
	}
	dfd = relpath_dir(st, sf->relpath, true, overflow, &leaf);
	if (dfd < 0) {
		ret = dfd;
		goto fail;
	}
	fd = openat(dfd, leaf, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		ret = sfile_open_existing(sf, fd, ev);
		close(fd);
	} else if (errno == ENOENT) {
		ret = sfile_create(sf, dfd, leaf, ev, key);
	} else {
		ret = -errno;
	}
	close(dfd);
	if (ret)
		goto fail;
	if (!overflow) {
		ret = index_insert(st, sf);
		if (ret)
			goto fail;
	}
	sf->next = st->files;
	st->files = sf;
	st->stats.files++;
	return sf;
fail:
	sfile_free(sf);
	errno = -ret;
	return NULL;
}

/* The overflow bucket of event, created on first use (exempt from the
 * caps).  NULL and errno if even that fails. */
static struct sfile *store_overflow(struct store *st, uint8_t event)
{
	struct nkey n = {
		.app = OVERFLOW_DIR, .image = OVERFLOW_DIR, .event = event,
		.tgid = -1, .tid = -1, .cpu = -1,
	};
	struct store_key key = { .image = OVERFLOW_DIR, .event = event };

	if (!st->ovf[event]) {
		st->ovf[event] = sfile_new(st, &n, 0, OVERFLOW_DIR, OVERFLOW_DIR,
					   &key, true);
		if (st->ovf[event])
			st->nr_ovf++;
	}
	return st->ovf[event];
}

/* Errors after which a sample still has a place: the overflow bucket. */
static bool overflow_err(int err)
{
	return err == EDQUOT || err == ENOSPC || err == ENOMEM ||
	       err == EMFILE || err == ENFILE || err == EFBIG;
}

static int sfile_remap(struct sfile *sf);

/* A build-id the key carries that sf was made without (the guest could
 * not read it when the first sample came: introspection reads it from the
 * process's mapping once its page is resident): written into the header
 * once.  A build-id the file has is never replaced. */
static void __attribute__((noinline, cold)) sfile_late_build_id(struct sfile *sf,
								 const struct store_key *key)
{
	struct sfile_hdr *h;
	size_t n;

	sf->has_build_id = true;	/* one try, whatever comes of it */
	if (sf->overflow || (!sf->map && sfile_remap(sf)))
		return;
	h = (struct sfile_hdr *)sf->map;
	if (h->build_id_len)
		return;
	n = key->build_id_len < sizeof(h->build_id) ? key->build_id_len : sizeof(h->build_id);
	memcpy(h->build_id, key->build_id, n);
	__atomic_store_n(&h->build_id_len, (uint32_t)n, __ATOMIC_RELEASE);
	sf->st->stats.build_ids_late++;
}

static inline struct sfile *sfile_hit(struct sfile *sf, const struct store_key *key)
{
	if (__builtin_expect(key->build_id_len && !sf->has_build_id, 0))
		sfile_late_build_id(sf, key);
	return sf;
}

struct sfile *store_get(struct store *st, const struct store_key *key)
{
	char mapp[OPVM_MANGLE_MAX], mimg[OPVM_MANGLE_MAX];
	struct sfile *sf;
	struct nkey n;
	uint64_t h;

	if (!st || !key || !key->image || key->event >= st->nr_events) {
		errno = EINVAL;
		return NULL;
	}
	key_normalise(st, key, &n);
	/* Consecutive samples mostly hit the same file: skip the hashing. */
	if (st->last && nkey_eq_fields(st->last, &n))
		return sfile_hit(st->last, key);
	h = nkey_hash(&n);
	for (size_t j = h & (st->index_cap - 1); (sf = st->index[j]);
	     j = (j + 1) & (st->index_cap - 1))
		if (nkey_eq(sf, &n, h))
			return st->last = sfile_hit(sf, key);

	if (st->stats.files - st->nr_ovf < st->lim.max_files) {
		store_mangle(n.app, strlen(n.app), mapp);
		store_mangle(n.image, strlen(n.image), mimg);
		sf = sfile_new(st, &n, h, mapp, mimg, key, false);
		if (sf)
			return st->last = sf;
		if (!overflow_err(errno))
			return NULL;
	}
	st->stats.overflow_keys++;
	return store_overflow(st, n.event);
}

/* The fd is not kept (a store can hold many files): sf's file is opened
 * again by the same safe walk, and must still be the file it was.  Returns
 * an fd or -errno. */
static int sfile_reopen(struct sfile *sf, struct stat *sb)
{
	const char *leaf;
	int dfd, fd, ret;

	dfd = relpath_dir(sf->st, sf->relpath, false, false, &leaf);
	if (dfd < 0)
		return dfd;
	fd = openat(dfd, leaf, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	ret = fd < 0 ? -errno : 0;
	close(dfd);
	if (ret)
		return ret;
	ret = file_check(fd, sb);
	if (!ret && (sb->st_dev != sf->dev || sb->st_ino != sf->ino))
		ret = -ESTALE;
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/* Maps an unmapped file again (sfile_unmap() left its counts in sf). */
static int __attribute__((noinline, cold)) sfile_remap(struct sfile *sf)
{
	struct sfile_hdr *h;
	struct stat sb;
	int fd, ret;

	fd = sfile_reopen(sf, &sb);
	if (fd < 0)
		return fd;
	ret = (uint64_t)sb.st_size < sf->map_len ? -EBADMSG : sfile_map(sf, fd, sf->map_len);
	close(fd);
	if (ret)
		return ret;
	h = (struct sfile_hdr *)sf->map;
	/* Only this store writes the file; a table that moved means someone
	 * else did.  Not a crash: an error, and no write through it. */
	if (__atomic_load_n(&h->table, __ATOMIC_ACQUIRE) != sf->desc) {
		sfile_unmap(sf);
		return -EBADMSG;
	}
	sfile_set_table(sf, sf->desc);
	sf->st->stats.remaps++;
	return 0;
}

/* Grows the table to twice its size in a fresh region and publishes it. */
static int sfile_grow(struct sfile *sf)
{
	struct store *st = sf->st;
	struct sfile_hdr *h = (struct sfile_hdr *)sf->map;
	uint64_t old_desc = h->table;
	uint64_t old_off = old_desc & ~63ULL;
	unsigned lg = (unsigned)(old_desc & 63) + 1;
	uint64_t old_size = (1ULL << (lg - 1)) * SLOT_SIZE;
	uint64_t new_off = (sf->map_len + SFILE_TABLE_ALIGN - 1) & ~(uint64_t)(SFILE_TABLE_ALIGN - 1);
	uint64_t new_size = (1ULL << lg) * SLOT_SIZE;
	uint64_t new_len = new_off + new_size;
	/* blocks after the growth: the old table is punched out */
	uint64_t new_disk = (new_len - sf->punched - old_size + BLOCK - 1) / BLOCK * BLOCK;
	uint64_t more = new_disk > sf->disk ? new_disk - sf->disk : 0;
	struct stat sb;
	struct slot *nt;
	void *m;
	int fd, ret;

	if (lg > SFILE_MAX_LOG2 || new_len > st->file_limit)
		return -ENOSPC;
	fd = sfile_reopen(sf, &sb);
	if (fd < 0)
		return fd;
	ret = store_disk_take(st, more, sf->overflow);
	if (ret) {
		close(fd);
		return ret;
	}
	ret = file_reserve(fd, sf->map_len, new_len - sf->map_len);
	if (ret) {
		/* Drop a partial reservation; the live table is untouched. */
		if (ftruncate(fd, (off_t)sf->map_len)) {}
		store_disk_give(st, more);
		goto out;
	}
	m = mremap(sf->map, sf->map_len, new_len, MREMAP_MAYMOVE);
	if (m == MAP_FAILED) {
		ret = -errno;
		if (ftruncate(fd, (off_t)sf->map_len)) {}
		store_disk_give(st, more);
		goto out;
	}
	sf->disk += more;
	sf->punched += old_size;
	sf->map = m;
	sf->map_len = new_len;
	h = (struct sfile_hdr *)sf->map;

	/* Fill the new region; the old table stays live until the publish. */
	nt = (struct slot *)(sf->map + new_off);
	{
		const struct slot *ot = (const struct slot *)(sf->map + old_off);
		uint64_t nmask = (1ULL << lg) - 1;
		unsigned nshift = 64 - lg;

		for (uint64_t i = 0; i <= sf->mask; i++) {
			uint64_t j;

			if (!ot[i].count)
				continue;
			for (j = slot_hash(ot[i].offset) >> nshift; nt[j].count;
			     j = (j + 1) & nmask)
				;
			nt[j].offset = ot[i].offset;
			nt[j].count = ot[i].count;
		}
	}
	barrier();
	__atomic_store_n(&h->table, new_off | lg, __ATOMIC_RELEASE);
	barrier();
	sfile_set_table(sf, new_off | lg);
	/* The old table is dead: give its blocks back. */
	fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		  (off_t)old_off, (off_t)old_size);
out:
	close(fd);
	return ret;
}

/* A sample sf cannot take (err) goes to its event's overflow bucket.
 * Returns 0, or err when the bucket cannot take it either. */
static int __attribute__((noinline, cold))
sfile_divert(struct sfile *sf, uint64_t count, int err)
{
	struct sfile *o;

	if (sf->overflow || !overflow_err(-err))
		return err;
	o = store_overflow(sf->st, sf->event);
	if (!o || sfile_add(o, 0, count))
		return err;
	return 0;
}

static int __attribute__((noinline, cold))
sfile_insert(struct sfile *sf, uint64_t offset, uint64_t count)
{
	uint64_t j;
	int ret;

	/* The bucket keeps one count per event: its samples come from
	 * files of every image, their offsets mean nothing together. */
	if (sf->overflow && offset)
		return sfile_add(sf, 0, count);
	if (sf->nr + 1 > sf->grow_at) {
		ret = sf->full ? -ENOSPC : sfile_grow(sf);
		if (ret) {
			sf->full = overflow_err(-ret);
			return sfile_divert(sf, count, ret);
		}
	}
	for (j = slot_hash(offset) >> sf->shift; sf->tab[j].count;
	     j = (j + 1) & sf->mask)
		;
	sf->tab[j].offset = offset;
	barrier();	/* offset lands before the count makes it live */
	sf->tab[j].count = count;
	sf->nr++;
	sf->total += count;
	sf->dirty = 1;
	sf->ref = 1;
	return 0;
}

int sfile_add(struct sfile *sf, uint64_t offset, uint64_t count)
{
	struct slot *tab = sf->tab;
	uint64_t j = slot_hash(offset) >> sf->shift;

	if (__builtin_expect(count == 0, 0))
		return 0;
	if (__builtin_expect(!tab, 0)) {
		int ret = sfile_remap(sf);

		if (ret)
			return sfile_divert(sf, count, ret);
		tab = sf->tab;
	}
	for (;;) {
		struct slot *s = &tab[j];

		if (!s->count)
			break;
		if (s->offset == offset) {
			uint64_t v;

			if (__builtin_add_overflow(s->count, count, &v))
				v = UINT64_MAX;
			s->count = v;
			sf->total += count;
			sf->dirty = 1;
			sf->ref = 1;
			return 0;
		}
		j = (j + 1) & sf->mask;
	}
	return sfile_insert(sf, offset, count);
}

/* sfile_add_many()'s home slots of offsets[k..m), as byte offsets into tab,
 * prefetched (tab NULL: the table is not mapped, nothing to fetch). */
static inline void sfile_homes(const uint8_t *tab, unsigned shift, const uint64_t *offsets,
			       uint64_t *home, size_t k, size_t m)
{
	if (!tab) {
		for (; k < m; k++)
			home[k] = (slot_hash(offsets[k]) >> shift) * sizeof(struct slot);
		return;
	}
#pragma GCC unroll 4
	for (; k < m; k++) {
		home[k] = (slot_hash(offsets[k]) >> shift) * sizeof(struct slot);
		__builtin_prefetch(tab + home[k], 1);
	}
}

/*
 * The hits (offsets already in the table) are counted here, inline, with the
 * table's fields in registers and sf's totals written once per run; a new
 * offset, an unmapped table or a full count goes through sfile_add(), which
 * makes the table the same, byte for byte, as one sfile_add() per offset.
 *
 * A chunk's home slots are hashed and prefetched first, then probed: with
 * large tables a probe is a cache miss, and the misses then overlap; each
 * offset is hashed once.  Home slots are kept as byte offsets into the
 * table, so that a probe is one add.
 */
size_t sfile_add_many(struct sfile *sf, const uint64_t *offsets, size_t n, int *err)
{
	enum { CHUNK = 32 };
	uint64_t home[CHUNK];
	size_t failed = 0;

	while (n) {
		size_t m = n < CHUNK ? n : CHUNK, k = 0;
		uint8_t *tab = (uint8_t *)sf->tab;
		unsigned shift = sf->shift;

		sfile_homes(tab, shift, offsets, home, 0, m);
		while (k < m) {
			uint64_t bmask = sf->mask * sizeof(struct slot), hits;
			size_t k0 = k;

			for (; tab && k < m; k++) {
				uint64_t off = offsets[k], j = home[k], c;
				struct slot *s = (struct slot *)(tab + j);

				c = s->count;
				if (__builtin_expect(s->offset != off, 0)) {
					while (c && s->offset != off) {
						j = (j + sizeof(struct slot)) & bmask;
						s = (struct slot *)(tab + j);
						c = s->count;
					}
				}
				/* c + 1 <= 1: a new offset (c == 0), or a count
				 * at its limit (sfile_add() saturates it) */
				if (c + 1 <= 1)
					break;
				s->count = c + 1;
			}
			hits = k - k0;
			if (hits) {
				sf->total += hits;
				sf->dirty = 1;
				sf->ref = 1;
			}
			if (k < m) {
				int r = sfile_add(sf, offsets[k++], 1);

				if (r && !failed++)
					*err = r;
				/* grown or mapped again: other home slots */
				if ((uint8_t *)sf->tab != tab || sf->shift != shift) {
					tab = (uint8_t *)sf->tab;
					shift = sf->shift;
					sfile_homes(tab, shift, offsets, home, k, m);
				}
			}
		}
		offsets += m;
		n -= m;
	}
	return failed;
}
