// SPDX-License-Identifier: MIT
/*
 * The size cap of a guest's build-id cache (<cache>/<guest>/xx/yyyy).
 *
 * Each session fetches at most --fetch-max-session bytes, but the cache is
 * shared by all sessions of the guest: without a cap a guest that keeps
 * changing its binaries would grow it without bound.  Past the cap the
 * least recently used files go first: a file's mtime is set when it is
 * written and whenever a session finds it there (fetch_want()), so what
 * current sessions use is the newest.  Only names the cache gives (two hex
 * digits / the rest of a build-id, regular files) are counted or removed,
 * and the part files (.part-PID-N) of an opvm that was killed mid-transfer:
 * those of a live process are its open transfers; anything else is left
 * alone.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/collect/fetch.h"
#include "lib/fs.h"

struct centry {
	int dfd;		/* its xx directory */
	char name[2 * OPVM_BUILD_ID_MAX + sizeof(FETCH_MEMSYMS_SUFFIX)];
	uint64_t size;
	struct timespec mtime;
};

struct clist {
	struct centry *v;
	size_t n, cap;
	int dirs[256];		/* open xx directories */
	size_t nr_dirs;
	uint64_t total;
};

static bool hex_name(const char *s, size_t min, size_t max)
{
	size_t n = strspn(s, "0123456789abcdef");

	return n == strlen(s) && n >= min && n <= max;
}

static int by_mtime(const void *a, const void *b)
{
	const struct centry *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return 0;
}

/* A name the cache gives a file: the rest of a build-id, a binary's, or
 * with FETCH_MEMSYMS_SUFFIX its symbols read from guest memory. */
static bool cache_name(const char *s, size_t max)
{
	size_t n = strspn(s, "0123456789abcdef");

	return n >= 2 && n <= max && (!s[n] || !strcmp(s + n, FETCH_MEMSYMS_SUFFIX));
}

/* The files of one xx directory; dfd is kept open in l->dirs. */
static int list_dir(struct clist *l, int dfd)
{
	DIR *d = fs_opendir_at(dfd);
	struct dirent *de;
	struct stat sb;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (!cache_name(de->d_name, 2 * OPVM_BUILD_ID_MAX - 2) ||
		    fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) || !S_ISREG(sb.st_mode))
			continue;
		if (l->n == l->cap) {
			size_t cap = l->cap ? 2 * l->cap : 256;
			struct centry *v = realloc(l->v, cap * sizeof(*v));

			if (!v) {
				closedir(d);
				return -ENOMEM;
			}
			l->v = v;
			l->cap = cap;
		}
		l->v[l->n] = (struct centry){ .dfd = dfd, .size = (uint64_t)sb.st_size,
					      .mtime = sb.st_mtim };
		strcpy(l->v[l->n].name, de->d_name);
		l->total += (uint64_t)sb.st_size;
		l->n++;
	}
	closedir(d);
	return 0;
}

/* A part file whose opvm is gone ("." "part-PID-N", fetch.c part_path). */
static bool stale_part(const char *name)
{
	char *end;
	long pid;

	if (strncmp(name, ".part-", 6))
		return false;
	pid = strtol(name + 6, &end, 10);
	if (pid <= 0 || pid > INT32_MAX || *end != '-')
		return false;
	return kill((pid_t)pid, 0) && errno == ESRCH;
}

static int list_cache(struct clist *l, int root, struct fetch_prune *out)
{
	DIR *d = fs_opendir_at(root);
	struct dirent *de;
	struct stat sb;
	int ret = 0;

	if (!d)
		return -errno;
	/* a dup shares the offset with the caller's fd, which an earlier
	 * listing left at the end: without this, every prune after the
	 * session's first saw an empty cache (cache_bytes 0, nothing pruned) */
	rewinddir(d);
	while (!ret && (de = readdir(d))) {
		int dfd;

		if (stale_part(de->d_name) &&
		    !fstatat(root, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) &&
		    !unlinkat(root, de->d_name, 0)) {
			out->stale_parts++;
			out->bytes += S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : 0;
			continue;
		}
		if (!hex_name(de->d_name, 2, 2) || l->nr_dirs == 256)
			continue;
		dfd = openat(root, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			continue;
		l->dirs[l->nr_dirs++] = dfd;
		ret = list_dir(l, dfd);
	}
	closedir(d);
	return ret;
}

int fetch_cache_prune_at(int dfd, uint64_t max, struct fetch_prune *out)
{
	struct clist l = { 0 };
	int root, ret;

	memset(out, 0, sizeof(*out));
	root = dup(dfd);	/* list_cache() closes what it reads */
	if (root < 0)
		return -errno;
	ret = list_cache(&l, root, out);
	if (!ret && l.total > max) {
		qsort(l.v, l.n, sizeof(*l.v), by_mtime);
		for (size_t i = 0; i < l.n && l.total > max; i++) {
			if (unlinkat(l.v[i].dfd, l.v[i].name, 0))
				continue;
			l.total -= l.v[i].size;
			out->files++;
			out->bytes += l.v[i].size;
		}
	}
	out->cache_bytes = l.total;
	for (size_t i = 0; i < l.nr_dirs; i++) {
		close(l.dirs[i]);
	}
	free(l.v);
	close(root);
	return ret;
}

int fetch_cache_prune(const char *dir, uint64_t max, struct fetch_prune *out)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), ret;

	if (fd < 0) {
		memset(out, 0, sizeof(*out));
		return errno == ENOENT ? 0 : -errno;
	}
	ret = fetch_cache_prune_at(fd, max, out);
	close(fd);
	return ret;
}
