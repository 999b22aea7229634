// SPDX-License-Identifier: MIT
/*
 * unwind/pyframes.c: a real CPython (Debian's /usr/bin/python3.11) running
 * a script of known nested functions in two threads, stopped with SIGSTOP
 * and read through /proc/PID/mem with the reader callback guest memory
 * uses: _PyRuntime from the mapped executable's .dynsym, each thread's
 * chain by its native thread id, names, files and lines asserted.  Then a
 * fake memory image in 3.11's layout and in 3.13's published one, and
 * hostile versions of it: forged thread states, frame loops, giant and
 * non-UTF-8 names, bad pointers, wrong object types, depth.  And the
 * samplers' side (vmm/guest/pyguest.c) on the real interpreter: the set
 * the collector publishes, the interpreter found once, frames per sample.
 * And a real 3.13 (Debian 13's, in the root the test image's py313 piece
 * is made of, through chroot) read by its _Py_DebugOffsets alone.
 */
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tmpdir.h"
#include "unwind/pyframes.h"
#include "vmm/guest/pyguest.h"
#include "lib/array.h"

/* ---- a real interpreter ------------------------------------------------- */

#define PYTHON	"/usr/bin/python3.11"

/* Line numbers below are the script's; keep them in step. */
static const char script[] =
	"import os, sys, threading\n"			/* 1 */
	"def leaf_work():\n"				/* 2 */
	"    x = 0\n"					/* 3 */
	"    while True:\n"				/* 4 */
	"        x += 1\n"				/* 5 */
	"def middle():\n"				/* 6 */
	"    leaf_work()\n"				/* 7 */
	"class Outer:\n"				/* 8 */
	"    def method(self):\n"			/* 9 */
	"        middle()\n"				/* 10 */
	"def spin_thread():\n"				/* 11 */
	"    n = 0\n"					/* 12 */
	"    while True:\n"				/* 13 */
	"        n += 1\n"				/* 14 */
	"threading.Thread(target=spin_thread, daemon=True).start()\n" /* 15 */
	"os.write(1, b'r')\n"				/* 16 */
	"Outer().method()\n";				/* 17 */

struct proc {
	pid_t pid;
	int mem;
	char *dir;
	char path[512];
	const char *root;		/* NULL: PYTHON; else the root of PYTHON313 */
};

/* Debian 13's python3.13 in its own root, as the test image has it
 * (images/py313.sh: $BUILD/images/py313-root/opt/py313), run through
 * chroot: as root only. */
#define PYTHON313	"/usr/bin/python3.13"

static int proc_read(void *arg, uint64_t gva, void *buf, size_t len)
{
	struct proc *p = arg;

	return pread(p->mem, buf, len, (off_t)gva) == (ssize_t)len ? 0 : -EFAULT;
}

/* The executable's first page: its mapping at file offset 0. */
static uint64_t exe_base(pid_t pid, const char *exe)
{
	char maps[64], line[512];
	uint64_t lo = 0, off;
	FILE *f;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", pid);
	f = fopen(maps, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, o;

		if (sscanf(line, "%lx-%*x %*s %lx", &a, &o) == 2 && (strstr(line, exe) && !strcmp(strstr(line, exe) + strlen(exe), "\n"))) {
			off = o;
			if (!off) {
				lo = a;
				break;
			}
		}
	}
	fclose(f);
	return lo;
}

