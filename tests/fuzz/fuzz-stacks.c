// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the stack table reader (store_stacks_read()): the
 * input is a session's stacks.def, read beside a valid stacks.cnt, as
 * `opvm report` reads a session directory it did not write.  Anything
 * malformed is -EBADMSG with a message; every frame handed out names a
 * string of the table.
 *
 * Seeds: a table the writer made (the first run writes one).
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/collect/store.h"

static char cur[256];

static int check_cb(const struct store_stack *s, void *arg)
{
	size_t *n = arg;

	if (!s->app || !s->nr || s->nr > STORE_STACKS_MAX_FRAMES || s->nr_events > 8)
		abort();
	for (unsigned i = 0; i < s->nr; i++)
		*n += strlen(s->frames[i].image) + s->frames[i].build_id_len;
	for (unsigned i = 0; i < s->nr_events; i++)
		*n += s->counts[i] & 1;
	return 0;
}

/* A real table once, for its stacks.cnt (and a seed). */
static void setup(void)
{
	static const struct store_event ev = { .name = "TIMER", .count = 1 };
	char dir[] = "/tmp/fuzz-stacks.XXXXXX";
	struct store_frame f[2] = { { .image = "vmlinux", .kernel = 1, .offset = 16 },
				    { .image = "/bin/sh", .offset = 4096 } };
	struct store *st;

	if (!mkdtemp(dir))
		abort();
	struct stacktab *t;

	st = store_open(dir, "g", &ev, 1, 0, 0);
	t = st ? store_stacks_open(st) : NULL;
	if (!t || store_stack_add(t, 0, "/bin/sh", f, 2))
		abort();
	store_stacks_close(t);
	store_close(st);
	snprintf(cur, sizeof(cur), "%s/guests/g/samples/current", dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[300], err[256] = "";
	size_t n = 0;
	int fd;

	if (!cur[0])
		setup();
	snprintf(path, sizeof(path), "%s/stacks.def", cur);
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	close(fd);
	int r = store_stacks_read(cur, check_cb, &n, err, sizeof(err));

	if (r && r != -EBADMSG && r != -ENOMEM)
		abort();
	if (r == -EBADMSG && !err[0])
		abort();
	return 0;
}
