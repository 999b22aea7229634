// SPDX-License-Identifier: MIT
/*
 * Growing arrays (lib/array.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/array.h"

int array_grow(void *arrp, size_t *cap, size_t need, size_t size, size_t min_cap)
{
	size_t ncap = *cap ? *cap : (min_cap ? min_cap : 1);
	void *arr, *n;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
	if (size && ncap > SIZE_MAX / size)
		ncap = need;	/* the doubling overshot: exactly what is needed */
	if (size && ncap > SIZE_MAX / size)
		return -EOVERFLOW;
	/* arrp points at any object pointer: copied, not cast, to stay
	 * within C's aliasing rules */
	memcpy(&arr, arrp, sizeof(arr));
	n = realloc(arr, size ? ncap * size : 1);
	if (!n)
		return -ENOMEM;
	memcpy(arrp, &n, sizeof(n));
	*cap = ncap;
	return 0;
}
