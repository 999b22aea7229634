// SPDX-License-Identifier: MIT
/*
 * What host perf's cpu-clock sampling costs this machine on a plain thread,
 * with no VM around: the yardstick for perf-sample-cost (tests/bench/
 * perf-bench.sh), which measures the same sampling on a KVM vCPU thread,
 * where each sample also takes the guest out to the host and back.
 *
 * The same fixed work runs unsampled and sampled at 1000 samples/s
 * (cpu-clock, IP|TID|TIME|CPU, a 64-page ring read at a watermark, as the
 * perf sampler does), in blocks of four rounds in ABBA order (sampled,
 * unsampled, unsampled, sampled: a block cancels a linear drift of the
 * host's load).  Each block gives one estimate: the extra CPU time of its
 * two sampled rounds over its two unsampled ones, divided by their samples.
 * The extra time is a few milliseconds in a second of work, below one
 * round's noise on a shared host, so one difference can come out at zero
 * or below; the figure is the median of the blocks with the sign test's
 * distribution-free interval (order statistics, coverage printed), the
 * point estimate clamped at 0 (sampling cannot make the work cheaper).
 * Prints
 *   perf-sample-cost-host-thread: N ns (95 % interval [LO, HI] ns, ...)
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

#define BLOCKS		10	/* of four rounds; the sign test's 95 % needs 6 */
#define SLICES		4	/* work() calls a round: ~0.3 s */
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
	for (int i = 0; i < SLICES; i++) {
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

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static uint64_t unsampled_round(void)
{
	uint64_t t0 = cpu_ns();

	for (int i = 0; i < SLICES; i++)
		work();
	return cpu_ns() - t0;
}

/* P(X <= k) for X ~ Binomial(n, 1/2). */
static double binom_cdf(int n, int k)
{
	double p = 0, c = 1;

	for (int i = 0; i <= k; i++) {
		p += c;
		c = c * (n - i) / (i + 1);
	}
	return p / (double)(1ull << n);
}

int main(void)
{
	double est[BLOCKS], cover;
	uint64_t samples = 0;
	int k = 1;

	for (int b = 0; b < BLOCKS; b++) {
		uint64_t s1, s2, u;
		long n1 = sampled_round(&s1), n2;

		u = unsampled_round();
		u += unsampled_round();
		n2 = n1 > 0 ? sampled_round(&s2) : n1;
		if (n1 <= 0 || n2 <= 0) {
			long n = n1 <= 0 ? n1 : n2;

			printf("SKIP: perf-sample-cost-host-thread: perf_event_open: %s\n",
			       n ? strerror((int)-n) : "no samples");
			return 0;
		}
		est[b] = ((double)(s1 + s2) - (double)u) / (double)(n1 + n2);
		samples += (uint64_t)(n1 + n2);
	}
	qsort(est, BLOCKS, sizeof(est[0]), cmp_dbl);
	/* the widest-coverage-at-least-95 % ranks k and BLOCKS + 1 - k */
	while (binom_cdf(BLOCKS, k) <= 0.025)
		k++;
	cover = 1 - 2 * binom_cdf(BLOCKS, k - 1);
	{
		double med = (est[(BLOCKS - 1) / 2] + est[BLOCKS / 2]) / 2;

		printf("perf-sample-cost-host-thread: %.0f ns (%.1f %% interval [%.0f, %.0f] ns, "
		       "%d blocks)\n", med > 0 ? med : 0.0, cover * 100, est[k - 1],
		       est[BLOCKS - k], BLOCKS);
		printf("# perf-sample-cost-host-thread: raw median %.0f ns, %llu samples in the "
		       "sampled rounds\n", med, (unsigned long long)samples);
	}
	return 0;
}
