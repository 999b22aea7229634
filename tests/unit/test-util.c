// SPDX-License-Identifier: MIT
/* Unit tests for lib/'s small helpers (errbuf, hex, fs, unixsock, clock, stream, hash, signals, sort, text, size, procfs, array). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/array.h"
#include "lib/numparse.h"
#include "lib/arith.h"
#include "lib/clock.h"
#include "lib/errbuf.h"
#include "lib/fs.h"
#include "lib/hash.h"
#include "lib/hex.h"
#include "lib/procfs.h"
#include "lib/signals.h"
#include "lib/size.h"
#include "lib/sort.h"
#include "lib/stream.h"
#include "lib/strset.h"
#include "lib/text.h"
#include "lib/unixsock.h"
#include "tmpdir.h"

static int is_dir(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void test_hex(void **state)
{
	static const uint8_t id[] = { 0x00, 0x0f, 0xa5, 0xff };
	char out[2 * sizeof(id) + 1];
	char empty[1] = "x";

	(void)state;
	hex_encode(id, sizeof(id), out);
	assert_string_equal(out, "000fa5ff");
	hex_encode(id, 0, empty);
	assert_string_equal(empty, "");
}

static void test_self_dir(void **state)
{
	char dir[PATH_MAX], exe[PATH_MAX], small[4];
	ssize_t n;

	(void)state;
	assert_int_equal(fs_self_dir(dir, sizeof(dir)), 0);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	/* The binary's directory plus its own name is the binary. */
	assert_int_equal(strncmp(exe, dir, strlen(dir)), 0);
	assert_string_equal(exe + strlen(dir), "/test-util");
	assert_int_equal(fs_self_dir(small, sizeof(small)), -ENAMETOOLONG);
}

