// SPDX-License-Identifier: MIT
/*
 * The Python frame reader (unwind/pyframes.c) on a real interpreter:
 * Debian's /usr/bin/python3.11 running a chain of eight pure-Python
 * functions, stopped (SIGSTOP) 300 times and read through /proc/PID/mem
 * with the callback guest memory uses.  Per Python sample: the host's CPU
 * time in pyframes_read() (this thread's CPU time, the pread calls'
 * kernel time included: the shared machine's wall clock says nothing),
 * the guest bytes read and the read calls made.  Against guest memory
 * (QEMU's RAM mapped, a page walk per page) a read is a memcpy, not a
 * system call, so the time here is an upper bound.
 *
 * Then the perf sampler's way, the process running: read, read again
 * (pyframes_validate()) and keep what did not change.
 *
 * Prints:  pyframes-per-sample: N us
 *          pyframes-bytes-per-sample: N bytes
 *          pyframes-reads-per-sample: N reads
 *          pyframes-intern-per-sample: N us
 *          pyframes-running-per-sample: N us
 *          pyframes-running-kept: N %
 * SKIP (no line) without /usr/bin/python3.11.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/pynames.h"
#include "unwind/pyframes.h"

#define PYTHON	"/usr/bin/python3.11"
#define SAMPLES	300

static const char script[] =
	"import os\n"
	"def f8():\n    x = 0\n    while True:\n        x += 1\n"
	"def f7(): f8()\ndef f6(): f7()\ndef f5(): f6()\ndef f4(): f5()\n"
	"def f3(): f4()\ndef f2(): f3()\ndef f1(): f2()\n"
	"os.write(1, b'r')\nf1()\n";

struct proc {
	int mem;
	unsigned reads;
	pid_t pid;
};

static int proc_read(void *arg, uint64_t gva, void *buf, size_t len)
{
	struct proc *p = arg;

	p->reads++;
	return pread(p->mem, buf, len, (off_t)gva) == (ssize_t)len ? 0 : -EFAULT;
}

static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static uint64_t exe_base(pid_t pid)
{
	char path[64], line[512];
	unsigned long a, o;
	uint64_t base = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%*x %*s %lx", &a, &o) == 2 && !o &&
		    strstr(line, PYTHON "\n")) {
			base = a;
			break;
		}
	if (f)
		fclose(f);
	return base;
}

static pid_t start(const char *file)
{
	int out[2];
	pid_t pid;
	char c;
	FILE *f = fopen(file, "we");

	if (!f || fputs(script, f) < 0 || fclose(f) || pipe(out))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(out[1], 1);
		close(out[0]);
		execl(PYTHON, PYTHON, "-S", file, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	if (pid < 0 || read(out[0], &c, 1) != 1)
		pid = -1;
	close(out[0]);
	return pid;
}

/* The perf sampler's way: the process keeps running; read, then read
 * again and keep what did not change. */
static int running(struct proc *p, const struct pyframes_target *t,
		   const struct pyframes_layout *l)
{
	struct unwind_mem um = { proc_read, p };
	struct pyframes_stats st = { 0 };
	struct pyframe fr[PYFRAMES_MAX_DEPTH];
	unsigned whole = 0, named = 0;
	double ns = 0;

	for (int i = 0; i < SAMPLES; i++) {
		double t0 = cpu_ns();
		unsigned n = pyframes_read(&um, t, l, (uint32_t)p->pid, fr, PYFRAMES_MAX_DEPTH, &st);

		n = pyframes_validate(&um, t, l, (uint32_t)p->pid, fr, n, &st);
		ns += cpu_ns() - t0;
		whole += n >= 9;
		named += n >= 1 && !strcmp(fr[0].name, "f8");
		usleep(200);
	}
	printf("pyframes-running-per-sample: %.1f us\n", ns / SAMPLES / 1000.0);
	printf("pyframes-running-kept: %.1f %%\n", 100.0 * whole / SAMPLES);
	fprintf(stderr, "(running: %u of %d chains whole, %u with f8 as the leaf, %llu frames "
		"dropped as changed)\n", whole, SAMPLES, named, (unsigned long long)st.changed);
	return 0;
}

