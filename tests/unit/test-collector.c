// SPDX-License-Identifier: MIT
/*
 * Unit tests for the collector (host/collect/collector.c): a guest channel fed
 * through a socketpair with hand-built protocol records, samples pushed into
 * the guest's rings, then sample files and session.json checked; the main
 * loop's exits (target gone, sampler fault, stop flag, duration) and channel
 * reconnection.
 */
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "guest-kmod/opvm_proto.h"
#include "host/collect/collector.h"
#include "host/collect/decoder.h"
#include "host/collect/gstate.h"
#include "host/collect/stats.h"
#include "lib/ring.h"
#include "lib/sample.h"
#include "host/collect/store.h"
#include "vmm/sampler.h"

#define CR3_APP		0x2468000ull
#define EXE_LO		0x400000ull
#define MOD_BASE	0xffffffffc0100000ull
#define KTEXT		0xffffffff81000000ull

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(p);
}

static void mktmp(char *dir, size_t len)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, len, "%s/opvm-test-collector-XXXXXX", tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(dir));
}

/* ---- hand-built channel records ------------------------------------------ */

struct chan {
	int fd;
	uint32_t seq;
	uint8_t *buf;		/* non-NULL: records collect here, chan_flush() */
	size_t len;
};

/* The guest end of a new channel to g (the collector owns the other). */
static struct chan chan_open(struct cguest *g)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(cguest_set_channel(g, sv[0], NULL, NULL), 0);
	return (struct chan){ .fd = sv[1] };
}

/* One write for many records: a stream socket's buffer counts per-write
 * overhead, and fills after a few hundred small writes nobody reads. */
static void chan_flush(struct chan *ch)
{
	size_t off = 0;

	while (off < ch->len) {
		ssize_t n = write(ch->fd, ch->buf + off, ch->len - off);

		assert_true(n > 0);
		off += (size_t)n;
	}
	ch->len = 0;
}

static void send_rec(struct chan *ch, void *rec, size_t len, unsigned type)
{
	struct opvm_rec_hdr *h = rec;

	assert_int_equal(len % OPVM_REC_ALIGN, 0);
	h->magic = OPVM_PROTO_MAGIC;
	h->type = (uint16_t)type;
	h->len = (uint32_t)len;
	h->seq = ch->seq++;
	h->reserved = 0;
	if (ch->buf) {
		memcpy(ch->buf + ch->len, rec, len);
		ch->len += len;
		return;
	}
	assert_int_equal(write(ch->fd, rec, len), (ssize_t)len);
}

static void send_hello(struct chan *ch)
{
	struct opvm_rec_hello r;

	memset(&r, 0, sizeof(r));
	r.version = OPVM_PROTO_VERSION;
	r.nr_cpus = 2;
	r.slot_pa = 0x100000;
	r.slot_size = sizeof(struct opvm_slot);
	r.anchor_addr = KTEXT;
	r.text_addr = KTEXT;
	strcpy(r.anchor_name, "_text");
	strcpy(r.release, "6.1.0-test-amd64");
	send_rec(ch, &r, sizeof(r), OPVM_REC_HELLO);
}

static void send_cookie(struct chan *ch, uint64_t id, const char *path)
{
	uint8_t buf[512];
	struct opvm_rec_cookie *r = (struct opvm_rec_cookie *)buf;
	size_t plen = strlen(path), len = (sizeof(*r) + plen + 7) & ~(size_t)7;

	memset(buf, 0, sizeof(buf));
	r->cookie = id;
	r->path_len = (uint16_t)plen;
	r->build_id_len = 4;
	memcpy(r->build_id, "\xde\xad\xbe\xef", 4);
	memcpy(buf + sizeof(*r), path, plen);
	send_rec(ch, buf, len, OPVM_REC_COOKIE);
}

static void send_proc(struct chan *ch, uint32_t tgid, uint64_t cr3, const char *comm,
		      uint64_t exe)
{
	struct opvm_rec_proc r;

	memset(&r, 0, sizeof(r));
	r.tgid = tgid;
	r.ppid = 1;
	r.cr3 = cr3;
	r.exe_cookie = exe;
	strncpy(r.comm, comm, sizeof(r.comm));
	send_rec(ch, &r, sizeof(r), OPVM_REC_PROC);
}

static void send_mmap(struct chan *ch, uint32_t tgid, uint64_t start, uint64_t end,
		      uint64_t pgoff, uint64_t cookie)
{
	struct opvm_rec_mmap r;

	memset(&r, 0, sizeof(r));
	r.tgid = tgid;
	r.prot = 5;
	r.start = start;
	r.end = end;
	r.pgoff = pgoff;
	r.cookie = cookie;
	send_rec(ch, &r, sizeof(r), OPVM_REC_MMAP);
}

static void send_module(struct chan *ch, const char *name, uint64_t base, uint64_t size)
{
	struct opvm_rec_module r;

	memset(&r, 0, sizeof(r));
	r.base = base;
	r.size = size;
	strncpy(r.name, name, sizeof(r.name));
	send_rec(ch, &r, sizeof(r), OPVM_REC_MODULE);
}

static void send_guest_state(struct chan *ch)
{
	send_hello(ch);
	send_cookie(ch, 1, "/usr/bin/app");
	send_proc(ch, 100, CR3_APP, "app", 1);
	send_mmap(ch, 100, EXE_LO, EXE_LO + 0x10000, 0x1000, 1);
	send_module(ch, "virtio_net", MOD_BASE, 0x4000);
}

