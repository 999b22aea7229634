// SPDX-License-Identifier: MIT
/*
 * libvirt lookup: finding the opvm channel's socket in domain XML, including
 * XML a hostile or odd configuration could produce; the libvirt reader of
 * top and the exporter against a daemon socket that never answers.  (The
 * live daemon is exercised by tests/integration/libvirt-*.sh.)
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "host/hoststats/virt-stats.h"
#include "lib/array.h"
#include "lib/clock.h"
#include "vmm/libvirt/virt.h"

static const char dom_xml[] =
	"<domain type='qemu' id='3'>\n  <name>web01</name>\n  <devices>\n"
	"    <channel type='unix'>\n"
	"      <source mode='bind' path='/var/lib/libvirt/qemu/channel/target/domain-3-web01/org.qemu.guest_agent.0'/>\n"
	"      <target type='virtio' name='org.qemu.guest_agent.0' state='disconnected'/>\n"
	"    </channel>\n"
	"    <channel type='pty'>\n"
	"      <source path='/dev/pts/3'/>\n"
	"      <target type='virtio' name='org.opvm.0'/>\n"
	"    </channel>\n"
	"    <channel type='unix'>\n"
	"      <source mode='bind' path='/run/opvm/web01.sock'/>\n"
	"      <target type='virtio' name='org.opvm.0' state='connected'/>\n"
	"      <alias name='channel1'/>\n"
	"    </channel>\n  </devices>\n</domain>\n";

static void test_channel_path(void **state)
{
	char path[256];

	(void)state;
	assert_int_equal(virt_xml_channel_path(dom_xml, "org.opvm.0", path, sizeof(path)), 0);
	assert_string_equal(path, "/run/opvm/web01.sock");
	assert_int_equal(virt_xml_channel_path(dom_xml, "org.qemu.guest_agent.0", path,
					       sizeof(path)), 0);
	assert_non_null(strstr(path, "guest_agent"));
	assert_int_equal(virt_xml_channel_path(dom_xml, "org.other", path, sizeof(path)), -ENOENT);
	assert_int_equal(virt_xml_channel_path(dom_xml, "org.opvm.0", path, 8), -ENAMETOOLONG);
}

static void test_channel_path_odd(void **state)
{
	char path[64];
	static const char *none[] = {
		"",
		"<channel type='unix'>",
		"<channel type='unix'><source path='relative'/><target name='org.opvm.0'/></channel>",
		"<channel type='unix'><source path='/x/><target name='org.opvm.0'/></channel>",
		"<channelx type='unix'><source path='/x'/><target name='org.opvm.0'/></channelx>",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(none); i++)
		assert_int_equal(virt_xml_channel_path(none[i], "org.opvm.0", path, sizeof(path)),
				 -ENOENT);
	assert_int_equal(virt_xml_channel_path(
		"<channel type=\"unix\"><source mode=\"bind\" path=\"/a/b\"/>"
		"<target type=\"virtio\" name=\"org.opvm.0\"/></channel>",
		"org.opvm.0", path, sizeof(path)), 0);
	assert_string_equal(path, "/a/b");
}

/* A "libvirtd" that takes connections into its queue and never answers. */
static int silent_daemon(char *dir, char *uri, size_t cap)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int l;

	assert_non_null(mkdtemp(dir));
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/sock", dir);
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 8), 0);
	snprintf(uri, cap, "qemu+unix:///system?socket=%s", a.sun_path);
	return l;
}

static void silent_daemon_end(int l, const char *dir)
{
	char path[128];

	close(l);
	snprintf(path, sizeof(path), "%s/sock", dir);
	unlink(path);
	rmdir(dir);
}

/* One budget for the first reading, nothing for the next while the call is
 * pending; freed while the worker is stuck in libvirt. */
