// SPDX-License-Identifier: MIT
/*
 * Unit tests for the built-in KVM VMM (vmm/kvm*.c): the virtio-mmio console
 * driven by a hand-written driver in host memory (with hostile input), the
 * 8250's probe registers, and, where /dev/kvm works, the synthetic guest
 * under the kvm sampler, its channel decoded as the collector does it (HELLO
 * passed to the sampler's guest_hello): every sample is checked against the
 * guest's layout and its current-task slot.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "guest-kmod/opvm_proto.h"
#include "host/collect/decoder.h"
#include "lib/channel.h"
#include "lib/ring.h"
#include "vmm/kvm/kvm-priv.h"
#include "vmm/kvm/kvm-sampler.h"
#include "vmm/kvm/kvm.h"

/* ---- virtio-mmio console ----------------------------------------------------- */

#define MEM_SIZE	(1u << 20)
#define QNUM		8

struct vtest {
	uint8_t *mem;
	struct kvm_virtio_con *vc;
	unsigned irqs;
	char sink[256];
	size_t sunk;
	uint16_t avail_idx[4];
};

static void vt_irq(void *arg)
{
	((struct vtest *)arg)->irqs++;
}

static void vt_sink(const void *buf, size_t len, void *arg)
{
	struct vtest *t = arg;

	if (t->sunk + len <= sizeof(t->sink)) {
		memcpy(t->sink + t->sunk, buf, len);
		t->sunk += len;
	}
}

static void wr(struct vtest *t, uint64_t off, uint32_t v)
{
	kvm_virtio_con_mmio(t->vc, off, &v, 4, 1);
}

static uint32_t rd(struct vtest *t, uint64_t off)
{
	uint32_t v = 0;

	kvm_virtio_con_mmio(t->vc, off, &v, 4, 0);
	return v;
}

static uint64_t q_desc(unsigned q) { return 0x10000ull * (q + 1); }
static uint64_t q_avail(unsigned q) { return q_desc(q) + 0x1000; }
static uint64_t q_used(unsigned q) { return q_desc(q) + 0x2000; }
static uint64_t q_buf(unsigned q, unsigned i) { return 0x80000ull + 0x1000 * q + 0x100 * i; }

static void set_desc(struct vtest *t, unsigned q, unsigned i, uint64_t addr, uint32_t len,
		     uint16_t flags, uint16_t next)
{
	uint8_t *d = t->mem + q_desc(q) + 16 * i;

	memcpy(d, &addr, 8);
	memcpy(d + 8, &len, 4);
	memcpy(d + 12, &flags, 2);
	memcpy(d + 14, &next, 2);
}

static void avail_push(struct vtest *t, unsigned q, uint16_t head)
{
	uint16_t idx = t->avail_idx[q];

	memcpy(t->mem + q_avail(q) + 4 + 2 * (idx % QNUM), &head, 2);
	t->avail_idx[q] = ++idx;
	memcpy(t->mem + q_avail(q) + 2, &idx, 2);
}

static uint16_t used_idx(struct vtest *t, unsigned q)
{
	uint16_t v;

	memcpy(&v, t->mem + q_used(q) + 2, 2);
	return v;
}

static void used_elem(struct vtest *t, unsigned q, unsigned i, uint32_t *id, uint32_t *len)
{
	memcpy(id, t->mem + q_used(q) + 4 + 8 * (i % QNUM), 4);
	memcpy(len, t->mem + q_used(q) + 8 + 8 * (i % QNUM), 4);
}

