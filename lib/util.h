/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every opvm library needs and none owns: filling a caller's
 * error buffer, reading a hex digit, connecting to a unix socket,
 * creating a directory path, copying a stream, hashing a string.  Library code: nothing here prints.
 */
#ifndef OPVM_UTIL_H
#define OPVM_UTIL_H

#include <stddef.h>
#include <stdint.h>

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

/* mkdir -p, mode 0755: creates every missing directory of path; existing
 * ones are fine.  0 or -errno (-ENAMETOOLONG from PATH_MAX on, before any
 * directory is made). */
int util_mkdir_p(const char *path);

/* Whether s can name a guest's directory as it is: 1 to 64 of
 * [A-Za-z0-9._-], and not "." or "..".  (Names that come from a guest or
 * libvirt go through store_mangle() instead.) */
int util_valid_name(const char *s);

/* Copies in to out and (if >= 0) also to out2 until EOF or a read error,
 * retrying EINTR.  A failed or short write to either output is ignored and
 * copying goes on: for a console, a full disk or a closed stdout loses
 * text, and must not stall the guest writing into in. */
void util_copy_stream(int in, int out, int out2);

/* A 64-bit FNV-1a-style hash of the NUL-terminated s, for in-memory hash
 * tables (report, export, symres).  Not for anything stored: the store's
 * names use their own, fixed hash. */
uint64_t util_hash_str(const char *s);

/* Opens path read-only for a report: O_NONBLOCK (a FIFO planted where a
 * file was expected must not hang the reader), O_NOFOLLOW, O_CLOEXEC,
 * O_NOCTTY, and only a regular file (-EINVAL otherwise, -ELOOP for a
 * symlink).  The returned fd is blocking again.  The fd, or -errno. */
int util_open_regular(const char *path);

/* Copies the NUL-terminated s into out[outlen] for text output: bytes
 * that would break a line or a column (newline, tab), drive a terminal
 * (other controls, DEL, C1) or are not UTF-8 become \n, \t, \xNN, and a
 * backslash becomes \\; valid UTF-8 text is kept.  Cut at outlen, never
 * inside an escape or a character.  For every string that came from a
 * guest (or a file a guest wrote).  Returns out. */
const char *util_text_escape(char *out, size_t outlen, const char *s);

/* Length of the UTF-8 character at s (at most avail bytes): 1 for ASCII
 * but NUL, 2-4 for a valid multibyte character that is not a C1 control,
 * 0 for anything else (overlongs, surrogates, truncated). */
size_t util_utf8_char(const char *s, size_t avail);

/*
 * Counters saturate at UTIL_SATURATED instead of wrapping.  session.json
 * holds signed 64-bit integers, so a saturated counter is written there as
 * INT64_MAX and read back as UTIL_SATURATED (util_count_from_json()).
 */
#define UTIL_SATURATED		UINT64_MAX

static inline uint64_t util_sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_add_overflow(a, b, &r) ? UTIL_SATURATED : r;
}

/* A counter as session.json stores it (INT64_MAX when saturated), and
 * back. */
static inline int64_t util_count_to_json(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

static inline uint64_t util_count_from_json(int64_t v)
{
	return v == INT64_MAX ? UTIL_SATURATED : v < 0 ? 0 : (uint64_t)v;
}

/* "123", or "saturated" for UTIL_SATURATED.  Returns out. */
const char *util_fmt_count(char *out, size_t outlen, uint64_t v);

#endif /* OPVM_UTIL_H */
