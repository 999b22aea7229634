/* SPDX-License-Identifier: MIT */
/*
 * Hex digits: reading one, and bytes spelled as hex (a build-id's usual
 * spelling).
 */
#ifndef OPVM_HEX_H
#define OPVM_HEX_H

#include <stddef.h>
#include <stdint.h>

/* The value of hex digit c (either case), or -1 if c is not one. */
int hex_val(int c);

/* n bytes as 2n lower-case hex digits and a NUL into out[2n + 1]. */
void hex_encode(const uint8_t *b, size_t n, char *out);

#endif /* OPVM_HEX_H */