static struct vtest *vt_setup(void)
{
	struct vtest *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	t->mem = calloc(1, MEM_SIZE);
	assert_non_null(t->mem);
	t->vc = kvm_virtio_con_new(t->mem, MEM_SIZE, vt_irq, vt_sink, t);
	assert_non_null(t->vc);
	assert_int_equal(rd(t, 0x000), 0x74726976);
	assert_int_equal(rd(t, 0x004), 2);
	assert_int_equal(rd(t, 0x008), 3);
	wr(t, 0x070, 1 | 2);				/* ACKNOWLEDGE | DRIVER */
	wr(t, 0x014, 0);
	assert_true(rd(t, 0x010) & (1u << 1));		/* MULTIPORT */
	wr(t, 0x014, 1);
	assert_true(rd(t, 0x010) & 1u);			/* VERSION_1 */
	wr(t, 0x024, 0);
	wr(t, 0x020, 1u << 1);
	wr(t, 0x024, 1);
	wr(t, 0x020, 1);
	wr(t, 0x070, 1 | 2 | 8);			/* FEATURES_OK */
	/* max_nr_ports in the config space */
	assert_int_equal(rd(t, 0x104), 1);
	for (unsigned q = 0; q < 4; q++) {
		wr(t, 0x030, q);
		assert_true(rd(t, 0x034) >= QNUM);
		wr(t, 0x038, QNUM);
		wr(t, 0x080, (uint32_t)q_desc(q));
		wr(t, 0x084, 0);
		wr(t, 0x090, (uint32_t)q_avail(q));
		wr(t, 0x094, 0);
		wr(t, 0x0a0, (uint32_t)q_used(q));
		wr(t, 0x0a4, 0);
		wr(t, 0x044, 1);
		assert_int_equal(rd(t, 0x044), 1);
	}
	wr(t, 0x070, 1 | 2 | 8 | 4);			/* DRIVER_OK */
	/* control receive buffers, as virtio_console's fill_queue() posts */
	for (unsigned i = 0; i < 4; i++) {
		set_desc(t, 2, i, q_buf(2, i), 64, 2 /* WRITE */, 0);
		avail_push(t, 2, (uint16_t)i);
	}
	wr(t, 0x050, 2);
	return t;
}

static void vt_free(struct vtest *t)
{
	kvm_virtio_con_free(t->vc);
	free(t->mem);
	free(t);
}

static void ctrl_send(struct vtest *t, unsigned slot, uint32_t id, uint16_t ev, uint16_t val)
{
	uint8_t *b = t->mem + q_buf(3, slot);

	memcpy(b, &id, 4);
	memcpy(b + 4, &ev, 2);
	memcpy(b + 6, &val, 2);
	set_desc(t, 3, slot, q_buf(3, slot), 8, 0, 0);
	avail_push(t, 3, (uint16_t)slot);
	wr(t, 0x050, 3);
}

static void ctrl_recv(struct vtest *t, unsigned i, uint32_t *id, uint16_t *ev, uint16_t *val,
		      uint32_t *len)
{
	uint32_t head;
	uint8_t *b;

	used_elem(t, 2, i, &head, len);
	assert_true(head < 4);
	b = t->mem + q_buf(2, head);
	memcpy(id, b, 4);
	memcpy(ev, b + 4, 2);
	memcpy(val, b + 6, 2);
}

