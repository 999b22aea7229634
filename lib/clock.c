// SPDX-License-Identifier: MIT
/*
 * The clocks (lib/clock.h).
 */
#include <limits.h>

#include "lib/clock.h"

unsigned clk_ms_left(int64_t deadline_ms)
{
	int64_t left = deadline_ms - clk_now_ms();

	return left <= 0 ? 0 : left > UINT_MAX ? UINT_MAX : (unsigned)left;
}
