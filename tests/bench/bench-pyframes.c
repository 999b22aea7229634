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
 * And the samplers' whole paths on a forged guest (tests/unit/
 * pyguest-image.h: guest RAM read through /proc/self/mem as QEMU's is
 * through /proc/PID/mem, page walks, opvm.ko's slots, the same nine-frame
 * chain in 3.11's layout): the perf sampler's read right after a sample
 * (vmm/perf/perf-python.c: slot, chain, second read, slot again, names
 * interned, held and confirmed) and, for comparison, the gdbstub's read
 * in its stop (one read through the same kind of view), and the built-in
 * VMM's own sampler's (the same, its reads copies of its own memory).
 *
 * Prints:  pyframes-per-sample: N us
 *          pyframes-bytes-per-sample: N bytes
 *          pyframes-reads-per-sample: N reads
 *          pyframes-intern-per-sample: N us
 *          pyframes-running-per-sample: N us
 *          pyframes-running-kept: N %
 *          pyframes-perf-per-sample: N us
 *          pyframes-perf-bytes-per-sample: N bytes
 *          pyframes-perf-current-per-sample: N us   (no module: the kernel's
 *          pyframes-perf-current-bytes-per-sample: N bytes   current-task pointer)
 *          pyframes-stopped-image-per-sample: N us
 *          pyframes-kvm-image-per-sample: N us
 * The real interpreter's lines are left out (SKIP) without
 * /usr/bin/python3.11.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/pynames.h"
#include "tests/unit/pyguest-image.h"
#include "unwind/pyframes.h"
#include "vmm/guest/pyguest.h"
#include "vmm/perf/perf-python.h"

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

/* The gdbstub's read in a stop, on the forged guest: the address space's
 * view emptied (a new sample), one read. */
static void image_stopped(struct pyimg *im, const char *figure)
{
	static struct guestmem_view v;
	struct pyguest *pg = pyguest_new();
	struct unwind_mem um = { guestmem_view_read, &v };
	struct pyframe fr[PYFRAMES_MAX_DEPTH];
	struct sampler_python set;
	unsigned got = 0;
	double t0, ns;

	if (!pg)
		return;
	pyimg_set(&set);
	pyguest_publish(pg, &set);
	pyguest_take(pg);
	guestmem_view_init(&v, im->m);
	t0 = cpu_ns();
	for (int i = 0; i < SAMPLES * 10; i++) {
		guestmem_view_reset(&v, PYIMG_CR3, PYGUEST_PAGES);
		got += pyguest_read(pg, &um, PYIMG_CR3, PYIMG_TID, fr, PYFRAMES_MAX_DEPTH, 0) == 9;
	}
	ns = cpu_ns() - t0;
	printf("%s: %.1f us\n", figure, ns / (SAMPLES * 10) / 1000.0);
	{
		struct pyguest_stats st;

		pyguest_get_stats(pg, &st);
		fprintf(stderr, "(forged guest, %s: %u of %d whole, %.0f bytes each)\n",
			figure, got, SAMPLES * 10,
			(double)st.fr.bytes / (SAMPLES * 10));
	}
	pyguest_free(pg);
}

/* The perf sampler's read right after a sample, on the forged guest, the
 * task named by opvm.ko's slot and confirmed as the timeline would, or
 * (cur) by the kernel's current-task pointer (no module) and handed on
 * with its tgid: per sample, its host CPU time, guest bytes and pages. */
static int image_perf(struct pyimg *im, bool cur)
{
	static const struct timeline_task task = { .tsc = 1, .pid = PYIMG_TID,
						   .tgid = PYIMG_TID, .cr3 = PYIMG_CR3 };
	const struct timeline_task *t = cur ? NULL : &task;
	const char *fig = cur ? "pyframes-perf-current" : "pyframes-perf";
	const struct guest_tsc clk = { 0, 0, 0 };
	struct perf_python *pp = perf_python_new(1);
	struct pynames *names = pynames_new();
	struct perf_python_stats st;
	struct sampler_python set;
	struct kcurrent_info ci;
	uint64_t w[PYFRAMES_MAX_DEPTH];
	unsigned kept = 0;
	uint32_t tgid;
	double t0, ns;

	if (!pp || !names)
		return -1;
	pyimg_set(&set);
	perf_python_publish(pp, &set);
	if (cur) {
		pyimg_kernel(im, 1, &ci);
		perf_python_set_current(pp, &ci);
	} else {
		perf_python_set_slots(pp, PYIMG_SLOTS, sizeof(struct opvm_slot), 1);
	}
	perf_python_take(pp, im->m);
	/* the first read finds the interpreter: not a steady sample */
	perf_python_chain(pp, 0, perf_python_read(pp, im->m, names, 0, &clk), t, t, w, &tgid);
	perf_python_publish_stats(pp);
	perf_python_get_stats(pp, &st);
	t0 = cpu_ns();
	for (int i = 0; i < SAMPLES * 10; i++) {
		uint32_t h = perf_python_read(pp, im->m, names, 0, &clk);

		kept += perf_python_chain(pp, 0, h, t, t, w, &tgid) == 9;
	}
	ns = cpu_ns() - t0;
	{
		struct perf_python_stats s2;
		double n = SAMPLES * 10;

		perf_python_publish_stats(pp);
		perf_python_get_stats(pp, &s2);
		printf("%s-per-sample: %.1f us\n", fig, ns / n / 1000.0);
		printf("%s-bytes-per-sample: %.0f bytes (target <= 16384)\n", fig,
		       (double)(s2.py.fr.bytes - st.py.fr.bytes) / n);
		fprintf(stderr, "(forged guest, perf sampler's read%s: %u of %.0f kept whole, "
			"%llu frames changed)\n", cur ? " by the current-task pointer" : "",
			kept, n, (unsigned long long)(s2.py.fr.changed - st.py.fr.changed));
	}
	perf_python_free(pp);
	pynames_free(names);
	return kept == SAMPLES * 10 ? 0 : -1;
}

/* Both samplers' paths on the forged guest. */
static int image(void)
{
	static const char *const chain9[] = { "f8", "f7", "f6", "f5", "f4", "f3", "f2", "f1",
					      "<module>" };
	struct pyimg im;
	int rc = -1;

	if (!pyimg_build(&im, chain9, 9, 1)) {
		rc = image_perf(&im, false);
		if (image_perf(&im, true))
			rc = -1;
		image_stopped(&im, "pyframes-stopped-image-per-sample");
		/* the built-in VMM's own sampler: its guest's RAM is its own */
		if (guestmem_map_self(im.m) == 1)
			image_stopped(&im, "pyframes-kvm-image-per-sample");
	}
	pyimg_free(&im);
	return rc;
}

int main(void)
{
	char file[] = "/tmp/bench-pyframes.XXXXXX";
	struct proc p = { -1, 0, 0 };
	char mem[64];
	pid_t pid;
	int fd, rc;

	if (image()) {
		fprintf(stderr, "bench-pyframes: the forged guest's reads failed\n");
		return 1;
	}
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
