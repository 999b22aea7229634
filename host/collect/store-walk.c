// SPDX-License-Identifier: MIT
/*
 * The tree walk (store_walk(), host/collect/store.h): every sample file of every
 * guest of a session, its path components unmangled and its name parsed.
 * Like the reader it trusts nothing it finds: links, entries that are not
 * what their level should hold and names that do not parse are skipped and
 * counted, never followed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/collect/store-priv.h"
#include "lib/fs.h"

struct walk {
	int (*fn)(const struct store_entry *e, void *arg);
	void *arg;
	size_t skipped;
	struct store_entry e;
	char path[PATH_MAX];
	char guest[OPVM_MANGLE_MAX * 2];
	char app[OPVM_MANGLE_MAX * 2];
	char image[OPVM_MANGLE_MAX * 2];
	char cgroup[OPVM_MANGLE_MAX * 2];
	char event[32];
};

static bool hidden(const char *n)
{
	return n[0] == '.';
}

typedef int (*level_fn)(struct walk *w, int dfd, const char *name, int depth);

/* Calls fn for every entry of directory dfd; entries that are not
 * directories (when want_dir) are skipped and counted. */
static int walk_dir(struct walk *w, int dfd, bool want_dir, level_fn fn, int depth)
{
	DIR *d;
	struct dirent *de;
	int ret = 0;

	d = fs_opendir_at(dfd);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		struct stat sb;

		if (hidden(de->d_name))
			continue;
		if (fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
		    (want_dir && !S_ISDIR(sb.st_mode)) ||
		    (!want_dir && !S_ISREG(sb.st_mode))) {
			if (!(depth == 0 && !strcmp(de->d_name, "session.json")))
				w->skipped++;
			continue;
		}
		ret = fn(w, dfd, de->d_name, depth);
		if (ret)
			break;
	}
	closedir(d);
	return ret;
}

static size_t path_push(struct walk *w, const char *name)
{
	size_t len = strlen(w->path);

	if (len + 1 + strlen(name) >= sizeof(w->path))
		return (size_t)-1;
	w->path[len] = '/';
	strcpy(w->path + len + 1, name);
	return len;
}

/* Levels below current/: 0 {root} or {cg}<cgroup>, 1 <app>, 2 {dep},
 * 3 {root|kern|py}, 4 <image>, 5 sample file. */
static int walk_level(struct walk *w, int dfd, const char *name, int depth)
{
	size_t saved;
	int sub, ret = 0;

	switch (depth) {
	case 0:
		w->e.cgroup = NULL;
		if (!strncmp(name, CG_PREFIX, CG_PREFIX_LEN)) {
			if (store_unmangle(name + CG_PREFIX_LEN, w->cgroup, sizeof(w->cgroup)) < 0)
				goto skip;
			w->e.cgroup = w->cgroup;
		} else if (strcmp(name, ROOT_DIR)) {
			goto skip;
		}
		break;
	case 1:
		if (store_unmangle(name, w->app, sizeof(w->app)) < 0)
			goto skip;
		break;
	case 2:
		if (strcmp(name, DEP_DIR))
			goto skip;
		break;
	case 3:
		w->e.kernel = !strcmp(name, KERN_DIR);
		w->e.python = !strcmp(name, PY_DIR);
		if (!w->e.kernel && !w->e.python && strcmp(name, ROOT_DIR))
			goto skip;
		break;
	case 4:
		if (store_unmangle(name, w->image, sizeof(w->image)) < 0)
			goto skip;
		break;
	case 5:
		if (store_leaf_parse(name, &w->e, w->event))
			goto skip;
		saved = path_push(w, name);
		if (saved == (size_t)-1)
			goto skip;
		ret = w->fn(&w->e, w->arg);
		w->path[saved] = '\0';
		return ret;
	}
	saved = path_push(w, name);
	if (saved == (size_t)-1)
		goto skip;
	sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0) {
		w->path[saved] = '\0';
		goto skip;
	}
	ret = walk_dir(w, sub, depth + 1 < 5, walk_level, depth + 1);
	close(sub);
	w->path[saved] = '\0';
	return ret;
skip:
	w->skipped++;
	return 0;
}

/* One guest's samples/<which>/ under gfd (the session's guests/), walked
 * into w: 0, or what the callback returned to stop the walk. */
