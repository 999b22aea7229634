/* SPDX-License-Identifier: MIT */
/*
 * Signals: what every long-running command does with SIGINT and SIGTERM,
 * and helper threads that take none, so that a signal interrupts the
 * blocking calls of the threads that wait for it.
 */
#ifndef OPVM_SIGNALS_H
#define OPVM_SIGNALS_H

#include <pthread.h>
#include <signal.h>

/* SIGINT and SIGTERM set *flag (the handler does nothing else) and
 * interrupt a blocking call (no SA_RESTART), so the command's loop sees
 * the flag.  One flag per process: a second call replaces the first.
 * (Whether SIGPIPE is ignored is each command's choice: a filter may die
 * of it, a session must not.) */
void signals_stop_on(volatile sig_atomic_t *flag);

/* pthread_create() of a thread that takes no signal: they stay with the
 * caller's threads, whose blocking calls they are to interrupt.  0 or an
 * error number (as pthread_create()). */
int signals_thread_start(pthread_t *th, void *(*fn)(void *), void *arg);

#endif /* OPVM_SIGNALS_H */
