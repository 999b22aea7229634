// SPDX-License-Identifier: MIT
/* Unit tests for lib/text: guest text: UTF-8 repair, escapes, wrapped paragraphs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/text.h"

/* Invalid bytes become U+FFFD, valid text and controls stay, the cut is at
 * a character: the result is always valid UTF-8. */
static void test_utf8_fix(void **state)
{
	char out[64], small[5];

	assert_string_equal(text_utf8_fix(out, sizeof(out), "caf\xc3\xa9"), "caf\xc3\xa9");
	assert_string_equal(text_utf8_fix(out, sizeof(out), "a\xff\x1b\n"),
			    "a\xef\xbf\xbd\x1b\n");
	assert_string_equal(text_utf8_fix(out, sizeof(out), "\xc3"), "\xef\xbf\xbd");
	assert_true(text_utf8_valid(text_utf8_fix(out, sizeof(out), "\xed\xa0\x80x\xc2\x85")));
	assert_string_equal(text_utf8_fix(small, sizeof(small), "ab\xff"), "ab");
	assert_string_equal(text_utf8_fix(small, sizeof(small), "\xff\xff"), "\xef\xbf\xbd");
	assert_string_equal(text_utf8_fix(out, 1, "abc"), "");
}

/* Guest strings for text output: layout and terminal bytes escaped,
 * UTF-8 kept, cut on a boundary. */
static void test_text_escape(void **state)
{
	char out[64], small[8];

	assert_string_equal(text_escape(out, sizeof(out), "plain /usr/bin/x"), "plain /usr/bin/x");
	assert_string_equal(text_escape(out, sizeof(out), "a\nb\tc\\d"), "a\\nb\\tc\\\\d");
	assert_string_equal(text_escape(out, sizeof(out), "\x1b[2J\x7f"), "\\x1b[2J\\x7f");
	/* UTF-8 kept; C1 controls, overlongs, surrogates, stray bytes not */
	assert_string_equal(text_escape(out, sizeof(out), "caf\xc3\xa9 \xe2\x82\xac"),
			    "caf\xc3\xa9 \xe2\x82\xac");
	assert_string_equal(text_escape(out, sizeof(out), "\xc2\x9b" "1m"), "\\xc2\\x9b1m");
	assert_string_equal(text_escape(out, sizeof(out), "\xc0\xaf\xed\xa0\x80\xff"),
			    "\\xc0\\xaf\\xed\\xa0\\x80\\xff");
	assert_string_equal(text_escape(out, sizeof(out), "\xe2\x82"), "\\xe2\\x82");
	/* never cut inside an escape or a character */
	assert_string_equal(text_escape(small, sizeof(small), "abcd\n"), "abcd\\n");
	assert_string_equal(text_escape(small, sizeof(small), "abcdef\n"), "abcdef");
	assert_string_equal(text_escape(small, sizeof(small), "abcde\xe2\x82\xac"), "abcde");
	assert_string_equal(text_escape(out, sizeof(out), NULL), "");
	assert_int_equal(text_utf8_char("\xf0\x9f\x98\x80", 4), 4);
	assert_int_equal(text_utf8_char("\xf0\x9f\x98\x80", 3), 0);
	assert_int_equal(text_utf8_char("", 1), 0);
	assert_true(text_utf8_valid("caf\xc3\xa9\n\t"));
	assert_false(text_utf8_valid("caf\xc3"));
	assert_false(text_utf8_valid("\xff"));
	assert_true(text_utf8_valid(""));
}

/* Every line of a wrapped paragraph fits TEXT_COLUMNS, continuation lines
 * are indented, no word is split, and a word wider than a line stands
 * alone. */
static void test_wrapped(void **state)
{
	char *buf = NULL, word[100];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	const char *line;

	(void)state;
	assert_non_null(f);
	memset(word, 'x', 90);
	word[90] = '\0';
	text_fprintf_wrapped(f, 2, "warning: %s %s %s %s %s %s %s %s %s %s %s\nnext line",
			     "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta",
			     "theta", "iota", "kappa lambda mu nu xi omicron pi rho", word);
	fclose(f);
	assert_string_equal(buf,
		"warning: alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu\n"
		"  xi omicron pi rho\n"
		"  xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"
		"next line\n");
	for (line = buf; *line; line = strchr(line, '\n') + 1)
		assert_true(strchr(line, '\n') - line <= 80 || line[2] == 'x');
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8_fix),
		cmocka_unit_test(test_text_escape),
		cmocka_unit_test(test_wrapped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
