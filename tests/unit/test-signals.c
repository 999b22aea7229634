// SPDX-License-Identifier: MIT
/* Unit tests for lib/signals: signals_thread_start(): the thread's signal mask. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/signals.h"

static void *mask_of_thread(void *arg)
{
	pthread_sigmask(SIG_BLOCK, NULL, (sigset_t *)arg);
	return NULL;
}

/* signals_thread_start(): the thread blocks every signal (SIGINT and SIGTERM
 * stay with the caller), the caller's own mask is as it was. */
static void test_thread_start(void **state)
{
	sigset_t before, after, in;
	pthread_t th;

	(void)state;
	sigemptyset(&in);
	pthread_sigmask(SIG_BLOCK, NULL, &before);
	assert_int_equal(signals_thread_start(&th, mask_of_thread, &in), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	pthread_sigmask(SIG_BLOCK, NULL, &after);
	assert_true(sigismember(&in, SIGINT) == 1 && sigismember(&in, SIGTERM) == 1 &&
		    sigismember(&in, SIGPIPE) == 1 && sigismember(&in, SIGUSR1) == 1);
	for (int sig = 1; sig < NSIG; sig++)
		assert_int_equal(sigismember(&before, sig), sigismember(&after, sig));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thread_start),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
