// SPDX-License-Identifier: MIT
/*
 * gdbstub client: register-layout parsing on fixed descriptions; the
 * sampler's fast path in two halves against a scripted stub that answers
 * as QEMU 7.2 does (answers that are all in are read without waiting,
 * late ones are waited for); then the real protocol against a real QEMU
 * (TCG, no kernel: the BIOS runs) with two vCPUs: thread list, registers
 * at reset, physical memory, stop and continue, and QEMU dying
 * mid-session.  The QEMU part is skipped, with the reason, when
 * qemu-system-x86_64 is not installed.
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
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <linux/sockios.h>

#include "vmm/qemu/gdbstub.h"
#include "qemu-harness.h"
#include "lib/array.h"

/* The reset vector's alias at the top of 4 GiB: the BIOS ROM, never RAM. */
#define RESET_TOP 0xfffffff0ull

static const char upstream_xml[] =
	"<feature name=\"org.gnu.gdb.i386.core\">"
	"<reg name=\"rax\" bitsize=\"64\" type=\"int64\" regnum=\"0\"/>"
	"<reg name=\"rbx\" bitsize=\"64\"/><reg name=\"rcx\" bitsize=\"64\"/>"
	"<reg name=\"rdx\" bitsize=\"64\"/><reg name=\"rsi\" bitsize=\"64\"/>"
	"<reg name=\"rdi\" bitsize=\"64\"/><reg name=\"rbp\" bitsize=\"64\"/>"
	"<reg name=\"rsp\" bitsize=\"64\"/><reg name=\"r8\" bitsize=\"64\"/>"
	"<reg name=\"r9\" bitsize=\"64\"/><reg name=\"r10\" bitsize=\"64\"/>"
	"<reg name=\"r11\" bitsize=\"64\"/><reg name=\"r12\" bitsize=\"64\"/>"
	"<reg name=\"r13\" bitsize=\"64\"/><reg name=\"r14\" bitsize=\"64\"/>"
	"<reg name=\"r15\" bitsize=\"64\"/>"
	"<reg name=\"rip\" bitsize=\"64\" type=\"code_ptr\"/>"
	"<reg name=\"eflags\" bitsize=\"32\"/>"
	"<reg name=\"cs\" bitsize=\"32\"/><reg name=\"ss\" bitsize=\"32\"/>"
	"<reg name=\"ds\" bitsize=\"32\"/><reg name=\"es\" bitsize=\"32\"/>"
	"<reg name=\"fs\" bitsize=\"32\"/><reg name=\"gs\" bitsize=\"32\"/>"
	"<!-- <reg name=\"ss_base\" bitsize=\"64\"/>\n"
	"<reg name=\"es_base\" bitsize=\"64\" type=\"int64\"/-->"
	"<reg name='fs_base' bitsize='64'/><reg name='gs_base' bitsize='64'/>"
	"<reg name='k_gs_base' bitsize='64'/>"
	"<reg name='cr0' bitsize='64'/><reg name='cr2' bitsize='64'/>"
	"<reg name='cr3' bitsize='64'/>";

static void test_layout(void **state)
{
	struct gdbstub_layout l;

	(void)state;
	gdbstub_layout_init(&l);
	assert_int_equal(gdbstub_layout_parse(&l, upstream_xml, strlen(upstream_xml)), 0);
	assert_int_equal(l.rip_off, 128);
	assert_int_equal(l.rip_size, 8);
	assert_int_equal(l.cs_off, 140);
	assert_int_equal(l.cs_size, 4);
	assert_int_equal(l.cr3_off, 204);
	assert_int_equal(l.cr3_size, 8);
	assert_int_equal(l.cr0_off, 188);
	assert_int_equal(l.next_off, 212);
}

static void test_layout_bad(void **state)
{
	struct gdbstub_layout l;
	static const char *bad[] = {
		"<reg name=\"rip\" bitsize=\"63\"/>",
		"<reg name=\"rip\" bitsize=\"-8\"/>",
		"<reg name=\"rip\"/>",
		"<reg name=\"rip\" bitsize=\"64\" regnum=\"5\"/>",
		"<reg name=\"rip\" bitsize=\"64\"",
		"<reg name=\"rip\" bitsize=64/>",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		gdbstub_layout_init(&l);
		assert_int_equal(gdbstub_layout_parse(&l, bad[i], strlen(bad[i])), -EPROTO);
	}
	/* Truncated input never reads past its end (ASan checks). */
	for (size_t n = 0; n < sizeof(upstream_xml) - 1; n += 7) {
		char *copy = malloc(n ? n : 1);

		memcpy(copy, upstream_xml, n);
		gdbstub_layout_init(&l);
		(void)gdbstub_layout_parse(&l, copy, n);
		free(copy);
	}
}