static void test_virtio_console_port(void **state)
{
	struct vtest *t = vt_setup();
	uint32_t id, len;
	uint16_t ev, val;

	(void)state;
	ctrl_send(t, 0, 0, 0 /* DEVICE_READY */, 1);
	assert_int_equal(used_idx(t, 3), 1);
	assert_int_equal(used_idx(t, 2), 1);
	ctrl_recv(t, 0, &id, &ev, &val, &len);
	assert_int_equal(ev, 1);				/* DEVICE_ADD */
	assert_int_equal(id, 0);

	ctrl_send(t, 1, 0, 3 /* PORT_READY */, 1);
	assert_int_equal(used_idx(t, 2), 3);
	ctrl_recv(t, 1, &id, &ev, &val, &len);
	assert_int_equal(ev, 7);				/* PORT_NAME */
	assert_int_equal(len, 8 + strlen(OPVM_PORT_NAME));
	{
		uint32_t head;

		used_elem(t, 2, 1, &head, &len);
		assert_memory_equal(t->mem + q_buf(2, head) + 8, OPVM_PORT_NAME,
				    strlen(OPVM_PORT_NAME));
	}
	ctrl_recv(t, 2, &id, &ev, &val, &len);
	assert_int_equal(ev, 6);				/* PORT_OPEN (host side) */
	assert_int_equal(val, 1);

	ctrl_send(t, 2, 0, 6 /* PORT_OPEN */, 1);
	assert_int_equal(kvm_virtio_con_open_ports(t->vc), 1);

	/* the guest writes to the port: a two-buffer chain */
	memcpy(t->mem + q_buf(1, 0), "hello ", 6);
	memcpy(t->mem + q_buf(1, 1), "world", 5);
	set_desc(t, 1, 0, q_buf(1, 0), 6, 1 /* NEXT */, 1);
	set_desc(t, 1, 1, q_buf(1, 1), 5, 0, 0);
	avail_push(t, 1, 0);
	unsigned irqs = t->irqs;

	wr(t, 0x050, 1);
	assert_int_equal(t->sunk, 11);
	assert_memory_equal(t->sink, "hello world", 11);
	assert_int_equal(used_idx(t, 1), 1);
	assert_true(t->irqs > irqs);
	assert_true(rd(t, 0x060) & 1);
	wr(t, 0x064, 1);
	assert_false(rd(t, 0x060) & 1);
	assert_false(rd(t, 0x070) & 0x40);

	/* reset: status 0 forgets everything */
	wr(t, 0x070, 0);
	assert_int_equal(rd(t, 0x070), 0);
	assert_int_equal(kvm_virtio_con_open_ports(t->vc), 0);
	vt_free(t);
}

static void test_virtio_hostile(void **state)
{
	struct vtest *t;

	(void)state;
	/* a buffer outside guest RAM */
	t = vt_setup();
	set_desc(t, 1, 0, MEM_SIZE - 2, 16, 0, 0);
	avail_push(t, 1, 0);
	wr(t, 0x050, 1);
	assert_true(rd(t, 0x070) & 0x40);			/* NEEDS_RESET */
	assert_int_equal(t->sunk, 0);
	vt_free(t);

	/* a descriptor chain that loops */
	t = vt_setup();
	set_desc(t, 1, 0, q_buf(1, 0), 4, 1, 1);
	set_desc(t, 1, 1, q_buf(1, 1), 4, 1, 0);
	avail_push(t, 1, 0);
	wr(t, 0x050, 1);
	assert_true(rd(t, 0x070) & 0x40);
	vt_free(t);

	/* an avail index far ahead of what the queue can hold */
	t = vt_setup();
	{
		uint16_t idx = 1000;

		memcpy(t->mem + q_avail(1) + 2, &idx, 2);
	}
	wr(t, 0x050, 1);
	assert_true(rd(t, 0x070) & 0x40);
	vt_free(t);

	/* head index out of range, and a queue size that is no power of two */
	t = vt_setup();
	avail_push(t, 1, 200);
	wr(t, 0x050, 1);
	assert_true(rd(t, 0x070) & 0x40);
	wr(t, 0x070, 0);
	wr(t, 0x030, 1);
	wr(t, 0x038, 6);
	wr(t, 0x044, 1);
	assert_int_equal(rd(t, 0x044), 0);
	/* a ring placed past the end of RAM */
	wr(t, 0x038, 8);
	wr(t, 0x080, MEM_SIZE - 16);
	wr(t, 0x044, 1);
	assert_int_equal(rd(t, 0x044), 0);
	/* odd-sized and out-of-range accesses do nothing */
	{
		uint8_t b = 0xaa;
		uint64_t q = ~0ull;

		kvm_virtio_con_mmio(t->vc, 0x050, &b, 1, 1);
		kvm_virtio_con_mmio(t->vc, 0x050, &q, 8, 1);
		wr(t, 0x050, 77);				/* no such queue */
	}
	vt_free(t);
}

/* ---- 8250 --------------------------------------------------------------------- */

