/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every opvm library needs and none owns: filling a caller's
 * error buffer, reading a hex digit, connecting to a unix socket,
 * creating a directory path, copying a stream, hashing a string, the
 * monotonic clock, the stop signals.  Library code: nothing here prints.
 */
#ifndef OPVM_UTIL_H
#define OPVM_UTIL_H

#include <signal.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <endian.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Formats into err[errlen] (truncating); err may be NULL or errlen 0, then
 * nothing is written.  For the "char *err, size_t errlen" (or why/whylen)
 * out-parameters that library calls fill with a message for the user. */
void util_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The value of hex digit c (either case), or -1 if c is not one. */
int util_hexval(int c);

/* The directory of the running binary (from /proc/self/exe) into
 * dir[len]: 0, or -errno (-ENAMETOOLONG if it does not fit). */
int util_self_dir(char *dir, size_t len);

/* n bytes as 2n lower-case hex digits and a NUL into out[2n + 1] (a
 * build-id's usual spelling). */
void util_hex(const uint8_t *b, size_t n, char *out);

/* A connected SOCK_STREAM | SOCK_CLOEXEC socket to the unix socket at
 * path, within timeout_ms: the fd (blocking), or -errno: -ENAMETOOLONG if
 * path does not fit sun_path, -ETIMEDOUT when the listener's accept queue
 * stayed full that long (any local user can bind a socket that never
 * accepts), -EINTR when a signal came meanwhile (the stop signals). */
int util_connect_unix(const char *path, unsigned timeout_ms);

/* The deadline for connecting to a local socket a user named or /proc or
 * libvirt showed (a guest channel, a gdbstub): a listener with room in its
 * queue takes a connection at once, so this only bounds a stuck one. */
#define UTIL_CONNECT_MS	5000

/* Milliseconds left until deadline_ms (util_now_ms() clock): 0 once it
 * has passed, for the timeout of a step of a longer exchange. */
