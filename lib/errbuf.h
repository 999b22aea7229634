/* SPDX-License-Identifier: MIT */
/*
 * Errors into a caller's buffer: the "char *err, size_t errlen" (or
 * why/whylen) out-parameters that library calls fill with a message for
 * the user.  Library code never prints; main() does, with this text.
 */
#ifndef OPVM_ERRBUF_H
#define OPVM_ERRBUF_H

#include <stddef.h>

/* Formats into err[errlen] (truncating); err may be NULL or errlen 0, then
 * nothing is written. */
void errbuf_set(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* OPVM_ERRBUF_H */
