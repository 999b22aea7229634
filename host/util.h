/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every opvm library needs and none owns: filling a caller's
 * error buffer, reading a hex digit, connecting to a unix socket.  Library code: nothing here prints.
 */
#ifndef OPVM_UTIL_H
#define OPVM_UTIL_H

#include <stddef.h>

/* Formats into err[errlen] (truncating); err may be NULL or errlen 0, then
 * nothing is written.  For the "char *err, size_t errlen" (or why/whylen)
 * out-parameters that library calls fill with a message for the user. */
void util_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The value of hex digit c (either case), or -1 if c is not one. */
int util_hexval(int c);

/* A connected SOCK_STREAM | SOCK_CLOEXEC socket to the unix socket at
 * path: the fd, or -errno (-ENAMETOOLONG if path does not fit sun_path). */
int util_connect_unix(const char *path);

#endif /* OPVM_UTIL_H */