static void test_parse_size(void **state)
{
	uint64_t v;

	assert_int_equal(size_parse("4096", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(size_parse("64k", &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(size_parse("2G", &v), 0);
	assert_int_equal(v, 2ULL << 30);
	assert_int_equal(size_parse("128MiB", &v), 0);
	assert_int_equal(v, 128ULL << 20);
	assert_int_equal(size_parse("1M", &v), 0);
	assert_int_equal(v, 1ULL << 20);
	assert_int_equal(size_parse("", &v), -EINVAL);
	assert_int_equal(size_parse("-1", &v), -EINVAL);
	assert_int_equal(size_parse("12x", &v), -EINVAL);
	assert_int_equal(size_parse("1B", &v), -EINVAL);
	assert_int_equal(size_parse("99999999999T", &v), -EINVAL);
	assert_int_equal(size_parse("99999999999999999999", &v), -EINVAL);
}

static void test_seterr(void **state)
{
	char buf[8];

	errbuf_set(NULL, 0, "ignored %d", 1);
	memset(buf, 'x', sizeof(buf));
	errbuf_set(buf, 0, "ignored");
	assert_int_equal(buf[0], 'x');
	errbuf_set(buf, sizeof(buf), "%s:%u", "abc", 42u);
	assert_string_equal(buf, "abc:42");
	errbuf_set(buf, sizeof(buf), "a longer message");
	assert_string_equal(buf, "a longe");	/* truncated, terminated */
}

static void test_hexval(void **state)
{
	assert_int_equal(hex_val('0'), 0);
	assert_int_equal(hex_val('9'), 9);
	assert_int_equal(hex_val('a'), 10);
	assert_int_equal(hex_val('F'), 15);
	assert_int_equal(hex_val('g'), -1);
	assert_int_equal(hex_val('/'), -1);
	assert_int_equal(hex_val(0), -1);
	assert_int_equal(hex_val(0xff), -1);
}

static void test_mkdir_p(void **state)
{
	char *d = tmpdir_new(), path[1024], big[PATH_MAX + 8];

	assert_non_null(d);
	snprintf(path, sizeof(path), "%s/a/b//c/", d);
	assert_int_equal(fs_mkdir_p(path), 0);
	snprintf(path, sizeof(path), "%s/a/b/c", d);
	assert_true(is_dir(path));
	assert_int_equal(fs_mkdir_p(path), 0);	/* existing: fine */
	assert_int_equal(fs_mkdir_p(""), -ENOENT);

	/* A file in the way. */
	snprintf(path, sizeof(path), "%s/f", d);
	close(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	snprintf(path, sizeof(path), "%s/f/g", d);
	assert_int_equal(fs_mkdir_p(path), -ENOTDIR);

	/* Too long: refused before anything is made. */
	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	snprintf(path, sizeof(path), "%s/long/", d);
	memcpy(big, path, strlen(path));
	assert_int_equal(fs_mkdir_p(big), -ENAMETOOLONG);
	snprintf(path, sizeof(path), "%s/long", d);
	assert_false(is_dir(path));
	tmpdir_free(d);
}

static void test_valid_name(void **state)
{
	char long_name[66];

	assert_true(fs_valid_name("guest"));
	assert_true(fs_valid_name("a.b-c_D9"));
	assert_false(fs_valid_name(""));
	assert_false(fs_valid_name("."));
	assert_false(fs_valid_name(".."));
	assert_false(fs_valid_name("a/b"));
	assert_false(fs_valid_name("a b"));
	memset(long_name, 'n', 64);
	long_name[64] = '\0';
	assert_true(fs_valid_name(long_name));
	long_name[64] = 'n';
	long_name[65] = '\0';
	assert_false(fs_valid_name(long_name));
}

/* A unix socket listening at path with backlog (never accepting by
 * itself); the test is skipped when path does not fit sun_path. */
static int listen_at(const char *path, int backlog)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int srv;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -1;
	strcpy(sun.sun_path, path);
	srv = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(srv >= 0);
	assert_int_equal(bind(srv, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(srv, backlog), 0);
	return srv;
}

static void test_connect_unix(void **state)
{
	char *d = tmpdir_new(), path[1024], big[200];
	int srv, fd, acc;

	assert_non_null(d);
	if (!d)
		return;
	memset(big, 's', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(unixsock_connect(big, 1000), -ENAMETOOLONG);

	snprintf(path, sizeof(path), "%s/sock", d);
	assert_int_equal(unixsock_connect(path, 1000), -ENOENT);
	srv = listen_at(path, 1);
	if (srv < 0) {
		tmpdir_free(d);
		skip();
	}
	fd = unixsock_connect(path, 1000);
	assert_true(fd >= 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	acc = accept(srv, NULL, NULL);
	assert_true(acc >= 0);
	assert_int_equal(write(acc, "hi", 2), 2);
	{
		char b[2];

		assert_int_equal(read(fd, b, 2), 2);
		assert_memory_equal(b, "hi", 2);
	}
	close(acc);
	close(fd);
	close(srv);
	tmpdir_free(d);
}

/* A listener that never accepts, its accept queue full (backlog 0 holds
 * one connection): the connect gives up at its deadline instead of
 * blocking for ever, and the fd it made is closed. */
static void test_connect_unix_full(void **state)
{
	char *d = tmpdir_new(), path[1024];
	int srv, first, fd, fds_before, fds_after;
	int64_t t0;

	assert_non_null(d);
	if (!d)
		return;
	snprintf(path, sizeof(path), "%s/full", d);
	srv = listen_at(path, 0);
	if (srv < 0) {
		tmpdir_free(d);
		skip();
	}
	first = unixsock_connect(path, 1000);
	assert_true(first >= 0);
	fds_before = dup(0);
	close(fds_before);
	t0 = clk_now_ms();
	fd = unixsock_connect(path, 200);
	assert_int_equal(fd, -ETIMEDOUT);
	assert_true(clk_now_ms() - t0 >= 150);		/* it did wait for room */
	assert_true(clk_now_ms() - t0 < 30000);	/* and gave up */
	fds_after = dup(0);
	close(fds_after);
	assert_int_equal(fds_after, fds_before);	/* no fd leaked */
	assert_int_equal(unixsock_connect(path, 0), -ETIMEDOUT);
	assert_int_equal(clk_ms_left(clk_now_ms() - 5), 0);
	assert_true(clk_ms_left(clk_now_ms() + 10000) > 5000);
	close(first);
	close(srv);
	tmpdir_free(d);
}

struct lines {
	char text[4][STREAM_LINE_MAX];
	int n;
};

static void line_cb(void *arg, const char *text)
{
	struct lines *l = arg;

	if (l->n < 4)
		snprintf(l->text[l->n], STREAM_LINE_MAX, "%s", text);
	l->n++;
}

/* Lines as the console's panic watch sees them: CRs gone, a long line
 * cut at the bound, a last line without its newline never handed over. */
static void test_copy_stream_lines(void **state)
{
	char long_line[600];
	struct lines l = { .n = 0 };
	int in[2], out[2];

	(void)state;
	memset(long_line, 'x', sizeof(long_line));
	long_line[sizeof(long_line) - 1] = '\n';
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(write(in[1], "one\r\ntwo\n", 9), 9);
	assert_int_equal(write(in[1], long_line, sizeof(long_line)), (ssize_t)sizeof(long_line));
	assert_int_equal(write(in[1], "tail", 4), 4);
	close(in[1]);
	stream_copy(in[0], out[1], -1, line_cb, &l);
	assert_string_equal(l.text[0], "one");
	assert_string_equal(l.text[1], "two");
	assert_int_equal(strlen(l.text[2]), STREAM_LINE_MAX - 1);
	assert_int_equal(strlen(l.text[3]), STREAM_LINE_MAX - 1);
	assert_int_equal(l.n, 5);	/* 599 x: 255 + 255 + 89, none lost */
	close(in[0]);
	close(out[0]);
	close(out[1]);
}

static void test_copy_stream(void **state)
{
	int in[2], out[2], out2[2];
	char buf[64];

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out2, O_CLOEXEC), 0);
	assert_int_equal(write(in[1], "console", 7), 7);
	close(in[1]);
	stream_copy(in[0], out[1], out2[1], NULL, NULL);
	assert_int_equal(read(out[0], buf, sizeof(buf)), 7);
	assert_memory_equal(buf, "console", 7);
	assert_int_equal(read(out2[0], buf, sizeof(buf)), 7);
	assert_memory_equal(buf, "console", 7);
	close(in[0]);

	/* A closed output is ignored: copying goes on to the end. */
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(write(in[1], "more", 4), 4);
	close(in[1]);
	close(out2[0]);
	signal(SIGPIPE, SIG_IGN);
	stream_copy(in[0], out2[1], out[1], NULL, NULL);
	assert_int_equal(read(out[0], buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "more", 4);
	close(in[0]);
	close(out[0]);
	close(out[1]);
	close(out2[1]);
}

/* sort_radix_u64() against a stable reference: the order of the bits
 * [lo, 64), ties in their first order; for few keys (narrow digits), many
 * (11-bit ones), keys alike in most bits, and a single key. */
static int radix_ref_lo;

static int radix_ref_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	uint64_t hx = radix_ref_lo < 64 ? x >> radix_ref_lo : 0;
	uint64_t hy = radix_ref_lo < 64 ? y >> radix_ref_lo : 0;

	if (hx != hy)
		return hx < hy ? -1 : 1;
	return (x & 0xffff) < (y & 0xffff) ? -1 : (x & 0xffff) > (y & 0xffff);
}

/* strset: strings keyed by themselves and objects by a member, through
 * several growths; a missing key is not found. */
static void test_strset(void **state)
{
	struct named {
		int n;
		char *key;
	} obj[1000];
	struct strset self = { 0 }, by = { .key_off = STRSET_MEMBER(struct named, key) };
	char keys[1000][16];

	(void)state;
	assert_null(strset_find(&self, "x"));
	for (int i = 0; i < 1000; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		obj[i].n = i;
		obj[i].key = keys[i];
		assert_int_equal(strset_add(&self, keys[i]), 0);
		assert_int_equal(strset_add(&by, &obj[i]), 0);
	}
	assert_int_equal(self.nr, 1000);
	for (int i = 0; i < 1000; i++) {
		char k[16];

		snprintf(k, sizeof(k), "k%d", i);
		assert_ptr_equal(strset_find(&self, k), keys[i]);
		assert_ptr_equal(strset_find(&by, k), &obj[i]);
	}
	assert_null(strset_find(&self, "k1000"));
	assert_null(strset_find(&by, ""));
	strset_free(&self);
	strset_free(&by);
	assert_null(strset_find(&by, "k1"));
}

/* sort_bound_u64() against a count by hand, over sorted arrays with runs
 * of equal keys, every key and its neighbours, of every size to 40. */
static void test_sort_bound(void **state)
{
	struct item {
		uint32_t pad;
		uint64_t key;
	} a[40];

	(void)state;
	assert_int_equal(SORT_UPPER(a, 0, key, 5), 0);
	for (size_t n = 1; n <= ARRAY_SIZE(a); n++) {
		for (size_t i = 0; i < n; i++)
			a[i].key = 10 + 2 * (i / 3);	/* runs of three */
		for (uint64_t k = 8; k <= 12 + n; k++) {
			size_t le = 0, lt = 0;

			for (size_t i = 0; i < n; i++) {
				le += a[i].key <= k;
				lt += a[i].key < k;
			}
			assert_int_equal(SORT_UPPER(a, n, key, k), le);
			assert_int_equal(SORT_LOWER(a, n, key, k), lt);
		}
	}
}

static void test_radix_u64(void **state)
{
	static const size_t ns[] = { 1, 7, 700, 20000 };
	static const unsigned los[] = { 16, 16, 40 };
	static const uint64_t masks[] = { ~0ull, 0x00000fff000fffffull, 0x0000ff0000000000ull };
	uint64_t seed = 7;

	(void)state;
	for (size_t a = 0; a < ARRAY_SIZE(ns); a++)
		for (size_t b = 0; b < ARRAY_SIZE(los); b++) {
			size_t n = ns[a];
			uint64_t *k = malloc(n * sizeof(*k)), *t = malloc(n * sizeof(*t));
			uint64_t *ref = malloc(n * sizeof(*ref)), *got;

			assert_non_null(k);
			assert_non_null(t);
			assert_non_null(ref);
			for (size_t i = 0; i < n; i++) {
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				/* the low 16 bits: the key's first place */
				k[i] = ((seed & masks[b]) & ~0xffffull) | i;
			}
			memcpy(ref, k, n * sizeof(*k));
			radix_ref_lo = (int)los[b];
			qsort(ref, n, sizeof(*ref), radix_ref_cmp);
			got = sort_radix_u64(k, t, n, los[b]);
			for (size_t i = 0; i < n; i++)
				assert_true((got[i] >> los[b]) == (ref[i] >> los[b]) &&
					    (got[i] & 0xffff) == (ref[i] & 0xffff));
			free(k);
			free(t);
			free(ref);
		}
}

static void *mask_of_thread(void *arg)
{
	pthread_sigmask(SIG_BLOCK, NULL, (sigset_t *)arg);
	return NULL;
}

/* signals_thread_start(): the thread blocks every signal (SIGINT and SIGTERM
 * stay with the caller), the caller's own mask is as it was. */
static void test_thread_start(void **state)
{
	sigset_t before, after, in;
	pthread_t th;

	(void)state;
	sigemptyset(&in);
	pthread_sigmask(SIG_BLOCK, NULL, &before);
	assert_int_equal(signals_thread_start(&th, mask_of_thread, &in), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	pthread_sigmask(SIG_BLOCK, NULL, &after);
	assert_true(sigismember(&in, SIGINT) == 1 && sigismember(&in, SIGTERM) == 1 &&
		    sigismember(&in, SIGPIPE) == 1 && sigismember(&in, SIGUSR1) == 1);
	for (int sig = 1; sig < NSIG; sig++)
		assert_int_equal(sigismember(&before, sig), sigismember(&after, sig));
}

/* A thread that tells its id and waits until told to end. */
static pid_t other_tid;
static int told[2], ended[2];	/* the thread's "here", the test's "end" */

static void *tell_tid(void *arg)
{
	char c;

	(void)arg;
	other_tid = gettid();
	if (write(told[1], "t", 1) != 1 || read(ended[0], &c, 1) != 1)
		return NULL;
	return NULL;
}

static void test_thread_of(void **state)
{
	pthread_t th;
	char c;
	int fd_null;

	(void)state;
	assert_int_equal(pipe(told), 0);
	assert_int_equal(pipe(ended), 0);
	assert_int_equal(pthread_create(&th, NULL, tell_tid, NULL), 0);
	assert_int_equal(read(told[0], &c, 1), 1);
	assert_int_equal(procfs_thread_of(getpid(), getpid()), 1);
	assert_int_equal(procfs_thread_of(getpid(), other_tid), 1);
	assert_int_equal(procfs_thread_tgid(other_tid), getpid());
	/* pid 1's threads are not ours, nor ours its */
	assert_int_equal(procfs_thread_of(getpid(), 1), 0);
	assert_int_equal(procfs_thread_of(1, other_tid), 0);
	assert_int_equal(procfs_thread_of(getpid(), 0), 0);
	assert_true(procfs_thread_of(INT32_MAX, getpid()) < 0);	/* no such process */
	assert_int_equal(write(ended[1], "x", 1), 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	for (int i = 0; i < 2; i++) {
		close(told[i]);
		close(ended[i]);
	}

	/* the peer of a connection is the process that listened: a child */
	{
		char *d = tmpdir_new(), path[1024];
		pid_t child;
		int up[2], down[2], fd;

		assert_non_null(d);
		snprintf(path, sizeof(path), "%s/sock", d);
		assert_int_equal(pipe(up), 0);
		assert_int_equal(pipe(down), 0);
		child = fork();
		if (!child) {
			int srv = listen_at(path, 1);

			_exit(srv < 0 || write(up[1], "l", 1) != 1 || read(down[0], &c, 1) < 0);
		}
		assert_true(child > 0);
		assert_int_equal(read(up[0], &c, 1), 1);
		fd = unixsock_connect(path, 1000);
		assert_true(fd >= 0);
		assert_int_equal(unixsock_peer_pid(fd), child);
		assert_int_equal(write(down[1], "x", 1), 1);
		waitpid(child, NULL, 0);
		close(fd);
		for (int i = 0; i < 2; i++) {
			close(up[i]);
			close(down[i]);
		}
		tmpdir_free(d);
	}
	fd_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(unixsock_peer_pid(fd_null) < 0);	/* no socket */
	close(fd_null);
}

static void test_hash_str(void **state)
{
	/* Pinned: the hash report, export and symres each had their own copy of. */
	/* FNV-1a: the basis and prime of the 64-bit variant */
	assert_true(hash_str("") == 0xcbf29ce484222325ull);
	assert_true(hash_str("a") == ((0xcbf29ce484222325ull ^ 'a') * 0x100000001b3ull));
	assert_true(hash_fnv1a(hash_fnv1a(HASH_FNV_BASIS, "fu", 2), "nc_a", 4) == hash_str("func_a"));
	/* hash_bytes() names long images on disk: its value is fixed */
	assert_true(hash_bytes("abc", 3, 0) == 0xec56ac5ddf8b1126ull);
	assert_true(hash_str("func_a") != hash_str("func_b"));
}

/* Guest strings for text output: layout and terminal bytes escaped,
 * UTF-8 kept, cut on a boundary. */
/* Invalid bytes become U+FFFD, valid text and controls stay, the cut is at
 * a character: the result is always valid UTF-8. */
static void test_utf8_fix(void **state)
{
	char out[64], small[5];

	assert_string_equal(text_utf8_fix(out, sizeof(out), "caf\xc3\xa9"), "caf\xc3\xa9");
	assert_string_equal(text_utf8_fix(out, sizeof(out), "a\xff\x1b\n"),
			    "a\xef\xbf\xbd\x1b\n");
	assert_string_equal(text_utf8_fix(out, sizeof(out), "\xc3"), "\xef\xbf\xbd");
	assert_true(text_utf8_valid(text_utf8_fix(out, sizeof(out), "\xed\xa0\x80x\xc2\x85")));
	assert_string_equal(text_utf8_fix(small, sizeof(small), "ab\xff"), "ab");
	assert_string_equal(text_utf8_fix(small, sizeof(small), "\xff\xff"), "\xef\xbf\xbd");
	assert_string_equal(text_utf8_fix(out, 1, "abc"), "");
}

static void test_text_escape(void **state)
{
	char out[64], small[8];

	assert_string_equal(text_escape(out, sizeof(out), "plain /usr/bin/x"), "plain /usr/bin/x");
	assert_string_equal(text_escape(out, sizeof(out), "a\nb\tc\\d"), "a\\nb\\tc\\\\d");
	assert_string_equal(text_escape(out, sizeof(out), "\x1b[2J\x7f"), "\\x1b[2J\\x7f");
	/* UTF-8 kept; C1 controls, overlongs, surrogates, stray bytes not */
	assert_string_equal(text_escape(out, sizeof(out), "caf\xc3\xa9 \xe2\x82\xac"),
			    "caf\xc3\xa9 \xe2\x82\xac");
	assert_string_equal(text_escape(out, sizeof(out), "\xc2\x9b" "1m"), "\\xc2\\x9b1m");
	assert_string_equal(text_escape(out, sizeof(out), "\xc0\xaf\xed\xa0\x80\xff"),
			    "\\xc0\\xaf\\xed\\xa0\\x80\\xff");
	assert_string_equal(text_escape(out, sizeof(out), "\xe2\x82"), "\\xe2\\x82");
	/* never cut inside an escape or a character */
	assert_string_equal(text_escape(small, sizeof(small), "abcd\n"), "abcd\\n");
	assert_string_equal(text_escape(small, sizeof(small), "abcdef\n"), "abcdef");
	assert_string_equal(text_escape(small, sizeof(small), "abcde\xe2\x82\xac"), "abcde");
	assert_string_equal(text_escape(out, sizeof(out), NULL), "");
	assert_int_equal(text_utf8_char("\xf0\x9f\x98\x80", 4), 4);
	assert_int_equal(text_utf8_char("\xf0\x9f\x98\x80", 3), 0);
	assert_int_equal(text_utf8_char("", 1), 0);
	assert_true(text_utf8_valid("caf\xc3\xa9\n\t"));
	assert_false(text_utf8_valid("caf\xc3"));
	assert_false(text_utf8_valid("\xff"));
	assert_true(text_utf8_valid(""));
}

/* Only regular files, never through a symlink, never blocking on a FIFO. */
static void test_open_regular(void **state)
{
	char *d = tmpdir_new(), path[1024], link[1024];
	int fd;

	assert_non_null(d);
	snprintf(path, sizeof(path), "%s/f", d);
	close(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	fd = fs_open_regular(path, O_NOFOLLOW);
	assert_true(fd >= 0);
	assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);	/* blocking again */
	close(fd);
	snprintf(link, sizeof(link), "%s/l", d);
	assert_int_equal(symlink("f", link), 0);
	assert_int_equal(fs_open_regular(link, O_NOFOLLOW), -ELOOP);
	fd = fs_open_regular(link, 0);	/* followed when asked */
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/fifo", d);
	assert_int_equal(mkfifo(path, 0600), 0);
	alarm(30);
	assert_int_equal(fs_open_regular(path, 0), -EINVAL);
	alarm(0);
	assert_int_equal(fs_open_regular(d, 0), -EINVAL);
	snprintf(path, sizeof(path), "%s/none", d);
	assert_int_equal(fs_open_regular(path, 0), -ENOENT);
	tmpdir_free(d);
}

/* Counters saturate instead of wrapping. */
/* Every line of a wrapped paragraph fits TEXT_COLUMNS, continuation lines
 * are indented, no word is split, and a word wider than a line stands
 * alone. */
static void test_wrapped(void **state)
{
	char *buf = NULL, word[100];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	const char *line;

	(void)state;
	assert_non_null(f);
	memset(word, 'x', 90);
	word[90] = '\0';
	text_fprintf_wrapped(f, 2, "warning: %s %s %s %s %s %s %s %s %s %s %s\nnext line",
			     "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta",
			     "theta", "iota", "kappa lambda mu nu xi omicron pi rho", word);
	fclose(f);
	assert_string_equal(buf,
		"warning: alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu\n"
		"  xi omicron pi rho\n"
		"  xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"
		"next line\n");
	for (line = buf; *line; line = strchr(line, '\n') + 1)
		assert_true(strchr(line, '\n') - line <= 80 || line[2] == 'x');
	free(buf);
}

static void test_sat_add(void **state)
{
	assert_true(arith_sat_add(UINT64_MAX - 1, 5) == UINT64_MAX);
	assert_true(arith_sat_add(UINT64_MAX, UINT64_MAX) == UINT64_MAX);
	assert_int_equal(arith_sat_add(2, 3), 5);
}

/* Under AddressSanitizer an impossible allocation returns NULL, as in libc,
 * instead of aborting: test_grow checks the -ENOMEM path. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

static void test_grow(void **state)
{
	uint64_t *a = NULL;
	uint8_t *b;
	size_t cap = 0;

	assert_int_equal(ARRAY_GROW(a, cap, 1, 8), 0);
	assert_non_null(a);
	assert_int_equal(cap, 8);
	a[7] = 7;
	assert_int_equal(ARRAY_GROW(a, cap, 8, 8), 0);	/* fits: no change */
	assert_int_equal(cap, 8);
	assert_int_equal(ARRAY_GROW(a, cap, 9, 8), 0);
	assert_int_equal(cap, 16);
	assert_int_equal(a[7], 7);
	assert_int_equal(ARRAY_GROW(a, cap, 100, 8), 0);
	assert_int_equal(cap, 128);
	/* need * size overflows: refused, array kept */
	assert_int_equal(ARRAY_GROW(a, cap, SIZE_MAX / 4, 8), -EOVERFLOW);
	assert_int_equal(cap, 128);
	assert_int_equal(a[7], 7);
	free(a);
	/* larger than any object (PTRDIFF_MAX): -ENOMEM, array kept */
	b = NULL;
	cap = 0;
	assert_int_equal(ARRAY_GROW(b, cap, 3, 0), 0);	/* from 1: 1, 2, 4 */
	assert_int_equal(cap, 4);
	b[3] = 3;
	assert_int_equal(ARRAY_GROW(b, cap, (size_t)PTRDIFF_MAX + 1, 0), -ENOMEM);
	assert_int_equal(cap, 4);
	assert_int_equal(b[3], 3);
	free(b);
}

/* Strict numbers: decimal digits to the end, in range, nothing else. */
/* Times: Unix seconds, RFC 3339 with its offsets, and what is none. */
static void test_parse_time(void **state)
{
	int64_t ms;

	(void)state;
	assert_int_equal(num_parse_time("1764645000", &ms), 0);
	assert_true(ms == 1764645000000LL);
	assert_int_equal(num_parse_time("1764645000.250", &ms), 0);
	assert_true(ms == 1764645000250LL);
	assert_int_equal(num_parse_time("2025-12-02T03:10:00Z", &ms), 0);
	assert_true(ms == 1764645000000LL);
	assert_int_equal(num_parse_time("2025-12-02T04:10:00.5+01:00", &ms), 0);
	assert_true(ms == 1764645000500LL);
	assert_int_equal(num_parse_time("2025-12-02T02:10:00-01:00", &ms), 0);
	assert_true(ms == 1764645000000LL);
	assert_int_equal(num_parse_time("03:10", &ms), 0);
	assert_int_equal(num_parse_time("2025-12-02T03:10:00", &ms), -EINVAL);
	assert_int_equal(num_parse_time("2025-13-02T03:10:00Z", &ms), -EINVAL);
	assert_int_equal(num_parse_time("1960-01-01T00:00:00Z", &ms), -ERANGE);
	assert_int_equal(num_parse_time("-5", &ms), -EINVAL);
	assert_int_equal(num_parse_time("", &ms), -EINVAL);
	assert_int_equal(num_parse_time("yesterday", &ms), -EINVAL);
	assert_int_equal(num_parse_time("25:00", &ms), -EINVAL);
	assert_int_equal(num_parse_time("1e9", &ms), -EINVAL);
}

static void test_numparse(void **state)
{
	static const char *const bad[] = {
		"", " 5", "+5", "-1", "5 ", "100x", "1x", "0x10", "1e3", "nan", "inf", "5\n",
	};
	uint64_t v = 7;
	unsigned u;
	double d;
	char err[160];

	(void)state;
	assert_int_equal(num_parse_u64("0", 0, 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(num_parse_u64("010", 0, 100, &v), 0);
	assert_int_equal(v, 10);	/* decimal, never octal */
	assert_int_equal(num_parse_u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(num_parse_u64("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
	assert_int_equal(num_parse_u64("99999999999999999999", 0, UINT64_MAX, &v), -ERANGE);
	assert_int_equal(num_parse_uint("11", 1, 10, &u), -ERANGE);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		v = 7;
		assert_int_equal(num_parse_u64(bad[i], 0, UINT64_MAX, &v), -EINVAL);
		assert_int_equal(v, 7);
		assert_int_not_equal(num_parse_decimal(bad[i], 0, 1e9, &d), 0);
	}
	assert_int_equal(num_parse_decimal("0.5", 0.1, 1, &d), 0);
	assert_true(d == 0.5);
	assert_int_equal(num_parse_decimal("2.", 0, 3, &d), 0);
	assert_int_equal(num_parse_decimal(".5", 0, 1, &d), -EINVAL);
	assert_int_equal(num_parse_decimal("1.2.3", 0, 9, &d), -EINVAL);
	assert_int_equal(num_parse_decimal("0.05", 0.1, 1, &d), -ERANGE);
	assert_string_equal(num_bad_value(err, sizeof(err), "--width", "1234567890123456",
					  "40 to 1000"),
			    "--width '123456789012...': use 40 to 1000");
	assert_string_equal(num_bad_value(err, sizeof(err), "-F", "\x1b[2J", "1 to 9"),
			    "-F '\\x1b[2J': use 1 to 9");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_size),
		cmocka_unit_test(test_seterr),
		cmocka_unit_test(test_hexval),
		cmocka_unit_test(test_hex),
		cmocka_unit_test(test_self_dir),
		cmocka_unit_test(test_mkdir_p),
		cmocka_unit_test(test_valid_name),
		cmocka_unit_test(test_connect_unix),
		cmocka_unit_test(test_connect_unix_full),
		cmocka_unit_test(test_copy_stream),
		cmocka_unit_test(test_copy_stream_lines),
		cmocka_unit_test(test_hash_str),
		cmocka_unit_test(test_thread_start),
		cmocka_unit_test(test_thread_of),
		cmocka_unit_test(test_radix_u64),
		cmocka_unit_test(test_sort_bound),
		cmocka_unit_test(test_strset),
		cmocka_unit_test(test_utf8_fix),
		cmocka_unit_test(test_text_escape),
		cmocka_unit_test(test_open_regular),
		cmocka_unit_test(test_sat_add),
		cmocka_unit_test(test_wrapped),
		cmocka_unit_test(test_grow),
		cmocka_unit_test(test_numparse),
		cmocka_unit_test(test_parse_time),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
