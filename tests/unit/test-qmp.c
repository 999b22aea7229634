// SPDX-License-Identifier: MIT
/*
 * QMP client against a real QEMU (TCG, BIOS only, 2 vCPUs): capabilities,
 * vCPU threads, status, HMP passthrough, starting a gdbstub at run time on
 * a socket pair passed with getfd and talking to it, events (stop/resume/reset), QEMU quitting.  Skipped with
 * the reason when qemu-system-x86_64 is not installed.
 */
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "vmm/qemu/gdbstub.h"
#include "vmm/guest/qmp.h"
#include "qemu-harness.h"

static int qemu_start(struct qemu *q)
{
	return qemu_start_with(q, "qmp", "-qmp");
}

static void test_qmp(void **state)
{
	struct qemu q = { 0 };
	struct qmp *m;
	struct gdbstub *gs;
	struct gdbstub_regs r;
	char *out = NULL, errbuf[256] = "";
	int tids[4] = { 0 }, ev = 0, stops = 0, sv[2];
	json_t *args;

	(void)state;
	if (!qemu_available()) {
		printf("SKIP: qemu-system-x86_64 is not installed\n");
		skip();
	}
	assert_int_equal(qemu_start(&q), 0);
	m = qmp_open(q.sock, 5000);
	assert_non_null(m);

	assert_int_equal(qmp_vcpu_threads(m, tids, 4, 2000), 2);
	assert_true(tids[0] > 0 && tids[1] > 0 && tids[0] != tids[1]);
	assert_int_equal(qmp_running(m, 2000), 0);

	assert_int_equal(qmp_hmp(m, "info status", &out, 2000), 0);
	assert_non_null(strstr(out, "paused"));
	free(out);

	assert_int_equal(qmp_execute(m, "no-such-command", NULL, NULL, errbuf,
				     sizeof(errbuf), 2000), -EREMOTEIO);
	assert_true(errbuf[0] != '\0');

	/* A gdbstub started at run time through the monitor on a socket
	 * pair, as attach does: getfd passes one end (SCM_RIGHTS), chardev-add
	 * opens it, gdbserver takes the chardev. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	args = json_pack("{s:s}", "fdname", "g0");
	assert_int_equal(qmp_execute_fd(m, "getfd", args, sv[1], NULL, NULL, 0, 2000), 0);
	json_decref(args);
	close(sv[1]);
	args = json_pack("{s:s,s:{s:s,s:{s:{s:s,s:{s:s}},s:b}}}", "id", "g0", "backend",
			 "type", "socket", "data", "addr", "type", "fd", "data", "str", "g0",
			 "server", 0);
	assert_int_equal(qmp_execute(m, "chardev-add", args, NULL, NULL, 0, 2000), 0);
	json_decref(args);
	assert_int_equal(qmp_hmp(m, "gdbserver chardev:g0", &out, 2000), 0);
	assert_non_null(strstr(out, "Waiting for gdb"));
	free(out);
	gs = gdbstub_open_fd(sv[0], 5000, NULL);
	assert_non_null(gs);
	assert_int_equal(gdbstub_nr_threads(gs), 2);
	assert_int_equal(gdbstub_read_regs(gs, 0, &r), 0);
	assert_int_equal(r.cs, 0xf000);

	/* gdb "continue" runs the VM: QMP sees RESUME and status running. */
	assert_int_equal(gdbstub_continue(gs), 0);
	usleep(100000);
	assert_int_equal(qmp_running(m, 2000), 1);
	ev = qmp_take_events(m);
	assert_true(ev & QMP_EV_RESUME);

	/* "c" to a guest that already runs (its owner resumed it after our
	 * stop) leaves it running: a bare "$c#63" would stop it. */
	assert_int_equal(gdbstub_interrupt(gs, 2000), 0);
	assert_int_equal(qmp_execute(m, "cont", NULL, NULL, NULL, 0, 2000), 0);
	assert_int_equal(gdbstub_continue(gs), 0);
	usleep(200000);
	assert_int_equal(qmp_running(m, 2000), 1);
	assert_int_equal(gdbstub_continue(gs), 0);
	for (int i = 0; i < 50 && qmp_running(m, 2000) != 1; i++)
		usleep(100000);
	assert_int_equal(qmp_running(m, 2000), 1);
	gdbstub_drain(gs);

	/* The sampler's way out: "qC" to a running guest only stops it (1);
	 * to a guest paused by its owner it is answered alone (0). */
	assert_int_equal(gdbstub_settle(gs, 500), 1);
	assert_int_equal(qmp_running(m, 2000), 0);
	assert_int_equal(gdbstub_settle(gs, 2000), 0);
	assert_int_equal(gdbstub_continue(gs), 0);
	for (int i = 0; i < 50 && qmp_running(m, 2000) != 1; i++)
		usleep(100000);
	assert_int_equal(qmp_running(m, 2000), 1);
	gdbstub_drain(gs);

	/* A stop from the monitor reaches the gdbstub as a stop reply. */
	assert_int_equal(qmp_execute(m, "stop", NULL, NULL, NULL, 0, 2000), 0);
	for (int i = 0; i < 50 && !(stops = gdbstub_drain(gs)); i++)
		usleep(100000);
	assert_int_equal(stops, 1);
	assert_int_equal(gdbstub_interrupt(gs, 200), -ETIMEDOUT);
	assert_int_equal(qmp_execute(m, "cont", NULL, NULL, NULL, 0, 2000), 0);

	assert_int_equal(qmp_execute(m, "system_reset", NULL, NULL, NULL, 0, 2000), 0);
	/* The event follows the reply: wait for it (5 s on a busy host). */
	ev = 0;
	for (int i = 0; i < 50 && !(ev & QMP_EV_RESET); i++) {
		int e = qmp_take_events(m);

		assert_true(e >= 0);
		ev |= e;
		usleep(100000);
	}
	assert_true(ev & QMP_EV_RESET);

	/* Still sampling after the reset. */
	assert_int_equal(gdbstub_interrupt(gs, 2000), 0);
	assert_int_equal(gdbstub_read_regs(gs, 1, &r), 0);
	assert_int_equal(gdbstub_continue(gs), 0);

	qmp_execute(m, "quit", NULL, NULL, NULL, 0, 2000);
	waitpid(q.pid, NULL, 0);
	q.pid = 0;
	ev = 0;
	for (int i = 0; i < 10 && ev >= 0; i++)
		ev = qmp_take_events(m);
	assert_int_equal(ev, -EPIPE);
	assert_int_equal(qmp_running(m, 500), -EPIPE);
	gdbstub_close(gs);
	qmp_close(m);
	qemu_stop(&q);
}

static void test_qmp_no_socket(void **state)
{
	(void)state;
	assert_null(qmp_open("/nonexistent/opvm/qmp.sock", 100));
	assert_int_equal(errno, ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_qmp_no_socket),
		cmocka_unit_test(test_qmp),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
