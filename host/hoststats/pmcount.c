// SPDX-License-Identifier: MIT
/*
 * Counting perf events per vCPU thread.  See pmcount.h.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "host/hoststats/pmcount.h"

struct pmcount {
	int fd[PMC_NR];
};

static const uint64_t hw_config[PMC_NR] = {
	[PMC_CYCLES] = PERF_COUNT_HW_CPU_CYCLES,
	[PMC_INSTRUCTIONS] = PERF_COUNT_HW_INSTRUCTIONS,
	[PMC_LLC_MISSES] = PERF_COUNT_HW_CACHE_MISSES,
};

static const uint64_t sw_config[PMC_NR] = {
	[PMC_CYCLES] = PERF_COUNT_SW_TASK_CLOCK,
	[PMC_INSTRUCTIONS] = PERF_COUNT_SW_CONTEXT_SWITCHES,
	[PMC_LLC_MISSES] = PERF_COUNT_SW_PAGE_FAULTS,
};

void pmcount_close(struct pmcount *p)
{
	if (!p)
		return;
	for (int i = PMC_NR - 1; i >= 0; i--)
		if (p->fd[i] >= 0)
			close(p->fd[i]);
	free(p);
}

struct pmcount *pmcount_open(int tid, enum pmc_kind kind)
{
	struct pmcount *p = malloc(sizeof(*p));
	int err = 0;

	if (!p)
		return NULL;
	for (int i = 0; i < PMC_NR; i++)
		p->fd[i] = -1;
	for (int i = 0; i < PMC_NR; i++) {
		struct perf_event_attr a;

		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.type = kind == PMC_HARDWARE ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE;
		a.config = kind == PMC_HARDWARE ? hw_config[i] : sw_config[i];
		a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED |
				PERF_FORMAT_TOTAL_TIME_RUNNING;
		/* Guest mode only: what the guest's code costs, not QEMU's. */
		a.exclude_host = kind == PMC_HARDWARE;
		p->fd[i] = (int)syscall(SYS_perf_event_open, &a, tid, -1, i ? p->fd[0] : -1,
					PERF_FLAG_FD_CLOEXEC);
		if (p->fd[i] < 0) {
			err = errno;
			break;
		}
	}
	if (err) {
		pmcount_close(p);
		errno = err;
		return NULL;
	}
	return p;
}

int pmcount_read(struct pmcount *p, uint64_t v[PMC_NR])
{
	struct {
		uint64_t nr, enabled, running, val[PMC_NR];
	} g;
	ssize_t n = read(p->fd[0], &g, sizeof(g));

	if (n < 0)
		return -errno;
	if ((size_t)n < sizeof(g) || g.nr != PMC_NR)
		return -EIO;
	for (int i = 0; i < PMC_NR; i++) {
		/* Multiplexed: extrapolate over the time the group was enabled. */
		if (g.running && g.running < g.enabled)
			v[i] = (uint64_t)((double)g.val[i] * (double)g.enabled / (double)g.running);
		else
			v[i] = g.val[i];
	}
	return 0;
}
