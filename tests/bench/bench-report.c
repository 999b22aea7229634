// SPDX-License-Identifier: MIT
/*
 * `opvm report -l` on a large session: 300 images (copies of one compiled
 * ELF with 334 functions: ~100 k symbols), two threads each, 10 M samples
 * spread over every byte of every function (~2.6 M sample-file entries).
 * Times the report (exec of $OPVM, else the report library in a child)
 * and its peak RSS.
 *
 *   report: X s          (wall, best of three)
 *   report-cpu: X s      (user + system)
 *   report-rss: N MiB
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include "host/report/report.h"
#include "host/collect/store.h"
#include "symbols/elfimage.h"

#define NR_IMAGES	300
#define NR_FUNCS	334
#define NR_SAMPLES	10000000ull

static int sh(const char *cmd)
{
	int rc = system(cmd);

	if (rc)
		fprintf(stderr, "bench-report: '%s' failed\n", cmd);
	return rc;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int make_binary(const char *dir, char *path, size_t len)
{
	char src[1024], cmd[4096];
	FILE *f;

	snprintf(src, sizeof(src), "%s/many.c", dir);
	f = fopen(src, "w");
	if (!f)
		return -1;
	for (int i = 0; i < NR_FUNCS; i++)
		fprintf(f, "__attribute__((noinline)) long fn_%03d_compute(long x)"
			" { return x * %d + (x >> %d); }\n", i, i + 3, i % 13 + 1);
	fprintf(f, "int main(void) { return 0; }\n");
	fclose(f);
	snprintf(path, len, "%s/root/usr/lib/base.so", dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/root/usr/lib %s/root/usr/bin && "
		 "cc -O1 -fPIC -shared -o %s %s", dir, dir, path, src);
	return sh(cmd);
}

struct offs {
	uint64_t *v;
	size_t nr;
};

/* Every byte offset of every function: where samples may land. */
static int sample_offsets(const char *bin, struct offs *o)
{
	char err[256];
	struct elfimage *img = elfimage_open(bin, err, sizeof(err));
	size_t cap = 0;

	if (!img) {
		fprintf(stderr, "bench-report: %s\n", err);
		return -1;
	}
	for (size_t i = 0; i < elfimage_nr_syms(img); i++) {
		const struct elfsym *s = elfimage_sym(img, i);
		uint64_t off;

		if (strncmp(s->name, "fn_", 3) || elfimage_addr_to_offset(img, s->addr, &off))
			continue;
		for (uint64_t k = 0; k < s->size && k < 64; k++) {
			if (o->nr == cap) {
				cap = cap ? cap * 2 : 4096;
				o->v = realloc(o->v, cap * sizeof(*o->v));
				if (!o->v)
					return -1;
			}
			o->v[o->nr++] = off + k;
		}
	}
	elfimage_close(img);
	return o->nr ? 0 : -1;
}

static int make_session(const char *dir, const char *bin, const struct offs *o)
{
	static const struct store_event ev[] = { { .name = "TIMER", .count = 1 } };
	char session[1024], cmd[4096], image[64];
	uint64_t per_file, left = NR_SAMPLES;
	struct store *st;
	int ret = -1;

	snprintf(session, sizeof(session), "%s/session", dir);
	st = store_open(session, "bench", ev, 1, OPVM_SEP_LIB | OPVM_SEP_THREAD, 0);
	if (!st)
		return -1;
	per_file = NR_SAMPLES / (NR_IMAGES * 2);
	for (int i = 0; i < NR_IMAGES; i++) {
		snprintf(image, sizeof(image), "/usr/lib/lib%03d.so", i);
		snprintf(cmd, sizeof(cmd), "cp %s %s/root%s", bin, dir, image);
		if (sh(cmd))
			goto out;
		for (int t = 0; t < 2; t++) {
			struct store_key k = {
				.app = "/usr/bin/app", .image = image, .event = 0,
				.tgid = 1000, .tid = 1000 + t, .cpu = -1,
			};
			struct sfile *sf = store_get(st, &k);
			uint64_t n = (i == NR_IMAGES - 1 && t == 1) ? left : per_file;

			if (!sf)
				goto out;
			/* Spread n samples over every offset, a skew on the first. */
			for (size_t j = 0; j < o->nr && n; j++) {
				uint64_t c = n / (o->nr - j);

				if (j == (size_t)i % o->nr)
					c += n / 4;
				if (c > n)
					c = n;
				if (!c)
					c = 1;
				if (sfile_add(sf, o->v[j], c))
					goto out;
				n -= c;
				left -= c;
			}
		}
	}
	ret = store_write_meta(st, "{\"version\": 1, \"guest\": \"bench\", \"mode\": "
			       "\"kvm-timer\", \"rate_hz\": 1000, \"events\": [{\"name\": "
			       "\"TIMER\", \"count\": 1, \"unit_mask\": 0}], \"vcpus\": 4, "
			       "\"duration_s\": 2500.0, \"kernel\": null}");
	if (!ret)
		ret = store_sync(st);
out:
	store_close(st);
	return ret;
}

