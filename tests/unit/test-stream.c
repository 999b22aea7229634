// SPDX-License-Identifier: MIT
/* Unit tests for lib/stream: stream_copy(): copies, lines, a closed output. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/stream.h"

struct lines {
	char text[4][STREAM_LINE_MAX];
	int n;
};

static void line_cb(void *arg, const char *text)
{
	struct lines *l = arg;

	if (l->n < 4)
		snprintf(l->text[l->n], STREAM_LINE_MAX, "%s", text);
	l->n++;
}

static void test_copy_stream(void **state)
{
	int in[2], out[2], out2[2];
	char buf[64];

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out2, O_CLOEXEC), 0);
	assert_int_equal(write(in[1], "console", 7), 7);
	close(in[1]);
	stream_copy(in[0], out[1], out2[1], NULL, NULL);
	assert_int_equal(read(out[0], buf, sizeof(buf)), 7);
	assert_memory_equal(buf, "console", 7);
	assert_int_equal(read(out2[0], buf, sizeof(buf)), 7);
	assert_memory_equal(buf, "console", 7);
	close(in[0]);

	/* A closed output is ignored: copying goes on to the end. */
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(write(in[1], "more", 4), 4);
	close(in[1]);
	close(out2[0]);
	signal(SIGPIPE, SIG_IGN);
	stream_copy(in[0], out2[1], out[1], NULL, NULL);
	assert_int_equal(read(out[0], buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "more", 4);
	close(in[0]);
	close(out[0]);
	close(out[1]);
	close(out2[1]);
}

/* Lines as the console's panic watch sees them: CRs gone, a long line
 * cut at the bound, a last line without its newline never handed over. */
static void test_copy_stream_lines(void **state)
{
	char long_line[600];
	struct lines l = { .n = 0 };
	int in[2], out[2];

	(void)state;
	memset(long_line, 'x', sizeof(long_line));
	long_line[sizeof(long_line) - 1] = '\n';
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(write(in[1], "one\r\ntwo\n", 9), 9);
	assert_int_equal(write(in[1], long_line, sizeof(long_line)), (ssize_t)sizeof(long_line));
	assert_int_equal(write(in[1], "tail", 4), 4);
	close(in[1]);
	stream_copy(in[0], out[1], -1, line_cb, &l);
	assert_string_equal(l.text[0], "one");
	assert_string_equal(l.text[1], "two");
	assert_int_equal(strlen(l.text[2]), STREAM_LINE_MAX - 1);
	assert_int_equal(strlen(l.text[3]), STREAM_LINE_MAX - 1);
	assert_int_equal(l.n, 5);	/* 599 x: 255 + 255 + 89, none lost */
	close(in[0]);
	close(out[0]);
	close(out[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copy_stream),
		cmocka_unit_test(test_copy_stream_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