/* What the gdbstub sampler adds to each read: the frames interned in the
 * session's name table (lib/pynames.h), all of them known after the
 * first sample, as in a steady profile. */
static void intern(const struct pyframe *fr, unsigned n)
{
	struct pynames *t = pynames_new();
	double t0, ns;
	uint32_t idx;

	if (!t)
		return;
	t0 = cpu_ns();
	for (int i = 0; i < SAMPLES; i++)
		for (unsigned k = 0; k < n; k++)
			pynames_intern(t, fr[k].name, fr[k].file, fr[k].first_line, fr[k].line, &idx);
	ns = cpu_ns() - t0;
	printf("pyframes-intern-per-sample: %.2f us\n", ns / SAMPLES / 1000.0);
	pynames_free(t);
}

static int run(pid_t pid, struct proc *p)
{
	struct unwind_mem um = { proc_read, p };
	struct pyframes_stats st = { 0 };
	struct pyframes_target t;
	struct pyframes_layout l;
	struct pyframe fr[PYFRAMES_MAX_DEPTH];
	double ns = 0;
	unsigned got = 0, reads = 0;

	if (pyframes_dynsym(&um, exe_base(pid), &t) || pyframes_layout(&um, &t, &l, &st))
		return -1;
	/* until the script is in f8: it may not have run since its write */
	for (int i = 0; i < 2000 && pyframes_read(&um, &t, &l, (uint32_t)pid, fr,
						  PYFRAMES_MAX_DEPTH, &st) < 9; i++)
		usleep(1000);
	memset(&st, 0, sizeof(st));
	for (int i = 0; i < SAMPLES; i++) {
		double t0;
		unsigned r0 = p->reads, n;

		kill(pid, SIGSTOP);
		waitpid(pid, NULL, WUNTRACED);
		t0 = cpu_ns();
		n = pyframes_read(&um, &t, &l, (uint32_t)pid, fr, PYFRAMES_MAX_DEPTH, &st);
		ns += cpu_ns() - t0;
		reads += p->reads - r0;
		kill(pid, SIGCONT);
		got += n >= 9;		/* f8..f1 and <module> */
		usleep(200);		/* let it run between samples */
	}
	printf("pyframes-per-sample: %.1f us\n", ns / SAMPLES / 1000.0);
	printf("pyframes-bytes-per-sample: %.0f bytes\n", (double)st.bytes / SAMPLES);
	printf("pyframes-reads-per-sample: %.1f reads\n", (double)reads / SAMPLES);
	intern(fr, pyframes_read(&um, &t, &l, (uint32_t)pid, fr, PYFRAMES_MAX_DEPTH, &st));
	fprintf(stderr, "(%u of %d samples with the whole 9-frame chain, %llu frames)\n", got,
		SAMPLES, (unsigned long long)st.frames);
	return got >= SAMPLES * 9 / 10 ? running(p, &t, &l) : -1;
}

int main(void)
{
	char file[] = "/tmp/bench-pyframes.XXXXXX";
	struct proc p = { -1, 0, 0 };
	char mem[64];
	pid_t pid;
	int fd, rc;

	if (access(PYTHON, X_OK)) {
		fprintf(stderr, "bench-pyframes: SKIP: no " PYTHON "\n");
		return 0;
	}
	fd = mkstemp(file);
	if (fd < 0)
		return 1;
	close(fd);
	pid = start(file);
	if (pid <= 0) {
		unlink(file);
		return 1;
	}
	snprintf(mem, sizeof(mem), "/proc/%d/mem", pid);
	p.mem = open(mem, O_RDONLY | O_CLOEXEC);
	p.pid = pid;
	rc = p.mem >= 0 ? run(pid, &p) : -1;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	if (p.mem >= 0)
		close(p.mem);
	unlink(file);
	if (rc)
		fprintf(stderr, "bench-pyframes: the reads failed\n");
	return rc ? 1 : 0;
}
