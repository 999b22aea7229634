// SPDX-License-Identifier: MIT
/*
 * switch-check: opvm.ko's task-switch rings against the current-task slots,
 * on a real QEMU guest.
 *
 *   switch-check --qmp SOCK --gdb SOCK --chan SOCK --pid QEMU_PID
 *                [--samples N] [--interval-ms MS]
 *
 * Takes HELLO from the channel (the ring and slot addresses), reads the
 * rings through the guest-memory reader (vmm/guestmem) into a timeline
 * (vmm/timeline) while the guest runs, and N times stops the guest through
 * the gdbstub and reads every vCPU's slot the way the gdbstub sampler does
 * (gdbstub_stop_sample).  For each stop it asks the timeline which task ran
 * on each vCPU at that moment and compares with the slot:
 *
 *   RESULT switch-ring vs slot: N of M samples agree (X %)
 *
 * The moment of a stop on the guest's clock: under QEMU TCG the guest TSC is
 * not the host's (it starts near 0 with the VM and stands still while the
 * VM is stopped, so every gdbstub stop moves the offset).  The stopped
 * guest's TSC lies between the last switch stamped before the stop and the
 * first one after it on every vCPU: the tool reads each ring's head while
 * the guest is stopped, intersects those brackets over the vCPUs, and looks
 * the middle of the intersection up.  Host TSC readings are kept to print
 * how the offset moved.
 *
 * At the first 40 stops it also checks guestmem's page-table walk against
 * QEMU's own virtual reads (HMP `x`, vCPU 0):
 *
 *   RESULT page walk vs QEMU's own reads: N of M addresses agree
 *
 * Exit status: 0 when >= 99 % of the samples and every address agree (at
 * least 10 addresses), 1 otherwise, 2 for a setup failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "guest-kmod/opvm_proto.h"
#include "host/collect/decoder.h"
#include "host/collect/gstate.h"
#include "lib/unixsock.h"
#include "vmm/qemu/gdbstub.h"
#include "vmm/guest/guestmem.h"
#include "vmm/guest/qmp.h"
#include "vmm/guest/timeline.h"
#include "tests/unit/qemu-harness.h"

#define MAX_VCPUS	8
#define MAX_SAMPLES	5000

struct stop {
	uint64_t host_tsc;		/* host TSC while stopped */
	uint64_t head[MAX_VCPUS];	/* ring heads while stopped */
	uint64_t lo, hi;		/* guest TSC bracket [lo, hi) */
	int have_hi[MAX_VCPUS];
	struct opvm_slot slot[MAX_VCPUS];
};

struct tally {
	unsigned agree, total, mismatch, unknown, torn, nobracket;
};

struct check {
	struct qmp *q;
	unsigned walk_tried, walk_agree, walk_failed, walk_user;
	struct guestmem *mem;
	struct timeline *tl;
	unsigned nr;
	uint64_t switch_pa;
	uint32_t stride, entries;
	struct stop *stops;
	unsigned nstops;
	unsigned judged;	/* stops[0..judged) are in the tally */
	struct tally t;
};

