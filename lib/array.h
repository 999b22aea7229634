/* SPDX-License-Identifier: MIT */
/*
 * Arrays: the element count of a fixed-size array, and arrays that grow.
 * One definition for the tree, so a table's size is never written out by
 * hand.
 */
#ifndef OPVM_ARRAY_H
#define OPVM_ARRAY_H

#include <stddef.h>

/* The number of elements of array a (an array, never a pointer: gcc's
 * -Wsizeof-pointer-div warns where a pointer is passed). */
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Makes room for need elements of size bytes in the array at *(void **)arrp
 * whose capacity is *cap: the capacity doubles (from min_cap when 0) until
 * it holds need.  0, -EOVERFLOW (need * size does not fit a size_t) or
 * -ENOMEM; on error the array and *cap are as they were.  ARRAY_GROW()
 * takes the array and its capacity themselves. */
int array_grow(void *arrp, size_t *cap, size_t need, size_t size, size_t min_cap);
#define ARRAY_GROW(arr, cap, need, min_cap) \
	array_grow(&(arr), &(cap), (need), sizeof(*(arr)), (min_cap))

#endif /* OPVM_ARRAY_H */