static void test_reader_silent(void **state)
{
	char dir[] = "/tmp/opvm-test-virt-XXXXXX", uri[160], err[256];
	struct virtstats_dom *ds = (struct virtstats_dom *)1;
	int l = silent_daemon(dir, uri, sizeof(uri));
	struct virtstats_reader *r = virtstats_reader_new(uri, 300, 5);
	int64_t t0, took;

	(void)state;
	assert_non_null(r);
	t0 = clk_now_ms();
	assert_int_equal(virtstats_reader_read(r, NULL, &ds, err, sizeof(err)), 0);
	took = clk_now_ms() - t0;
	assert_null(ds);
	assert_non_null(strstr(err, "did not answer within 0.3 s"));
	assert_true(took >= 300);
	t0 = clk_now_ms();
	assert_int_equal(virtstats_reader_read(r, NULL, &ds, err, sizeof(err)), 0);
	took = clk_now_ms() - t0;
	assert_non_null(strstr(err, "did not answer for"));
	assert_true(took < 300);	/* not waited on again */
	virtstats_reader_free(r);		/* the worker is in libvirt: detached */
	silent_daemon_end(l, dir);	/* its call now fails, and it frees r */
	usleep(100000);
}

/* A stop signal ends the wait at once. */
static void test_reader_stop(void **state)
{
	char dir[] = "/tmp/opvm-test-virt-XXXXXX", uri[160], err[256];
	struct virtstats_dom *ds;
	int l = silent_daemon(dir, uri, sizeof(uri));
	struct virtstats_reader *r = virtstats_reader_new(uri, 60000, 5);
	volatile sig_atomic_t stop = 1;
	int64_t t0 = clk_now_ms();

	(void)state;
	assert_non_null(r);
	assert_int_equal(virtstats_reader_read(r, &stop, &ds, err, sizeof(err)), 0);
	assert_true(clk_now_ms() - t0 < 1000);
	assert_null(ds);
	virtstats_reader_free(r);
	silent_daemon_end(l, dir);
	usleep(100000);
}

struct job {
	pthread_t caller, ran_in;
	int calls;
};

static int count_domains(struct virt *v, void *arg, char *err, size_t errlen)
{
	struct job *j = arg;
	char **names = NULL;
	int n = virt_list_running(v, &names, err, errlen);

	j->ran_in = pthread_self();
	j->calls++;
	virt_free_names(names);
	return n;
}

/* Any call by the reader's worker and budget: done in the worker, its
 * result returned; a daemon that does not answer costs the budget once,
 * and a second call while the first is pending costs nothing. */
static void test_reader_run(void **state)
{
	char dir[] = "/tmp/opvm-test-virt-XXXXXX", uri[160], err[256];
	struct job j = { .caller = pthread_self() };
	struct virtstats_reader *r = virtstats_reader_new("test:///default", 10000, 5);
	int l, n;
	int64_t t0, took;

	(void)state;
	assert_non_null(r);
	n = virtstats_reader_run(r, count_domains, &j, NULL, err, sizeof(err));
	assert_true(n >= 1);		/* the test driver's domain "test" */
	assert_int_equal(j.calls, 1);
	assert_false(pthread_equal(j.ran_in, j.caller));
	virtstats_reader_free(r);

	l = silent_daemon(dir, uri, sizeof(uri));
	r = virtstats_reader_new(uri, 300, 5);
	assert_non_null(r);
	j.calls = 0;
	t0 = clk_now_ms();
	assert_int_equal(virtstats_reader_run(r, count_domains, &j, NULL, err, sizeof(err)),
			 -ETIMEDOUT);
	took = clk_now_ms() - t0;
	assert_non_null(strstr(err, "did not answer within 0.3 s"));
	assert_true(took >= 300);
	t0 = clk_now_ms();
	assert_int_equal(virtstats_reader_run(r, count_domains, &j, NULL, err, sizeof(err)),
			 -ETIMEDOUT);
	assert_true(clk_now_ms() - t0 < 300);	/* not waited on again */
	assert_non_null(strstr(err, "has not answered an earlier call"));
	assert_int_equal(j.calls, 0);	/* the connect never finished */
	virtstats_reader_free(r);
	silent_daemon_end(l, dir);	/* its connect fails now: j is left alone */
	usleep(100000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_channel_path),
		cmocka_unit_test(test_channel_path_odd),
		cmocka_unit_test(test_reader_silent),
		cmocka_unit_test(test_reader_stop),
		cmocka_unit_test(test_reader_run),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
