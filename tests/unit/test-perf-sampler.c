// SPDX-License-Identifier: MIT
/*
 * The perf sampler backend (vmm/perf/perf-sampler.c) without a guest: its time
 * conversions, the built-in VMM's runtime descriptor (vmm/kvm/kvm-desc.c, read
 * as hostile input), and a real perf event on a busy thread of this process:
 * every sample there is host code, so nothing may reach the sink and every
 * sample must be counted as host-mode.  (tests/integration/kvm-perf-*.sh
 * sample real KVM guests.)
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/array.h"
#include "lib/ring.h"
#include "vmm/kvm/kvm-desc.h"
#include "vmm/perf/guest-tsc.h"
#include "vmm/perf/perf-sampler.h"

/* The perf mmap page's forward formula (perf_event_mmap_page comment). */
static uint64_t tsc_to_time(uint64_t tsc, uint64_t zero, uint32_t mult, uint16_t shift)
{
	uint64_t quot = tsc >> shift, rem = tsc & ((1ull << shift) - 1);

	return zero + quot * mult + ((rem * mult) >> shift);
}

static void test_time_to_tsc(void **state)
{
	static const uint64_t tscs[] = { 0, 1, 999, 123456789, 5000000000000ull,
					 0x7fffffffffffull, 0x3fffffffffffffull };
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(tscs); i++) {
		/* 2.6 GHz: mult/2^shift = 1/2.6 ns per tick */
		uint64_t t = tsc_to_time(tscs[i], 1000, 6452595, 24);
		uint64_t back = perf_sampler_time_to_tsc(t, 1000, 6452595, 24);
		uint64_t d = back > tscs[i] ? back - tscs[i] : tscs[i] - back;

		assert_true(d <= 3);	/* one ns is 2.6 ticks */
	}
	assert_int_equal(perf_sampler_time_to_tsc(5, 0, 0, 0), 0);	/* no mult */
}

static void test_guest_tsc(void **state)
{
	(void)state;
	assert_int_equal(guest_tsc(&(struct guest_tsc){ 0, 0, 0 }, 1000), 1000);
	assert_int_equal(guest_tsc(&(struct guest_tsc){ -400, 0, 0 }, 1000), 600);
	assert_int_equal(guest_tsc(&(struct guest_tsc){ 5, 0, 0 }, 1000), 1005);
	/* ratio 1.5 in 48 fractional bits */
	assert_int_equal(guest_tsc(&(struct guest_tsc){ 0, 3ull << 47, 48 }, 1000), 1500);
	assert_int_equal(guest_tsc(&(struct guest_tsc){ 0, 1ull << 47, 48 }, 1ull << 60), 1ull << 59);
}

static char dir[] = "/tmp/opvm-test-perf-XXXXXX";

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_desc(void **state)
{
	struct kvm_desc d = { .pid = 4242, .nr_vcpus = 2, .nr_ram = 2,
			      .switch_pa = 0x10c1c0, .switch_stride = 2592,
			      .switch_entries = 64, .switch_nr = 2 }, r;
	char path[256];
	static const char *const bad[] = {
		"opvm-vmm 2\npid 1\nvcpus 1\nram 0x0 0x1000 0x7f0000\n",	/* version */
		"opvm-vmm 1\npid 0\nvcpus 1\nram 0x0 0x1000 0x7f0000\n",	/* pid */
		"opvm-vmm 1\npid 1\nvcpus 0\nram 0x0 0x1000 0x7f0000\n",	/* vcpus */
		"opvm-vmm 1\npid 1\nvcpus 99999\nram 0x0 0x1000 0x7f0000\n",
		"opvm-vmm 1\npid 1\nvcpus 1\nram 0x0 0x0 0x7f0000\n",		/* empty */
		"opvm-vmm 1\npid 1\nvcpus 1\n",					/* no RAM */
		"opvm-vmm 1\npid 1\nvcpus 1\nram 0x0 0x1000 0x7f0000\n../../etc\n",
	};

	(void)state;
	d.ram[0].len = 0x4000000;
	d.ram[0].hva = 0x7efed3000000;
	d.ram[1].gpa = 0x100000000;
	d.ram[1].len = 0x1000;
	d.ram[1].hva = 0x7f0000000000;
	snprintf(path, sizeof(path), "%s/vmm-4242", dir);
	assert_int_equal(kvm_desc_write(path, &d), 0);
	assert_int_equal(kvm_desc_read(path, &r), 0);
	assert_int_equal(r.pid, 4242);
	assert_int_equal(r.nr_vcpus, 2);
	assert_int_equal(r.nr_ram, 2);
	assert_int_equal(r.ram[1].gpa, 0x100000000);
	assert_int_equal(r.ram[0].hva, 0x7efed3000000);
	assert_int_equal(r.switch_pa, 0x10c1c0);
	assert_int_equal(r.switch_stride, 2592);
	assert_int_equal(r.switch_entries, 64);
	assert_int_equal(r.switch_nr, 2);
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		write_file(path, bad[i]);
		assert_int_equal(kvm_desc_read(path, &r), -EINVAL);
	}
	/* more RAM ranges than the table holds */
	{
		char big[2048] = "opvm-vmm 1\npid 1\nvcpus 1\n";

		for (int i = 0; i < KVM_DESC_MAX_RAM + 1; i++)
			snprintf(big + strlen(big), sizeof(big) - strlen(big),
				 "ram 0x%x 0x1000 0x7f0000\n", i << 12);
		write_file(path, big);
		assert_int_equal(kvm_desc_read(path, &r), -EINVAL);
	}
	/* a symlink is not followed */
	unlink(path);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_true(kvm_desc_read(path, &r) < 0);
	unlink(path);
}