/* ---- a scripted stub ------------------------------------------------------ */

/*
 * QEMU 7.2's gdbstub takes any byte that reaches it while the guest runs
 * for a stop request.  A reply with a bad checksum must therefore not be
 * answered with a lone "-": the guest would be left stopped, and the
 * sampler would take that stop for someone else's pause.
 */
struct fake_stub {
	int lfd;
	char path[64];
	int saw_nack;
	pthread_t thr;
};

/*
 * A stub's next request: its payload into pkt (cap bytes, NUL-terminated).
 * Each byte outside a packet ("$" included, before the packet it opens)
 * goes to outside(arg, byte) first.  1, or 0 when the client is gone.
 */
static int stub_request(int fd, char *pkt, size_t cap, void (*outside)(void *, char), void *arg)
{
	size_t len = 0;
	int in_pkt = 0;
	char c;

	while (read(fd, &c, 1) == 1) {
		if (!in_pkt) {
			outside(arg, c);
			in_pkt = c == '$';
			continue;
		}
		if (c != '#') {
			if (len < cap - 1)
				pkt[len++] = c;
			continue;
		}
		pkt[len] = '\0';
		return len + 3 <= cap && read(fd, pkt + len + 1, 2) == 2;	/* checksum */
	}
	return 0;
}

static void fake_outside(void *arg, char c)
{
	struct fake_stub *f = arg;

	if (c == '-')
		f->saw_nack = 1;
}

static void fake_send(int fd, const char *payload, int bad_sum)
{
	char buf[512];
	unsigned sum = 0;

	for (const char *c = payload; *c; c++)
		sum += (unsigned char)*c;
	/* No cmocka asserts here: this runs on the stub's own thread. */
	snprintf(buf, sizeof(buf), "+$%s#%02x", payload, bad_sum ? (sum + 1) & 0xff : sum & 0xff);
	if (write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf))
		return;
}

