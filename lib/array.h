/* SPDX-License-Identifier: MIT */
/*
 * Arrays: the element count of a fixed-size array.  One definition for the
 * tree, so a table's size is never written out by hand.
 */
#ifndef OPVM_ARRAY_H
#define OPVM_ARRAY_H

#include <stddef.h>

/* The number of elements of array a (an array, never a pointer: gcc's
 * -Wsizeof-pointer-div warns where a pointer is passed). */
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif /* OPVM_ARRAY_H */
