// SPDX-License-Identifier: MIT
/*
 * /proc and KVM-stats parsers behind opvm top: thread stat lines (comm with
 * spaces and parentheses, short or cut lines), schedstat, QEMU command lines
 * (bare, libvirt-style, ",," escapes, hostile values), query-stats replies
 * joined to vCPUs by qom-path, and this process's own /proc entries.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/hoststats/kvmstat.h"
#include "host/hoststats/procstat.h"
#include "lib/array.h"

static void test_stat_line(void **state)
{
	/* A real vCPU thread's line (utime 1, stime 370, guest_time 7). */
	static const char line[] =
		"8947 (CPU 0/KVM) R 1 8927 5001 0 -1 138412224 281 0 0 0 1 370 0 0 20 0 6 0 "
		"60334 439595008 10003 18446744073709551615 1 1 1 0 0 0 2147219511 4100 16963 "
		"0 0 0 -1 1 0 0 0 7 0 1 2 3\n";
	long hz = sysconf(_SC_CLK_TCK);
	struct ps_task t;

	(void)state;
	memset(&t, 0, sizeof(t));
	assert_int_equal(procstat_parse_stat(line, strlen(line), &t), 0);
	assert_string_equal(t.comm, "CPU 0/KVM");
	assert_int_equal(procstat_vcpu_of_comm(t.comm), 0);
	assert_int_equal(t.utime_ns, 1000000000ull / (uint64_t)hz);
	assert_int_equal(t.stime_ns, 370 * (1000000000ull / (uint64_t)hz));
	assert_int_equal(t.start_ticks, 60334);
	assert_int_equal(t.guest_ns, 7 * (1000000000ull / (uint64_t)hz));
}

static void test_stat_odd(void **state)
{
	static const char paren[] = "5 (a) b) (c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19";
	static const char *bad[] = { "", "5 (x", "5 x) S 1 2", "5 (x) S 1 2 3", "5 (x) S z" };
	struct ps_task t;

	(void)state;
	memset(&t, 0, sizeof(t));
	assert_int_equal(procstat_parse_stat(paren, strlen(paren), &t), 0);
	assert_string_equal(t.comm, "a) b) (c");
	assert_int_equal(t.start_ticks, 19);
	assert_int_equal(t.guest_ns, 0);	/* cut before guest_time */
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(procstat_parse_stat(bad[i], strlen(bad[i]), &t), -EINVAL);
	assert_int_equal(procstat_vcpu_of_comm("CPU 12/TCG"), 12);
	assert_int_equal(procstat_vcpu_of_comm("CPU x/KVM"), -1);
	assert_int_equal(procstat_vcpu_of_comm("CPU 99999/KVM"), -1);
	assert_int_equal(procstat_vcpu_of_comm("qemu-system-x86"), -1);
}

static void test_schedstat(void **state)
{
	struct ps_task t;

	(void)state;
	assert_int_equal(procstat_parse_schedstat("1090727528 1474045666 377\n", 26, &t), 0);
	assert_int_equal(t.run_ns, 1090727528ull);
	assert_int_equal(t.wait_ns, 1474045666ull);
	assert_int_equal(t.slices, 377);
	assert_int_equal(procstat_parse_schedstat("12 x", 4, &t), -EINVAL);
}

/* Joins argv into the NUL-separated form /proc/PID/cmdline has. */
static size_t mk_cmdline(char *buf, size_t cap, const char *const *argv)
{
	size_t off = 0;

	for (; *argv; argv++) {
		size_t l = strlen(*argv) + 1;

		assert_true(off + l <= cap);
		memcpy(buf + off, *argv, l);
		off += l;
	}
	return off;
}

static void test_cmdline_bare(void **state)
{
	static const char *const argv[] = {
		"qemu-system-x86_64", "-accel", "kvm", "-name", "web,,01,debug-threads=on",
		"-qmp", "unix:/run/q,,m.sock,server=on,wait=off", "-qmp", "unix:/second",
		"-chardev", "socket,id=opvm0,path=/run/chan,server=on,wait=off",
		"-device", "virtserialport,bus=ser.0,chardev=opvm0,name=org.opvm.0", NULL,
	};
	struct ps_qemu q;
	char buf[1024];
	size_t n = mk_cmdline(buf, sizeof(buf), argv);

	(void)state;
	assert_int_equal(procstat_parse_cmdline(buf, n, &q), 0);
	assert_string_equal(q.name, "web,01");
	assert_int_equal(q.libvirt, 0);
	assert_int_equal(q.accel, PS_ACCEL_KVM);
	assert_string_equal(q.qmp, "/run/q,m.sock");
	assert_string_equal(q.channel, "/run/chan");
}

static void test_cmdline_libvirt(void **state)
{
	static const char *const argv[] = {
		"/usr/bin/qemu-system-x86_64", "-name", "guest=dom1,debug-threads=on",
		"-machine", "pc-i440fx-7.2,usb=off,accel=tcg",
		"-chardev", "socket,id=charmonitor,fd=31,server=on,wait=off",
		"-mon", "chardev=charmonitor,id=monitor,mode=control", NULL,
	};
	static const char *const mon[] = {
		"qemu-kvm", "--enable-kvm", "-chardev", "socket,id=m,path=/tmp/m", "-mon",
		"chardev=m,mode=control", "-name", NULL,	/* value cut off */
	};
	struct ps_qemu q;
	char buf[1024];
	size_t n = mk_cmdline(buf, sizeof(buf), argv);

	(void)state;
	assert_int_equal(procstat_parse_cmdline(buf, n, &q), 0);
	assert_string_equal(q.name, "dom1");
	assert_int_equal(q.libvirt, 1);
	assert_int_equal(q.accel, PS_ACCEL_TCG);
	assert_string_equal(q.qmp, "");		/* an fd, not a path */
	n = mk_cmdline(buf, sizeof(buf), mon);
	assert_int_equal(procstat_parse_cmdline(buf, n, &q), 0);
	assert_int_equal(q.accel, PS_ACCEL_KVM);
	assert_string_equal(q.qmp, "/tmp/m");
	assert_string_equal(q.name, "");
	/* not QEMU; no terminating NUL at all */
	n = mk_cmdline(buf, sizeof(buf), (const char *const[]){ "bash", "-c", "x", NULL });
	assert_int_equal(procstat_parse_cmdline(buf, n, &q), -EINVAL);
	assert_int_equal(procstat_parse_cmdline("qemu-system", 11, &q), -EINVAL);
}