static void *fake_main(void *arg)
{
	struct fake_stub *f = arg;
	char pkt[512];
	int fd = accept(f->lfd, NULL, NULL);

	while (fd >= 0 && stub_request(fd, pkt, sizeof(pkt), fake_outside, f)) {
		if (!strncmp(pkt, "qSupported", 10))
			fake_send(fd, "PacketSize=1000;qXfer:features:read+", 0);
		else if (!strncmp(pkt, "qXfer:features:read:target.xml:0,", 33))
			fake_send(fd, "l<target><reg name=\"rip\" bitsize=\"64\"/>"
				  "<reg name=\"cs\" bitsize=\"32\"/>"
				  "<reg name=\"cr3\" bitsize=\"64\"/></target>", 0);
		else if (!strcmp(pkt, "qfThreadInfo"))
			fake_send(fd, "m1", 0);
		else if (!strcmp(pkt, "qsThreadInfo"))
			fake_send(fd, "l", 0);
		else if (!strcmp(pkt, "qC")) {
			fake_send(fd, "QC2", 1);	/* damaged */
			fake_send(fd, "QC1", 0);
		} else
			fake_send(fd, "OK", 0);
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/*
 * A listening socket at /tmp/opvm-NAME.PID (its path into path), served by
 * fn(arg) on a thread of its own, and a client connected to it.
 */
static struct gdbstub *stub_start(const char *name, char *path, size_t cap, int *lfd,
				  pthread_t *thr, void *(*fn)(void *), void *arg)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct gdbstub *gs;
	const char *why = NULL;
	char addr[96];

	snprintf(path, cap, "/tmp/opvm-%s.%d", name, (int)getpid());
	unlink(path);
	*lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(*lfd >= 0);
	strcpy(sun.sun_path, path);
	assert_int_equal(bind(*lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(*lfd, 1), 0);
	assert_int_equal(pthread_create(thr, NULL, fn, arg), 0);
	snprintf(addr, sizeof(addr), "unix:%s", path);
	gs = gdbstub_open(addr, 2000, &why);
	if (!gs)
		fprintf(stderr, "gdbstub_open: %s: %s\n", why, strerror(errno));
	assert_non_null(gs);
	return gs;
}

static void test_bad_checksum(void **state)
{
	struct fake_stub f = { 0 };
	struct gdbstub *gs;
	char reply[64];

	(void)state;
	gs = stub_start("fake-gdb", f.path, sizeof(f.path), &f.lfd, &f.thr, fake_main, &f);
	/* The damaged reply is dropped, the good one is taken, no "-" sent. */
	assert_int_equal(gdbstub_request(gs, "qC", reply, sizeof(reply), 2000), 3);
	assert_string_equal(reply, "QC1");
	gdbstub_close(gs);
	pthread_join(f.thr, NULL);
	assert_false(f.saw_nack);
	close(f.lfd);
	unlink(f.path);
}

/* ---- the fast path in two halves ----------------------------------------- */

#define SCRIPT_RIP	0xffffffff81001234ull
#define SCRIPT_CR3	0x1234000ull
#define SCRIPT_PA	0x5000ull	/* its bytes read as (pa + i) & 0xff */
#define SCRIPT_HOLD_PA	0x7000ull	/* the answer the stub holds back */
#define SCRIPT_RLE_PA	0x9000ull	/* answered escaped and run-length encoded */

/*
 * A stub that answers as QEMU 7.2's does: an ack and a reply for each
 * request, each in a write of its own; a "$" that reaches the running
 * guest stops it (a stop reply, and the rest of that packet is noise),
 * "\x03" is noise, "Hg" is OK, "g" gives rip, cs and cr3 (its target
 * description's), "m" bytes of a pattern, "c" lets the guest run and ends
 * a batch: one byte on the done pipe.  The answer to "m" at SCRIPT_HOLD_PA
 * is held until the client has read everything before it, so the client
 * must wait for it; the one at SCRIPT_RLE_PA (8 bytes of 0x11) comes
 * escaped and run-length encoded.  The guest starts stopped (QEMU stops it for a new
 * connection).
 */
struct script_stub {
	int lfd, done[2];
	char path[64];
	pthread_t thr;
};

static void script_put(int fd, const char *payload)
{
	char buf[256];
	unsigned sum = 0;

	for (const char *c = payload; *c; c++)
		sum += (unsigned char)*c;
	snprintf(buf, sizeof(buf), "$%s#%02x", payload, sum & 0xff);
	if (write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf))
		return;
}

/* Until the client has read every byte written to fd (5 s at most). */
static void script_wait_read(int fd)
{
	for (int i = 0; i < 5000; i++) {
		int queued = 0;

		if (ioctl(fd, SIOCOUTQ, &queued) < 0 || queued == 0)
			return;
		usleep(1000);
	}
}

/* One request from a stopped guest's client, answered. */
static void script_answer(int fd, const char *pkt, int *running, int done)
{
	char out[200];

	if (write(fd, "+", 1) != 1)
		return;
	if (!strcmp(pkt, "qSupported:xmlRegisters=i386"))
		script_put(fd, "PacketSize=1000;qXfer:features:read+");
	else if (!strncmp(pkt, "qXfer:features:read:target.xml:0,", 33))
		script_put(fd, "l<target><reg name=\"rip\" bitsize=\"64\"/>"
			   "<reg name=\"cs\" bitsize=\"32\"/>"
			   "<reg name=\"cr3\" bitsize=\"64\"/></target>");
	else if (!strcmp(pkt, "qfThreadInfo"))
		script_put(fd, "m1");
	else if (!strcmp(pkt, "qsThreadInfo"))
		script_put(fd, "l");
	else if (!strcmp(pkt, "qC"))
		script_put(fd, "QC1");
	else if (!strcmp(pkt, "g")) {
		uint64_t rip = SCRIPT_RIP, cr3 = SCRIPT_CR3;
		uint32_t cs = 0x10;
		size_t k = 0;

		for (int i = 0; i < 8; i++, k += 2)
			snprintf(out + k, 3, "%02x", (unsigned)(rip >> (8 * i)) & 0xff);
		for (int i = 0; i < 4; i++, k += 2)
			snprintf(out + k, 3, "%02x", (unsigned)(cs >> (8 * i)) & 0xff);
		for (int i = 0; i < 8; i++, k += 2)
			snprintf(out + k, 3, "%02x", (unsigned)(cr3 >> (8 * i)) & 0xff);
		script_put(fd, out);
	} else if (pkt[0] == 'm') {
		unsigned long long pa = 0;
		unsigned len = 0;

		if (sscanf(pkt, "m%llx,%x", &pa, &len) != 2 || len > 64) {
			script_put(fd, "E01");
			return;
		}
		if (pa == SCRIPT_HOLD_PA)
			script_wait_read(fd);
		if (pa == SCRIPT_RLE_PA) {
			script_put(fd, "}\x11" "1*+");	/* "1", "1" and 14 more */
			return;
		}
		for (unsigned i = 0; i < len; i++)
			snprintf(out + 2 * i, 3, "%02x", (unsigned)(pa + i) & 0xff);
		script_put(fd, out);
	} else if (!strcmp(pkt, "c")) {
		*running = 1;
		if (write(done, "d", 1) != 1)
			return;
	} else
		script_put(fd, "OK");	/* Hg, Qqemu.PhyMemMode */
}

/* The stub's connection: the guest runs; the request under way is noise
 * (its "$" stopped the running guest). */
struct script_conn {
	int fd, running, noise;
};

static void script_outside(void *arg, char c)
{
	struct script_conn *sc = arg;

	if (c != '$' || !sc->running)
		return;		/* acks, "\x03" */
	script_put(sc->fd, "T02thread:01;");
	sc->running = 0;
	sc->noise = 1;		/* QEMU drops the byte that stopped it */
}

static void *script_main(void *arg)
{
	struct script_stub *f = arg;
	struct script_conn sc = { .fd = accept(f->lfd, NULL, NULL) };
	char pkt[512];

	while (sc.fd >= 0 && stub_request(sc.fd, pkt, sizeof(pkt), script_outside, &sc)) {
		if (!sc.noise)
			script_answer(sc.fd, pkt, &sc.running, f->done[1]);
		sc.noise = 0;
	}
	if (sc.fd >= 0)
		close(sc.fd);
	return NULL;
}

/* Until the stub has answered a batch (5 s at most): 1, or 0. */
static int script_done(struct script_stub *f)
{
	struct pollfd p = { .fd = f->done[0], .events = POLLIN };
	char c;

	return poll(&p, 1, 5000) == 1 && read(f->done[0], &c, 1) == 1;
}

static void test_gathered(void **state)
{
	struct script_stub f = { 0 };
	struct gdbstub_regs r = { 0 };
	struct gdbstub *gs;
	uint64_t hold = SCRIPT_HOLD_PA, rle = SCRIPT_RLE_PA, w = 0;
	unsigned long waits;
	uint8_t mem[16];
	int merr = 1, stopped = -1;

	(void)state;
	assert_int_equal(pipe(f.done), 0);
	gs = stub_start("script-gdb", f.path, sizeof(f.path), &f.lfd, &f.thr, script_main, &f);
	assert_int_equal(gdbstub_continue(gs), 0);
	assert_true(script_done(&f));

	/* Nothing sent, nothing to read. */
	assert_int_equal(gdbstub_stop_sample_recv(gs, &r, mem, &merr, &stopped), -EINVAL);

	/* The answers are all in when they are read: read without waiting. */
	assert_int_equal(gdbstub_stop_sample_send(gs, 1, SCRIPT_PA, sizeof(mem), 1), 0);
	assert_true(script_done(&f));
	waits = gdbstub_waits(gs);
	assert_int_equal(gdbstub_stop_sample_recv(gs, &r, mem, &merr, &stopped), 0);
	assert_int_equal(gdbstub_waits(gs), waits);
	assert_int_equal(stopped, 1);
	assert_int_equal(merr, 0);
	assert_true(r.rip == SCRIPT_RIP && r.cr3 == SCRIPT_CR3 && r.cs == 0x10);
	for (unsigned i = 0; i < sizeof(mem); i++)
		assert_int_equal(mem[i], (SCRIPT_PA + i) & 0xff);

	/* The last answer late: waited for, and the stream stays in step.
	 * While a batch's answers are owed, its word reads do not change. */
	assert_int_equal(gdbstub_set_words(gs, &hold, 1), 0);
	assert_int_equal(gdbstub_stop_sample_send(gs, 1, SCRIPT_PA, sizeof(mem), 1), 0);
	assert_int_equal(gdbstub_set_words(gs, NULL, 0), -EBUSY);
	waits = gdbstub_waits(gs);
	memset(&r, 0, sizeof(r));
	assert_int_equal(gdbstub_stop_sample_recv(gs, &r, mem, &merr, &stopped), 0);
	assert_true(gdbstub_waits(gs) > waits);
	assert_int_equal(stopped, 1);
	assert_true(r.rip == SCRIPT_RIP && r.cr3 == SCRIPT_CR3);
	assert_int_equal(gdbstub_word(gs, 0, &w), 0);
	assert_int_equal(w, 0x0706050403020100ull);
	assert_true(script_done(&f));
	/* An answer with escapes and run-length encoding is decoded. */
	assert_int_equal(gdbstub_set_words(gs, &rle, 1), 0);
	assert_int_equal(gdbstub_stop_sample_send(gs, 1, SCRIPT_PA, sizeof(mem), 1), 0);
	assert_true(script_done(&f));
	assert_int_equal(gdbstub_stop_sample_recv(gs, &r, mem, &merr, &stopped), 0);
	assert_int_equal(stopped, 1);
	assert_int_equal(mem[0], SCRIPT_PA & 0xff);
	assert_int_equal(gdbstub_word(gs, 0, &w), 0);
	assert_int_equal(w, 0x1111111111111111ull);

	gdbstub_close(gs);
	pthread_join(f.thr, NULL);
	close(f.lfd);
	close(f.done[0]);
	close(f.done[1]);
	unlink(f.path);
}

/* ---- real QEMU ------------------------------------------------------------ */

static int qemu_start(struct qemu *q)
{
	return qemu_start_with(q, "gdbstub", "-gdb");
}

static void test_qemu(void **state)
{
	struct qemu q = { 0 };
	struct gdbstub *gs;
	struct gdbstub_regs r[2];
	const char *why = NULL;
	uint8_t mem[16];
	char addr[256];
	int merr = 1, err;
	struct timespec t0, t1;

	(void)state;
	if (!qemu_available()) {
		printf("SKIP: qemu-system-x86_64 is not installed\n");
		skip();
	}
	assert_int_equal(qemu_start(&q), 0);
	snprintf(addr, sizeof(addr), "unix:%s", q.sock);
	gs = gdbstub_open(addr, 5000, &why);
	if (!gs)
		fprintf(stderr, "gdbstub_open: %s: %s\n", why, strerror(errno));
	assert_non_null(gs);
	assert_int_equal(gdbstub_nr_threads(gs), 2);
	assert_true(gdbstub_has_phys(gs));

	/* x86 reset state: CS selector f000, IP fff0, CR3 0. */
	assert_int_equal(gdbstub_read_regs(gs, 1, &r[1]), 0);
	assert_int_equal(r[1].cs, 0xf000);
	assert_int_equal(r[1].rip & 0xffff, 0xfff0);
	assert_int_equal(r[1].cr3, 0);
	assert_int_equal(r[1].cr0, 0x60000010);	/* reset value: CD, NW, ET */
	assert_int_equal(gdbstub_regs_cpl(&r[1]), 0);

	/* The reset vector at physical 0xffff0 is a far jump (opcode ea). */
	assert_int_equal(gdbstub_read_phys(gs, 0xffff0, mem, sizeof(mem)), 0);
	assert_int_equal(mem[0], 0xea);

	/* Pipelined: both vCPUs and memory in one round trip. */
	memset(mem, 0, sizeof(mem));
	assert_int_equal(gdbstub_sample(gs, r, 2, 0xffff0, mem, sizeof(mem), &merr), 0);
	assert_int_equal(merr, 0);
	assert_int_equal(mem[0], 0xea);
	assert_int_equal(r[0].cs, 0xf000);

	/* Words with the sample (the current-task pointers): one 8-byte
	 * read each, pa 0 none; a plain physical read takes none of them. */
	{
		uint64_t pa[3] = { 0xffff0, 0, 0xffff8 }, w = 0;
		uint8_t hi[8];

		assert_int_equal(gdbstub_set_words(gs, pa, 3), 0);
		assert_int_equal(gdbstub_read_phys(gs, 0xffff8, hi, sizeof(hi)), 0);
		assert_int_equal(gdbstub_sample(gs, r, 2, 0xffff0, mem, sizeof(mem), &merr), 0);
		assert_int_equal(gdbstub_word(gs, 0, &w), 0);
		assert_int_equal(w & 0xff, 0xea);
		assert_memory_equal(&w, mem, 8);
		assert_int_equal(gdbstub_word(gs, 1, &w), -ENOENT);
		assert_int_equal(gdbstub_word(gs, 2, &w), 0);
		assert_memory_equal(&w, hi, 8);
		assert_int_equal(gdbstub_word(gs, 3, &w), -ENOENT);
		assert_int_equal(gdbstub_set_words(gs, pa, GDBSTUB_MAX_THREADS + 1), -EINVAL);
		assert_int_equal(gdbstub_set_words(gs, NULL, 0), 0);
		assert_int_equal(gdbstub_sample(gs, r, 2, 0, NULL, 0, &merr), 0);
		assert_int_equal(gdbstub_word(gs, 0, &w), -ENOENT);
	}
	/* From here on the BIOS runs: it makes 0xf0000-0xfffff RAM and copies
	 * itself there (a read in between sees zeros), so the reads below take
	 * the reset vector at its alias under 4 GiB, which stays the ROM. */
	{
		uint64_t top = RESET_TOP;

		assert_int_equal(gdbstub_set_words(gs, &top, 1), 0);	/* for the fast path */
	}

	/* Run the BIOS a little, stop it again: vCPU 0 has moved on. */
	for (int i = 0; i < 30; i++) {	/* 200 ms at a time, up to 6 s */
		assert_int_equal(gdbstub_continue(gs), 0);
		usleep(200000);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		assert_int_equal(gdbstub_interrupt(gs, 2000), 0);
		assert_int_equal(gdbstub_sample(gs, r, 2, 0, NULL, 0, &merr), 0);
		if (!(r[0].rip == 0xfff0 && r[0].cs == 0xf000))
			break;
	}
	assert_int_equal(gdbstub_continue(gs), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("MEASURED stop/read/continue: %.0f us (2 vCPUs, BIOS)\n",
	       ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3);
	assert_false(r[0].rip == 0xfff0 && r[0].cs == 0xf000);

	/* Fast path: stop and read in one write. */
	{
		int stopped = -1;

		memset(mem, 0, sizeof(mem));
		assert_int_equal(gdbstub_stop_sample(gs, r, 2, RESET_TOP, mem, sizeof(mem), 0,
						     &merr, &stopped), 0);
		assert_int_equal(stopped, 1);
		assert_int_equal(mem[0], 0xea);
		{
			uint64_t w = 0;

			assert_int_equal(gdbstub_word(gs, 0, &w), 0);
			assert_int_equal(w & 0xff, 0xea);
		}
		/* Already stopped: the reads work, no stop is claimed. */
		assert_int_equal(gdbstub_stop_sample(gs, r, 2, 0, NULL, 0, 0, &merr, &stopped), 0);
		assert_int_equal(stopped, 0);
		assert_int_equal(gdbstub_continue(gs), 0);
		/* Stop, read and resume in one write: the guest runs after it
		 * (a plain "\x03" then gets its stop reply). */
		usleep(20000);
		assert_int_equal(gdbstub_stop_sample(gs, r, 2, RESET_TOP, mem, sizeof(mem), 1,
						     &merr, &stopped), 0);
		assert_int_equal(stopped, 1);
		assert_int_equal(mem[0], 0xea);
		usleep(20000);
		assert_int_equal(gdbstub_interrupt(gs, 2000), 0);
		assert_int_equal(gdbstub_continue(gs), 0);
	}

	/* Interrupting an already stopped guest: no stop reply. */
	assert_int_equal(gdbstub_interrupt(gs, 2000), 0);
	assert_int_equal(gdbstub_interrupt(gs, 100), -ETIMEDOUT);
	assert_int_equal(gdbstub_continue(gs), 0);

	/* Out-of-range physical memory answers with an error, not a hang. */
	assert_int_equal(gdbstub_interrupt(gs, 2000), 0);
	err = gdbstub_read_phys(gs, 0xfffffffffff00000ull, mem, 8);
	assert_true(err == -EIO || err == 0);
	assert_int_equal(gdbstub_continue(gs), 0);

	/* QEMU dies mid-session: a clean error, not a hang or a crash. */
	kill(q.pid, SIGKILL);
	waitpid(q.pid, NULL, 0);
	q.pid = 0;
	err = gdbstub_interrupt(gs, 2000);
	assert_true(err == -EPIPE || err == -ESHUTDOWN);
	gdbstub_close(gs);
	qemu_stop(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_layout_bad),
		cmocka_unit_test(test_bad_checksum),
		cmocka_unit_test(test_gathered),
		cmocka_unit_test(test_qemu),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
