// SPDX-License-Identifier: MIT
/*
 * Small helpers shared by every opvm library (lib/util.h).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/util.h"

void util_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int util_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int util_self_dir(char *dir, size_t len)
{
	char *slash;
	ssize_t n;

	if (!len)
		return -ENAMETOOLONG;
	n = readlink("/proc/self/exe", dir, len);
	if (n < 0)
		return -errno;
	if ((size_t)n >= len)
		return -ENAMETOOLONG;
	dir[n] = '\0';
	slash = strrchr(dir, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	return 0;
}

void util_hex(const uint8_t *b, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = '\0';
}

/*
 * A unix stream connect has no "in progress" state to poll: non-blocking,
 * it fails with EAGAIN at once when the accept queue is full.  Blocking, the
 * kernel waits for room for at most SO_SNDTIMEO (unix_stream_connect), and
 * a signal interrupts the wait: so the deadline is that timeout, set for
 * the connect only.
 */
int util_connect_unix(const char *path, unsigned timeout_ms)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_ms / 1000,
			      .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000 };
	static const struct timeval none;
	int fd, err;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (!timeout_ms)
		tv.tv_usec = 1;		/* 0 would mean "wait forever" */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		goto fail;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		if (errno == EAGAIN || errno == EINPROGRESS)
			errno = ETIMEDOUT;
		goto fail;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none)))
		goto fail;
	return fd;
fail:
	err = -errno;
	close(fd);
	return err;
}

unsigned util_ms_left(int64_t deadline_ms)
{
	int64_t left = deadline_ms - util_now_ms();

	return left <= 0 ? 0 : left > UINT_MAX ? UINT_MAX : (unsigned)left;
}

