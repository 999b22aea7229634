/* SPDX-License-Identifier: MIT */
/*
 * Little-endian loads from unaligned bytes (guest memory read as bytes).
 */
#ifndef OPVM_BYTES_H
#define OPVM_BYTES_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t bytes_le64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static inline uint32_t bytes_le32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

#endif /* OPVM_BYTES_H */
