// SPDX-License-Identifier: MIT
/* Unit tests for lib/procfs: procfs_thread_of() and procfs_thread_tgid(). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/procfs.h"

/* A thread that tells its id and waits until told to end. */
static pid_t other_tid;
static int told[2], ended[2];	/* the thread's "here", the test's "end" */

static void *tell_tid(void *arg)
{
	char c;

	(void)arg;
	other_tid = gettid();
	if (write(told[1], "t", 1) != 1 || read(ended[0], &c, 1) != 1)
		return NULL;
	return NULL;
}

static void test_thread_of(void **state)
{
	pthread_t th;
	char c;

	(void)state;
	assert_int_equal(pipe(told), 0);
	assert_int_equal(pipe(ended), 0);
	assert_int_equal(pthread_create(&th, NULL, tell_tid, NULL), 0);
	assert_int_equal(read(told[0], &c, 1), 1);
	assert_int_equal(procfs_thread_of(getpid(), getpid()), 1);
	assert_int_equal(procfs_thread_of(getpid(), other_tid), 1);
	assert_int_equal(procfs_thread_tgid(other_tid), getpid());
	/* pid 1's threads are not ours, nor ours its */
	assert_int_equal(procfs_thread_of(getpid(), 1), 0);
	assert_int_equal(procfs_thread_of(1, other_tid), 0);
	assert_int_equal(procfs_thread_of(getpid(), 0), 0);
	assert_true(procfs_thread_of(INT32_MAX, getpid()) < 0);	/* no such process */
	assert_int_equal(write(ended[1], "x", 1), 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	for (int i = 0; i < 2; i++) {
		close(told[i]);
		close(ended[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thread_of),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