static void push(struct cguest *g, unsigned vcpu, uint64_t rip, uint64_t cr3, uint8_t cpl)
{
	struct opvm_sample s = {
		.rip = rip, .cr3 = cr3, .slot_tid = 100, .slot_tgid = 100,
		.vcpu = vcpu, .cpl = cpl, .flags = OPVM_SAMPLE_SLOT,
	};

	assert_int_equal(ring_push(cguest_ring(g, vcpu), &s), 0);
}

/* ---- reading results --------------------------------------------------------- */

struct tally {
	const char *image;
	uint64_t total;
	int kernel;
};

static int total_cb(uint64_t off, uint64_t count, void *arg)
{
	*(uint64_t *)arg += count;
	return 0;
}

static int walk_cb(const struct store_entry *e, void *arg)
{
	struct tally *t = arg;
	struct sfile_reader *r;
	char err[256];

	if (strcmp(e->image, t->image))
		return 0;
	r = sfile_reader_open(e->path, err, sizeof(err));
	if (!r)
		fail_msg("%s: %s", e->path, err);
	assert_int_equal(sfile_reader_foreach(r, total_cb, &t->total), 0);
	t->kernel = e->kernel;
	sfile_reader_close(r);
	return 0;
}

static uint64_t image_total(const char *dir, const char *image)
{
	struct tally t = { .image = image };

	assert_int_equal(store_walk(dir, "current", walk_cb, &t, NULL), 0);
	return t.total;
}

static json_t *load_session(const char *dir, const char *guest)
{
	char path[512];
	json_error_t jerr;
	json_t *j;

	snprintf(path, sizeof(path), "%s/guests/%s/samples/current/session.json", dir, guest);
	j = json_load_file(path, 0, &jerr);
	if (!j)
		fail_msg("%s: %s", path, jerr.text);
	return j;
}

static int64_t jget(json_t *root, const char *obj, const char *key)
{
	json_t *o = obj ? json_object_get(root, obj) : root;
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v))
		fail_msg("%s.%s is not an integer", obj ? obj : "", key);
	return json_integer_value(v);
}

static struct collector_config base_cfg(const char *dir)
{
	struct collector_config cfg = {
		.session_dir = dir,
		.separate = OPVM_SEP_LIB,
		.nr_events = 1,
		.sync_ms = 50,
		.hold_ms = 2000,
		.mode = "gdbstub-timer",
		.rate_hz = 250,
	};

	strcpy(cfg.events[0].name, "TIMER");
	cfg.events[0].count = 1;
	return cfg;
}

/* ---- a scripted sampler ----------------------------------------------------- */

struct fake {
	struct sampler s;
	int status_after;	/* calls before status reports `final` */
	int final;
	int calls;
	int stopped;
	struct cguest *g;
	int push_each_status;	/* push one user sample per status call */
	int hellos;		/* guest_hello calls */
	struct chan_hello hello;	/* the last one */
	int pythons;		/* guest_python calls */
	unsigned python_nr;	/* the last set's address spaces */
};

static int fake_status(struct sampler *s)
{
	struct fake *f = s->priv;

	if (f->push_each_status && f->calls < f->status_after)
		push(f->g, 0, EXE_LO + 0x20, CR3_APP, 3);
	if (++f->calls > f->status_after)
		return f->final;
	return SAMPLER_RUNNING;
}

static void fake_stop(struct sampler *s)
{
	((struct fake *)s->priv)->stopped++;
}

static void fake_stats(struct sampler *s, struct sampler_stats *out)
{
	struct fake *f = s->priv;

	memset(out, 0, sizeof(*out));
	out->ticks = (uint64_t)f->calls + 3;
	out->samples = (uint64_t)f->calls;
	out->throttled = 3;
	out->cost_ns_total = 1000 * out->ticks;
}

static const char *fake_err(struct sampler *s)
{
	return "scripted fault";
}

static void fake_hello(struct sampler *s, const struct chan_hello *h)
{
	struct fake *f = s->priv;

	f->hellos++;
	f->hello = *h;
}

static void fake_python(struct sampler *s, const struct sampler_python *p)
{
	struct fake *f = s->priv;

	f->pythons++;
	f->python_nr = p->nr;
}

static const struct sampler_ops fake_ops = {
	.name = "fake",
	.stop = fake_stop,
	.status = fake_status,
	.last_error = fake_err,
	.get_stats = fake_stats,
	.guest_hello = fake_hello,
	.guest_python = fake_python,
};

/* ---- tests ---------------------------------------------------------------------- */

