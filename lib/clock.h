/* SPDX-License-Identifier: MIT */
/*
 * The clocks: monotonic time for spans and deadlines, wall-clock time for
 * names.  (The prefix is clk_: POSIX reserves clock_ to <time.h>.)
 */
#ifndef OPVM_CLOCK_H
#define OPVM_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds and in milliseconds.  Signed, so that
 * "deadline - now" goes negative when a deadline has passed.  Inline: the
 * samplers read the clock on their per-sample path. */
static inline int64_t clk_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t clk_now_ms(void)
{
	return clk_now_ns() / 1000000;
}

/* Wall-clock time (CLOCK_REALTIME) in Unix milliseconds: what names a
 * stored window (host/collect/store.h), never what measures a span. */
static inline int64_t clk_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left until deadline_ms (clk_now_ms() clock): 0 once it
 * has passed, for the timeout of a step of a longer exchange. */
unsigned clk_ms_left(int64_t deadline_ms);

#endif /* OPVM_CLOCK_H */
