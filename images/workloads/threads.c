/* SPDX-License-Identifier: MIT */
/*
 * threads [seconds]: four threads, each spinning in its own function
 * thread_fn_0..3 for the same time.  Known answer: each thread's tid and
 * function, about 25 % of this process's samples each (given enough vCPUs).
 */
#include <pthread.h>
#include "common.h"

static double secs;
static volatile uint64_t sinks[4][8];

static void spin(int idx)
{
	uint64_t end = now_ns() + (uint64_t)(secs * 1e9);
	uint64_t x = 1;

	do {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ull + (uint64_t)i;
		sinks[idx][0] = x;
	} while (now_ns() < end);
}

#define THREAD_FN(n)							\
static void * __attribute__((noinline)) thread_fn_##n(void *arg)	\
{									\
	TRUTH("threads pid=%d tid=%d fn=thread_fn_" #n "\n",		\
	      getpid(), opvm_gettid());					\
	spin(n);							\
	return arg;							\
}
THREAD_FN(0)
THREAD_FN(1)
THREAD_FN(2)
THREAD_FN(3)

int main(int argc, char **argv)
{
	void *(*fns[4])(void *) = { thread_fn_0, thread_fn_1, thread_fn_2,
				    thread_fn_3 };
	pthread_t th[4];

	secs = arg_double(argc, argv, 1, 3.0);
	TRUTH("threads pid=%d seconds=%.1f nthreads=4\n", getpid(), secs);
	for (int i = 0; i < 4; i++)
		if (pthread_create(&th[i], NULL, fns[i], NULL)) {
			perror("pthread_create");
			return 1;
		}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	TRUTH("threads done\n");
	return 0;
}