static void test_channel_and_sync(void **state)
{
	char dir[256];
	struct collector_config cfg;
	struct collector *c;
	struct cguest *g;
	struct chan ch;
	json_t *j, *k, *mods, *ev;

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	c = collector_new(&cfg);
	assert_non_null(c);
	g = collector_add_guest(c, "vm1", 2);
	assert_non_null(g);
	assert_int_equal(cguest_nr_vcpus(g), 2);
	assert_string_equal(cguest_name(g), "vm1");
	assert_non_null(cguest_ring(g, 1));
	assert_null(cguest_ring(g, 2));
	assert_null(collector_add_guest(c, "vm1", 1));	/* same tree twice */
	assert_int_equal(errno, EEXIST);

	ch = chan_open(g);
	send_guest_state(&ch);

	/* the samples are taken while the records are still in the socket:
	 * the sync must decode first */
	for (int i = 0; i < 30; i++)
		push(g, (unsigned)i & 1, EXE_LO + 0x100 + (uint64_t)(i % 3), CR3_APP | 0x1, 3);
	for (int i = 0; i < 5; i++)
		push(g, 0, MOD_BASE + 0x10, CR3_APP, 0);
	for (int i = 0; i < 7; i++)
		push(g, 1, KTEXT + 0x500, CR3_APP, 0);
	assert_int_equal(collector_sync(c), 0);

	assert_non_null(gstate_proc_by_cr3(cguest_gstate(g), CR3_APP));
	assert_int_equal(image_total(dir, "/usr/bin/app"), 30);
	assert_int_equal(image_total(dir, "virtio_net"), 5);
	assert_int_equal(image_total(dir, "vmlinux"), 7);

	j = load_session(dir, "vm1");
	assert_int_equal(jget(j, NULL, "version"), 1);
	assert_string_equal(json_string_value(json_object_get(j, "guest")), "vm1");
	assert_string_equal(json_string_value(json_object_get(j, "mode")), "gdbstub-timer");
	assert_int_equal(jget(j, NULL, "rate_hz"), 250);
	assert_int_equal(jget(j, NULL, "vcpus"), 2);
	assert_string_equal(json_string_value(json_object_get(j, "separate")), "lib");
	assert_non_null(json_string_value(json_object_get(j, "start")));
	assert_true(json_is_number(json_object_get(j, "duration_s")));
	ev = json_array_get(json_object_get(j, "events"), 0);
	assert_string_equal(json_string_value(json_object_get(ev, "name")), "TIMER");
	assert_int_equal(jget(ev, NULL, "count"), 1);
	assert_int_equal(jget(j, "stats", "received"), 42);
	assert_int_equal(jget(j, "stats", "user"), 30);
	assert_int_equal(jget(j, "stats", "kernel"), 12);
	assert_int_equal(jget(j, "stats", "lost_overflow"), 0);
	assert_int_equal(jget(j, "stats", "lost_no_mapping"), 0);
	assert_int_equal(jget(j, "stats", "lost_no_process"), 0);
	assert_int_equal(jget(j, "stats", "unresolved"), 0);
	assert_int_equal(jget(j, "stats", "guest_lost"), 0);
	assert_int_equal(jget(j, "stats", "throttled"), 0);
	k = json_object_get(j, "kernel");
	assert_true(json_is_object(k));
	assert_string_equal(json_string_value(json_object_get(k, "release")), "6.1.0-test-amd64");
	assert_string_equal(json_string_value(json_object_get(k, "anchor_name")), "_text");
	assert_string_equal(json_string_value(json_object_get(k, "text_addr_hex")),
			    "0xffffffff81000000");
	assert_true((uint64_t)json_number_value(json_object_get(k, "text_addr")) == KTEXT);
	mods = json_object_get(j, "modules");
	assert_int_equal(json_array_size(mods), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(mods, 0), "name")),
			    "virtio_net");
	assert_int_equal(jget(j, "channel", "records"), 5);
	assert_int_equal(jget(j, "channel", "bad_records"), 0);
	assert_true(jget(j, "channel", "bytes") > 0);
	assert_true(json_is_object(json_object_get(j, "sampler")));
	json_decref(j);

	close(ch.fd);
	collector_free(c);
	collector_free(NULL);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* A sample taken before its process is announced and never resolved: the
 * final sync (collector_free) files it anyway, and counts it. */