static int walk_guest(struct walk *w, int gfd, const char *name, const char *session_dir,
		      const char *which)
{
	int g, s, c, ret;
	size_t saved;

	if (store_unmangle(name, w->guest, sizeof(w->guest)) < 0) {
		w->skipped++;
		return 0;
	}
	g = openat(gfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (g < 0) {
		w->skipped++;
		return 0;
	}
	s = openat(g, "samples", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(g);
	if (s < 0)
		return 0;
	c = openat(s, which, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(s);
	if (c < 0) {
		if (errno != ENOENT)
			w->skipped++;
		return 0;
	}
	if (snprintf(w->path, sizeof(w->path), "%s/guests/%s/samples/%s",
		     session_dir, name, which) >= (int)sizeof(w->path)) {
		close(c);
		w->skipped++;
		return 0;
	}
	saved = strlen(w->path);
	ret = walk_dir(w, c, true, walk_level, 0);
	w->path[saved] = '\0';
	close(c);
	return ret;
}

/* The session's guests/ directory, opened without following links. */
static DIR *open_guests(const char *session_dir, int *gfd)
{
	int sfd = open(session_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), e;
	DIR *gd;

	if (sfd < 0)
		return NULL;
	*gfd = openat(sfd, "guests", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	e = errno;
	close(sfd);
	if (*gfd < 0) {
		errno = e;
		return NULL;
	}
	gd = fdopendir(*gfd);
	if (!gd) {
		e = errno;
		close(*gfd);
		errno = e;
	}
	return gd;
}

int store_walk(const char *session_dir, const char *which,
	       int (*fn)(const struct store_entry *e, void *arg), void *arg,
	       size_t *skipped)
{
	struct walk *w;
	DIR *gd;
	struct dirent *de;
	int gfd = -1, ret = 0;

	if (skipped)
		*skipped = 0;
	if (!session_dir || !which || !fn || !*which || strchr(which, '/') ||
	    !strcmp(which, ".") || !strcmp(which, ".."))
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->arg = arg;
	w->e.path = w->path;
	w->e.guest = w->guest;
	w->e.app = w->app;
	w->e.image = w->image;
	w->e.event = w->event;

	gd = open_guests(session_dir, &gfd);
	if (!gd) {
		ret = -errno;
		goto out;
	}
	while (!ret && (de = readdir(gd))) {
		if (!hidden(de->d_name))
			ret = walk_guest(w, gfd, de->d_name, session_dir, which);
	}
	closedir(gd);
out:
	if (skipped)
		*skipped = w->skipped;
	free(w);
	return ret;
}

const char *store_app_label(const char *app)
{
	if (app && !strcmp(app, "{idle}"))
		return STORE_APP_IDLE;
	if (app && !strcmp(app, "{boot}"))
		return STORE_APP_BOOT;
	return app;
}

void store_window_name(char *buf, int64_t start_ms, int64_t end_ms)
{
	snprintf(buf, STORE_WINDOW_NAME_MAX, "w-%013lld-%013lld", (long long)start_ms,
		 (long long)end_ms);
}

/* 13 decimal digits at s into *v. */
static int window_ms(const char *s, int64_t *v)
{
	int64_t x = 0;

	for (int i = 0; i < 13; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		x = x * 10 + (s[i] - '0');
	}
	*v = x;
	return 0;
}

int store_window_parse(const char *name, int64_t *start_ms, int64_t *end_ms)
{
	if (!name || strlen(name) != 29 || name[0] != 'w' || name[1] != '-' || name[15] != '-' ||
	    window_ms(name + 2, start_ms) || window_ms(name + 16, end_ms) ||
	    *end_ms < *start_ms)
		return -EINVAL;
	return 0;
}

/* One guest's samples/ (fd sfd, consumed): its windows in the range
 * added to names[0..*n) unless there already. */
static void windows_of(int sfd, int64_t since, int64_t until,
		       char (*names)[STORE_WINDOW_NAME_MAX], size_t max, size_t *n)
{
	DIR *d = fdopendir(sfd);
	struct dirent *de;

	if (!d) {
		close(sfd);
		return;
	}
	while ((de = readdir(d))) {
		int64_t s, e;
		size_t i;

		if (store_window_parse(de->d_name, &s, &e) || e <= since || s >= until)
			continue;
		for (i = 0; i < *n && i < max; i++)
			if (!strcmp(names[i], de->d_name))
				break;
		if (i < *n && i < max)
			continue;
		if (*n < max)
			memcpy(names[*n], de->d_name, STORE_WINDOW_NAME_MAX);
		(*n)++;
	}
	closedir(d);
}

static int window_cmp(const void *a, const void *b)
{
	return strcmp(a, b);	/* fixed-width times: by start, then end */
}

int store_windows(const char *session_dir, int64_t since_ms, int64_t until_ms,
		  char (*names)[STORE_WINDOW_NAME_MAX], size_t max)
{
	char path[PATH_MAX];
	struct dirent *de;
	size_t n = 0;
	int gfd;
	DIR *d;

	if (snprintf(path, sizeof(path), "%s/guests", session_dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	gfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (gfd < 0)
		return -errno;
	d = fdopendir(gfd);
	if (!d) {
		close(gfd);
		return -ENOMEM;
	}
	while ((de = readdir(d))) {
		int g, sfd;

		if (de->d_name[0] == '.')
			continue;
		g = openat(gfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (g < 0)
			continue;
		sfd = openat(g, "samples", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(g);
		if (sfd >= 0)
			windows_of(sfd, since_ms, until_ms, names, max, &n);
	}
	closedir(d);
	qsort(names, n < max ? n : max, STORE_WINDOW_NAME_MAX, window_cmp);
	return n > (size_t)INT32_MAX ? INT32_MAX : (int)n;
}
