/* SPDX-License-Identifier: MIT */
/* Median of the repetitions after the first (warm-up) one. */
#ifndef OPVM_WORKLOAD_MEDIAN_H
#define OPVM_WORKLOAD_MEDIAN_H

static inline double median_after_warmup(double *v, long n)
{
	long m = n > 1 ? n - 1 : n;
	double *w = n > 1 ? v + 1 : v;

	for (long i = 1; i < m; i++)
		for (long j = i; j > 0 && w[j - 1] > w[j]; j--) {
			double t = w[j];

			w[j] = w[j - 1];
			w[j - 1] = t;
		}
	return m % 2 ? w[m / 2] : (w[m / 2 - 1] + w[m / 2]) / 2;
}

#endif