static atomic_int spin_stop;

static void *spin(void *arg)
{
	atomic_int *tid = arg;

	atomic_store(tid, (int)syscall(SYS_gettid));
	while (!atomic_load(&spin_stop))
		;
	return NULL;
}

static void clock_config(struct perf_sampler_config *cfg, pid_t *tids)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->pid = getpid();
	cfg->nr_vcpus = 1;
	cfg->vcpu_tids = tids;
	cfg->attr.type = PERF_TYPE_SOFTWARE;
	cfg->attr.config = PERF_COUNT_SW_CPU_CLOCK;
	cfg->attr.sample_period = 1000000;
	cfg->event_name = "cpu-clock";
	cfg->kernel = cfg->user = 1;
	cfg->kvm_debugfs = "";
}

/* Host code only: counted as host-mode, never filed. */
static void test_host_thread(void **state)
{
	struct perf_sampler_config cfg;
	struct perf_sampler_info in;
	struct sampler *s;
	struct ring *r = ring_new(1 << 12);
	struct ring *rings[1] = { r };
	struct sampler_sink sink = { rings, 1, NULL };
	struct opvm_sample x;
	uint64_t chain[OPVM_MAX_CALLCHAIN];
	atomic_int tid = 0;
	pid_t tids[1];
	pthread_t th;
	char err[256] = "";

	(void)state;
	assert_non_null(r);
	assert_int_equal(pthread_create(&th, NULL, spin, &tid), 0);
	while (!atomic_load(&tid))
		;
	tids[0] = atomic_load(&tid);
	clock_config(&cfg, tids);
	s = perf_sampler_new(&cfg, err, sizeof(err));
	if (!s) {
		atomic_store(&spin_stop, 1);
		pthread_join(th, NULL);
		ring_free(r);
		if (errno == EACCES || errno == EPERM || errno == ENOENT || errno == ENOSYS)
			skip();
		fail_msg("%s", err);
	}
	assert_string_equal(s->ops->name, "perf");
	assert_int_equal(s->ops->start(s, &sink), 0);
	usleep(300000);
	s->ops->stop(s);
	atomic_store(&spin_stop, 1);
	pthread_join(th, NULL);
	perf_sampler_get_info(s, &in);
	/* exclude_host keeps most of them away; the kernel still reports
	 * some (46 of ~300 in 0.3 s, measured), which must be counted. */
	assert_true(in.host_mode > 0);
	assert_int_equal(in.guest_user + in.guest_kernel, 0);
	assert_int_equal(ring_pop(r, &x, chain), 0);
	{
		char d[1024];

		s->ops->describe(s, d, sizeof(d));
		assert_non_null(strstr(d, "sampler perf, event cpu-clock"));
		for (char *l = d, *e; *l; l = e + 1) {
			e = strchr(l, '\n');
			assert_non_null(e);
			assert_true(e - l <= 80);
		}
	}
	s->ops->free(s);
	ring_free(r);
}

/* A vCPU thread that is not there: a message that says what to check. */
static void test_gone_thread(void **state)
{
	struct perf_sampler_config cfg;
	pid_t tids[1] = { 0x3ffffff0 };
	char err[256] = "";

	(void)state;
	clock_config(&cfg, tids);
	assert_null(perf_sampler_new(&cfg, err, sizeof(err)));
	assert_non_null(strstr(err, "has gone"));
	cfg.nr_vcpus = 0;
	assert_null(perf_sampler_new(&cfg, err, sizeof(err)));
	assert_int_equal(errno, EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_time_to_tsc),
		cmocka_unit_test(test_guest_tsc),
		cmocka_unit_test(test_desc),
		cmocka_unit_test(test_host_thread),
		cmocka_unit_test(test_gone_thread),
	};
	int rc;

	if (!mkdtemp(dir))
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(dir);
	return rc;
}