static uint64_t host_tsc(void)
{
	uint64_t t;

	_mm_lfence();
	t = __rdtsc();
	_mm_lfence();
	return t;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* Reads the channel until HELLO has come with its switch-ring tail. */
static int wait_hello(const char *chan, struct gstate *gs, struct chan_hello *out)
{
	struct decoder *d = decoder_new(gs);
	int fd = unixsock_connect(chan, UNIXSOCK_CONNECT_MS), rc = -ETIMEDOUT;
	time_t end = time(NULL) + 30;
	char buf[65536];

	if (!d || fd < 0) {
		fprintf(stderr, "switch-check: cannot open the channel %s\n", chan);
		decoder_free(d);
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	while (time(NULL) < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		const struct chan_hello *h;
		ssize_t n;

		if (poll(&p, 1, 500) <= 0)
			continue;
		n = read(fd, buf, sizeof(buf));
		if (n <= 0) {
			rc = -EPIPE;
			break;
		}
		decoder_feed(d, buf, (size_t)n);
		h = gstate_get_hello(gs);
		if (h) {
			*out = *h;
			rc = h->switch_pa ? 0 : -ENOENT;
			break;
		}
	}
	decoder_free(d);
	close(fd);
	return rc;
}

/* Entry n of vCPU v's ring, read directly (guest stopped or running); its
 * tsc if complete, else -EAGAIN. */
static int ring_entry_tsc(struct check *c, unsigned v, uint64_t n, uint64_t *tsc)
{
	uint64_t at = c->switch_pa + (uint64_t)v * c->stride +
		      sizeof(struct opvm_switch_ring_hdr) +
		      (n & (c->entries - 1)) * sizeof(struct opvm_switch);
	struct opvm_switch e;

	if (guestmem_read(c->mem, at, &e, sizeof(e)) || e.seq != 2 * n + 2)
		return -EAGAIN;
	*tsc = e.tsc;
	return 0;
}

static int ring_head(struct check *c, unsigned v, uint64_t *head)
{
	return guestmem_read(c->mem, c->switch_pa + (uint64_t)v * c->stride,
			     head, sizeof(*head));
}

/* The guest is stopped: record the slots (already read), the heads and the
 * lower end of the bracket. */
static int record_stop(struct check *c, const uint8_t *slots)
{
	struct stop *s = &c->stops[c->nstops];

	memset(s, 0, sizeof(*s));
	s->host_tsc = host_tsc();
	memcpy(s->slot, slots, c->nr * sizeof(struct opvm_slot));
	for (unsigned v = 0; v < c->nr; v++) {
		uint64_t t;

		if (ring_head(c, v, &s->head[v]) || !s->head[v] ||
		    ring_entry_tsc(c, v, s->head[v] - 1, &t))
			return -EAGAIN;
		if (t > s->lo)
			s->lo = t;
	}
	s->hi = UINT64_MAX;
	c->nstops++;
	return 0;
}

/* The guest runs again: close the brackets of stops whose next switch has
 * been stamped by now (entry head on some vCPU). */
static void close_brackets(struct check *c)
{
	for (unsigned i = 0; i < c->nstops; i++) {
		struct stop *s = &c->stops[i];

		for (unsigned v = 0; v < c->nr; v++) {
			uint64_t head, t;

			if (s->have_hi[v] || ring_head(c, v, &head) ||
			    head <= s->head[v] ||
			    ring_entry_tsc(c, v, s->head[v], &t))
				continue;
			s->have_hi[v] = 1;
			if (t < s->hi)
				s->hi = t;
		}
	}
}

/*
 * The page-table walk against QEMU's own MMU: vCPU 0 is stopped, so the
 * monitor's `x` (virtual, through vCPU 0's CR3) and guestmem's walk of the
 * same CR3 must read the same bytes: at its RIP (user code on 4K pages, or
 * kernel text on 2M pages), at the kernel's _text and at a static
 * workload's text (each when vCPU 0 runs on a page table that maps it).
 */
static void check_walk(struct check *c, const struct gdbstub_regs *r0,
		       uint64_t text_addr)
{
	/* 0x401000: the text of the image's static workloads (non-PIE), mapped
	 * when vCPU 0 runs one of them or a syscall of one (PTI's kernel page
	 * table maps user space too). */
	const uint64_t vas[3] = { r0->rip, text_addr, 0x401000 };

	for (int i = 0; i < 3; i++) {
		uint8_t want[16], got[16];
		unsigned n = 16;
		uint64_t gpa;

		if (!vas[i])
			continue;
		if (4096 - (vas[i] & 4095) < n)
			n = 4096 - (vas[i] & 4095);
		if (qemu_hmp_bytes(c->q, "x", vas[i], want, n))
			continue;	/* not mapped there for QEMU either */
		c->walk_tried++;
		c->walk_user += vas[i] < (1ull << 47);
		if (guestmem_virt_to_phys(c->mem, r0->cr3, vas[i], &gpa) ||
		    guestmem_read(c->mem, gpa, got, n)) {
			c->walk_failed++;
			continue;
		}
		c->walk_agree += !memcmp(want, got, n);
	}
}


/* One stop against the timeline.  Returns -EAGAIN to ask again later. */
static int judge(struct check *c, const struct stop *s, struct tally *t)
{
	uint64_t at;

	if (s->hi == UINT64_MAX)
		return -EAGAIN;
	if (s->hi <= s->lo) {
		t->nobracket += c->nr;
		t->total += c->nr;
		return 0;
	}
	at = s->lo + (s->hi - s->lo) / 2;
	for (unsigned v = 0; v < c->nr; v++) {
		struct timeline_task k;
		int rc;

		if (s->slot[v].seq & 1) {
			t->torn++;	/* the slot itself was mid-update */
			continue;
		}
		rc = timeline_lookup(c->tl, v, at, &k);
		if (rc == -EAGAIN)
			return -EAGAIN;
		t->total++;
		if (rc)
			t->unknown++;
		else if (k.pid == s->slot[v].pid && k.tgid == s->slot[v].tgid)
			t->agree++;
		else
			t->mismatch++;
	}
	return 0;
}

/*
 * Judges every stop whose bracket has closed, in order, while its switches
 * are still in the timeline's bounded mirror (opvm joins samples as they
 * come, never hours later; a check that waited to the end would look up
 * stops whose entries the mirror has long let go).
 */
static void judge_ready(struct check *c)
{
	while (c->judged < c->nstops &&
	       judge(c, &c->stops[c->judged], &c->t) != -EAGAIN)
		c->judged++;
}

static void usage(void)
{
	fprintf(stderr, "usage: switch-check --qmp SOCK --gdb SOCK --chan SOCK "
		"--pid QEMU_PID [--samples N] [--interval-ms MS]\n");
}

static int sample_loop(struct check *c, struct gdbstub *gs, const struct chan_hello *h,
		       unsigned samples, unsigned interval_ms)
{
	struct gdbstub_regs regs[MAX_VCPUS];
	uint8_t slots[MAX_VCPUS * sizeof(struct opvm_slot)];
	unsigned failed = 0;

	while (c->nstops < samples && failed < 100) {
		int merr = 0, stopped = 0, rc;

		sleep_ms(interval_ms);
		timeline_refresh(c->tl, c->mem, UINT64_MAX - 1);
		close_brackets(c);
		judge_ready(c);
		rc = gdbstub_stop_sample(gs, regs, c->nr, h->slot_pa, slots,
					 c->nr * sizeof(struct opvm_slot), 0,
					 &merr, &stopped);
		if (rc == -EPIPE || rc == -ESHUTDOWN)
			return rc;
		if (rc || stopped != 1 || merr) {
			failed++;
			if (stopped)
				gdbstub_continue(gs);
			continue;
		}
		if (record_stop(c, slots))
			failed++;
		if (c->nstops <= 40)
			check_walk(c, &regs[0], h->text_addr);
		rc = gdbstub_continue(gs);
		if (rc)
			return rc;
	}
	/* The next switch after the last stops, then a last read. */
	for (int i = 0; i < 20; i++) {
		sleep_ms(50);
		timeline_refresh(c->tl, c->mem, UINT64_MAX - 1);
		close_brackets(c);
		judge_ready(c);
	}
	return 0;
}

static void print_offsets(const struct check *c)
{
	const struct stop *a = &c->stops[0], *b = &c->stops[c->nstops - 1];

	if (c->nstops < 2 || a->hi == UINT64_MAX || b->hi == UINT64_MAX)
		return;
	printf("MEASURED host TSC - guest TSC at the first stop: %" PRId64
	       ", at the last: %" PRId64 " (%u stops in between)\n",
	       (int64_t)(a->host_tsc - a->lo), (int64_t)(b->host_tsc - b->lo),
	       c->nstops - 1);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "qmp", 1, NULL, 'q' }, { "gdb", 1, NULL, 'g' },
		{ "chan", 1, NULL, 'c' }, { "pid", 1, NULL, 'p' },
		{ "samples", 1, NULL, 'n' }, { "interval-ms", 1, NULL, 'i' },
		{ NULL, 0, NULL, 0 },
	};
	const char *qmp_path = NULL, *gdb_path = NULL, *chan = NULL;
	unsigned samples = 300, interval_ms = 20;
	struct check c = { 0 };
	struct chan_hello h;
	struct timeline_stats ts;
	struct tally t = { 0 };
	struct gstate *gst = NULL;
	struct gdbstub *gs = NULL;
	struct qmp *q = NULL;
	char gdbaddr[300];
	const char *why = NULL;
	pid_t pid = 0;
	int o, rc, ret = 2;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'q': qmp_path = optarg; break;
		case 'g': gdb_path = optarg; break;
		case 'c': chan = optarg; break;
		case 'p': pid = (pid_t)atoi(optarg); break;
		case 'n': samples = (unsigned)atoi(optarg); break;
		case 'i': interval_ms = (unsigned)atoi(optarg); break;
		default: usage(); return 2;
		}
	}
	if (!qmp_path || !gdb_path || !chan || pid <= 0 || !samples ||
	    samples > MAX_SAMPLES) {
		usage();
		return 2;
	}
	c.stops = calloc(samples, sizeof(*c.stops));
	gst = gstate_new(NULL);
	q = qmp_open(qmp_path, 30000);
	c.q = q;
	c.mem = guestmem_open(pid);
	if (!c.stops || !gst || !q || !c.mem) {
		fprintf(stderr, "switch-check: setup: %s\n", strerror(errno));
		goto out;
	}
	rc = guestmem_add_qemu_ranges(c.mem, q);
	if (rc) {
		fprintf(stderr, "switch-check: guest RAM ranges: %s\n", strerror(-rc));
		goto out;
	}
	rc = wait_hello(chan, gst, &h);
	if (rc) {
		fprintf(stderr, "switch-check: no HELLO with switch rings (%s)\n",
			strerror(-rc));
		goto out;
	}
	snprintf(gdbaddr, sizeof(gdbaddr), "unix:%s", gdb_path);
	gs = gdbstub_open(gdbaddr, 5000, &why);	/* stops the guest */
	if (!gs) {
		fprintf(stderr, "switch-check: gdbstub: %s\n", why ? why : strerror(errno));
		goto out;
	}
	c.nr = gdbstub_nr_threads(gs);
	if (c.nr > h.nr_cpus)
		c.nr = h.nr_cpus;
	if (c.nr > MAX_VCPUS)
		c.nr = MAX_VCPUS;
	c.switch_pa = h.switch_pa;
	c.stride = h.switch_stride;
	c.entries = h.switch_entries;
	c.tl = timeline_new(c.nr, h.switch_pa, h.switch_stride, h.switch_entries);
	if (!c.tl || gdbstub_continue(gs)) {
		fprintf(stderr, "switch-check: timeline: %s\n", strerror(errno));
		goto out;
	}
	printf("switch rings at 0x%" PRIx64 ", %u entries each, %u vCPUs, tsc_khz %u\n",
	       h.switch_pa, h.switch_entries, c.nr, h.tsc_khz);
	rc = sample_loop(&c, gs, &h, samples, interval_ms);
	if (rc) {
		fprintf(stderr, "switch-check: sampling: %s\n", strerror(-rc));
		goto out;
	}
	judge_ready(&c);
	for (unsigned i = c.judged; i < c.nstops; i++)	/* never bracketed */
		c.t.total += c.nr, c.t.unknown += c.nr;
	t = c.t;
	timeline_get_stats(c.tl, &ts);
	print_offsets(&c);
	printf("timeline: %" PRIu64 " switches read, %" PRIu64 " overrun, %" PRIu64
	       " torn, %" PRIu64 " unknown lookups\n", ts.switches, ts.overrun,
	       ts.torn, ts.unknown);
	printf("samples: %u agree, %u differ, %u unknown to the timeline, %u without "
	       "a bracket, %u slots mid-update (left out)\n", t.agree, t.mismatch,
	       t.unknown, t.nobracket, t.torn);
	printf("RESULT switch-ring vs slot: %u of %u samples agree (%.2f %%)\n",
	       t.agree, t.total, t.total ? 100.0 * t.agree / t.total : 0.0);
	printf("RESULT page walk vs QEMU's own reads: %u of %u addresses agree "
	       "(%u user, %u kernel; %u walks failed)\n", c.walk_agree,
	       c.walk_tried, c.walk_user, c.walk_tried - c.walk_user,
	       c.walk_failed);
	ret = t.total >= c.nr * samples / 2 && t.agree * 100 >= t.total * 99 &&
	      c.walk_tried >= 10 && c.walk_agree == c.walk_tried ? 0 : 1;
out:
	gdbstub_close(gs);	/* the guest was left running by the last "c" */
	timeline_free(c.tl);
	guestmem_close(c.mem);
	qmp_close(q);
	gstate_free(gst);
	free(c.stops);
	return ret;
}
