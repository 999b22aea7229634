// SPDX-License-Identifier: MIT
/*
 * The kernel and initrd of a disk image's /boot, read with debugfs
 * (vmm/qemu/disk-boot.h).  debugfs runs with an argument vector, never a
 * shell; the guest's file names only ever name files inside the image: what
 * is written on the host goes to fixed names in opvm's private directory,
 * written by opvm from debugfs's output (`cat`), never by debugfs itself, so
 * that every byte is counted against the size the listing gave.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/safepath.h"
#include "lib/clock.h"
#include "lib/errbuf.h"
#include "lib/fs.h"
#include "vmm/backend.h"
#include "vmm/qemu/disk-boot.h"

#define DEBUGFS_OUT_MAX	(256 * 1024)	/* a /boot listing is a few KB */
#define DEBUGFS_LIST_MS	60000

/* Where debugfs's stdout goes: a buffer (NUL-ended, cut at its size) or
 * a file of exactly want bytes. */
struct dbg_sink {
	char *buf;
	size_t len;
	int fd;
	uint64_t want, got;
};

static pid_t debugfs_spawn(const char *image, const char *request, int *rd)
{
	char *argv[] = { "debugfs", "-R", (char *)request, (char *)image, NULL };
	int pfd[2];
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -errno;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, STDIN_FILENO);
		dup2(pfd[1], STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	*rd = pfd[0];
	return pid;
}

/* One chunk of debugfs's output into s: 0, 1 at its end, -errno. */
static int sink_put(struct dbg_sink *s, const char *p, size_t n)
{
	if (s->fd < 0) {
		size_t room = s->len - 1 - (size_t)s->got;

		memcpy(s->buf + s->got, p, n < room ? n : room);
		s->got += n < room ? n : room;
		return s->got == s->len - 1;
	}
	if (n > s->want - s->got)
		return -EFBIG;		/* more than the listing said */
	for (size_t off = 0; off < n;) {
		ssize_t w = write(s->fd, p + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		off += (size_t)w;
	}
	s->got += n;
	return 0;
}

/* Reads debugfs's output into s until EOF, ms or the sink's bound. */
static int sink_fill(int rd, struct dbg_sink *s, unsigned ms)
{
	int64_t deadline = clk_now_ms() + ms;
	char chunk[65536];

	for (;;) {
		struct pollfd p = { .fd = rd, .events = POLLIN };
		unsigned left = clk_ms_left(deadline);
		ssize_t n;
		int r;

		if (!left)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ETIMEDOUT;
		n = read(rd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : 0;
		r = sink_put(s, chunk, (size_t)n);
		if (r)
			return r < 0 ? r : 0;
	}
}

/* Runs `debugfs -R REQUEST IMAGE` into s, within ms: past it, or past the
 * sink's bound, debugfs is killed.  debugfs exits 0 even when a request
 * fails: callers check what arrived. */
static int debugfs_run(const char *image, const char *request, struct dbg_sink *s,
		       unsigned ms)
{
	int rd = -1, status = 0, r;
	pid_t pid = debugfs_spawn(image, request, &rd);

	if (pid < 0)
		return (int)pid;
	r = sink_fill(rd, s, ms);
	close(rd);
	if (r)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (s->fd < 0)
		s->buf[s->got] = '\0';
	if (!r && WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return -ENOENT;
	return r;
}

int disk_boot_probe(const char *image, char *err, size_t errlen)
{
	unsigned char m[4];
	struct stat st;
	ssize_t n;
	int fd = fs_open_regular(image, 0);	/* O_NONBLOCK: a FIFO cannot hang it */

	if (fd == -EINVAL) {
		int s = stat(image, &st) ? 0 : (int)(st.st_mode & S_IFMT);

		errbuf_set(err, errlen, "--disk %s is %s, not a disk image file: give the "
			    "image's file (raw or qcow2)", image,
			    s == S_IFIFO ? "a FIFO" : s == S_IFCHR ? "a character device" :
			    s == S_IFBLK ? "a block device" : s == S_IFDIR ? "a directory" :
			    s == S_IFSOCK ? "a socket" : "not a regular file");
		return -EINVAL;
	}
	if (fd < 0) {
		errbuf_set(err, errlen, "--disk %s: %s", image, strerror(-fd));
		return fd;
	}
	n = pread(fd, m, sizeof(m), 0);
	close(fd);
	return n == 4 && !memcmp(m, "QFI\xfb", 4);
}

/* A kernel release we accept from the image: short, no path characters. */
static int release_ok(const char *s, size_t len)
{
	if (!len || len > 64)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || strchr("._+-", s[i])))
			return 0;
	return 1;
}

/* One `ls -p` entry: /INODE/MODE/UID/GID/NAME/SIZE/ exactly (a name holds
 * no '/', so no line can pass for another); mode is octal. */
struct entry {
	char name[96];
	unsigned mode;
	uint64_t size;
};

static int entry_parse(const char *line, size_t len, struct entry *e)
{
	const char *f[8];
	size_t n = 0, nlen;
	char num[32], *end;

	for (size_t i = 0; i < len && n < 8; i++)
		if (line[i] == '/')
			f[n++] = line + i + 1;
	if (n != 7 || !len || line[0] != '/' || line[len - 1] != '/')
		return -EINVAL;
	nlen = (size_t)(f[5] - f[4]) - 1;
	if (!nlen || nlen >= sizeof(e->name) || (size_t)(f[2] - f[1]) - 1 >= sizeof(num) ||
	    (size_t)(f[6] - f[5]) - 1 >= sizeof(num))
		return -EINVAL;
	memcpy(e->name, f[4], nlen);
	e->name[nlen] = '\0';
	snprintf(num, sizeof(num), "%.*s", (int)(f[2] - f[1]) - 1, f[1]);
	e->mode = (unsigned)strtoul(num, &end, 8);
	if (!num[0] || *end)
		return -EINVAL;
	snprintf(num, sizeof(num), "%.*s", (int)(f[6] - f[5]) - 1, f[5]);
	errno = 0;
	e->size = strtoull(num, &end, 10);
	if (!num[0] || *end || num[0] == '-' || errno)
		return -EINVAL;
	return 0;
}

/* The listing's entry named name, or NULL. */
static const struct entry *entry_find(const struct entry *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].name, name))
			return &v[i];
	return NULL;
}