/* The report in a child (exec of opvm when available) -> seconds, RSS. */
static int run_report(const char *dir, double *secs, double *cpu, long *rss_kib,
		      uint64_t *total)
{
	const char *opvm = getenv("OPVM");
	char session[1024], root[1024], sarg[1024];
	struct rusage ru;
	double t0;
	int status;
	pid_t pid;

	snprintf(session, sizeof(session), "%s/session", dir);
	snprintf(root, sizeof(root), "%s/root", dir);
	snprintf(sarg, sizeof(sarg), "%s", session);
	if (!opvm || access(opvm, X_OK))
		opvm = NULL;
	t0 = now();
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

		dup2(fd, 1);
		if (opvm) {
			execl(opvm, opvm, "report", "-l", "--session-dir", sarg, "--guest-root",
			      root, "--no-host-kernel", (char *)NULL);
			_exit(127);
		} else {
			struct symres_root r = { .dir = root };
			struct symres_config sc = { .roots = &r, .nr_roots = 1,
						    .no_host_kernel = 1, .no_debuginfod = 1 };
			struct symres *res = symres_new(&sc);
			struct report_opts ro = { .session_dir = session, .symbols = 1,
						  .keep = REPORT_KEEP_DEFAULT, .res = res };
			struct report_print_opts po = { .width = 80 };
			struct report *rep = report_load(&ro, NULL, 0);

			if (!rep)
				_exit(1);
			report_print_symbols(stdout, rep, &po);
			report_print_footer(stdout, rep);
			_exit(rep->total == NR_SAMPLES ? 0 : 3);
		}
	}
	if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return -1;
	*secs = now() - t0;
	*cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	*rss_kib = ru.ru_maxrss;
	*total = NR_SAMPLES;
	return 0;
}

int main(void)
{
	const char *build = getenv("BUILD");
	char base[512], dir[600], bin[1024], cmd[2048];
	struct offs o = { 0 };
	double secs = 0, best = 1e9, cpu = 0, best_cpu = 1e9;
	long rss = 0;
	uint64_t total = 0;
	int rc = 1;

	snprintf(base, sizeof(base), "%s/tmp", build && *build ? build : "build");
	mkdir(base, 0755);
	snprintf(dir, sizeof(dir), "%s/bench-report.XXXXXX", base);
	if (!mkdtemp(dir))
		return 1;
	setenv("DEBUGINFOD_URLS", "", 1);
	if (make_binary(dir, bin, sizeof(bin)) || sample_offsets(bin, &o) ||
	    make_session(dir, bin, &o))
		goto out;
	/* Best of three: the machine is shared. */
	for (int i = 0; i < 3; i++) {
		long r;

		if (run_report(dir, &secs, &cpu, &r, &total)) {
			fprintf(stderr, "bench-report: the report failed\n");
			goto out;
		}
		if (secs < best)
			best = secs;
		if (cpu < best_cpu)
			best_cpu = cpu;
		if (r > rss)
			rss = r;
	}
	printf("report: %.3f s\n", best);
	/* CPU time too: on a shared machine wall time includes waiting. */
	printf("report-cpu: %.3f s\n", best_cpu);
	printf("report-rss: %ld MiB\n", (rss + 1023) / 1024);
	rc = 0;
out:
	free(o.v);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (!getenv("OPVM_BENCH_KEEP"))
		sh(cmd);
	return rc;
}
