// SPDX-License-Identifier: MIT
/*
 * Signals (lib/signals.h).
 */
#include <signal.h>

#include "lib/signals.h"

static volatile sig_atomic_t *stop_flag;

int signals_thread_start(pthread_t *th, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(th, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

static void on_stop_signal(int sig)
{
	(void)sig;
	if (stop_flag)
		*stop_flag = 1;
}

void signals_stop_on(volatile sig_atomic_t *flag)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };

	stop_flag = flag;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}
