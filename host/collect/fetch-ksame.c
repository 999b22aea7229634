// SPDX-License-Identifier: MIT
/*
 * A kernel-symbol transfer held against the kallsyms the session already
 * has (host/collect/fetch-priv.h), so that one that repeats it writes
 * nothing.
 *
 * A sampler started again for a guest whose <guest>/kallsyms the session
 * holds (the exporter restarted, or its sampler for the guest) is sent the
 * same table again: introspection decodes vmlinux's from guest memory at
 * each start, the relay sends the modules' walk.  Written to kallsyms.part
 * beside the old file, it took the file's size again until the rename: in
 * the exporter's store, past --max-store.  So each record's lines are
 * compared with the next stored lines of their kind (vmlinux's, or a
 * module's: "\t[" in the line, as the merge tells them apart); the part
 * file is made only at the first line that differs (or at the end, when
 * the stored file has more), from the stored lines that matched.  Two
 * streams over the file, one a kind, read a line at a time: memory stays
 * bounded whatever the file's size.  The file is the host's, but its
 * lines are the guest's: a line not of the writer's shape (too long, no
 * newline) ends the match.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/collect/fetch-priv.h"
#include "lib/fs.h"

struct ksame {
	FILE *in[2];			/* [0] vmlinux's lines, [1] the modules' */
	uint64_t matched[2];		/* lines of each kind that matched */
	char line[FETCH_KLINE_MAX + 2];
};

/* Index of a kind (FETCH_KIND_*) in the arrays above. */
static unsigned kind_index(unsigned kind)
{
	return kind == FETCH_KIND_MODULES;
}

static bool line_is_module(const char *line)
{
	return strstr(line, "\t[") != NULL;
}

/* The stored file once more, as a stream; NULL if it is not there. */
static FILE *stored_open(int gfd)
{
	int fd = gfd < 0 ? -EBADF : fs_openat_regular(gfd, "kallsyms", O_NOFOLLOW);
	FILE *in = fd >= 0 ? fdopen(fd, "r") : NULL;

	if (!in && fd >= 0)
		close(fd);
	return in;
}

struct ksame *ksame_open(int gfd)
{
	struct ksame *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->in[0] = stored_open(gfd);
	s->in[1] = s->in[0] ? stored_open(gfd) : NULL;
	if (!s->in[1]) {
		ksame_close(s);
		return NULL;
	}
	return s;
}

void ksame_close(struct ksame *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < 2; i++)
		if (s->in[i])
			fclose(s->in[i]);
	free(s);
}

/* The next stored line of kind i into s->line: its length, 0 at the end,
 * -1 for a line the writer did not make (it matches nothing). */
static long next_line(struct ksame *s, unsigned i)
{
	while (fgets(s->line, sizeof(s->line), s->in[i])) {
		size_t n = strlen(s->line);

		if (!n || s->line[n - 1] != '\n')
			return -1;
		if (line_is_module(s->line) == (i == 1))
			return (long)n;
	}
	return 0;
}

size_t ksame_match(struct ksame *s, unsigned kind, const char *text, size_t n)
{
	unsigned i = kind_index(kind);
	size_t done = 0;

	while (done < n) {
		const char *nl = memchr(text + done, '\n', n - done);
		size_t len = nl ? (size_t)(nl - (text + done)) + 1 : n - done;
		long got = next_line(s, i);

		if (got <= 0 || (size_t)got != len || memcmp(s->line, text + done, len))
			break;
		s->matched[i]++;
		done += len;
	}
	return done;
}

bool ksame_more(struct ksame *s, unsigned kinds)
{
	for (unsigned i = 0; i < 2; i++)
		if ((kinds & (i ? FETCH_KIND_MODULES : FETCH_KIND_VMLINUX)) && next_line(s, i))
			return true;
	return false;
}

int ksame_copy(struct ksame *s, int fd)
{
	uint64_t left[2] = { s->matched[0], s->matched[1] };

	rewind(s->in[0]);
	while ((left[0] || left[1]) && fgets(s->line, sizeof(s->line), s->in[0])) {
		size_t n = strlen(s->line);
		unsigned i = line_is_module(s->line);

		if (!n || s->line[n - 1] != '\n' || !left[i])
			continue;	/* matched nothing, or past what matched */
		if (write(fd, s->line, n) != (ssize_t)n)
			return -EIO;
		left[i]--;
	}
	return left[0] || left[1] ? -EIO : 0;	/* the file changed under us */
}