/* Why file name (entry e, or none) cannot be booted, or NULL if it can. */
static const char *file_why(const struct entry *e, uint64_t max, char *why, size_t len)
{
	if (!e)
		return "missing";
	if ((e->mode & 0170000) != 0100000)
		return "not a regular file";
	if (!e->size)
		return "empty";
	if (e->size > max) {
		snprintf(why, len, "%" PRIu64 " bytes, above the %" PRIu64 " MiB limit "
			 "(--disk-boot-max)", e->size, max >> 20);
		return why;
	}
	return NULL;
}

static int rel_cmp(const void *a, const void *b)
{
	return strverscmp(*(const char *const *)b, *(const char *const *)a);
}

/* The listing's entries (at most cap) and its releases (vmlinuz-REL). */
static size_t listing_parse(char *list, struct entry *v, size_t cap, const char **rels,
			    size_t *nr_rels)
{
	size_t n = 0;

	*nr_rels = 0;
	for (char *line = list, *nl; *line && n < cap; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			break;		/* cut at the buffer's end */
		if (entry_parse(line, (size_t)(nl - line), &v[n]) ||
		    entry_find(v, n, v[n].name))
			continue;	/* not an entry, or a name seen twice */
		if (!strncmp(v[n].name, "vmlinuz-", 8) && *nr_rels < DISK_BOOT_RELEASES * 4 &&
		    release_ok(v[n].name + 8, strlen(v[n].name + 8)))
			rels[(*nr_rels)++] = v[n].name + 8;
		n++;
	}
	qsort(rels, *nr_rels, sizeof(*rels), rel_cmp);
	return n;
}

/* Whether release rel is complete; why (for a note) if not. */
static int release_check(const struct entry *v, size_t n, const char *rel, uint64_t max,
			 struct disk_boot *b, char *why, size_t whylen)
{
	char kn[96], in[96], w[96];
	const struct entry *k, *i;
	const char *kw, *iw;

	snprintf(kn, sizeof(kn), "vmlinuz-%s", rel);
	snprintf(in, sizeof(in), "initrd.img-%s", rel);
	k = entry_find(v, n, kn);
	i = entry_find(v, n, in);
	kw = file_why(k, max, w, sizeof(w));
	if (kw) {
		snprintf(why, whylen, "%s is %s", kn, kw);
		return 0;
	}
	iw = file_why(i, max, w, sizeof(w));
	if (iw) {
		snprintf(why, whylen, "%s is %s", in, iw);
		return 0;
	}
	if (b->n < DISK_BOOT_RELEASES) {
		snprintf(b->r[b->n].rel, sizeof(b->r[b->n].rel), "%s", rel);
		b->r[b->n].ksize = k->size;
		b->r[b->n].isize = i->size;
		b->n++;
	}
	return 1;
}

