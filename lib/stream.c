// SPDX-License-Identifier: MIT
/*
 * Copying a stream (lib/stream.h).
 */
#include <errno.h>
#include <unistd.h>

#include "lib/stream.h"

/* Feeds n bytes of buf to line() a line at a time (used: bytes kept). */
static void copy_lines(const char *buf, size_t n, char *text, size_t *used,
		       void (*line)(void *arg, const char *text), void *arg)
{
	for (size_t i = 0; i < n; i++) {
		if (buf[i] != '\n' && *used == STREAM_LINE_MAX - 1) {
			text[*used] = '\0';	/* a cut: the byte starts the next piece */
			line(arg, text);
			*used = 0;
		}
		if (buf[i] == '\n') {
			text[*used] = '\0';
			line(arg, text);
			*used = 0;
		} else if (buf[i] != '\r') {
			text[(*used)++] = buf[i];
		}
	}
}

void stream_copy(int in, int out, int out2,
		      void (*line)(void *arg, const char *text), void *arg)
{
	char buf[4096], text[STREAM_LINE_MAX];
	size_t used = 0;

	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (out >= 0 && write(out, buf, (size_t)n) != n) {
			/* lost text, not a stalled guest */
		}
		if (out2 >= 0 && write(out2, buf, (size_t)n) != n) {
			/* likewise */
		}
		if (line)
			copy_lines(buf, (size_t)n, text, &used, line, arg);
	}
}
