// SPDX-License-Identifier: MIT
/* Unit tests for lib/errbuf: errbuf_set(): bounded, terminated messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/errbuf.h"

static void test_seterr(void **state)
{
	char buf[8];

	errbuf_set(NULL, 0, "ignored %d", 1);
	memset(buf, 'x', sizeof(buf));
	errbuf_set(buf, 0, "ignored");
	assert_int_equal(buf[0], 'x');
	errbuf_set(buf, sizeof(buf), "%s:%u", "abc", 42u);
	assert_string_equal(buf, "abc:42");
	errbuf_set(buf, sizeof(buf), "a longer message");
	assert_string_equal(buf, "a longe");	/* truncated, terminated */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seterr),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
