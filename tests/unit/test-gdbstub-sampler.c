// SPDX-License-Identifier: MIT
/*
 * The gdbstub sampler never leaves a guest paused that nobody else paused.
 *
 * A real QEMU (TCG, BIOS only, two vCPUs) sampled with call graphs, so the
 * fast path stops the guest, reads it, and sends "c" only after the reads.
 * (Without call graphs too, where "c" goes with the batch.)
 * Between the sampler and QEMU's gdbstub sits a proxy that, at two chosen
 * ticks, holds QEMU's answers for longer than the sampler waits for them
 * (what a loaded host does to a slow stop): the sampler's batch times out
 * with the guest stopped by it.  Deterministic: the stalls are placed by
 * count (the Nth fast-path batch) and last longer than the reply timeout
 * whatever the host's speed.  Then the guest must be sampled again (the
 * fast path's batches go on), never be taken for paused by someone else
 * (no paused tick), and run when the session ends (QMP query-status).
 * A second QEMU shows the other side: after such a stall, an owner's
 * "stop" holds until its "cont", and sampling goes on after it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/ring.h"
#include "lib/clock.h"
#include "lib/unixsock.h"
#include "vmm/guest/guestmem.h"
#include "vmm/qemu/gdbstub-sampler.h"
#include "vmm/guest/qmp.h"
#include "vmm/sampler.h"
#include "qemu-harness.h"

/* Longer than the sampler's wait for a batch's answers (2 s). */
#define STALL_MS	2600
/* The fast-path batch opens with this (vmm/qemu/gdbstub.c). */
static const char batch_sig[] = "$qC#b4\x03";

struct proxy {
	int lfd;
	char path[100], target[200];
	unsigned stall_at[2];		/* batch numbers whose answers are held */
	atomic_uint batches;		/* fast-path batches seen */
	atomic_uint stalls;		/* stalls done */
	atomic_int stalling;		/* 1 while answers are held */
	pthread_t thr;
};

struct buf {
	char *p;
	size_t len;
};

