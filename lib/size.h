/* SPDX-License-Identifier: MIT */
/*
 * Sizes with units, as a user writes them ("64M", "2G", "512k").
 */
#ifndef OPVM_SIZE_H
#define OPVM_SIZE_H

#include <stdint.h>

/* Parses a count ("4096") or, with units, a size ("64M", "2G", "512k":
 * powers of 1024).  0 or -EINVAL (not a number, a bad unit, overflow). */
int size_parse(const char *s, uint64_t *out);

#endif /* OPVM_SIZE_H */
