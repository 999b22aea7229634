/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every opvm library needs and none owns: filling a caller's
 * error buffer.  Library code: nothing here prints.
 */
#ifndef OPVM_UTIL_H
#define OPVM_UTIL_H

#include <stddef.h>

/* Formats into err[errlen] (truncating); err may be NULL or errlen 0, then
 * nothing is written.  For the "char *err, size_t errlen" (or why/whylen)
 * out-parameters that library calls fill with a message for the user. */
void util_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* OPVM_UTIL_H */