static void test_cmdline_hostile(void **state)
{
	char *buf = malloc(70000), *p = buf;
	struct ps_qemu q;

	(void)state;
	assert_non_null(buf);
	p += sprintf(p, "qemu-system-x86_64") + 1;
	p += sprintf(p, "-name") + 1;
	memset(p, 'A', 5000);		/* a name far longer than PS_NAME_MAX */
	p[5000] = '\0';
	p += 5001;
	p += sprintf(p, "-qmp") + 1;
	p += sprintf(p, "unix:/%0300d", 0) + 1;
	for (int i = 0; i < 100; i++)	/* more chardevs than kept */
		p += sprintf(p, "-chardev%csocket,id=c%d,path=/c%d", 0, i, i) + 1;
	assert_int_equal(procstat_parse_cmdline(buf, (size_t)(p - buf), &q), 0);
	assert_int_equal(strlen(q.name), 0);	/* too long: dropped, not cut */
	assert_string_equal(q.qmp, "");
	free(buf);
}

static void test_self(void **state)
{
	int tids[64], n = procstat_list_tasks(getpid(), tids, 64), *pids, np;
	struct ps_task t;
	struct ps_qemu q;
	int found = 0;

	(void)state;
	assert_true(n >= 1);
	assert_int_equal(tids[0], getpid());
	assert_int_equal(procstat_read_task(getpid(), getpid(), &t), 0);
	assert_true(t.start_ticks > 0);
	assert_int_equal(procstat_read_proc(getpid(), &t), 0);
	assert_int_equal(procstat_probe(getpid(), &q), 0);	/* not a QEMU */
	assert_int_equal(procstat_read_proc(0x7ffffff0, &t), -ENOENT);
	np = procstat_list_pids(&pids);
	assert_true(np > 1);
	for (int i = 0; i < np; i++) {
		found |= pids[i] == getpid();
		if (i)
			assert_true(pids[i] > pids[i - 1]);
	}
	assert_true(found);
	free(pids);
}

static void test_query_stats(void **state)
{
	/* query-stats lists vCPUs in its own order: joined by qom-path. */
	json_t *stats = json_loads(
		"[{\"provider\":\"kvm\",\"qom-path\":\"/m/d[2]\",\"stats\":["
		"{\"name\":\"exits\",\"value\":100},{\"name\":\"halt_exits\",\"value\":30},"
		"{\"name\":\"io_exits\",\"value\":20},{\"name\":\"guest_mode\",\"value\":false},"
		"{\"name\":\"halt_wait_hist\",\"value\":[1,2]}]},"
		"{\"provider\":\"kvm\",\"qom-path\":\"/m/d[0]\",\"stats\":["
		"{\"name\":\"exits\",\"value\":7},{\"name\":\"mmio_exits\",\"value\":-3}]},"
		"{\"provider\":\"other\",\"qom-path\":\"/m/d[0]\",\"stats\":[]},"
		"{\"provider\":\"kvm\",\"qom-path\":\"/m/nowhere\",\"stats\":[]},"
		"\"junk\"]", 0, NULL);
	json_t *cpus = json_loads(
		"[{\"cpu-index\":0,\"qom-path\":\"/m/d[0]\",\"thread-id\":5},"
		"{\"cpu-index\":1,\"qom-path\":\"/m/d[2]\",\"thread-id\":6},"
		"{\"cpu-index\":-4,\"qom-path\":\"/m/nowhere\"}]", 0, NULL);
	struct kvmstat v[2];

	(void)state;
	memset(v, 0, sizeof(v));
	assert_int_equal(kvmstat_parse(stats, cpus, v, 2), 2);
	assert_int_equal(v[1].exits, 100);
	assert_int_equal(v[1].reason[KVMSTAT_HALT], 30);
	assert_int_equal(v[1].reason[KVMSTAT_IO], 20);
	assert_int_equal(v[1].reason[KVMSTAT_OTHER], 50);
	assert_int_equal(v[0].exits, 7);
	assert_int_equal(v[0].reason[KVMSTAT_MMIO], 0);	/* negative: skipped */
	assert_int_equal(v[0].reason[KVMSTAT_OTHER], 7);
	assert_string_equal(kvmstat_reason_label(KVMSTAT_HALT), "halt");
	assert_int_equal(kvmstat_parse(cpus, NULL, v, 2), 0);
	assert_int_equal(kvmstat_parse(json_object_get(cpus, "x"), cpus, v, 2), -EPROTO);
	json_decref(stats);
	json_decref(cpus);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stat_line),
		cmocka_unit_test(test_stat_odd),
		cmocka_unit_test(test_schedstat),
		cmocka_unit_test(test_cmdline_bare),
		cmocka_unit_test(test_cmdline_libvirt),
		cmocka_unit_test(test_cmdline_hostile),
		cmocka_unit_test(test_self),
		cmocka_unit_test(test_query_stats),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