static void buf_add(struct buf *b, const char *p, size_t n)
{
	b->p = realloc(b->p, b->len + n);
	assert_non_null(b->p);
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static int buf_flush(struct buf *b, int fd)
{
	size_t off = 0;

	while (off < b->len) {
		ssize_t n = send(fd, b->p + off, b->len - off, MSG_NOSIGNAL);

		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	b->len = 0;
	return 0;
}

/* Counts batch signatures in p (one send each: never split). */
static unsigned count_batches(const char *p, size_t n)
{
	unsigned c = 0;

	for (size_t i = 0; i + sizeof(batch_sig) - 1 <= n; i++)
		if (!memcmp(p + i, batch_sig, sizeof(batch_sig) - 1))
			c++;
	return c;
}

/* Forwards one client to QEMU's gdbstub until either side closes. */
static void *proxy_main(void *arg)
{
	struct proxy *px = arg;
	struct buf to_client = { 0 };
	int64_t stall_end = 0;
	int cfd = accept(px->lfd, NULL, NULL), qfd;
	char tmp[8192];

	qfd = unixsock_connect(px->target, 5000);
	if (cfd < 0 || qfd < 0)
		goto out;
	for (;;) {
		struct pollfd p[2] = { { .fd = cfd, .events = POLLIN },
				       { .fd = qfd, .events = POLLIN } };
		ssize_t n;

		if (stall_end && clk_now_ns() >= stall_end) {
			stall_end = 0;
			atomic_store(&px->stalling, 0);
			if (buf_flush(&to_client, cfd))
				break;
		}
		if (poll(p, 2, 10) < 0)
			break;
		if (p[0].revents) {
			unsigned before = atomic_load(&px->batches), now;

			n = recv(cfd, tmp, sizeof(tmp), 0);
			if (n <= 0)
				break;
			now = before + count_batches(tmp, (size_t)n);
			atomic_store(&px->batches, now);
			if (send(qfd, tmp, (size_t)n, MSG_NOSIGNAL) != n)
				break;
			for (unsigned k = 0; k < 2; k++) {
				if (!stall_end && before < px->stall_at[k] && now >= px->stall_at[k]) {
					stall_end = clk_now_ns() + STALL_MS * 1000000ll;
					atomic_store(&px->stalling, 1);
					atomic_fetch_add(&px->stalls, 1);
				}
			}
		}
		if (p[1].revents) {
			n = recv(qfd, tmp, sizeof(tmp), 0);
			if (n <= 0)
				break;
			if (stall_end)
				buf_add(&to_client, tmp, (size_t)n);
			else if (send(cfd, tmp, (size_t)n, MSG_NOSIGNAL) != n)
				break;
		}
	}
out:
	free(to_client.p);
	if (cfd >= 0)
		close(cfd);
	if (qfd >= 0)
		close(qfd);
	return NULL;
}

struct vm {
	struct qemu q;			/* its gdbstub at q.sock */
	char qmp_path[220];
	struct qmp *qmp;
	struct proxy px;
	struct sampler *s;
	struct ring *rings[2];
};

/* QEMU (BIOS, -S) with -gdb and -qmp sockets, the proxy in front of the
 * gdbstub, and a call-graph sampler through the proxy. */
static void vm_start(struct vm *v, const char *name, int cg)
{
	char gdb[256], qmp[256], addr[256], why[256] = "";
	struct qemu_sampler_config cfg = { .rate_hz = 100, .resume = 1,
					   .cg = { .mode = cg ? SAMPLER_CG_FP :
							    SAMPLER_CG_NONE } };
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;

	snprintf(v->q.dir, sizeof(v->q.dir), "/tmp/opvm-test-%s.XXXXXX", name);
	assert_non_null(mkdtemp(v->q.dir));
	snprintf(v->q.sock, sizeof(v->q.sock), "%s/gdb.sock", v->q.dir);
	snprintf(v->qmp_path, sizeof(v->qmp_path), "%s/qmp.sock", v->q.dir);
	snprintf(gdb, sizeof(gdb), "unix:%s,server=on,wait=off", v->q.sock);
	snprintf(qmp, sizeof(qmp), "unix:%s,server=on,wait=off", v->qmp_path);
	v->q.pid = fork();
	if (v->q.pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		/* A failed assertion leaves no QEMU behind. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		execlp("qemu-system-x86_64", "qemu-system-x86_64", "-accel", "tcg",
		       "-nodefaults", "-nographic", "-m", "32", "-smp", "2", "-S",
		       "-gdb", gdb, "-qmp", qmp, (char *)NULL);
		_exit(127);
	}
	assert_true(v->q.pid > 0);
	/* Both listening, not only bound (see qemu-harness.h). */
	for (int i = 0; i < 3000 && (stat(v->q.sock, &st) || stat(v->qmp_path, &st) ||
				     !qemu_sock_listening(v->q.sock) ||
				     !qemu_sock_listening(v->qmp_path)); i++)
		usleep(10000);
	v->qmp = qmp_open(v->qmp_path, 5000);
	assert_non_null(v->qmp);

	assert_true((size_t)snprintf(v->px.path, sizeof(v->px.path), "%s/proxy.sock", v->q.dir) <
		    sizeof(v->px.path));
	snprintf(v->px.target, sizeof(v->px.target), "%s", v->q.sock);
	v->px.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(v->px.lfd >= 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", v->px.path);
	assert_int_equal(bind(v->px.lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(v->px.lfd, 1), 0);
	assert_int_equal(pthread_create(&v->px.thr, NULL, proxy_main, &v->px), 0);

	snprintf(addr, sizeof(addr), "unix:%s", v->px.path);
	cfg.gdb_addr = addr;
	if (cg) {
		cfg.mem = guestmem_open(v->q.pid);
		assert_non_null(cfg.mem);
	}
	v->s = qemu_sampler_new(&cfg, why, sizeof(why));
	if (!v->s)
		fail_msg("qemu_sampler_new: %s", why);
	assert_int_equal(qemu_sampler_nr_vcpus(v->s), 2);
	for (int i = 0; i < 2; i++) {
		v->rings[i] = ring_new(1 << 16);
		assert_non_null(v->rings[i]);
	}
	{
		struct sampler_sink sink = { .rings = v->rings, .nr_rings = 2 };

		assert_int_equal(v->s->ops->start(v->s, &sink), 0);
	}
}

/*
 * Whether the guest runs, asked until it does (up to 10 s): the sampler's
 * last "c" went through the proxy, which QEMU may read after QMP's
 * query-status on a loaded host (the sampler waits for its reader, here
 * the proxy, not QEMU).  A guest left paused stays paused: 0.
 */
static int qmp_running_soon(struct qmp *qmp)
{
	int running = 0;

	for (int i = 0; i < 200 && (running = qmp_running(qmp, 5000)) == 0; i++)
		usleep(50000);
	return running;
}

/* Ends the session as opvm does (stop, free), then the guest's state. */
static int vm_end(struct vm *v, struct qemu_sampler_info *info)
{
	int running;

	qemu_sampler_get_info(v->s, info);
	v->s->ops->stop(v->s);
	qemu_sampler_get_info(v->s, info);
	v->s->ops->free(v->s);
	pthread_join(v->px.thr, NULL);
	running = qmp_running_soon(v->qmp);
	qmp_close(v->qmp);
	close(v->px.lfd);
	unlink(v->px.path);
	for (int i = 0; i < 2; i++)
		ring_free(v->rings[i]);
	unlink(v->qmp_path);
	qemu_stop(&v->q);
	return running;
}

static uint64_t paused_ticks(struct vm *v)
{
	struct qemu_sampler_info info;

	qemu_sampler_get_info(v->s, &info);
	return info.paused_ticks;
}

static uint64_t ticks(struct vm *v)
{
	struct sampler_stats st;

	v->s->ops->get_stats(v->s, &st);
	return st.ticks;
}

/*
 * Waits until cond holds (checked every 10 ms) or the sampler has ticked
 * paused `paused_max` times.  Progress is counted; the 60 s only bound a
 * run that hangs.
 */
#define WAIT_FOR(v, cond, paused_max)						\
	do {									\
		int64_t end_ = clk_now_ns() + 60 * 1000000000ll;		\
										\
		while (!(cond) && paused_ticks(v) < (paused_max) &&		\
		       clk_now_ns() < end_)					\
			usleep(10000);						\
	} while (0)

/* Two stalls, nobody else touches the guest. */
static void stalled_answers(int cg)
{
	struct vm v = { .px = { .stall_at = { 20, 60 } } };
	struct qemu_sampler_info info;
	unsigned batches;
	int running;

	if (!qemu_available()) {
		print_message("SKIP: qemu-system-x86_64 is not installed\n");
		skip();
	}
	vm_start(&v, "gdbstub-stall", cg);
	/* 40 fast-path batches after the second stall: sampled again. */
	WAIT_FOR(&v, atomic_load(&v.px.batches) >= 100, 40);
	batches = atomic_load(&v.px.batches);
	assert_int_equal(qmp_running(v.qmp, 5000) >= 0, 1);
	running = vm_end(&v, &info);
	print_message("MEASURED %s: stalls: %u, fast-path batches: %u, ticks taken for "
		      "paused by someone else: %llu, guest at the end: %s\n",
		      cg ? "call graphs" : "no call graphs", atomic_load(&v.px.stalls), batches,
		      (unsigned long long)info.paused_ticks, running ? "running" : "paused");
	assert_int_equal(atomic_load(&v.px.stalls), 2);
	assert_true(batches >= 100);
	assert_int_equal(info.paused_ticks, 0);
	assert_int_equal(running, 1);
}

static void test_stalled_answers(void **state)
{
	(void)state;
	stalled_answers(1);
}

/* Without call graphs "c" goes in the batch; the late answers are read
 * after it, with the guest running. */
static void test_stalled_answers_nocg(void **state)
{
	(void)state;
	stalled_answers(0);
}

/* After a stall, an owner's "stop" holds until its "cont". */
static void test_owner_stop_after_stall(void **state)
{
	struct vm v = { .px = { .stall_at = { 20, 0 } } };
	struct qemu_sampler_info info;
	json_t *ret = NULL;
	unsigned batches;
	int running;

	(void)state;
	if (!qemu_available()) {
		print_message("SKIP: qemu-system-x86_64 is not installed\n");
		skip();
	}
	vm_start(&v, "gdbstub-owner", 1);
	WAIT_FOR(&v, atomic_load(&v.px.batches) >= 40, 40);
	assert_true(atomic_load(&v.px.batches) >= 40);
	assert_int_equal(paused_ticks(&v), 0);
	/* A "stop" that lands while a tick holds the guest stopped for its
	 * stacks changes nothing and is undone by that tick's "c" (QEMU
	 * announces it to nobody; docs/usage.md): the owner sees its guest
	 * run and stops it again, as here, up to 5 times. */
	for (int tries = 0; tries < 5 && paused_ticks(&v) == 0; tries++) {
		uint64_t t0 = ticks(&v);

		assert_int_equal(qmp_execute(v.qmp, "stop", NULL, &ret, NULL, 0, 5000), 0);
		json_decref(ret);
		/* 20 ticks after the stop took effect (counted, whatever
		 * the host's load) */
		WAIT_FOR(&v, ticks(&v) >= t0 + 20, 1);
		if (paused_ticks(&v) == 0)
			assert_int_equal(qmp_running(v.qmp, 5000), 1);
	}
	/* The sampler noticed and leaves it paused, 20 ticks long. */
	WAIT_FOR(&v, 0, 20);
	assert_true(paused_ticks(&v) >= 20);
	assert_int_equal(qmp_running(v.qmp, 5000), 0);
	/* The owner resumes it: sampled again. */
	batches = atomic_load(&v.px.batches);
	assert_int_equal(qmp_execute(v.qmp, "cont", NULL, &ret, NULL, 0, 5000), 0);
	json_decref(ret);
	WAIT_FOR(&v, atomic_load(&v.px.batches) >= batches + 20, UINT64_MAX);
	assert_true(atomic_load(&v.px.batches) >= batches + 20);
	running = vm_end(&v, &info);
	assert_int_equal(running, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stalled_answers),
		cmocka_unit_test(test_stalled_answers_nocg),
		cmocka_unit_test(test_owner_stop_after_stall),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