unsigned util_ms_left(int64_t deadline_ms);

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
 * text, and must not stall the guest writing into in.  With line set, each
 * line copied is also handed to line(arg, text): without its '\n' and any
 * '\r', a longer one cut every UTIL_LINE_MAX - 1 bytes (the text is the
 * guest's: bounded here, never trusted by the callee). */
#define UTIL_LINE_MAX	256
void util_copy_stream(int in, int out, int out2,
		      void (*line)(void *arg, const char *text), void *arg);

/* Parses a count ("4096") or, with units, a size ("64M", "2G", "512k":
 * powers of 1024).  0 or -EINVAL (not a number, a bad unit, overflow). */
int util_parse_size(const char *s, uint64_t *out);

/* A 64-bit FNV-1a-style hash of the NUL-terminated s, for in-memory hash
 * tables (report, export, symres).  Not for anything stored: the store's
 * names use their own, fixed hash. */
uint64_t util_hash_str(const char *s);
/* pthread_create() of a thread that takes no signal: they stay with the
 * caller's threads, whose blocking calls they are to interrupt.  0 or an
 * error number (as pthread_create()). */
int util_thread_start(pthread_t *th, void *(*fn)(void *), void *arg);
/* Sorts key[0..n) (n < 2^32) by their bits [lo, 64) (the bits below are
 * carried along: a payload such as an index), stably, by an LSD radix
 * sort of up to 11-bit digits (fewer for fewer keys) that passes over no
 * digit the same in every key.  tmp holds n keys too; the result is in
 * key or tmp, returned. */
uint64_t *util_radix_u64(uint64_t *key, uint64_t *tmp, size_t n, unsigned lo);

/* Opens path read-only, and only a regular file (-EINVAL otherwise):
 * O_NONBLOCK (a FIFO planted where a file was expected must not hang the
 * reader), O_CLOEXEC, O_NOCTTY, plus flags (O_NOFOLLOW for files in a
 * session tree: -ELOOP for a symlink).  The returned fd is blocking again.
 * The fd, or -errno. */
int util_open_regular(const char *path, int flags);
/* The same, path relative to the directory fd dfd (or AT_FDCWD). */
int util_openat_regular(int dfd, const char *path, int flags);

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
/* 1 if the NUL-terminated s is UTF-8 throughout (util_utf8_char()), else 0:
 * JSON and protobuf strings must be. */
int util_utf8_valid(const char *s);

/* Copies s into out[outlen] as UTF-8: each byte util_utf8_char() refuses
 * becomes U+FFFD, everything else (controls too) is kept; cut at outlen,
 * never inside a character.  For bytes that name something (a guest's
 * -name) and must stay one string in every output, JSON and Prometheus
 * included; text output still escapes it (util_text_escape()).  Returns
 * out. */
const char *util_utf8_fix(char *out, size_t outlen, const char *s);

/* a + b, or UINT64_MAX where the sum would wrap: counters saturate (and
 * print as such: stats_fmt_count() in host/collect/stats.h). */
static inline uint64_t util_sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* CLOCK_MONOTONIC in nanoseconds and in milliseconds.  Signed, so that
 * "deadline - now" goes negative when a deadline has passed.  Inline: the
 * samplers read the clock on their per-sample path. */
static inline int64_t util_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t util_now_ms(void)
{
	return util_now_ns() / 1000000;
}

/* Wall-clock time (CLOCK_REALTIME) in Unix milliseconds: what names a
 * stored window (host/collect/store.h), never what measures a span. */
static inline int64_t util_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What every long-running command does with signals: SIGINT and SIGTERM
 * set *flag (the handler does nothing else) and interrupt a blocking call
 * (no SA_RESTART), so the command's loop sees the flag.  One flag per
 * process: a second call replaces the first.  (Whether SIGPIPE is ignored
 * is each command's choice: a filter may die of it, a session must not.) */
void util_stop_on_signals(volatile sig_atomic_t *flag);

/* Makes room for need elements of size bytes in the array at *(void **)arrp
 * whose capacity is *cap: the capacity doubles (from min_cap when 0) until
 * it holds need.  0, -EOVERFLOW (need * size does not fit a size_t) or
 * -ENOMEM; on error the array and *cap are as they were.  UTIL_GROW()
 * takes the array and its capacity themselves. */
int util_grow(void *arrp, size_t *cap, size_t need, size_t size, size_t min_cap);
#define UTIL_GROW(arr, cap, need, min_cap) \
	util_grow(&(arr), &(cap), (need), sizeof(*(arr)), (min_cap))

/* Terminal output fits this many columns (reports, summaries, help). */
#define UTIL_COLUMNS	80

/* Prints fmt as one paragraph word-wrapped at UTIL_COLUMNS: lines break at
 * spaces, continuation lines start with indent spaces, a '\n' in the text
 * ends a line.  A word longer than a line (a long path) is kept whole, on a
 * line of its own.  Ends with a newline. */
void util_fprintf_wrapped(FILE *f, unsigned indent, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The start of a small text file (proc, sysfs, debugfs) at path relative
 * to dfd (AT_FDCWD for a plain path), NUL-terminated in buf[size]: its
 * length, or -errno (-EIO: empty).  One read: what does not fit is cut. */
ssize_t util_read_text(int dfd, const char *path, char *buf, size_t size);

/* The process a thread belongs to (its Tgid in /proc), or -errno. */
#include <sys/types.h>
pid_t util_thread_tgid(pid_t tid);
/* 1 if tid is a thread of process pid (/proc/PID/task/TID exists), 0 if
 * not, -errno if pid cannot be looked at.  What a monitor names as a
 * vCPU thread is checked with it before opvm samples or reads it. */
int util_thread_of(pid_t pid, pid_t tid);
/* The process at the other end of a connected unix socket (SO_PEERCRED:
 * the one that connected, or that listened for a socket we connected),
 * or -errno. */
pid_t util_socket_peer_pid(int fd);

/* Little-endian loads from unaligned bytes (guest memory read as bytes). */
static inline uint64_t util_le64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static inline uint32_t util_le32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

#endif /* OPVM_UTIL_H */