int util_mkdir_p(const char *path)
{
	char tmp[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, len + 1);
	for (char *p = tmp; *p; p++) {
		if (*p != '/' || p == tmp)	/* no "" directory to make */
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

int util_valid_name(const char *s)
{
	if (!*s || strlen(s) > 64 || !strcmp(s, ".") || !strcmp(s, ".."))
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
			return 0;
	return 1;
}

/* Feeds n bytes of buf to line() a line at a time (used: bytes kept). */
static void copy_lines(const char *buf, size_t n, char *text, size_t *used,
		       void (*line)(void *arg, const char *text), void *arg)
{
	for (size_t i = 0; i < n; i++) {
		if (buf[i] != '\n' && *used == UTIL_LINE_MAX - 1) {
			text[*used] = '\0';	/* a cut: the byte starts the next piece */
			line(arg, text);
			*used = 0;
		}
		if (buf[i] == '\n') {
			text[*used] = '\0';
			line(arg, text);
			*used = 0;
		} else if (buf[i] != '\r') {
			text[(*used)++] = buf[i];
		}
	}
}

void util_copy_stream(int in, int out, int out2,
		      void (*line)(void *arg, const char *text), void *arg)
{
	char buf[4096], text[UTIL_LINE_MAX];
	size_t used = 0;

	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (out >= 0 && write(out, buf, (size_t)n) != n) {
			/* lost text, not a stalled guest */
		}
		if (out2 >= 0 && write(out2, buf, (size_t)n) != n) {
			/* likewise */
		}
		if (line)
			copy_lines(buf, (size_t)n, text, &used, line, arg);
	}
}

uint64_t util_hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

int util_thread_start(pthread_t *th, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(th, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

#define RADIX_DIGIT_MAX	11

uint64_t *util_radix_u64(uint64_t *key, uint64_t *tmp, size_t n, unsigned lo)
{
	uint64_t kall = ~0ull, kany = 0, v;
	unsigned bits, passes, d, lg = n > 1 ? 64 - (unsigned)__builtin_clzll((uint64_t)n - 1) : 1;
	/* digits no wider than the keys are many (at least 8 bits): a pass
	 * costs its buckets as well as its keys */
	unsigned dmax = lg >= RADIX_DIGIT_MAX ? RADIX_DIGIT_MAX : lg > 8 ? lg : 8;
	uint32_t cnt[1u << RADIX_DIGIT_MAX];

	for (size_t i = 0; i < n; i++) {
		kall &= key[i];
		kany |= key[i];
	}
	v = lo < 64 ? (kall ^ kany) >> lo : 0;
	bits = v ? 64 - (unsigned)__builtin_clzll(v) : 0;
	passes = (bits + dmax - 1) / dmax;
	d = passes ? (bits + passes - 1) / passes : 0;
	for (unsigned p = 0; p < passes; p++) {
		unsigned shift = lo + p * d;
		uint64_t dm = (1ull << d) - 1, *t = key;
		uint32_t sum = 0;

		if (!(((kall ^ kany) >> shift) & dm))
			continue;	/* the same in every key */
		memset(cnt, 0, ((size_t)1 << d) * sizeof(*cnt));
		for (size_t i = 0; i < n; i++)
			cnt[(key[i] >> shift) & dm]++;
		for (size_t b = 0; b <= dm; b++) {
			uint32_t x = cnt[b];

			cnt[b] = sum;
			sum += x;
		}
		for (size_t i = 0; i < n; i++)
			tmp[cnt[(key[i] >> shift) & dm]++] = key[i];
		key = tmp;
		tmp = t;
	}
	return key;
}

int util_open_regular(const char *path, int flags)
{
	return util_openat_regular(AT_FDCWD, path, flags);
}

int util_openat_regular(int dfd, const char *path, int flags)
{
	struct stat st;
	int fd = openat(dfd, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | flags);
	int fl;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

size_t util_utf8_char(const char *str, size_t avail)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned char c = avail ? s[0] : 0;
	size_t n;

	if (!c)
		return 0;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (n > avail)
		return 0;
	for (size_t k = 1; k < n; k++)
		if ((s[k] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xc2 && s[1] < 0xa0) ||		/* C1 controls */
	    (c == 0xe0 && s[1] < 0xa0) ||		/* overlong */
	    (c == 0xed && s[1] > 0x9f) ||		/* surrogates */
	    (c == 0xf0 && s[1] < 0x90) ||		/* overlong */
	    (c == 0xf4 && s[1] > 0x8f))		/* past U+10FFFF */
		return 0;
	return n;
}

int util_utf8_valid(const char *s)
{
	size_t len = strlen(s), i = 0;

	while (i < len) {
		size_t n = util_utf8_char(s + i, len - i);

		if (!n)
			return 0;
		i += n;
	}
	return 1;
}

const char *util_utf8_fix(char *out, size_t outlen, const char *s)
{
	static const char fffd[] = "\xef\xbf\xbd";
	size_t o = 0, len = strlen(s), i = 0;

	if (!outlen)
		return out;
	while (i < len) {
		size_t n = util_utf8_char(s + i, len - i);
		const char *from = n ? s + i : fffd;
		size_t k = n ? n : 3;

		if (o + k >= outlen)
			break;
		memcpy(out + o, from, k);
		o += k;
		i += n ? n : 1;
	}
	out[o] = '\0';
	return out;
}

const char *util_text_escape(char *out, size_t outlen, const char *s)
{
	size_t o = 0, len = s ? strlen(s) : 0, i = 0;

	if (!outlen)
		return out;
	while (i < len) {
		unsigned char c = (unsigned char)s[i];
		size_t n, el;
		char esc[5];

		/* Printable ASCII, the whole of most names: copied as a run,
		 * without the UTF-8 decoder's call per byte. */
		if (c >= 0x20 && c < 0x7f && c != '\\') {
			size_t j = i + 1;

			while (j < len && (unsigned char)s[j] >= 0x20 &&
			       (unsigned char)s[j] < 0x7f && s[j] != '\\')
				j++;
			if (o + (j - i) >= outlen)
				j = i + (outlen - 1 - o);	/* what fits, as below */
			memcpy(out + o, s + i, j - i);
			o += j - i;
			i = j;
			if (o + 1 >= outlen)
				break;
			continue;
		}
		n = util_utf8_char(s + i, len - i);
		if (n && c >= 0x20 && c != 0x7f && c != '\\') {
			if (o + n >= outlen)
				break;
			memcpy(out + o, s + i, n);
			o += n;
			i += n;
			continue;
		}
		if (c == '\n')
			el = (size_t)snprintf(esc, sizeof(esc), "\\n");
		else if (c == '\t')
			el = (size_t)snprintf(esc, sizeof(esc), "\\t");
		else if (c == '\\')
			el = (size_t)snprintf(esc, sizeof(esc), "\\\\");
		else
			el = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", c);
		if (o + el >= outlen)
			break;
		memcpy(out + o, esc, el);
		o += el;
		i++;
	}
	out[o] = '\0';
	return out;
}

int util_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (*end == 'i' && shift)	/* "64MiB" */
		end++;
	if ((*end == 'b' || *end == 'B') && shift)
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static volatile sig_atomic_t *stop_flag;

static void on_stop_signal(int sig)
{
	(void)sig;
	if (stop_flag)
		*stop_flag = 1;
}

void util_stop_on_signals(volatile sig_atomic_t *flag)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };

	stop_flag = flag;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* One line of text (no '\n') out, broken at spaces to fit. */
static void wrap_line(FILE *f, const char *p, size_t len, unsigned indent)
{
	size_t col = 0;

	while (len) {
		size_t sp = 0, w;

		while (sp < len && p[sp] == ' ')
			sp++;
		for (w = sp; w < len && p[w] != ' '; w++)
			;
		/* the word from p + sp to p + w, after sp spaces */
		if (col && col + w > UTIL_COLUMNS) {
			fprintf(f, "\n%*s", (int)indent, "");
			col = indent;
			p += sp;
			len -= sp;
			w -= sp;
			sp = 0;
		}
		fwrite(p, 1, w, f);
		col += w;
		p += w;
		len -= w;
	}
}

void util_fprintf_wrapped(FILE *f, unsigned indent, const char *fmt, ...)
{
	char buf[4096];
	const char *p = buf;
	va_list ap;

	if (indent > UTIL_COLUMNS / 2)
		indent = UTIL_COLUMNS / 2;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	for (;;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		wrap_line(f, p, len, indent);
		fputc('\n', f);
		if (!nl || !nl[1])
			break;
		p = nl + 1;
	}
}

ssize_t util_read_text(int dfd, const char *path, char *buf, size_t size)
{
	int fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	return n;
}

/* The process a thread belongs to (its Tgid), or -errno. */
pid_t util_thread_tgid(pid_t tid)
{
	char path[64], buf[512], *t;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	n = util_read_text(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0)
		return (pid_t)n;
	t = strstr(buf, "\nTgid:");
	return t ? (pid_t)strtol(t + 6, NULL, 10) : -EPROTO;
}

int util_thread_of(pid_t pid, pid_t tid)
{
	char path[64];
	struct stat st;

	if (pid <= 0 || tid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid, (int)tid);
	if (!stat(path, &st))
		return 1;
	if (errno != ENOENT)
		return -errno;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	return stat(path, &st) ? -errno : 0;
}

pid_t util_socket_peer_pid(int fd)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len))
		return -errno;
	return uc.pid > 0 ? uc.pid : -ESRCH;
}

int util_grow(void *arrp, size_t *cap, size_t need, size_t size, size_t min_cap)
{
	size_t ncap = *cap ? *cap : (min_cap ? min_cap : 1);
	void *arr, *n;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
	if (size && ncap > SIZE_MAX / size)
		ncap = need;	/* the doubling overshot: exactly what is needed */
	if (size && ncap > SIZE_MAX / size)
		return -EOVERFLOW;
	/* arrp points at any object pointer: copied, not cast, to stay
	 * within C's aliasing rules */
	memcpy(&arr, arrp, sizeof(arr));
	n = realloc(arr, size ? ncap * size : 1);
	if (!n)
		return -ENOMEM;
	memcpy(arrp, &n, sizeof(n));
	*cap = ncap;
	return 0;
}
