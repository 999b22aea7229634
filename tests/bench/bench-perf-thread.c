// SPDX-License-Identifier: MIT
/*
 * What host perf's cpu-clock sampling costs this machine on a plain thread,
 * with no VM around: the yardstick for perf-sample-cost (tests/bench/
 * perf-bench.sh), which measures the same sampling on a KVM vCPU thread,
 * where each sample also takes the guest out to the host and back.
 *
 * The same fixed work runs unsampled and sampled at 1000 samples/s
 * (cpu-clock, IP|TID|TIME|CPU, a 64-page ring read at a watermark, as the
 * perf sampler does), alternating, 5 rounds; the cost per sample is the
 * extra CPU time of the median sampled round over the median unsampled one,
 * divided by its samples.  Prints
 *   perf-sample-cost-host-thread: N ns
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS		5
#define PAGES		64
#define WORK		400000000ull

static volatile uint64_t sink;

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One eighth of a round's work, the same sampled or not. */
static void work(void)
{
	uint64_t x = sink;

	for (uint64_t i = 0; i < WORK / 8; i++)
		x = x * 6364136223846793005ull + i;
	sink = x;
}

/* Samples in the ring (records of type PERF_RECORD_SAMPLE), consumed. */
static uint64_t drain(struct perf_event_mmap_page *mp)
{
	uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = mp->data_tail, n = 0;
	const char *data = (const char *)mp + mp->data_offset;

	while (tail < head) {
		const struct perf_event_header *h =
			(const void *)(data + (tail % mp->data_size));

		n += h->type == PERF_RECORD_SAMPLE;
		tail += h->size ? h->size : 8;
	}
	__atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
	return n;
}

/* One sampled round: CPU time in *ns, samples returned (or -errno). */
static long sampled_round(uint64_t *ns)
{
	struct perf_event_attr a;
	struct perf_event_mmap_page *mp;
	size_t len = (size_t)(PAGES + 1) * (size_t)sysconf(_SC_PAGESIZE);
	uint64_t t0, samples;
	int fd;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.sample_period = 1000000;		/* 1 ms: 1000 samples/s */
	a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
	a.disabled = 1;
	a.watermark = 1;
	a.wakeup_watermark = 256 * 40;
	fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	mp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mp == MAP_FAILED) {
		close(fd);
		return -ENOMEM;
	}
	t0 = cpu_ns();
	ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	/* in slices, draining between them as the sampler's thread would */
	samples = 0;
	for (int i = 0; i < 8; i++) {
		work();
		samples += drain(mp);
	}
	ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
	*ns = cpu_ns() - t0;
	samples += drain(mp);
	munmap(mp, len);
	close(fd);
	return (long)samples;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(void)
{
	uint64_t un[ROUNDS], sa[ROUNDS], nsamp[ROUNDS];

	for (int r = 0; r < ROUNDS; r++) {
		uint64_t t0 = cpu_ns();
		long n;

		for (int i = 0; i < 8; i++)
			work();
		un[r] = cpu_ns() - t0;
		n = sampled_round(&sa[r]);
		if (n <= 0) {
			printf("SKIP: perf-sample-cost-host-thread: perf_event_open: %s\n",
			       n ? strerror((int)-n) : "no samples");
			return 0;
		}
		nsamp[r] = (uint64_t)n;
	}
	qsort(un, ROUNDS, sizeof(un[0]), cmp_u64);
	qsort(sa, ROUNDS, sizeof(sa[0]), cmp_u64);
	qsort(nsamp, ROUNDS, sizeof(nsamp[0]), cmp_u64);
	printf("perf-sample-cost-host-thread: %.0f ns\n",
	       sa[ROUNDS / 2] > un[ROUNDS / 2] ?
	       (double)(sa[ROUNDS / 2] - un[ROUNDS / 2]) / (double)nsamp[ROUNDS / 2] : 0.0);
	printf("# perf-sample-cost-host-thread: median round %.3f s unsampled, %.3f s "
	       "sampled with %llu samples\n", un[ROUNDS / 2] / 1e9, sa[ROUNDS / 2] / 1e9,
	       (unsigned long long)nsamp[ROUNDS / 2]);
	return 0;
}