static void test_serial_probe(void **state)
{
	struct kvm_serial s = { .fd = -1 };
	struct kvm_dev d = { .base = 0x3f8, .len = 8, .io = kvm_serial_io, .priv = &s };
	uint8_t v;

	(void)state;
	v = 0x5a;
	kvm_serial_io(&d, 0x3ff, &v, 1, 1);		/* scratch */
	v = 0;
	kvm_serial_io(&d, 0x3ff, &v, 1, 0);
	assert_int_equal(v, 0x5a);
	kvm_serial_io(&d, 0x3fd, &v, 1, 0);		/* LSR: transmitter empty */
	assert_int_equal(v & 0x60, 0x60);
	v = 0x10 | 0x0a;				/* loopback, RTS, OUT2 */
	kvm_serial_io(&d, 0x3fc, &v, 1, 1);
	kvm_serial_io(&d, 0x3fe, &v, 1, 0);		/* MSR mirrors: CTS, DCD */
	assert_int_equal(v & 0xf0, 0x90);
	v = 0x80;					/* DLAB: divisor latch */
	kvm_serial_io(&d, 0x3fb, &v, 1, 1);
	v = 12;
	kvm_serial_io(&d, 0x3f8, &v, 1, 1);
	v = 0;
	kvm_serial_io(&d, 0x3f8, &v, 1, 0);
	assert_int_equal(v, 12);
}

/* ---- ACPI tables ---------------------------------------------------------------- */

static uint8_t sum8(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s += *p++;
	return s;
}

static const uint8_t *table_at(const struct kvm_vm *vm, uint64_t pa, const char *sig)
{
	const uint8_t *t = kvm_vm_gpa(vm, pa, 36);
	uint32_t len;

	assert_non_null(t);
	assert_memory_equal(t, sig, 4);
	memcpy(&len, t + 4, 4);
	assert_non_null(kvm_vm_gpa(vm, pa, len));
	assert_int_equal(sum8(t, len), 0);
	return t;
}

static void test_acpi_tables(void **state)
{
	struct kvm_vm *vm = calloc(1, sizeof(*vm));
	const uint8_t *rsdp, *xsdt, *fadt, *dsdt, *madt;
	uint64_t pa, x;
	uint32_t len, d;

	(void)state;
	assert_non_null(vm);
	vm->mem_size = 16 << 20;
	vm->mem = calloc(1, vm->mem_size);
	vm->nr_vcpus = 3;
	assert_non_null(vm->mem);
	assert_int_equal(kvm_acpi_write(vm, &pa), 0);
	/* the RSDP is where Linux scans for it */
	assert_true(pa >= 0xe0000 && pa < 0x100000 && pa % 16 == 0);
	rsdp = kvm_vm_gpa(vm, pa, 36);
	assert_memory_equal(rsdp, "RSD PTR ", 8);
	assert_int_equal(sum8(rsdp, 20), 0);
	assert_int_equal(sum8(rsdp, 36), 0);
	memcpy(&x, rsdp + 24, 8);
	xsdt = table_at(vm, x, "XSDT");
	memcpy(&len, xsdt + 4, 4);
	assert_int_equal(len, 36 + 16);
	memcpy(&x, xsdt + 36, 8);
	fadt = table_at(vm, x, "FACP");
	memcpy(&x, xsdt + 44, 8);
	madt = table_at(vm, x, "APIC");
	memcpy(&d, fadt + 40, 4);
	dsdt = table_at(vm, d, "DSDT");
	memcpy(&len, dsdt + 4, 4);
	/* virtio_mmio's ACPI id and the power-off package are in the DSDT */
	assert_non_null(memmem(dsdt, len, "LNRO0005", 8));
	assert_non_null(memmem(dsdt, len, "_S5_", 4));
	/* PM1a control block is the power-off port */
	memcpy(&d, fadt + 64, 4);
	assert_int_equal(d, KVM_PM_PORT);
	/* one LAPIC entry per vCPU */
	memcpy(&len, madt + 4, 4);
	{
		unsigned lapics = 0;

		for (uint32_t o = 44; o + 2 <= len; o += madt[o + 1]) {
			assert_true(madt[o + 1] >= 2);
			lapics += madt[o] == 0;
		}
		assert_int_equal(lapics, 3);
	}
	/* where acpica-tools is installed, iasl must disassemble the DSDT */
	if (!system("command -v iasl >/dev/null 2>&1")) {
		char dir[] = "/tmp/opvm-acpi.XXXXXX", cmd[256], path[128];
		FILE *f;

		assert_non_null(mkdtemp(dir));
		snprintf(path, sizeof(path), "%s/dsdt.dat", dir);
		memcpy(&len, dsdt + 4, 4);
		f = fopen(path, "wb");
		assert_non_null(f);
		assert_int_equal(fwrite(dsdt, 1, len, f), len);
		fclose(f);
		snprintf(cmd, sizeof(cmd), "cd %s && iasl -d dsdt.dat >/dev/null 2>&1 && "
			 "grep -q 'Memory32Fixed' dsdt.dsl && grep -q 'LNRO0005' dsdt.dsl", dir);
		assert_int_equal(system(cmd), 0);
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		assert_int_equal(system(cmd), 0);
	}
	free(vm->mem);
	free(vm);
}