static void test_free_flushes(void **state)
{
	char dir[256];
	struct collector_config cfg;
	struct collector *c;
	struct cguest *g;
	struct chan ch;
	json_t *j;

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	c = collector_new(&cfg);
	g = collector_add_guest(c, "vm2", 1);
	assert_non_null(g);
	ch = chan_open(g);
	send_hello(&ch);
	push(g, 0, 0x500000, 0x8642000, 3);
	assert_int_equal(collector_sync(c), 0);
	j = load_session(dir, "vm2");
	assert_int_equal(jget(j, "stats", "received"), 1);
	assert_int_equal(jget(j, "stats", "user"), 0);		/* held */
	assert_int_equal(jget(j, "model", "held"), 1);
	json_decref(j);
	push(g, 0, KTEXT, 0x8642000, 0);			/* not synced yet */
	close(ch.fd);
	collector_free(c);
	j = load_session(dir, "vm2");
	assert_int_equal(jget(j, "stats", "received"), 2);
	assert_int_equal(jget(j, "stats", "user"), 1);
	assert_int_equal(jget(j, "stats", "kernel"), 1);
	assert_int_equal(jget(j, "stats", "lost_no_process"), 1);
	json_decref(j);
	assert_int_equal(image_total(dir, "{anon-cr3:0x8642000}"), 1);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* Under -g dwarf each sample carries a user stack window: the ring holds
 * four seconds of the largest (a full chain and OPVM_MAX_STACK bytes) at
 * the configured rate, as it does chains alone under -g fp.  Sized for
 * chains, it held 113 at 200 Hz: a collector starved for 0.6 s on a
 * loaded host lost samples. */
static void test_ring_dwarf(void **state)
{
	static uint64_t chain[OPVM_MAX_CALLCHAIN];
	static uint8_t stack[OPVM_MAX_STACK];
	struct opvm_sample s = {
		.rip = EXE_LO + 0x20, .cr3 = CR3_APP, .cpl = 3,
		.flags = OPVM_SAMPLE_STACK, .chain = chain, .nr_chain = OPVM_MAX_CALLCHAIN,
		.stack = stack, .stack_len = OPVM_MAX_STACK,
	};
	struct collector_config cfg;
	struct collector *c;
	struct cguest *g;
	char dir[256];

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	cfg.rate_hz = 200;
	cfg.sync_ms = 1000;
	cfg.callgraph = "dwarf";
	c = collector_new(&cfg);
	g = collector_add_guest(c, "vm1", 1);
	assert_non_null(g);
	for (unsigned i = 0; i < 4 * cfg.rate_hz; i++)
		assert_int_equal(ring_push(cguest_ring(g, 0), &s), 0);
	collector_free(c);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	(void)state;
}

/* run() ends when the target is gone, having stopped the sampler and filed
 * what it pushed; sampler stats land in session.json. */
static void test_run_target_gone(void **state)
{
	char dir[256];
	struct collector_config cfg;
	struct collector *c;
	struct cguest *g;
	struct fake f = { .status_after = 5, .final = SAMPLER_TARGET_GONE,
			  .push_each_status = 1 };
	volatile sig_atomic_t stop = 0;
	struct chan ch;
	json_t *j;

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	c = collector_new(&cfg);
	g = collector_add_guest(c, "vm3", 1);
	assert_non_null(g);
	ch = chan_open(g);
	send_guest_state(&ch);
	f.s.ops = &fake_ops;
	f.s.priv = &f;
	f.g = g;
	cguest_set_sampler(g, &f.s);
	assert_int_equal(collector_run(c, &stop, 0), 0);
	assert_int_equal(f.stopped, 1);
	assert_int_equal(image_total(dir, "/usr/bin/app"), 5);
	j = load_session(dir, "vm3");
	assert_int_equal(jget(j, "stats", "user"), 5);
	assert_int_equal(jget(j, "stats", "throttled"), 3);
	assert_int_equal(jget(j, "sampler", "throttled"), 3);
	assert_int_equal(jget(j, "sampler", "ticks"), 9);
	assert_int_equal(jget(j, "sampler", "cost_ns_avg"), 1000);
	json_decref(j);
	close(ch.fd);
	collector_free(c);
	assert_int_equal(f.stopped, 1);	/* not stopped twice */
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* A sampler fault stops the run with its error, data synced. */
static void test_run_fault(void **state)
{
	char dir[256];
	struct collector_config cfg;
	struct collector *c;
	struct cguest *g;
	struct fake f = { .status_after = 3, .final = -EIO, .push_each_status = 1 };

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	c = collector_new(&cfg);
	g = collector_add_guest(c, "vm4", 1);
	assert_non_null(g);
	f.s.ops = &fake_ops;
	f.s.priv = &f;
	f.g = g;
	cguest_set_sampler(g, &f.s);
	assert_int_equal(collector_run(c, NULL, 0), -EIO);
	/* no guest module: filed per address space, right away */
	assert_int_equal(image_total(dir, "{anon-cr3:0x2468000}"), 3);
	collector_free(c);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* A progress callback that counts its calls: [0] all, [1] last ones. */
static void count_progress(void *arg, const struct collector_progress *p, bool last)
{
	int *n = arg;

	assert_non_null(p);
	n[0]++;
	n[1] += last;
}

/* Duration and stop flag end the run; with no sampler the run lasts. */
static void test_run_duration_and_stop(void **state)
{
	char dir[256];
	struct collector_config cfg;
	struct collector *c;
	volatile sig_atomic_t stop = 1;
	int shown[2] = { 0, 0 };

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	cfg.progress = count_progress;
	cfg.progress_arg = &shown;
	c = collector_new(&cfg);
	assert_non_null(collector_add_guest(c, "vm5", 1));
	assert_int_equal(collector_run(c, &stop, 0), 0);	/* stops at once */
	stop = 0;
	assert_int_equal(collector_run(c, &stop, 120), 0);	/* 120 ms */
	collector_free(c);
	assert_true(shown[0] >= 1);	/* the progress went to the caller */
	assert_int_equal(shown[1], 2);	/* and the end of each run said */
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

struct reconn {
	int calls;
	int peer;	/* our end of the new connection */
};

static int reconnect_cb(void *arg)
{
	struct reconn *r = arg;
	int sv[2];

	if (r->calls++)
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	r->peer = sv[1];
	return sv[0];
}

/* A guest running python3.11: the sampler is told of it, unless
 * python_off (--no-python), when it is never told and reads nothing;
 * session.json records which. */
static void python_told(int off, int want_calls, unsigned want_nr)
{
	char dir[256];
	struct collector_config cfg;
	struct collector *c;
	struct cguest *g;
	struct fake f = { .s = { .ops = &fake_ops } };
	struct chan ch;
	json_t *j;

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	cfg.python_off = off;
	c = collector_new(&cfg);
	g = collector_add_guest(c, off ? "py-off" : "py-on", 1);
	assert_non_null(g);
	f.s.priv = &f;
	cguest_set_sampler(g, &f.s);
	ch = chan_open(g);
	send_hello(&ch);
	send_cookie(&ch, 1, "/usr/bin/python3.11");
	send_proc(&ch, 100, CR3_APP, "python3.11", 1);
	send_mmap(&ch, 100, EXE_LO + 0x1000, EXE_LO + 0x10000, 0x1000, 1);
	assert_int_equal(collector_sync(c), 0);
	assert_int_equal(f.pythons, want_calls);
	assert_int_equal(f.python_nr, want_nr);
	j = load_session(dir, off ? "py-off" : "py-on");
	assert_true(json_is_boolean(json_object_get(j, "no_python")));
	assert_int_equal(json_is_true(json_object_get(j, "no_python")), off);
	json_decref(j);
	close(ch.fd);
	collector_free(c);
}

static void test_python_off(void **state)
{
	python_told(0, 1, 1);
	python_told(1, 0, 0);
}

/* The channel reaches EOF (guest rebooted): reconnect, decoder reset, the
 * new HELLO resets the model.  The sampler is told each HELLO once,
 * including one read before it was set. */
static void test_reconnect(void **state)
{
	char dir[256];
	struct collector_config cfg;
	struct collector *c;
	struct cguest *g;
	struct reconn rc = { 0 };
	struct fake f = { .s = { .ops = &fake_ops } };
	struct chan ch;
	int sv[2];

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	c = collector_new(&cfg);
	g = collector_add_guest(c, "vm6", 1);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(cguest_set_channel(g, sv[0], reconnect_cb, &rc), 0);
	ch = (struct chan){ .fd = sv[1] };
	send_guest_state(&ch);
	/* half a record, then the guest goes away */
	assert_int_equal(write(sv[1], "OV\x03\x00", 4), 4);
	close(sv[1]);
	assert_int_equal(collector_sync(c), 0);
	assert_int_equal(rc.calls, 1);
	assert_int_equal(gstate_nr_processes(cguest_gstate(g)), 1);
	f.s.priv = &f;
	cguest_set_sampler(g, &f.s);
	assert_int_equal(f.hellos, 1);
	assert_int_equal(f.hello.slot_pa, 0x100000);
	assert_int_equal(f.hello.nr_cpus, 2);
	assert_int_equal(f.hello.slot_size, sizeof(struct opvm_slot));
	assert_int_equal(f.hello.switch_pa, 0);
	assert_int_equal(collector_sync(c), 0);
	assert_int_equal(f.hellos, 1);		/* nothing new */
	ch = (struct chan){ .fd = rc.peer };
	send_hello(&ch);
	send_proc(&ch, 7, 0x1110000, "init", 0);
	assert_int_equal(collector_sync(c), 0);
	assert_int_equal(gstate_nr_processes(cguest_gstate(g)), 1);
	assert_non_null(gstate_proc_by_tgid(cguest_gstate(g), 7));
	assert_null(gstate_proc_by_tgid(cguest_gstate(g), 100));
	assert_int_equal(gstate_get_stats(cguest_gstate(g))->hellos, 2);
	assert_int_equal(f.hellos, 2);
	close(rc.peer);
	collector_free(c);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* How many asks for HELLO wait on the host's side of the channel (fd is
 * the guest's end); fails on any other byte. */
static int hello_asks(int fd)
{
	struct opvm_req_hello r;
	int n = 0;

	for (;;) {
		ssize_t got = recv(fd, &r, sizeof(r), MSG_DONTWAIT);

		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return n;
		assert_int_equal(got, sizeof(r));
		assert_int_equal(le16toh(r.hdr.magic), OPVM_PROTO_MAGIC);
		assert_int_equal(le16toh(r.hdr.type), OPVM_REQ_HELLO);
		assert_int_equal(le32toh(r.hdr.len), sizeof(r));
		n++;
	}
}

/* Each connection asks the relay for HELLO once, first thing: a relay
 * that saw neither the last host leave nor this one come greets it then
 * (OPVM_REQ_HELLO). */
static void test_hello_ask(void **state)
{
	char dir[256];
	struct collector_config cfg;
	struct collector *c;
	struct cguest *g;
	struct reconn rc = { 0 };
	int sv[2];

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	c = collector_new(&cfg);
	g = collector_add_guest(c, "vm-ask", 1);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(cguest_set_channel(g, sv[0], reconnect_cb, &rc), 0);
	assert_int_equal(collector_sync(c), 0);
	assert_int_equal(hello_asks(sv[1]), 1);
	assert_int_equal(collector_sync(c), 0);
	assert_int_equal(hello_asks(sv[1]), 0);	/* once per connection */
	close(sv[1]);
	assert_int_equal(collector_sync(c), 0);
	assert_int_equal(rc.calls, 1);
	assert_int_equal(collector_sync(c), 0);
	assert_int_equal(hello_asks(rc.peer), 1);	/* the new one asks again */
	close(rc.peer);
	collector_free(c);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void send_exit(struct chan *ch, uint32_t tgid)
{
	struct opvm_rec_exit r;

	memset(&r, 0, sizeof(r));
	r.tid = tgid;
	r.tgid = tgid;
	send_rec(ch, &r, sizeof(r), OPVM_REC_PROC_EXIT);
}

/*
 * Short-lived processes: each one is sampled, then its PROC, MMAP and EXIT
 * all arrive in one read, long before the next periodic sync.  The samples
 * must still land in the right images (the collector syncs before applying
 * the exit), and the model must end where it started.
 */
static void test_short_lived(void **state)
{
	char dir[256];
	struct collector_config cfg;
	struct collector *c;
	struct cguest *g;
	struct chan ch;
	json_t *j;

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	c = collector_new(&cfg);
	g = collector_add_guest(c, "vm7", 2);
	ch = chan_open(g);
	send_hello(&ch);
	send_cookie(&ch, 5, "/bin/true");
	assert_int_equal(collector_sync(c), 0);
	for (uint32_t i = 0; i < 200; i++) {
		uint64_t cr3 = 0x40000000ull + (uint64_t)(i % 17) * 0x2000;	/* reused */

		for (int k = 0; k < 3; k++)
			push(g, i & 1, EXE_LO + 0x40 + (uint64_t)k, cr3, 3);
		send_proc(&ch, 1000 + i, cr3, "true", 5);
		send_mmap(&ch, 1000 + i, EXE_LO, EXE_LO + 0x1000, 0, 5);
		send_exit(&ch, 1000 + i);
		if (i % 50 == 49)
			assert_int_equal(collector_sync(c), 0);
	}
	assert_int_equal(collector_sync(c), 0);
	assert_int_equal(gstate_nr_processes(cguest_gstate(g)), 0);
	assert_int_equal(gstate_nr_mappings(cguest_gstate(g)), 0);
	assert_int_equal(image_total(dir, "/bin/true"), 600);
	j = load_session(dir, "vm7");
	assert_int_equal(jget(j, "stats", "received"), 600);
	assert_int_equal(jget(j, "stats", "user"), 600);
	assert_int_equal(jget(j, "stats", "lost_no_process"), 0);
	assert_int_equal(jget(j, "stats", "lost_no_mapping"), 0);
	assert_int_equal(jget(j, "model", "held"), 0);
	json_decref(j);
	close(ch.fd);
	collector_free(c);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * A cookie id reused for another file (COOKIE records renaming it): samples
 * taken before the rename land under the old path, those after it under
 * the new one, although both wait in the rings for the same sync.  The
 * same name sent again, or a placeholder filled in, drains nothing.
 */
static void test_cookie_rename(void **state)
{
	char dir[256];
	struct collector_config cfg;
	struct collector *c;
	struct cguest *g;
	struct chan ch;

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	c = collector_new(&cfg);
	g = collector_add_guest(c, "vm8", 1);
	ch = chan_open(g);
	send_hello(&ch);
	send_cookie(&ch, 7, "/usr/bin/old");
	send_proc(&ch, 100, CR3_APP, "app", 7);
	send_mmap(&ch, 100, EXE_LO, EXE_LO + 0x10000, 0, 7);
	assert_int_equal(collector_sync(c), 0);
	for (int i = 0; i < 5; i++)
		push(g, 0, EXE_LO + 0x40, CR3_APP, 3);
	send_cookie(&ch, 7, "/usr/bin/old");		/* same name: nothing moves */
	send_cookie(&ch, 7, "/usr/bin/new");
	for (int round = 0; round < 2; round++) {
		/* the rename is read by this sync's channel read, after the
		 * next samples reached the ring: only a drain before it
		 * tells them apart */
		assert_int_equal(collector_sync(c), 0);
		if (round == 0) {
			assert_int_equal(image_total(dir, "/usr/bin/old"), 5);
			assert_int_equal(image_total(dir, "/usr/bin/new"), 0);
			for (int i = 0; i < 7; i++)
				push(g, 0, EXE_LO + 0x80, CR3_APP, 3);
			send_cookie(&ch, 7, "/usr/bin/old");
		}
	}
	/* the 7 were taken under "new", the rename back came after them */
	assert_int_equal(image_total(dir, "/usr/bin/old"), 5);
	assert_int_equal(image_total(dir, "/usr/bin/new"), 7);
	close(ch.fd);
	collector_free(c);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void send_thread(struct chan *ch, uint32_t tid, uint32_t tgid, bool exit)
{
	if (exit) {
		struct opvm_rec_exit r;

		memset(&r, 0, sizeof(r));
		r.tid = tid;
		r.tgid = tgid;
		send_rec(ch, &r, sizeof(r), OPVM_REC_THREAD_EXIT);
	} else {
		struct opvm_rec_thread r;

		memset(&r, 0, sizeof(r));
		r.tid = tid;
		r.tgid = tgid;
		strcpy(r.comm, "worker");
		send_rec(ch, &r, sizeof(r), OPVM_REC_THREAD);
	}
}

struct tid_tally {
	int64_t tid;
	uint64_t total;
};

static int tid_cb(const struct store_entry *e, void *arg)
{
	struct tid_tally *t = arg;
	struct sfile_reader *r;

	if (e->tid != t->tid || strcmp(e->image, "/usr/bin/app"))
		return 0;
	r = sfile_reader_open(e->path, NULL, 0);
	assert_non_null(r);
	assert_int_equal(sfile_reader_foreach(r, total_cb, &t->total), 0);
	sfile_reader_close(r);
	return 0;
}

/* --separate=thread: samples of a thread whose THREAD record comes late are
 * held; the record, the thread's exit and its process's exit then arrive in
 * one read, and the samples still land in the thread's own file. */
static void test_late_thread(void **state)
{
	char dir[256];
	struct collector_config cfg;
	struct collector *c;
	struct cguest *g;
	struct tid_tally t = { .tid = 2001 };
	struct chan ch;
	json_t *j;

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	cfg.separate = OPVM_SEP_THREAD;
	c = collector_new(&cfg);
	g = collector_add_guest(c, "vm8", 1);
	ch = chan_open(g);
	send_guest_state(&ch);
	assert_int_equal(collector_sync(c), 0);
	for (int i = 0; i < 4; i++) {
		struct opvm_sample s = {
			.rip = EXE_LO + 0x80, .cr3 = CR3_APP, .slot_tid = 2001,
			.slot_tgid = 100, .cpl = 3, .flags = OPVM_SAMPLE_SLOT,
		};

		assert_int_equal(ring_push(cguest_ring(g, 0), &s), 0);
	}
	assert_int_equal(collector_sync(c), 0);
	j = load_session(dir, "vm8");
	assert_int_equal(jget(j, "model", "held"), 4);
	json_decref(j);
	send_thread(&ch, 2001, 100, false);
	send_thread(&ch, 2001, 100, true);
	send_exit(&ch, 100);
	assert_int_equal(collector_sync(c), 0);
	assert_int_equal(store_walk(dir, "current", tid_cb, &t, NULL), 0);
	assert_int_equal(t.total, 4);
	j = load_session(dir, "vm8");
	assert_int_equal(jget(j, "model", "held"), 0);
	assert_int_equal(jget(j, "stats", "user"), 4);
	json_decref(j);
	close(ch.fd);
	collector_free(c);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * A hostile guest: samples in an address space it never describes fill the
 * hold queue, then it creates and reaps processes as fast as it can.  The
 * syncs before each exit must not retry the whole queue every time.
 */
static void test_exit_flood(void **state)
{
	char dir[256];
	struct collector_config cfg;
	struct collector *c;
	struct cguest *g;
	struct chan ch;
	struct timespec t0, t1;
	json_t *j;
	double secs;

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	c = collector_new(&cfg);
	g = collector_add_guest(c, "vm9", 1);
	ch = chan_open(g);
	send_hello(&ch);
	assert_int_equal(collector_sync(c), 0);
	for (int i = 0; i < 20000; i++)
		push(g, 0, 0x500000 + (uint64_t)i, 0x7770000, 3);
	assert_int_equal(collector_sync(c), 0);
	/* CPU time, not wall time: a busy host stretches the wall clock,
	 * never the work a sync does per exit */
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	ch.buf = malloc(500 * 80);
	assert_non_null(ch.buf);
	for (int round = 0; round < 20; round++) {
		for (uint32_t i = 0; i < 500; i++) {
			send_proc(&ch, 5000 + i, 0x10000000ull + i * 0x2000ull, "x", 0);
			send_exit(&ch, 5000 + i);
		}
		chan_flush(&ch);	/* 40 KB, one write */
		assert_int_equal(collector_sync(c), 0);
	}
	free(ch.buf);
	ch.buf = NULL;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	print_message("MEASURED 10000 exits with 20000 held samples: %.3f s of CPU\n", secs);
	assert_true(secs < 5.0);
	j = load_session(dir, "vm9");
	assert_int_equal(jget(j, "stats", "received"), 20000);
	assert_int_equal(jget(j, "model", "held") + jget(j, "stats", "lost_no_process"), 20000);
	assert_int_equal(jget(j, "model", "processes"), 0);
	json_decref(j);
	close(ch.fd);
	collector_free(c);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* Lines of /proc/self/maps that map a file under dir. */
static int maps_under(const char *dir)
{
	char line[2048], real[1024];
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0;

	assert_non_null(realpath(dir, real));
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, real))
			n++;
	fclose(f);
	return n;
}

struct treecount {
	uint64_t files, dirs, total, overflow;
	int bad_mode;
};

static struct treecount *tc_cur;

static int tc_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	if (flag == FTW_D && ftw->level >= 1) {
		tc_cur->dirs++;
		if ((sb->st_mode & 0777) != 0700)
			tc_cur->bad_mode++;
	} else if (flag == FTW_F) {
		if ((sb->st_mode & 0777) != 0600)
			tc_cur->bad_mode++;
	}
	return 0;
}

static int tc_file(const struct store_entry *e, void *arg)
{
	struct treecount *t = arg;
	struct sfile_reader *r = sfile_reader_open(e->path, NULL, 0);

	assert_non_null(r);
	t->files++;
	t->total += sfile_reader_info(r)->total;
	if (!strcmp(e->image, "{overflow}"))
		t->overflow += sfile_reader_info(r)->total;
	sfile_reader_close(r);
	return 0;
}

/* A guest that renames its executable's cookie before every sample: each
 * sample names a new image.  The caps hold (files, directories, mapped
 * files), every sample is in the tree, the overflow bucket says how many
 * went there, the tree is private, and a LOST count that saturates prints
 * as such. */
static void test_cookie_rename_flood(void **state)
{
	char dir[256], path[64], buf[OPVM_COUNT_BUF];
	struct collector_config cfg;
	struct collector *c;
	struct cguest *g;
	struct chan ch;
	struct treecount t = { 0 };
	struct opvm_rec_lost lost;
	int peak = 0;
	json_t *j;
	const int N = 600;

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	cfg.store_limits = (struct store_limits){ .max_files = 40, .max_mapped = 6 };
	c = collector_new(&cfg);
	assert_non_null(c);
	g = collector_add_guest(c, "flood", 1);
	assert_non_null(g);
	ch = chan_open(g);
	send_guest_state(&ch);
	for (int i = 0; i < N; i++) {
		snprintf(path, sizeof(path), "/tmp/renamed-%d", i);
		send_cookie(&ch, 1, path);
		push(g, 0, EXE_LO + 0x100 + (uint64_t)(i % 5) * 8, CR3_APP, 3);
		assert_int_equal(collector_sync(c), 0);
		if (i % 50 == 0) {
			int m = maps_under(dir);

			if (m > peak)
				peak = m;
		}
	}
	memset(&lost, 0, sizeof(lost));
	lost.count = UINT64_MAX;
	send_rec(&ch, &lost, sizeof(lost), OPVM_REC_LOST);
	send_rec(&ch, &lost, sizeof(lost), OPVM_REC_LOST);
	assert_int_equal(collector_sync(c), 0);
	j = load_session(dir, "flood");
	print_message("rename flood: %lld files, %lld dirs, %lld mapped at most (%d seen), "
		      "%lld samples in the overflow bucket\n",
		      (long long)jget(j, "store", "files"), (long long)jget(j, "store", "dirs"),
		      (long long)jget(j, "store", "mapped_peak"), peak,
		      (long long)jget(j, "store", "overflow_samples"));
	assert_int_equal(jget(j, "stats", "user"), N);
	assert_int_equal(jget(j, "store", "files"), 40 + 1);
	assert_int_equal(jget(j, "store", "dirs"), 1 + 40 * 4 + 4);
	assert_true(jget(j, "store", "mapped_peak") <= 6);
	assert_true(peak <= 6);
	assert_int_equal(jget(j, "store", "overflow_samples"), N - 40);
	assert_true(jget(j, "store", "overflow_keys") >= N - 40);
	assert_int_equal(jget(j, NULL, "store_errors"), 0);
	assert_int_equal(jget(json_object_get(j, "store"), "limits", "max_files"), 40);
	assert_int_equal(jget(json_object_get(j, "store"), "limits", "max_dirs"),
			 OPVM_STORE_MAX_DIRS);
	/* a LOST total past 2^63 is written saturated, and says so in print */
	assert_int_equal(jget(j, "stats", "guest_lost"), INT64_MAX);
	assert_string_equal(stats_fmt_count((uint64_t)jget(j, "stats", "guest_lost"), buf),
			    ">= 2^63");
	assert_string_equal(stats_fmt_count(42, buf), "42");
	json_decref(j);
	close(ch.fd);
	collector_free(c);
	assert_int_equal(store_walk(dir, "current", tc_file, &t, NULL), 0);
	assert_int_equal(t.files, 41);
	assert_int_equal(t.total, N);
	assert_int_equal(t.overflow, N - 40);
	tc_cur = &t;
	assert_int_equal(nftw(dir, tc_cb, 16, FTW_PHYS), 0);
	/* {root}; per file app, {dep}, {root}, image (the executable is
	 * renamed, so the app is new each time too); 4 of the bucket;
	 * guests/, the guest, samples/, current/ */
	assert_int_equal(t.dirs, 1 + 40 * 4 + 4 + 4);
	assert_int_equal(t.bad_mode, 0);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void *fail_alloc(size_t n)
{
	(void)n;
	return NULL;
}

static int fail_once;

static void *fail_once_alloc(size_t n)
{
	if (fail_once) {
		fail_once = 0;
		return NULL;
	}
	return malloc(n);
}

/* Out of memory while session.json is written: the write is retried with
 * the collector's reserve given back; when it fails anyway, the sync says
 * so, the failure is counted, profiling goes on, and the next write
 * catches up with the files. */
static void test_meta_nomem(void **state)
{
	char dir[256];
	struct collector_config cfg;
	struct collector *c;
	struct cguest *g;
	json_t *j;

	mktmp(dir, sizeof(dir));
	cfg = base_cfg(dir);
	c = collector_new(&cfg);
	g = collector_add_guest(c, "nomem", 1);
	assert_non_null(g);
	for (int i = 0; i < 10; i++)
		push(g, 0, 0x500000, 0x7770000, 3);
	fail_once = 1;
	json_set_alloc_funcs(fail_once_alloc, free);
	assert_int_equal(collector_sync(c), 0);	/* retried after the reserve */
	json_set_alloc_funcs(malloc, free);
	j = load_session(dir, "nomem");
	assert_int_equal(jget(j, "stats", "received"), 10);
	assert_int_equal(jget(j, NULL, "meta_failures"), 0);
	json_decref(j);

	for (int i = 0; i < 5; i++)
		push(g, 0, 0x500000, 0x7770000, 3);
	json_set_alloc_funcs(fail_alloc, free);
	assert_int_equal(collector_sync(c), -ENOMEM);
	json_set_alloc_funcs(malloc, free);
	j = load_session(dir, "nomem");
	assert_int_equal(jget(j, "stats", "received"), 10);	/* lags for now */
	json_decref(j);
	for (int i = 0; i < 5; i++)
		push(g, 0, 0x500000, 0x7770000, 3);
	collector_free(c);	/* the final write catches up */
	j = load_session(dir, "nomem");
	assert_int_equal(jget(j, "stats", "received"), 20);
	assert_int_equal(jget(j, NULL, "meta_failures"), 1);
	json_decref(j);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_bad_args(void **state)
{
	struct collector_config cfg = { .nr_events = 9 };

	assert_null(collector_new(NULL));
	assert_null(collector_new(&cfg));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(collector_sync(NULL), -EINVAL);
	assert_int_equal(cguest_set_channel(NULL, 0, NULL, NULL), -EINVAL);
}

/* stats_json_loadfd(): what json_loadfd() gives, from a file past its
 * first buffer (300 KB); a file that does not parse says why; read from
 * where the descriptor is, as json_loadfd() does. */
static void test_json_loadfd(void **state)
{
	char path[] = "/tmp/opvm-test-json-XXXXXX";
	int fd = mkstemp(path);
	json_error_t jerr;
	json_t *a, *b;
	FILE *f;

	(void)state;
	assert_true(fd >= 0);
	f = fdopen(dup(fd), "w");
	assert_non_null(f);
	fprintf(f, "{\"n\": [");
	for (int i = 0; i < 50000; i++)
		fprintf(f, "%s%d", i ? ", " : "", i);
	fprintf(f, "], \"big\": 18446744073709551615}");
	fclose(f);
	/* past INT64_MAX: only as a real, as report-session.c retries */
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_null(stats_json_loadfd(fd, 0, &jerr));
	assert_true(strlen(jerr.text) > 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	a = stats_json_loadfd(fd, JSON_DECODE_INT_AS_REAL, &jerr);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	b = json_loadfd(fd, JSON_DECODE_INT_AS_REAL, &jerr);
	assert_non_null(a);
	assert_non_null(b);
	assert_true(json_equal(a, b));
	assert_int_equal(json_array_size(json_object_get(a, "n")), 50000);
	json_decref(a);
	json_decref(b);
	close(fd);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_channel_and_sync),
		cmocka_unit_test(test_free_flushes),
		cmocka_unit_test(test_ring_dwarf),
		cmocka_unit_test(test_run_target_gone),
		cmocka_unit_test(test_run_fault),
		cmocka_unit_test(test_run_duration_and_stop),
		cmocka_unit_test(test_reconnect),
		cmocka_unit_test(test_hello_ask),
		cmocka_unit_test(test_python_off),
		cmocka_unit_test(test_short_lived),
		cmocka_unit_test(test_cookie_rename),
		cmocka_unit_test(test_late_thread),
		cmocka_unit_test(test_exit_flood),
		cmocka_unit_test(test_cookie_rename_flood),
		cmocka_unit_test(test_meta_nomem),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_json_loadfd),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