int disk_boot_pick(char *list, const char *image, uint64_t max, struct disk_boot *b,
		   char *notes, size_t noteslen, char *err, size_t errlen)
{
	enum { CAP = 1024 };
	struct entry *v = malloc(CAP * sizeof(*v));
	const char *rels[DISK_BOOT_RELEASES * 4];
	char why[256], first[256] = "";
	size_t n, nr;

	if (!v)
		return -ENOMEM;
	n = listing_parse(list, v, CAP, rels, &nr);
	b->n = 0;
	for (size_t r = 0; r < nr; r++)
		release_check(v, n, rels[r], max, b, why, sizeof(why));
	/* the newer ones skipped, and why: the note names the one booted */
	for (size_t r = 0; r < nr; r++) {
		struct disk_boot scratch = { 0 };

		if (release_check(v, n, rels[r], max, &scratch, why, sizeof(why)))
			break;
		if (!first[0])
			snprintf(first, sizeof(first), "%s", why);
		if (b->n)
			backend_note(notes, noteslen, "--disk %s: kernel %s skipped (/boot/%s); "
				     "booting %s, the newest complete release", image, rels[r],
				     why, b->r[0].rel);
	}
	free(v);
	if (b->n)
		return 0;
	if (first[0])
		errbuf_set(err, errlen, "--disk %s: no complete kernel release in its /boot "
			    "(/boot/%s); give --kernel and --initrd, or --disk-boot-max SIZE "
			    "for a larger kernel", image, first);
	else
		errbuf_set(err, errlen, "%s: no /boot/vmlinuz-RELEASE with its "
			    "initrd.img-RELEASE in it (--disk reads an ext2/3/4 file system "
			    "over the whole disk, as 'make images-disk' makes; for other "
			    "images give --kernel and --initrd)", image);
	return -ENOENT;
}

int disk_boot_find(const char *image, uint64_t max, struct disk_boot *b, char *notes,
		   size_t noteslen, char *err, size_t errlen)
{
	struct dbg_sink s = { .buf = malloc(DEBUGFS_OUT_MAX), .len = DEBUGFS_OUT_MAX, .fd = -1 };
	int r;

	if (!s.buf)
		return -ENOMEM;
	r = debugfs_run(image, "ls -p /boot", &s, DEBUGFS_LIST_MS);
	if (r == -ENOENT)
		errbuf_set(err, errlen, "--disk needs debugfs (Debian package e2fsprogs) to "
			    "read the image's /boot, or give --kernel and --initrd");
	else if (r)
		errbuf_set(err, errlen, "--disk %s: cannot list its /boot with debugfs: %s",
			    image, strerror(-r));
	if (!r)
		r = disk_boot_pick(s.buf, image, max, b, notes, noteslen, err, errlen);
	free(s.buf);
	return r;
}

/* Copies the image's /boot/NAME (size bytes) to TO in dirfd: 0 or -errno,
 * what it says in why. */
static int copy_one(const char *image, const char *name, uint64_t size, int dirfd,
		    const char *to, char *why, size_t whylen)
{
	char req[160];
	struct dbg_sink s = { .want = size };
	int r;

	unlinkat(dirfd, to, 0);
	s.fd = safepath_create_file(dirfd, to, 0600, O_EXCL);
	if (s.fd < 0) {
		snprintf(why, whylen, "cannot create %s: %s", to, strerror(-s.fd));
		return s.fd;
	}
	snprintf(req, sizeof(req), "cat /boot/%s", name);
	r = debugfs_run(image, req, &s, DISK_BOOT_COPY_MS);
	if (close(s.fd) && !r)
		r = -errno;
	if (!r && s.got != size)
		r = -EIO;
	if (r == -ETIMEDOUT)
		snprintf(why, whylen, "/boot/%s not copied in %u s (debugfs killed)", name,
			 DISK_BOOT_COPY_MS / 1000);
	else if (r == -EFBIG)
		snprintf(why, whylen, "/boot/%s gave more than its %" PRIu64 " bytes (debugfs "
			 "killed)", name, size);
	else if (r == -EIO)
		snprintf(why, whylen, "/boot/%s gave %" PRIu64 " of its %" PRIu64 " bytes",
			 name, s.got, size);
	else if (r)
		snprintf(why, whylen, "/boot/%s: %s", name, strerror(-r));
	if (r)
		unlinkat(dirfd, to, 0);
	return r;
}

int disk_boot_extract(const char *image, const struct disk_boot *b, int dirfd, char *notes,
		      size_t noteslen, char *err, size_t errlen)
{
	char name[96], why[256] = "";
	int r = -ENOENT;

	for (unsigned i = 0; i < b->n; i++) {
		snprintf(name, sizeof(name), "vmlinuz-%s", b->r[i].rel);
		r = copy_one(image, name, b->r[i].ksize, dirfd, "vmlinuz", why, sizeof(why));
		if (!r) {
			snprintf(name, sizeof(name), "initrd.img-%s", b->r[i].rel);
			r = copy_one(image, name, b->r[i].isize, dirfd, "initrd.img", why,
				     sizeof(why));
		}
		if (!r)
			return (int)i;
		if (i + 1 < b->n)
			backend_note(notes, noteslen, "--disk %s: kernel %s skipped (%s); "
				     "trying %s", image, b->r[i].rel, why, b->r[i + 1].rel);
	}
	errbuf_set(err, errlen, "cannot copy a kernel and initrd out of %s (debugfs): %s",
		    image, why);
	return r;
}