/* ---- the synthetic guest under the sampler ------------------------------------ */

/*
 * The collector's part, cut down: read the VM's channel, decode it with the
 * one decoder, and pass each HELLO to the sampler's guest_hello op.
 */
struct chan_reader {
	int fd;
	struct sampler *s;
	unsigned hellos;
	pthread_t th;
};

static void reader_record(const struct opvm_rec_hdr *rec, size_t len, void *arg)
{
	struct chan_reader *cr = arg;
	struct opvm_rec_hello h;
	struct chan_hello sh;

	if (le16toh(rec->type) != OPVM_REC_HELLO)
		return;
	memcpy(&h, rec, sizeof(h));	/* whole: decoder.h */
	sh = (struct chan_hello){ .slot_pa = le64toh(h.slot_pa),
				     .slot_size = le32toh(h.slot_size),
				     .nr_cpus = le32toh(h.nr_cpus) };
	cr->s->ops->guest_hello(cr->s, &sh);
	cr->hellos++;
}

static void *reader_main(void *arg)
{
	struct chan_reader *cr = arg;
	struct decoder *d = decoder_new(NULL);
	char buf[4096];
	ssize_t n;

	if (!d)
		return NULL;
	decoder_set_record_fn(d, reader_record, cr);
	while ((n = read(cr->fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
		if (n > 0)
			decoder_feed(d, buf, (size_t)n);
	decoder_free(d);
	return NULL;
}

static void test_guest_samples(void **state)
{
	const char *build = getenv("BUILD");
	char guest[4096], why[256] = "";
	struct kvm_vm_config vc = { .mem_bytes = 64 << 20, .nr_vcpus = 1,
				    .console_fd = -1, .channel_fd = -1 };
	struct kvm_sampler_config sc = { .nr_events = 1 };
	struct opvm_sample smp;
	uint64_t chain[OPVM_MAX_CALLCHAIN], cr3_of[3] = { 0 };
	unsigned long user = 0, kern = 0, slot = 0, early = 0;
	struct chan_reader cr = { .fd = -1 };
	int sv[2];
	struct kvm_vm *vm;
	struct sampler *s;
	struct ring *r;

	(void)state;
	snprintf(guest, sizeof(guest), "%s/tests/guests/guest.elf", build ? build : "build");
	if (access(guest, R_OK) || kvm_probe(why, sizeof(why))) {
		printf("SKIP: %s\n", why[0] ? why : "no synthetic guest (make guests)");
		skip();
	}
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	vc.channel_fd = sv[0];	/* the VM owns it from here on */
	cr.fd = sv[1];
	vm = kvm_vm_new(&vc, why, sizeof(why));
	if (!vm) {
		close(sv[1]);
		printf("SKIP: KVM VM: %s\n", why);
		skip();
	}
	assert_int_equal(kvm_vm_load_elf(vm, guest, why, sizeof(why)), 0);
	/* guest-physical bounds */
	assert_non_null(kvm_vm_gpa(vm, 0, 64 << 20));
	assert_null(kvm_vm_gpa(vm, 1, 64 << 20));
	assert_null(kvm_vm_gpa(vm, ~0ull, 2));

	sc.vm = vm;
	sc.events[0].attr.type = PERF_TYPE_SOFTWARE;
	sc.events[0].attr.config = PERF_COUNT_SW_TASK_CLOCK;
	sc.events[0].attr.sample_period = 1000000;
	sc.events[0].kernel = sc.events[0].user = 1;
	s = kvm_sampler_new(&sc);
	r = ring_new(1 << 20);
	assert_non_null(s);
	assert_non_null(r);
	assert_string_equal(kvm_sampler_mode(s), "kvm-timer");
	cr.s = s;
	assert_int_equal(pthread_create(&cr.th, NULL, reader_main, &cr), 0);
	assert_int_equal(s->ops->start(s, &(struct sampler_sink){ &r, 1, NULL }), 0);
	assert_int_equal(kvm_vm_wait(vm, 120000), KVM_VM_POWEROFF);
	kvm_vm_stop(vm);
	assert_int_equal(kvm_vm_exit_code(vm), 0);
	while (ring_pop(r, &smp, chain) == 1) {
		assert_int_equal(smp.vcpu, 0);
		assert_int_equal(smp.event, 0);
		if (smp.cpl == 3) {
			user++;
			/* user.elf is mapped at 0x400000, one page of code */
			assert_true(smp.rip >= 0x400000 && smp.rip < 0x401000);
			/* the slot names the process whose CR3 is loaded,
			 * from the first sample after the HELLO reached the
			 * sampler through the reader on */
			if (!slot && !(smp.flags & OPVM_SAMPLE_SLOT)) {
				early++;
				continue;
			}
			assert_true(smp.flags & OPVM_SAMPLE_SLOT);
			assert_true(smp.slot_tgid == 1 || smp.slot_tgid == 2);
			assert_int_equal(smp.slot_cr3, smp.cr3);
			if (!cr3_of[smp.slot_tgid])
				cr3_of[smp.slot_tgid] = smp.cr3;
			assert_int_equal(cr3_of[smp.slot_tgid], smp.cr3);
		} else {
			kern++;
			assert_int_equal(smp.cpl, 0);
			assert_true(smp.rip >= 0x100000 && smp.rip < 0x200000);
		}
		slot += !!(smp.flags & OPVM_SAMPLE_SLOT);
	}
	printf("user %lu kernel %lu with slot %lu (user samples before the HELLO "
	       "reached the sampler: %lu); cr3 A 0x%llx B 0x%llx\n", user, kern, slot,
	       early, (unsigned long long)cr3_of[1], (unsigned long long)cr3_of[2]);
	assert_true(user > 100 && kern > 10);
	assert_true(early * 20 < user);	/* the reader keeps up: under 5 % */
	assert_true(cr3_of[1] && cr3_of[2] && cr3_of[1] != cr3_of[2]);
	assert_int_equal(opvm_cr3_normalise(cr3_of[1]) == opvm_cr3_normalise(cr3_of[2]), 0);
	s->ops->free(s);
	kvm_vm_free(vm);	/* closes the channel: the reader sees EOF */
	pthread_join(cr.th, NULL);
	assert_int_equal(cr.hellos, 1);
	close(cr.fd);
	ring_free(r);
}

static void test_config_errors(void **state)
{
	struct kvm_vm_config vc = { .mem_bytes = 1 << 20, .nr_vcpus = 1, .console_fd = -1,
				    .channel_fd = -1 };
	struct kvm_sampler_config sc = { 0 };
	char why[256] = "";

	(void)state;
	assert_null(kvm_vm_new(&vc, why, sizeof(why)));
	assert_int_equal(errno, EINVAL);
	assert_true(strlen(why) > 0);
	vc.mem_bytes = 64 << 20;
	vc.nr_vcpus = 0;
	assert_null(kvm_vm_new(&vc, why, sizeof(why)));
	assert_null(kvm_sampler_new(&sc));
	assert_int_equal(errno, EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_virtio_console_port),
		cmocka_unit_test(test_virtio_hostile),
		cmocka_unit_test(test_serial_probe),
		cmocka_unit_test(test_acpi_tables),
		cmocka_unit_test(test_config_errors),
		cmocka_unit_test(test_guest_samples),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