static int start_python(struct proc *p)
{
	int out[2];
	char c;
	FILE *f;

	if (p->root) {			/* the script inside the root */
		snprintf(p->path, sizeof(p->path), "%s/tmp/opvm-test-%d", p->root, (int)getpid());
		p->dir = strdup(p->path);
		if (!p->dir || mkdir(p->dir, 0755))
			return -1;
	} else {
		p->dir = tmpdir_new();
	}
	snprintf(p->path, sizeof(p->path), "%s/nested.py", p->dir);
	f = fopen(p->path, "we");
	if (!f || fputs(script, f) < 0 || fclose(f) || pipe(out))
		return -1;
	p->pid = fork();
	if (p->pid == 0) {
		dup2(out[1], 1);
		close(out[0]);
		if (p->root) {
			snprintf(p->path, sizeof(p->path), "/tmp/opvm-test-%d/nested.py",
				 (int)getppid());
			if (chroot(p->root) || chdir("/"))
				_exit(126);
			/* -B: no .pyc written into the image's root */
			execl(PYTHON313, PYTHON313, "-S", "-B", p->path, (char *)NULL);
		}
		execl(PYTHON, PYTHON, "-S", p->path, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	if (read(out[0], &c, 1) != 1)
		return -1;
	close(out[0]);
	snprintf(p->path + 400, 64, "/proc/%d/mem", p->pid);
	p->mem = open(p->path + 400, O_RDONLY | O_CLOEXEC);
	snprintf(p->path, sizeof(p->path), "%s/nested.py", p->dir);
	return p->mem < 0 ? -1 : 0;
}

static void stop_python(struct proc *p)
{
	if (p->pid > 0) {		/* only the child this test started */
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
	}
	if (p->mem > 0)
		close(p->mem);
	tmpdir_free(p->dir);
}

/* Stops the process until thread tid's leaf frame is want (it may be
 * between frames at a stop); returns the frames read. */
static unsigned read_until(struct proc *p, const struct pyframes_target *t,
			   const struct pyframes_layout *l, pid_t tid, const char *want,
			   struct pyframe *fr, struct pyframes_stats *st)
{
	struct unwind_mem um = { proc_read, p };
	unsigned n = 0;

	for (int tries = 0; tries < 500; tries++) {
		int status;

		kill(p->pid, SIGSTOP);
		waitpid(p->pid, &status, WUNTRACED);
		n = pyframes_read(&um, t, l, (uint32_t)tid, fr, PYFRAMES_MAX_DEPTH, st);
		kill(p->pid, SIGCONT);
		if (n && !strcmp(fr[0].name, want))
			return n;
		usleep(2000);
	}
	return n;
}

static pid_t other_thread(pid_t pid)
{
	char dir[64];
	struct dirent *e;
	pid_t tid = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/task", pid);
	d = opendir(dir);
	while (d && (e = readdir(d)))
		if (atoi(e->d_name) > 0 && atoi(e->d_name) != pid)
			tid = atoi(e->d_name);
	if (d)
		closedir(d);
	return tid;
}

static struct proc *running;

static int teardown_python(void **state)
{
	(void)state;
	if (running)
		stop_python(running);
	running = NULL;
	return 0;
}

/* The script's two threads read, named, lined; p started. */
static void check_real(struct proc *p, uint64_t version)
{
	struct pyframe fr[PYFRAMES_MAX_DEPTH];
	struct pyframes_stats st = { 0 };
	struct pyframes_target t;
	struct pyframes_layout l;
	struct unwind_mem um = { proc_read, p };
	char abs[PATH_MAX];
	unsigned n;

	assert_int_equal(pyframes_dynsym(&um, exe_base(p->pid, p->root ? PYTHON313 : PYTHON), &t),
			 0);
	assert_true(t.runtime && t.code_type && t.unicode_type && t.bytes_type);
	assert_int_equal(t.version >> 16, version);
	assert_int_equal(pyframes_layout(&um, &t, &l, &st), 0);
	/* 3.13 by what it publishes, never by a table */
	assert_int_equal(st.layout_published, version >= 0x030d);
	assert_int_equal(st.layout_table, version < 0x030d);
	assert_int_equal(st.bad_offsets, 0);

	n = read_until(p, &t, &l, p->pid, "leaf_work", fr, &st);
	assert_int_equal(n, 4);
	assert_string_equal(fr[0].name, "leaf_work");
	/* python names __main__ by its absolute path (inside its root) */
	if (p->root)
		assert_string_equal(fr[0].file, p->path + strlen(p->root));
	else
		assert_string_equal(fr[0].file, realpath(p->path, abs));
	assert_true(fr[0].line == 4 || fr[0].line == 5);
	assert_string_equal(fr[1].name, "middle");
	assert_int_equal(fr[1].line, 7);
	assert_string_equal(fr[2].name, "Outer.method");
	assert_int_equal(fr[2].line, 10);
	assert_string_equal(fr[3].name, "<module>");
	assert_int_equal(fr[3].line, 17);

	/* the other thread by its own native id */
	n = read_until(p, &t, &l, other_thread(p->pid), "spin_thread", fr, &st);
	assert_true(n >= 2);
	assert_string_equal(fr[0].name, "spin_thread");
	assert_true(fr[0].line == 13 || fr[0].line == 14);
	assert_string_equal(fr[1].name, "Thread.run");
	assert_non_null(strstr(fr[1].file, "threading.py"));

	/* a tid that runs no Python */
	assert_int_equal(pyframes_read(&um, &t, &l, 1, fr, PYFRAMES_MAX_DEPTH, &st), 0);
	assert_true(st.no_thread >= 1);
	assert_int_equal(st.bad_runtime + st.bad_code + st.bad_string + st.loops, 0);
}

static void test_real_python(void **state)
{
	static struct proc p;

	(void)state;
	if (access(PYTHON, X_OK))
		skip();
	memset(&p, 0, sizeof(p));
	running = &p;
	assert_int_equal(start_python(&p), 0);
	check_real(&p, 0x030b);
}

/* The same on a real 3.13: every offset from its _Py_DebugOffsets. */
static void test_real_python313(void **state)
{
	static struct proc p;
	static char root[512];
	const char *b = getenv("BUILD"), *r = getenv("OPVM_PY313_ROOT");
	char exe[600];

	(void)state;
	if (r && *r)
		snprintf(root, sizeof(root), "%s", r);
	else
		snprintf(root, sizeof(root), "%s/images/py313-root/opt/py313", b ? b : "build");
	snprintf(exe, sizeof(exe), "%s%s", root, PYTHON313);
	if (geteuid() || access(exe, X_OK)) {
		printf("SKIP: no %s (make images) or not root (chroot)\n", exe);
		skip();
	}
	memset(&p, 0, sizeof(p));
	p.root = root;
	running = &p;
	assert_int_equal(start_python(&p), 0);
	check_real(&p, 0x030d);
}

/* The samplers' side: a published address space (its "CR3" 0x5000), its
 * interpreter found from the executable's first page, frames by tid. */
static void test_pyguest(void **state)
{
	struct pyframe fr[PYFRAMES_MAX_DEPTH];
	struct sampler_python set = { .nr = 1 };
	struct pyguest_stats st;
	struct proc p = { 0 };
	struct unwind_mem um = { proc_read, &p };
	struct pyguest *pg;
	char line[512];
	unsigned n = 0;

	(void)state;
	if (access(PYTHON, X_OK))
		skip();
	running = &p;
	assert_int_equal(start_python(&p), 0);
	pg = pyguest_new();
	assert_non_null(pg);
	set.as[0].cr3 = 0x5000;
	set.as[0].exe_base = exe_base(p.pid, PYTHON);
	set.as[0].version = 0x030b0000;
	assert_int_equal(pyguest_read(pg, &um, 0x5000, (uint32_t)p.pid, fr, 8, 0), 0);
	pyguest_publish(pg, &set);
	assert_false(pyguest_is_python(pg, 0x5000));	/* not taken yet */
	pyguest_take(pg);
	assert_true(pyguest_is_python(pg, 0x5000));
	assert_false(pyguest_is_python(pg, 0x6000));
	for (int i = 0; i < 500 && !(n && !strcmp(fr[0].name, "leaf_work")); i++) {
		kill(p.pid, SIGSTOP);
		waitpid(p.pid, NULL, WUNTRACED);
		n = pyguest_read(pg, &um, 0x5000, (uint32_t)p.pid, fr, PYFRAMES_MAX_DEPTH, 0);
		kill(p.pid, SIGCONT);
		usleep(2000);
	}
	assert_int_equal(n, 4);
	assert_string_equal(fr[2].name, "Outer.method");
	/* running (the perf sampler): read, read again */
	n = pyguest_read(pg, &um, 0x5000, (uint32_t)p.pid, fr, PYFRAMES_MAX_DEPTH, 1);
	assert_true(n <= 4);
	/* no tid; a name that says another version: not resolved */
	assert_int_equal(pyguest_read(pg, &um, 0x5000, 0, fr, PYFRAMES_MAX_DEPTH, 0), 0);
	pyguest_get_stats(pg, &st);
	assert_int_equal(st.resolved, 1);
	assert_int_equal(st.no_tid, 1);
	assert_true(st.with_frames >= 1);
	set.as[0].version = 0x030c0000;
	set.as[0].cr3 = 0x7000;
	pyguest_publish(pg, &set);
	pyguest_take(pg);
	assert_int_equal(pyguest_read(pg, &um, 0x7000, (uint32_t)p.pid, fr, 8, 0), 0);
	pyguest_get_stats(pg, &st);
	assert_int_equal(st.resolve_failed, 1);
	pyguest_describe(pg, line, sizeof(line));
	assert_non_null(strstr(line, "python: "));
	/* the interpreter's layout from the 3.11 table, none forged */
	assert_non_null(strstr(line, "offsets from _Py_DebugOffsets\n  0, from the table 1, forged 0;"));
	/* the sample whose interpreter was not found */
	assert_int_equal(st.unresolved, 1);
	assert_non_null(strstr(line, ", 1 samples before found)"));
	pyguest_free(pg);
}

/* ---- a fake image --------------------------------------------------------- */

#define BASE	0x10000000ull
#define IMG	(1u << 20)

static uint8_t img[IMG];
static uint64_t brk_at;
static unsigned reads;

static int img_read(void *arg, uint64_t gva, void *buf, size_t len)
{
	(void)arg;
	reads++;
	if (gva < BASE || gva - BASE > IMG || len > IMG - (gva - BASE))
		return -EFAULT;
	memcpy(buf, img + (gva - BASE), len);
	return 0;
}

static const struct unwind_mem img_mem = { img_read, NULL };

static uint64_t alloc(size_t len)
{
	uint64_t at = brk_at;

	brk_at += (len + 15) & ~15ull;
	assert_true(brk_at - BASE <= IMG);
	return at;
}

static void put(uint64_t at, const void *v, size_t len)
{
	memcpy(img + (at - BASE), v, len);
}

static void put64(uint64_t at, uint64_t v)
{
	put(at, &v, 8);
}

static void put32(uint64_t at, uint32_t v)
{
	put(at, &v, 4);
}

/* The fake types and the layout the image is built in. */
static struct pyframes_target ft;
static struct pyframes_layout fl;

static uint64_t mk_str(const char *s)
{
	size_t n = strlen(s);
	uint64_t o = alloc(fl.str_ascii_size + n + 1);

	put64(o + fl.ob_type, ft.unicode_type);
	put64(o + fl.str_length, n);
	put32(o + fl.str_state, 1u << 2 | 1u << 5 | 1u << 6);	/* kind 1, compact, ascii */
	put(o + fl.str_ascii_size, s, n + 1);
	return o;
}

/* A code object of one instruction per line from first: a short-form
 * table entry per instruction (code 10 + 1: the next line). */
static uint64_t mk_code(const char *name, const char *file, int first, unsigned ninstr)
{
	uint64_t c = alloc(fl.co_code + 2 * ninstr), lt = alloc(fl.bytes_sval + 3 * ninstr);

	put64(c + fl.ob_type, ft.code_type);
	put64(c + fl.co_qualname, mk_str(name));
	put64(c + fl.co_filename, mk_str(file));
	put32(c + fl.co_firstlineno, (uint32_t)first);
	put64(c + fl.co_linetable, lt);
	put64(lt + fl.ob_type, ft.bytes_type);
	put64(lt + fl.bytes_size, 3 * ninstr);
	for (unsigned i = 0; i < ninstr; i++) {
		/* the first entry stays on co_firstlineno (code 10) */
		uint8_t e[3] = { (uint8_t)(0x80 | (i ? 11 : 10) << 3), 0, 0 };

		put(lt + fl.bytes_sval + 3 * i, e, 3);
	}
	return c;
}

static uint64_t mk_frame(uint64_t code, unsigned instr, uint64_t previous)
{
	uint64_t f = alloc(80);

	put64(f + fl.fr_code, code);
	put64(f + fl.fr_previous, previous);
	put64(f + fl.fr_instr, code + fl.co_code + 2 * instr);
	img[f + fl.fr_owner - BASE] = 0;
	return f;
}

/* 3.13's _Py_DebugOffsets at _PyRuntime (Include/internal/pycore_runtime.h
 * of 3.13: where each offset sits), with offsets of our choosing and the
 * structures' sizes of Debian 13's python3.13 3.13.5. */
static void build_debug_offsets(void)
{
	static const struct { unsigned at; uint64_t v; } o[] = {
		{ 24, 283376 }, { 48, 194976 }, { 152, 304 }, { 224, 80 }, /* sizeof */
		{ 272, 208 }, { 352, 16 }, { 512, 40 }, { 536, 64 },
		{ 40, 600 },				/* runtime_state.interpreters_head */
		{ 64, 0 }, { 72, 72 },			/* interpreter_state next, threads_head */
		{ 168, 8 }, { 176, 16 }, { 184, 72 },	/* thread_state next, interp, current_frame */
		{ 200, 160 },				/* ... native_thread_id */
		{ 232, 8 }, { 240, 0 }, { 248, 56 }, { 264, 70 }, /* frame */
		{ 280, 112 }, { 296, 128 }, { 304, 136 }, { 312, 68 }, { 344, 200 }, /* code */
		{ 360, 8 },				/* ob_type */
		{ 520, 16 }, { 528, 32 },		/* bytes */
		{ 544, 32 }, { 552, 16 }, { 560, 40 },	/* unicode state, length, ascii size */
	};

	put(ft.runtime, "xdebugpy", 8);
	put64(ft.runtime + 8, ft.version);
	for (size_t i = 0; i < ARRAY_SIZE(o); i++)
		put64(ft.runtime + o[i].at, o[i].v);
}

static uint64_t fake_ts, fake_interp, fake_frames[3];

/* _PyRuntime -> interp -> tstate (tid 42) -> cframe -> three frames. */
static void build_image(int minor)
{
	uint64_t cf = 0, codes[3];

	memset(img, 0, sizeof(img));
	brk_at = BASE + 4096;
	ft.runtime = alloc(4096);
	ft.code_type = alloc(64);
	ft.unicode_type = alloc(64);
	ft.bytes_type = alloc(64);
	ft.version = minor == 13 ? 0x030d03f0 : 0x030b02f0;
	if (minor == 13)
		build_debug_offsets();
	assert_int_equal(pyframes_layout(&img_mem, &ft, &fl, &(struct pyframes_stats){ 0 }), 0);
	fake_interp = alloc(4096);
	fake_ts = alloc(1024);
	put64(ft.runtime + fl.rt_interp_head, fake_interp);
	put64(fake_interp + fl.is_threads_head, fake_ts);
	put64(fake_ts + fl.ts_interp, fake_interp);
	put64(fake_ts + fl.ts_native_tid, 42);
	codes[0] = mk_code("leaf", "/srv/app.py", 10, 8);
	codes[1] = mk_code("Cls.mid", "/srv/app.py", 20, 8);
	codes[2] = mk_code("<module>", "/srv/app.py", 1, 40);
	fake_frames[2] = mk_frame(codes[2], 30, 0);
	fake_frames[1] = mk_frame(codes[1], 3, fake_frames[2]);
	fake_frames[0] = mk_frame(codes[0], 5, fake_frames[1]);
	if (fl.cf_current != 0xffff) {
		cf = alloc(32);
		put64(fake_ts + fl.ts_frame, cf);
		put64(cf + fl.cf_current, fake_frames[0]);
	} else {
		put64(fake_ts + fl.ts_frame, fake_frames[0]);
	}
}

static unsigned read_fake(struct pyframe *fr, struct pyframes_stats *st)
{
	memset(st, 0, sizeof(*st));
	reads = 0;
	return pyframes_read(&img_mem, &ft, &fl, 42, fr, PYFRAMES_MAX_DEPTH, st);
}

static void assert_good_chain(void)
{
	struct pyframe fr[PYFRAMES_MAX_DEPTH];
	struct pyframes_stats st;
	char buf[256];

	assert_int_equal(read_fake(fr, &st), 3);
	assert_string_equal(fr[0].name, "leaf");
	assert_int_equal(fr[0].line, 15);	/* instruction 5: first + 5 */
	assert_string_equal(fr[1].name, "Cls.mid");
	assert_int_equal(fr[1].line, 23);
	assert_string_equal(fr[2].name, "<module>");
	assert_int_equal(fr[2].line, 31);
	pyframe_format(&fr[0], buf, sizeof(buf));
	assert_string_equal(buf, "leaf (/srv/app.py:15)");
	assert_int_equal(st.chains, 1);
	assert_int_equal(st.frames, 3);
}

static void test_fake_311(void **state)
{
	(void)state;
	build_image(11);
	assert_good_chain();
}

/* pyframes_layout() of the fake image after the 8 bytes at `at` of the
 * block became v: its result, the counters checked; the block restored. */
static int forge(unsigned at, uint64_t v)
{
	struct pyframes_stats st = { 0 };
	struct pyframes_layout l;
	uint64_t old;
	int err;

	memcpy(&old, img + (ft.runtime - BASE) + at, 8);
	put64(ft.runtime + at, v);
	err = pyframes_layout(&img_mem, &ft, &l, &st);
	put64(ft.runtime + at, old);
	assert_int_equal(st.layout_published, err ? 0 : 1);
	assert_int_equal(st.bad_offsets, err == -EINVAL ? 1 : 0);
	assert_int_equal(st.layout_table, 0);
	return err;
}

static void test_fake_313(void **state)
{
	struct pyframes_stats st = { 0 };
	struct pyframes_layout l;
	char cookie[8];

	(void)state;
	build_image(13);
	assert_int_equal(fl.cf_current, 0xffff);
	assert_int_equal(fl.is_threads_head, 72);
	assert_good_chain();
	assert_int_equal(forge(8, ft.version), 0);
	/* a forged cookie: a 3.13 without its block */
	memcpy(cookie, "xdebugpz", 8);
	assert_int_equal(forge(0, *(uint64_t *)(void *)cookie), -EINVAL);
	/* a version other than Py_Version's: another minor, another micro */
	assert_int_equal(forge(8, 0x030c00f0), -EINVAL);
	assert_int_equal(forge(8, 0x030d04f0), -EINVAL);
	assert_int_equal(forge(16, 1), -EINVAL);	/* free-threaded */
	/* offsets out of bounds: no field can be there, past its structure's
	 * declared size (tstate 304: native_thread_id at 296 fits, 300 not),
	 * past what is read of it (an interpreter's 64 KiB) */
	assert_int_equal(forge(232, 1ull << 40), -EINVAL);
	assert_int_equal(forge(200, 296), 0);
	assert_int_equal(forge(200, 300), -EINVAL);
	assert_int_equal(forge(64, 0x10000), -EINVAL);
	/* declared sizes: too large, too small for the offsets in them */
	assert_int_equal(forge(224, 1ull << 21), -EINVAL);
	assert_int_equal(forge(272, 100), -EINVAL);
	assert_int_equal(forge(536, 48), -EINVAL);	/* no compact header */
	/* fields that do not fit how objects are read: a file name among the
	 * instructions, a string length past the ASCII header */
	assert_int_equal(forge(280, 200), -EINVAL);
	assert_int_equal(forge(552, 40), -EINVAL);
	/* a 3.12 that says it publishes a block: forged */
	ft.version = 0x030c04f0;
	assert_int_equal(forge(8, ft.version), -EINVAL);
	/* a 3.12 without one: the table; an unreadable _PyRuntime: the table
	 * for 3.12, later for 3.13 */
	put64(ft.runtime, 0);
	assert_int_equal(pyframes_layout(&img_mem, &ft, &l, &st), 0);
	assert_int_equal(st.layout_table, 1);
	assert_int_equal(l.ts_native_tid, 144);
	ft.runtime = BASE + IMG;
	assert_int_equal(pyframes_layout(&img_mem, &ft, &l, &st), 0);
	assert_int_equal(st.layout_table, 2);
	ft.version = 0x030d03f0;
	assert_int_equal(pyframes_layout(&img_mem, &ft, &l, &st), -EFAULT);
	assert_int_equal(st.bad_offsets + st.layout_published, 0);
}

static void test_versions(void **state)
{
	struct pyframes_target t = { .runtime = BASE + 4096 };
	struct pyframes_layout l;

	(void)state;
	t.version = 0x030a0cf0;		/* 3.10: frames of another kind */
	assert_int_equal(pyframes_layout(&img_mem, &t, &l, &(struct pyframes_stats){ 0 }), -ENOTSUP);
	t.version = 0x030e00f0;		/* 3.14: another _Py_DebugOffsets */
	assert_int_equal(pyframes_layout(&img_mem, &t, &l, &(struct pyframes_stats){ 0 }), -ENOTSUP);
	t.version = 0;
	assert_int_equal(pyframes_layout(&img_mem, &t, &l, &(struct pyframes_stats){ 0 }), -ENOTSUP);
	t.version = 0x030c04f0;
	assert_int_equal(pyframes_layout(&img_mem, &t, &l, &(struct pyframes_stats){ 0 }), 0);
	assert_int_equal(l.ts_native_tid, 144);
}

static void test_frame_loops(void **state)
{
	struct pyframe fr[PYFRAMES_MAX_DEPTH];
	struct pyframes_stats st;

	(void)state;
	build_image(11);
	put64(fake_frames[0] + fl.fr_previous, fake_frames[0]);	/* itself */
	assert_int_equal(read_fake(fr, &st), 1);
	assert_int_equal(st.loops, 1);
	put64(fake_frames[0] + fl.fr_previous, fake_frames[1]);
	put64(fake_frames[2] + fl.fr_previous, fake_frames[0]);	/* a ring of three */
	assert_int_equal(read_fake(fr, &st), 3);
	assert_int_equal(st.loops, 1);
	assert_true(reads < 100);
}

static void test_forged_threads(void **state)
{
	struct pyframe fr[PYFRAMES_MAX_DEPTH];
	struct pyframes_stats st;
	uint64_t ts2 = alloc(1024);

	(void)state;
	build_image(11);
	ts2 = alloc(1024);
	put64(fake_ts + fl.ts_native_tid, 7);
	put64(fake_ts + fl.ts_next, ts2);
	put64(ts2 + fl.ts_interp, fake_interp);
	put64(ts2 + fl.ts_next, fake_ts);		/* a thread ring */
	assert_int_equal(read_fake(fr, &st), 0);
	assert_int_equal(st.loops, 1);
	put64(ts2 + fl.ts_next, 0);
	put64(ts2 + fl.ts_interp, fake_interp + 8);	/* not of this interpreter */
	assert_int_equal(read_fake(fr, &st), 0);
	assert_int_equal(st.bad_runtime, 1);
	put64(ts2 + fl.ts_interp, fake_interp);		/* no thread of tid 42 */
	assert_int_equal(read_fake(fr, &st), 0);
	assert_int_equal(st.no_thread, 1);
	/* a forged _PyRuntime: interpreters in the kernel half, unaligned */
	put64(ft.runtime + fl.rt_interp_head, 0xffff888000000000ull);
	assert_int_equal(read_fake(fr, &st), 0);
	assert_int_equal(st.bad_runtime, 1);
	put64(ft.runtime + fl.rt_interp_head, fake_interp + 3);
	assert_int_equal(read_fake(fr, &st), 0);
	assert_int_equal(st.bad_runtime, 1);
	/* an interpreter ring */
	put64(ft.runtime + fl.rt_interp_head, fake_interp);
	put64(fake_interp + fl.is_next, fake_interp);
	assert_int_equal(read_fake(fr, &st), 0);
	assert_int_equal(st.loops, 1);
}

static void test_names(void **state)
{
	struct pyframe fr[PYFRAMES_MAX_DEPTH];
	struct pyframes_stats st;
	uint64_t code = fake_frames[0], s;
	char big[400];

	(void)state;
	build_image(11);
	memcpy(&code, img + (fake_frames[0] + fl.fr_code - BASE), 8);
	memcpy(&s, img + (code + fl.co_qualname - BASE), 8);
	/* giant: refused */
	put64(s + fl.str_length, 1ull << 30);
	assert_int_equal(read_fake(fr, &st), 0);
	assert_int_equal(st.bad_string, 1);
	/* long: cut to fit */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	put64(code + fl.co_qualname, mk_str(big));
	assert_int_equal(read_fake(fr, &st), 3);
	assert_int_equal(strlen(fr[0].name), PYFRAMES_NAME_MAX - 1);
	assert_int_equal(st.truncated, 1);
	/* "ASCII" with a byte above 0x7f: refused; control characters: '?' */
	s = mk_str("ab\x85");
	put64(code + fl.co_qualname, s);
	assert_int_equal(read_fake(fr, &st), 0);
	assert_int_equal(st.bad_string, 1);
	put64(code + fl.co_qualname, mk_str("a\x1b[2Jb"));
	assert_int_equal(read_fake(fr, &st), 3);
	assert_string_equal(fr[0].name, "a?[2Jb");
	/* UCS-2 compact: UTF-8 out */
	s = alloc(fl.str_compact_size + 8);
	put64(s + fl.ob_type, ft.unicode_type);
	put64(s + fl.str_length, 2);
	put32(s + fl.str_state, 2u << 2 | 1u << 5);
	put(s + fl.str_compact_size, "\xe9\x00\x2c\x20", 4);	/* U+00E9 U+202C */
	put64(code + fl.co_qualname, s);
	assert_int_equal(read_fake(fr, &st), 3);
	assert_string_equal(fr[0].name, "\xc3\xa9\xe2\x80\xac");
	/* not compact, or not a str */
	put32(s + fl.str_state, 2u << 2);
	assert_int_equal(read_fake(fr, &st), 0);
	assert_int_equal(st.bad_string, 1);
	put32(s + fl.str_state, 2u << 2 | 1u << 5);
	put64(s + fl.ob_type, ft.bytes_type);
	assert_int_equal(read_fake(fr, &st), 0);
	assert_int_equal(st.bad_string, 1);
}

static void test_bad_pointers(void **state)
{
	struct pyframe fr[PYFRAMES_MAX_DEPTH];
	struct pyframes_stats st;
	uint64_t code;

	(void)state;
	build_image(11);
	memcpy(&code, img + (fake_frames[1] + fl.fr_code - BASE), 8);
	/* a code object of another type: the chain stops above it */
	put64(code + fl.ob_type, ft.unicode_type);
	assert_int_equal(read_fake(fr, &st), 1);
	assert_int_equal(st.bad_code, 1);
	put64(code + fl.ob_type, ft.code_type);
	/* frames in the kernel, unaligned, outside the image, bad owner */
	put64(fake_frames[1] + fl.fr_previous, 0xffffffff81000000ull);
	assert_int_equal(read_fake(fr, &st), 2);
	assert_int_equal(st.bad_frame, 1);
	put64(fake_frames[1] + fl.fr_previous, fake_frames[2] + 1);
	assert_int_equal(read_fake(fr, &st), 2);
	assert_int_equal(st.bad_frame, 1);
	put64(fake_frames[1] + fl.fr_previous, BASE + IMG + 4096);	/* does not read */
	assert_int_equal(read_fake(fr, &st), 2);
	assert_int_equal(st.unreadable, 1);
	assert_int_equal(st.bad_frame, 0);
	put64(fake_frames[1] + fl.fr_previous, fake_frames[2]);
	img[fake_frames[2] + fl.fr_owner - BASE] = 9;
	assert_int_equal(read_fake(fr, &st), 2);
	assert_int_equal(st.bad_frame, 1);
	img[fake_frames[2] + fl.fr_owner - BASE] = 0;
	/* an instruction pointer outside its code: the first line */
	put64(fake_frames[0] + fl.fr_instr, 0x1000);
	assert_int_equal(read_fake(fr, &st), 3);
	assert_int_equal(fr[0].line, 10);
	/* a location table that lies about its size: no line, no overrun */
	put64(fake_frames[0] + fl.fr_instr, code + fl.co_code + 10);
	memcpy(&code, img + (fake_frames[0] + fl.fr_code - BASE), 8);
	put64(fake_frames[0] + fl.fr_instr, code + fl.co_code + 2 * 7);
	{
		uint64_t lt;

		memcpy(&lt, img + (code + fl.co_linetable - BASE), 8);
		put64(lt + fl.bytes_size, 1ull << 40);
		assert_int_equal(read_fake(fr, &st), 3);
		assert_int_equal(fr[0].line, 0);
		put64(lt + fl.bytes_size, 6);		/* shorter than instruction 7 */
		assert_int_equal(read_fake(fr, &st), 3);
		assert_int_equal(fr[0].line, 0);
	}
}

static void test_depth(void **state)
{
	struct pyframe fr[PYFRAMES_MAX_DEPTH];
	struct pyframes_stats st;
	uint64_t code, f = 0;

	(void)state;
	build_image(11);
	memcpy(&code, img + (fake_frames[0] + fl.fr_code - BASE), 8);
	for (int i = 0; i < 200; i++)
		f = mk_frame(code, 1, f);
	put64(fake_frames[2] + fl.fr_previous, f);
	assert_int_equal(read_fake(fr, &st), PYFRAMES_MAX_DEPTH);
	assert_int_equal(st.depth_cut, 1);
	/* fewer wanted than there are */
	memset(&st, 0, sizeof(st));
	assert_int_equal(pyframes_read(&img_mem, &ft, &fl, 42, fr, 2, &st), 2);
}

/* The perf sampler's second read: what changed in between is dropped. */
static void test_validate(void **state)
{
	struct pyframe fr[PYFRAMES_MAX_DEPTH];
	struct pyframes_stats st;
	uint64_t code2;

	(void)state;
	build_image(11);
	assert_int_equal(read_fake(fr, &st), 3);
	/* nothing changed; the leaf's own instruction may move on */
	put64(fake_frames[0] + fl.fr_instr, fr[0].instr + 2);
	assert_int_equal(pyframes_validate(&img_mem, &ft, &fl, 42, fr, 3, &st), 3);
	assert_int_equal(st.changed, 0);
	/* the leaf returned: its caller runs another call site */
	put64(fake_frames[1] + fl.fr_instr, fr[1].instr + 2);
	assert_int_equal(pyframes_validate(&img_mem, &ft, &fl, 42, fr, 3, &st), 1);
	assert_int_equal(st.changed, 2);
	assert_string_equal(fr[0].name, "<module>");
	/* another code object in the outermost frame: nothing kept */
	assert_int_equal(read_fake(fr, &st), 3);
	memcpy(&code2, img + (fake_frames[0] + fl.fr_code - BASE), 8);
	put64(fake_frames[2] + fl.fr_code, code2);
	assert_int_equal(pyframes_validate(&img_mem, &ft, &fl, 42, fr, 3, &st), 0);
	assert_int_equal(st.changed, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_real_python, teardown_python),
		cmocka_unit_test_teardown(test_real_python313, teardown_python),
		cmocka_unit_test_teardown(test_pyguest, teardown_python),
		cmocka_unit_test(test_fake_311),
		cmocka_unit_test(test_fake_313),
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_frame_loops),
		cmocka_unit_test(test_forged_threads),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_bad_pointers),
		cmocka_unit_test(test_depth),
		cmocka_unit_test(test_validate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
