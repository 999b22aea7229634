// SPDX-License-Identifier: MIT
/*
 * Synthetic guest kernel for opvm's built-in VMM tests.
 *
 * Two "processes", each with its own address space (CR3), run the same
 * ring-3 program (user.elf, mapped at 0x400000 from file offset 0): A runs
 * func_a for GUEST_N loop iterations per slice, B runs func_b for 3 *
 * GUEST_N.  Each slice ends in a trap (ud2, see entry.S); the kernel then runs kfunc for
 * GUEST_K iterations (kernel time charged to the calling process, as a
 * system call would be), saves the caller, updates the current-task slot,
 * loads the other CR3 and returns into the other process.  The user loops
 * have the same body, so A : B = 1 : 3 in instructions; kernel and user
 * code do not run at the same speed on a software-assisted KVM (guest
 * ring 0 is largely emulated there), so the guest also measures the truth
 * itself, in vCPU-thread CPU time read from the VMM's CPU-time port, and
 * prints it on the serial console at the end:
 *   synthetic guest: truth cpu_us user_a=N user_b=N kernel=N
 *
 * Before running anything the kernel describes itself on the opvm channel
 * (port KVM_CHAN_PORT, or with GUEST_VIRTIO the org.opvm.0 port of the
 * VMM's virtio-mmio console, as Linux's opvm.ko would): HELLO (slot array), PROC/THREAD for both processes,
 * COOKIE for /user.elf with its build-id, MMAP of it in both, SYNC.
 * HELLO carries the switch tail: the guest logs every task switch in a
 * one-vCPU ring {seq, rdtsc, pid, tgid, cr3} exactly as opvm.ko does, and
 * also counts its own work (loop iterations per process), printed at the
 * end as "synthetic guest: truth work a=N b=N".
 * It ends with a write to the debug-exit port: 0 on success, 0x80|vector
 * on an unexpected exception.
 *
 * GUEST_PYTHON: process A also maps, at PY_VA, what a CPython 3.11 shows
 * a profiler from outside (docs/runtimes.md): an executable whose .dynsym
 * exports _PyRuntime and the type objects, the runtime, an interpreter,
 * the thread state of A's thread and its chain <module> -> main -> leaf,
 * in 3.11's layout; a COOKIE and MMAP name that mapping
 * /usr/bin/python3.11.  Each of A's slices runs "py_f1" or "py_f3" (the
 * leaf frame's code object, set as A is switched in): one slice in four
 * py_f1, so 1:3 in work; the guest measures each one's user CPU time and
 * prints "synthetic guest: truth python f1_us=N f3_us=N".
 *
 * GUEST_PROGRESS: every 16 rounds a line "synthetic guest: progress
 * rounds=N tsc=T cpu_us=C", the guest's own measure of its work rate.
 */
#include <elf.h>
#include <stddef.h>
#include <stdint.h>

#include "guest-kmod/opvm_proto.h"

#ifndef GUEST_N
#define GUEST_N		20000000ul
#endif
#ifndef GUEST_K
#define GUEST_K		2000ul
#endif
#ifndef GUEST_ROUNDS
#define GUEST_ROUNDS	40ul
#endif

#define CHAN_PORT	0x07f0
#define DEBUG_EXIT_PORT	0x0501
#define CPUTIME_PORT	0x0508
#define COM1		0x03f8
#define COM2		0x02f8	/* GUEST_QEMU: the channel, an ISA serial port */

#define PTE_P	0x1ull
#define PTE_W	0x2ull
#define PTE_U	0x4ull
#define PTE_PS	0x80ull

#define USER_BASE	0x400000ull
#define USER_STACK_TOP	0x5f4000ull
#define KCODE		0x08
#define KDATA		0x10
#define UDATA		0x18
#define UCODE		0x20
#define TSS_SEL		0x28

struct frame {
	uint64_t r15, r14, r13, r12, r11, r10, r9, r8, rbp, rdi, rsi, rdx, rcx, rbx, rax;
	uint64_t rip, cs, rflags, rsp, ss;
};

struct tss {
	uint32_t res0;
	uint64_t rsp[3];
	uint64_t res1;
	uint64_t ist[7];
	uint64_t res2;
	uint16_t res3;
	uint16_t iomap;
} __attribute__((packed));

struct idt_entry {
	uint16_t off_lo, sel;
	uint8_t ist, type;
	uint16_t off_mid;
	uint32_t off_hi, zero;
};

struct proc {
	struct frame f;
	uint64_t cr3;
	uint32_t tgid;
	const char *comm;
};

extern const uint8_t user_blob[], user_blob_end[];
extern char fault_stubs[];
void isr_syscall(void);
void enter_frame(struct frame *f) __attribute__((noreturn));
void kmain(uint64_t mem_size);
void syscall_handler(struct frame *f);
void fault_handler(uint64_t vec, uint64_t info);

static uint64_t gdt[7] __attribute__((aligned(16)));
static struct tss tss __attribute__((aligned(16)));
static struct idt_entry idt[256] __attribute__((aligned(16)));
extern uint8_t kstack_top[];
/* 8 KiB apart and aligned, as Linux's PTI page-table pairs: the host
 * normalises CR3 by clearing bit 12 (the PTI user copy). */
static uint64_t pml4[2][1024] __attribute__((aligned(8192)));
static uint64_t pdpt[2][512] __attribute__((aligned(4096)));
static uint64_t pd[2][512] __attribute__((aligned(4096)));
static uint64_t pt[2][512] __attribute__((aligned(4096)));
static uint8_t ustack[2][4 * 4096] __attribute__((aligned(4096)));
static struct opvm_slot slots[1] __attribute__((aligned(64)));
/* The per-vCPU task-switch ring, written as opvm.ko writes it (protocol in
 * opvm_proto.h), for hosts that sample without stopping the guest.  Sized
 * like opvm.ko's (4096 there) relative to the switch rate: with 64 entries a
 * host under load (a refresh delayed by > 64 switches) lost entries to
 * overrun, and the samples in each lost interval went unnamed. */
#define SW_ENTRIES	1024
static struct {
	struct opvm_switch_ring_hdr h;
	struct opvm_switch e[SW_ENTRIES];
} swring __attribute__((aligned(64)));
static struct proc procs[2];
static int cur;
static void py_slice_in(void) __attribute__((noinline));
static void py_slice_out(uint32_t us) __attribute__((noinline));
static void py_describe(void *rec);
static void py_truth(void);
static void py_map(int k);
static unsigned long switches;
static uint32_t rec_seq;
/* Ground truth, measured by the guest itself: the vCPU thread's CPU time
 * (the VMM's CPU-time port, the clock timer-mode sampling runs on, so host
 * preemption does not skew it) spent in each process's user code, and
 * everything else (kernel). */
static uint32_t t_start, t_exit, t_user[2];
static uint64_t work[2];	/* loop iterations each process finished */
/* CPU time of each of B's slices (same work each): their median is the
 * guest's speed, little disturbed by the host's other load. */
static uint32_t b_slice_us[GUEST_ROUNDS];
static unsigned nr_b_slices;

static inline void outb(uint16_t port, uint8_t v)
{
	asm volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static __attribute__((unused)) void outsb(uint16_t port, const void *buf, size_t len)
{
	asm volatile("rep outsb" : "+S"(buf), "+c"(len) : "d"(port) : "memory");
}

static inline uint32_t cpu_us(void)
{
	uint32_t v;

	asm volatile("inl %1, %0" : "=a"(v) : "Nd"((uint16_t)CPUTIME_PORT));
	return v;
}

static void *memset(void *d, int c, size_t n)
{
	uint8_t *p = d;

	while (n--)
		*p++ = (uint8_t)c;
	return d;
}

static void *memcpy(void *d, const void *s, size_t n)
{
	uint8_t *p = d;
	const uint8_t *q = s;

	while (n--)
		*p++ = *q++;
	return d;
}

static size_t strlen(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

static inline uint8_t inb(uint16_t port)
{
	uint8_t v;

	asm volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

/* A 16550 that may be slower than us (QEMU's, on a socket): wait for the
 * transmit holding register before each byte. */
static __attribute__((unused)) void serial_send(uint16_t port, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len--) {
		while (!(inb(port + 5) & 0x20))
			;
		outb(port, *p++);
	}
}

static void puts_serial(const char *s)
{
	while (*s)
		outb(COM1, (uint8_t)*s++);
}

static void put_hex(uint64_t v)
{
	char buf[19] = "0x";

	for (int i = 0; i < 16; i++)
		buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
	buf[18] = 0;
	puts_serial(buf);
}

static void put_dec(uint64_t v)
{
	char buf[21];
	int i = 20;

	buf[20] = 0;
	do {
		buf[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v && i);
	puts_serial(buf + i);
}

static void guest_exit(uint8_t code)
{
	outb(DEBUG_EXIT_PORT, code);
	for (;;)
		asm volatile("cli; hlt");
}

void fault_handler(uint64_t vec, uint64_t info)
{
	puts_serial("synthetic guest: exception ");
	put_hex(vec);
	uint64_t cr2;

	asm volatile("mov %%cr2, %0" : "=r"(cr2));
	puts_serial(" info ");
	put_hex(info);
	puts_serial(" cr2 ");
	put_hex(cr2);
	puts_serial("\n");
	guest_exit((uint8_t)(0x80 | vec));
}

/* The kernel's own work: the same loop body as func_a/func_b. */
__attribute__((noinline)) void kfunc(unsigned long n)
{
	asm volatile("1: dec %0\n\tjnz 1b" : "+r"(n) : : "cc");
}

/* ---- virtio-mmio console (GUEST_VIRTIO builds) ------------------------------ */

#ifdef GUEST_VIRTIO
/*
 * A minimal polling driver for the VMM's virtio-mmio console: the same
 * handshake as Linux's virtio_console with MULTIPORT (DEVICE_READY ->
 * DEVICE_ADD, PORT_READY -> PORT_NAME + PORT_OPEN, PORT_OPEN), then each
 * record goes out as one buffer on port 0's transmitq.  The VMM handles a
 * notify synchronously, so polling the used index needs no interrupts.
 * Runs on the VMM's boot page tables, which map the MMIO window.
 */
#define VIO_BASE	0xd0000000ul
#define VQ_NUM		8

struct vdesc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

struct vavail {
	uint16_t flags, idx, ring[VQ_NUM], event;
};

struct vused {
	uint16_t flags, idx;
	struct { uint32_t id, len; } ring[VQ_NUM];
	uint16_t event;
};

static struct vdesc vq_desc[4][VQ_NUM] __attribute__((aligned(16)));
static struct vavail vq_avail[4] __attribute__((aligned(4)));
static struct vused vq_used[4] __attribute__((aligned(4)));
static uint16_t vq_seen[4];
static uint8_t ctrl_rx[4][64], ctrl_tx[8];

static uint32_t vr(unsigned off)
{
	return *(volatile uint32_t *)(VIO_BASE + off);
}

static void vw(unsigned off, uint32_t v)
{
	*(volatile uint32_t *)(VIO_BASE + off) = v;
}

static void vio_fail(const char *what)
{
	puts_serial("synthetic guest: virtio: ");
	puts_serial(what);
	puts_serial("\n");
	guest_exit(0x7e);
}

/* Queue buffer desc as the next avail entry of q and notify. */
static void vq_push(unsigned q, unsigned desc)
{
	vq_avail[q].ring[vq_avail[q].idx % VQ_NUM] = (uint16_t)desc;
	asm volatile("" ::: "memory");
	vq_avail[q].idx++;
	asm volatile("mfence" ::: "memory");
	vw(0x050, q);
}

static void vq_send(unsigned q, const void *buf, uint32_t len)
{
	uint16_t before = vq_used[q].idx;

	vq_desc[q][0] = (struct vdesc){ (uint64_t)(uintptr_t)buf, len, 0, 0 };
	vq_push(q, 0);
	if (*(volatile uint16_t *)&vq_used[q].idx == before)
		vio_fail("the device did not consume a buffer");
}

static void ctrl_send(uint32_t id, uint16_t event, uint16_t value)
{
	memcpy(ctrl_tx, &id, 4);
	memcpy(ctrl_tx + 4, &event, 2);
	memcpy(ctrl_tx + 6, &value, 2);
	vq_send(3, ctrl_tx, 8);
}

/* Next control message from the device; returns its buffer (and reposts
 * it for later). */
static const uint8_t *ctrl_recv(uint16_t want_event, uint32_t *len)
{
	unsigned head;

	if (*(volatile uint16_t *)&vq_used[2].idx == vq_seen[2])
		vio_fail("no control message from the device");
	head = vq_used[2].ring[vq_seen[2] % VQ_NUM].id;
	*len = vq_used[2].ring[vq_seen[2] % VQ_NUM].len;
	vq_seen[2]++;
	if (head >= 4 || *len < 8 || *(const uint16_t *)(ctrl_rx[head] + 4) != want_event)
		vio_fail("unexpected control message");
	vq_push(2, head);
	return ctrl_rx[head];
}

static void vio_init(void)
{
	const uint8_t *m;
	uint32_t f0, f1, len;

	if (vr(0x000) != 0x74726976 || vr(0x004) != 2 || vr(0x008) != 3)
		vio_fail("no virtio-mmio console at 0xd0000000");
	vw(0x070, 0);
	vw(0x070, 1 | 2);
	vw(0x014, 0);
	f0 = vr(0x010);
	vw(0x014, 1);
	f1 = vr(0x010);
	if (!(f0 & 2) || !(f1 & 1))
		vio_fail("no MULTIPORT or VERSION_1");
	vw(0x024, 0);
	vw(0x020, 2);
	vw(0x024, 1);
	vw(0x020, 1);
	vw(0x070, 1 | 2 | 8);
	if (!(vr(0x070) & 8))
		vio_fail("features refused");
	for (unsigned q = 1; q < 4; q++) {
		vw(0x030, q);
		if (vr(0x034) < VQ_NUM)
			vio_fail("queue too small");
		vw(0x038, VQ_NUM);
		vw(0x080, (uint32_t)(uintptr_t)vq_desc[q]);
		vw(0x084, 0);
		vw(0x090, (uint32_t)(uintptr_t)&vq_avail[q]);
		vw(0x094, 0);
		vw(0x0a0, (uint32_t)(uintptr_t)&vq_used[q]);
		vw(0x0a4, 0);
		vw(0x044, 1);
	}
	vw(0x070, 1 | 2 | 8 | 4);
	for (unsigned i = 0; i < 4; i++) {
		vq_desc[2][i] = (struct vdesc){ (uint64_t)(uintptr_t)ctrl_rx[i], 64, 2, 0 };
		vq_push(2, i);
	}
	ctrl_send(0, 0, 1);				/* DEVICE_READY */
	ctrl_recv(1, &len);				/* DEVICE_ADD */
	ctrl_send(0, 3, 1);				/* PORT_READY */
	m = ctrl_recv(7, &len);				/* PORT_NAME */
	if (len != 8 + sizeof(OPVM_PORT_NAME) - 1)
		vio_fail("port name length");
	for (unsigned i = 0; i < sizeof(OPVM_PORT_NAME) - 1; i++)
		if (m[8 + i] != OPVM_PORT_NAME[i])
			vio_fail("port is not org.opvm.0");
	ctrl_recv(6, &len);				/* PORT_OPEN from the host */
	ctrl_send(0, 6, 1);				/* we opened it too */
	puts_serial("synthetic guest: virtio console port " OPVM_PORT_NAME " open\n");
}
#endif

/* ---- channel records ---------------------------------------------------- */

static void rec_send(void *rec, uint16_t type, uint32_t len)
{
	struct opvm_rec_hdr *h = rec;

	h->magic = OPVM_PROTO_MAGIC;
	h->type = type;
	h->len = len;
	h->seq = rec_seq++;
	h->reserved = 0;
#if defined(GUEST_VIRTIO)
	vq_send(1, rec, len);
#elif defined(GUEST_QEMU)
	serial_send(COM2, rec, len);
#else
	outsb(CHAN_PORT, rec, len);
#endif
}

static void copy_str(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);

	memset(dst, 0, n);
	memcpy(dst, src, l < n ? l : n);
}

/* Build-id of the embedded user.elf, from its PT_NOTE. */
static size_t user_build_id(uint8_t *out)
{
	const uint8_t *e = user_blob;
	uint64_t phoff = *(const uint64_t *)(e + 0x20);
	uint16_t phnum = *(const uint16_t *)(e + 0x38);

	for (unsigned i = 0; i < phnum; i++) {
		const uint8_t *ph = e + phoff + i * 56ul;
		uint64_t off = *(const uint64_t *)(ph + 8), sz = *(const uint64_t *)(ph + 32);
		const uint8_t *n = e + off;

		if (*(const uint32_t *)ph != 4)		/* PT_NOTE */
			continue;
		while (n + 12 <= e + off + sz) {
			uint32_t namesz = *(const uint32_t *)n, descsz = *(const uint32_t *)(n + 4);
			uint32_t type = *(const uint32_t *)(n + 8);
			const uint8_t *desc = n + 12 + ((namesz + 3) & ~3u);

			if (type == 3 && namesz == 4 && descsz <= OPVM_BUILD_ID_MAX) {
				memcpy(out, desc, descsz);
				return descsz;
			}
			n = desc + ((descsz + 3) & ~3u);
		}
	}
	return 0;
}

static void describe(void)
{
	static const char path[] = "/user.elf";
	union {
		struct {
			struct opvm_rec_hello h;
			struct opvm_hello_switch sw;
		} hello;
		struct opvm_rec_proc proc;
		struct opvm_rec_thread thread;
		struct opvm_rec_mmap mmap;
		struct opvm_rec_sync sync;
		struct {
			struct opvm_rec_cookie c;
			char path[64];
		} cookie;
	} r;
	uint64_t user_end = USER_BASE + (((uint64_t)(user_blob_end - user_blob) + 4095) & ~4095ull);

	memset(&r, 0, sizeof(r));
	r.hello.h.version = OPVM_PROTO_VERSION;
	r.hello.h.nr_cpus = 1;
	r.hello.h.slot_pa = (uint64_t)(uintptr_t)slots;
	r.hello.h.slot_size = sizeof(struct opvm_slot);
	r.hello.h.anchor_addr = (uint64_t)(uintptr_t)kfunc;
	r.hello.h.text_addr = 0x100000;
	copy_str(r.hello.h.anchor_name, sizeof(r.hello.h.anchor_name), "kfunc");
	copy_str(r.hello.h.release, sizeof(r.hello.h.release), "opvm-synthetic-1");
	r.hello.sw.switch_pa = (uint64_t)(uintptr_t)&swring;
	r.hello.sw.switch_stride = sizeof(swring);
	r.hello.sw.switch_entries = SW_ENTRIES;
	rec_send(&r, OPVM_REC_HELLO, sizeof(r.hello));

	memset(&r, 0, sizeof(r));
	r.cookie.c.cookie = 1;
	r.cookie.c.build_id_len = (uint8_t)user_build_id(r.cookie.c.build_id);
	r.cookie.c.path_len = sizeof(path) - 1;
	memcpy(r.cookie.path, path, sizeof(path) - 1);
	rec_send(&r, OPVM_REC_COOKIE,
		 (uint32_t)((sizeof(r.cookie.c) + sizeof(path) - 1 + 7) & ~7ul));

	for (int i = 0; i < 2; i++) {
		memset(&r, 0, sizeof(r));
		r.proc.tgid = procs[i].tgid;
		r.proc.ppid = 0;
		r.proc.cr3 = procs[i].cr3;
		r.proc.exe_cookie = 1;
		copy_str(r.proc.comm, sizeof(r.proc.comm), procs[i].comm);
		rec_send(&r, OPVM_REC_PROC, sizeof(r.proc));

		memset(&r, 0, sizeof(r));
		r.thread.tid = procs[i].tgid;
		r.thread.tgid = procs[i].tgid;
		copy_str(r.thread.comm, sizeof(r.thread.comm), procs[i].comm);
		rec_send(&r, OPVM_REC_THREAD, sizeof(r.thread));

		memset(&r, 0, sizeof(r));
		r.mmap.tgid = procs[i].tgid;
		r.mmap.prot = 5;		/* PROT_READ | PROT_EXEC */
		r.mmap.start = USER_BASE;
		r.mmap.end = user_end;
		r.mmap.pgoff = 0;
		r.mmap.cookie = 1;
		rec_send(&r, OPVM_REC_MMAP, sizeof(r.mmap));
	}
	py_describe(&r);
	memset(&r, 0, sizeof(r));
	r.sync.nr_procs = 2;
	r.sync.nr_modules = 0;
	rec_send(&r, OPVM_REC_SYNC, sizeof(r.sync));
}

/* ---- a CPython 3.11 as seen from outside (GUEST_PYTHON) ------------------ */

#ifdef GUEST_PYTHON
#define PY_VA		0x10000000ull	/* in A's address space only */
#define PY_SIZE		(16 * 4096)
#define PY_PATH		"/usr/bin/python3.11"
/* CPython 3.11's offsets (those unwind/pyframes.c's table has for Debian
 * 12's python3.11 3.11.2) */
#define RT_INTERP	40
#define IS_THREADS	16
#define TS_INTERP	16
#define TS_TID		160
#define TS_CFRAME	56
#define CF_CURRENT	8
#define FR_PREVIOUS	48
#define FR_CODE		32
#define FR_INSTR	56
#define OB_TYPE		8
#define CO_FILENAME	112
#define CO_QUALNAME	128
#define CO_LINETABLE	136
#define CO_FIRSTLINE	72
#define CO_CODE		184
#define STR_LENGTH	16
#define STR_STATE	32
#define STR_ASCII	48
#define BYTES_SIZE	16
#define BYTES_SVAL	32

static uint8_t pyimg[PY_SIZE] __attribute__((aligned(4096)));
static uint64_t pypt[512] __attribute__((aligned(4096)));
static uint64_t py_brk = 0x4000;		/* offsets in pyimg */
static uint64_t py_leaf, py_code[2];		/* user addresses */
static unsigned py_slices;
static int py_which;				/* the slice's: 0 py_f1, 1 py_f3 */
static uint32_t py_us[2];

static void py_put(uint64_t off, const void *v, size_t len)
{
	memcpy(pyimg + off, v, len);
}

static void py_put64(uint64_t off, uint64_t v)
{
	py_put(off, &v, 8);
}

static uint64_t py_alloc(size_t len)
{
	uint64_t at = py_brk;

	py_brk += (len + 15) & ~15ull;
	if (py_brk > PY_SIZE)
		fault_handler(0x3f, py_brk);
	return at;
}

static uint64_t py_str(const char *str)
{
	size_t n = strlen(str);
	uint64_t o = py_alloc(STR_ASCII + n + 1);
	uint32_t state = 1u << 2 | 1u << 5 | 1u << 6;	/* compact ASCII */

	py_put64(o + OB_TYPE, PY_VA + 0x2040);
	py_put64(o + STR_LENGTH, n);
	py_put(o + STR_STATE, &state, 4);
	py_put(o + STR_ASCII, str, n + 1);
	return PY_VA + o;
}

/* A code object of 8 instructions, one line each from first. */
static uint64_t py_codeobj(const char *name, uint32_t first)
{
	uint64_t c = py_alloc(CO_CODE + 16), lt = py_alloc(BYTES_SVAL + 24);

	py_put64(c + OB_TYPE, PY_VA + 0x2000);
	py_put64(c + CO_QUALNAME, py_str(name));
	py_put64(c + CO_FILENAME, py_str("/srv/split.py"));
	py_put(c + CO_FIRSTLINE, &first, 4);
	py_put64(c + CO_LINETABLE, PY_VA + lt);
	py_put64(lt + OB_TYPE, PY_VA + 0x2080);
	py_put64(lt + BYTES_SIZE, 24);
	for (unsigned i = 0; i < 8; i++) {
		uint8_t e[3] = { (uint8_t)(0x80 | (i ? 11 : 10) << 3), 0, 0 };

		py_put(lt + BYTES_SVAL + 3 * i, e, 3);
	}
	return PY_VA + c;
}

static uint64_t py_frame(uint64_t code, uint64_t previous)
{
	uint64_t f = py_alloc(80);

	py_put64(f + FR_CODE, code);
	py_put64(f + FR_PREVIOUS, previous);
	py_put64(f + FR_INSTR, code + CO_CODE + 2 * 3);
	return PY_VA + f;
}

/* The executable's headers: PT_LOAD from offset 0, PT_DYNAMIC, and a
 * .gnu.hash of one bucket over the five symbols the readers look up. */
static void py_elf(void)
{
	static const char *const names[5] = { "_PyRuntime", "PyCode_Type", "PyUnicode_Type",
					      "PyBytes_Type", "Py_Version" };
	static const uint64_t at[5] = { 0x1000, 0x2000, 0x2040, 0x2080, 0x20c0 };
	Elf64_Ehdr eh = { .e_type = ET_EXEC, .e_machine = EM_X86_64, .e_version = EV_CURRENT,
			  .e_phoff = sizeof(Elf64_Ehdr), .e_ehsize = sizeof(Elf64_Ehdr),
			  .e_phentsize = sizeof(Elf64_Phdr), .e_phnum = 2 };
	Elf64_Phdr ph[2] = {
		{ .p_type = PT_LOAD, .p_vaddr = PY_VA, .p_filesz = PY_SIZE, .p_memsz = PY_SIZE },
		{ .p_type = PT_DYNAMIC, .p_vaddr = PY_VA + 0x200, .p_memsz = 6 * sizeof(Elf64_Dyn) },
	};
	Elf64_Dyn d[6] = { { DT_GNU_HASH, { PY_VA + 0x300 } }, { DT_SYMTAB, { PY_VA + 0x400 } },
			   { DT_STRTAB, { PY_VA + 0x600 } }, { DT_STRSZ, { 256 } },
			   { DT_SYMENT, { sizeof(Elf64_Sym) } }, { DT_NULL, { 0 } } };
	uint32_t hdr[4] = { 1, 1, 1, 0 }, one = 1, off = 1;

	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	py_put(0, &eh, sizeof(eh));
	py_put(sizeof(eh), ph, sizeof(ph));
	py_put(0x200, d, sizeof(d));
	py_put(0x300, hdr, sizeof(hdr));
	py_put(0x300 + 24, &one, 4);
	py_put64(0x20c0, 0x030b02f0);			/* Py_Version: 3.11.2 */
	for (unsigned i = 0; i < 5; i++) {
		Elf64_Sym sym = { .st_name = off, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT),
				  .st_shndx = 1, .st_value = PY_VA + at[i], .st_size = 8 };
		uint32_t h = 5381;

		for (const char *c = names[i]; *c; c++)
			h = h * 33 + (uint8_t)*c;
		h = (h & ~1u) | (i == 4);
		py_put(0x300 + 28 + 4 * i, &h, 4);
		py_put(0x400 + sizeof(sym) * (i + 1), &sym, sizeof(sym));
		py_put(0x600 + off, names[i], strlen(names[i]) + 1);
		off += (uint32_t)strlen(names[i]) + 1;
	}
}

/* The image, and A's mapping of it (k 0). */
static void py_map(int k)
{
	uint64_t mainf, top;

	if (k)
		return;
	py_elf();
	py_put64(0x1000 + RT_INTERP, PY_VA + 0x3000);
	py_put64(0x3000 + IS_THREADS, PY_VA + 0x3400);
	py_put64(0x3400 + TS_INTERP, PY_VA + 0x3000);
	py_put64(0x3400 + TS_TID, 1);			/* A's thread */
	py_put64(0x3400 + TS_CFRAME, PY_VA + 0x3800);
	py_code[0] = py_codeobj("py_f1", 10);
	py_code[1] = py_codeobj("py_f3", 20);
	top = py_frame(py_codeobj("<module>", 1), 0);
	mainf = py_frame(py_codeobj("main", 30), top);
	py_leaf = py_frame(py_code[0], mainf);
	py_put64(0x3800 + CF_CURRENT, py_leaf);
	for (unsigned i = 0; i < PY_SIZE / 4096; i++)
		pypt[i] = (uint64_t)(uintptr_t)(pyimg + i * 4096) | PTE_P | PTE_W | PTE_U;
	pd[k][PY_VA >> 21 & 511] = (uint64_t)(uintptr_t)pypt | PTE_P | PTE_W | PTE_U;
}

/* A is switched in: its slice's function, one in four py_f1. */
static void py_slice_in(void)
{
	py_which = py_slices++ % 4 != 0;
	*(volatile uint64_t *)(pyimg + (py_leaf - PY_VA) + FR_CODE) = py_code[py_which];
}

static void py_slice_out(uint32_t us)
{
	py_us[py_which] += us;
}

/* COOKIE and MMAP of the interpreter in A (rec: room for either). */
static void py_describe(void *rec)
{
	struct {
		struct opvm_rec_cookie c;
		char path[32];
	} *ck = rec;
	struct opvm_rec_mmap *mm = rec;

	memset(ck, 0, sizeof(*ck));
	ck->c.cookie = 2;
	ck->c.path_len = sizeof(PY_PATH) - 1;
	memcpy(ck->path, PY_PATH, sizeof(PY_PATH) - 1);
	rec_send(ck, OPVM_REC_COOKIE, (uint32_t)((sizeof(ck->c) + sizeof(PY_PATH) - 1 + 7) & ~7ul));
	memset(mm, 0, sizeof(*mm));
	mm->tgid = 1;
	mm->prot = 5;
	mm->start = PY_VA;
	mm->end = PY_VA + PY_SIZE;
	mm->pgoff = 0;
	mm->cookie = 2;
	rec_send(mm, OPVM_REC_MMAP, sizeof(*mm));
}

static void py_truth(void)
{
	puts_serial("\nsynthetic guest: truth python f1_us=");
	put_dec(py_us[0]);
	puts_serial(" f3_us=");
	put_dec(py_us[1]);
}
#else
static void py_map(int k)
{
	(void)k;
}

static void py_slice_in(void)
{
}

static void py_slice_out(uint32_t us)
{
	(void)us;
}

static void py_describe(void *rec)
{
	(void)rec;
}

static void py_truth(void)
{
}
#endif

/* ---- CPU tables and address spaces -------------------------------------- */

static void idt_set(unsigned vec, uint64_t handler, uint8_t type)
{
	idt[vec] = (struct idt_entry){
		.off_lo = (uint16_t)handler, .sel = KCODE, .ist = 0, .type = type,
		.off_mid = (uint16_t)(handler >> 16), .off_hi = (uint32_t)(handler >> 32),
	};
}

static void cpu_tables(void)
{
	uint64_t base = (uint64_t)(uintptr_t)&tss, limit = sizeof(tss) - 1;
	struct { uint16_t limit; uint64_t base; } __attribute__((packed)) gdtr, idtr;

	gdt[0] = 0;
	gdt[KCODE / 8] = 0x00af9a000000ffffull;
	gdt[KDATA / 8] = 0x00cf92000000ffffull;
	gdt[UDATA / 8] = 0x00cff2000000ffffull;
	gdt[UCODE / 8] = 0x00affa000000ffffull;
	gdt[TSS_SEL / 8] = (limit & 0xffff) | (base & 0xffffff) << 16 | 0x89ull << 40 |
			   ((limit >> 16) & 0xf) << 48 | ((base >> 24) & 0xff) << 56;
	gdt[TSS_SEL / 8 + 1] = base >> 32;
	tss.rsp[0] = (uint64_t)(uintptr_t)kstack_top;
	tss.iomap = sizeof(tss);

	for (unsigned v = 0; v < 32; v++)
		idt_set(v, (uint64_t)(uintptr_t)(fault_stubs + 16 * v), 0x8e);
	idt_set(6, (uint64_t)(uintptr_t)isr_syscall, 0x8e);	/* ud2 = yield */

	gdtr.limit = sizeof(gdt) - 1;
	gdtr.base = (uint64_t)(uintptr_t)gdt;
	idtr.limit = sizeof(idt) - 1;
	idtr.base = (uint64_t)(uintptr_t)idt;
	asm volatile("lgdt %0" : : "m"(gdtr));
	asm volatile("pushq %0\n\t"
		     "leaq 1f(%%rip), %%rax\n\t"
		     "pushq %%rax\n\t"
		     "lretq\n"
		     "1:\n\t"
		     "movl %1, %%eax\n\t"
		     "movl %%eax, %%ds\n\tmovl %%eax, %%es\n\tmovl %%eax, %%ss\n\t"
		     "movl %%eax, %%fs\n\tmovl %%eax, %%gs"
		     : : "i"(KCODE), "i"(KDATA) : "rax", "memory");
	asm volatile("lidt %0" : : "m"(idtr));
	asm volatile("ltr %w0" : : "r"(TSS_SEL));
}

static void address_space(int k)
{
	uint64_t blob = (uint64_t)(uintptr_t)user_blob;
	uint64_t pages = ((uint64_t)(user_blob_end - user_blob) + 4095) / 4096;

	pml4[k][0] = (uint64_t)(uintptr_t)pdpt[k] | PTE_P | PTE_W | PTE_U;
	pdpt[k][0] = (uint64_t)(uintptr_t)pd[k] | PTE_P | PTE_W | PTE_U;
	pd[k][0] = 0x000000 | PTE_P | PTE_W | PTE_PS;		/* kernel only */
	pd[k][1] = 0x200000 | PTE_P | PTE_W | PTE_PS;
	pd[k][2] = (uint64_t)(uintptr_t)pt[k] | PTE_P | PTE_W | PTE_U;
	for (uint64_t i = 0; i < pages && i < 0x1f0; i++)
		pt[k][i] = (blob + i * 4096) | PTE_P | PTE_U;	/* read-only text */
	for (uint64_t j = 0; j < 4; j++)
		pt[k][0x1f0 + j] = (uint64_t)(uintptr_t)(ustack[k] + j * 4096) |
				   PTE_P | PTE_W | PTE_U;
	py_map(k);
}

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

/* Entry n = head: seq odd, full barrier, TSC, fields, seq even, head. */
static void switch_log(const struct proc *p)
{
	uint64_t n = swring.h.head;
	volatile struct opvm_switch *e = &swring.e[n & (SW_ENTRIES - 1)];

	e->seq = 2 * n + 1;
	asm volatile("mfence" ::: "memory");
	e->tsc = rdtsc();
	e->pid = p->tgid;
	e->tgid = p->tgid;
	e->cr3 = p->cr3;
	e->flags = 0;
	asm volatile("" ::: "memory");	/* x86 stores are not reordered */
	e->seq = 2 * n + 2;
	asm volatile("" ::: "memory");
	*(volatile uint64_t *)&swring.h.head = n + 1;
}

static void slot_update(const struct proc *p)
{
	switch_log(p);
	slots[0].seq++;
	asm volatile("" ::: "memory");
	slots[0].pid = p->tgid;
	slots[0].tgid = p->tgid;
	slots[0].cr3 = p->cr3;
	slots[0].flags = 0;
	asm volatile("" ::: "memory");
	slots[0].seq++;
}

static void proc_init(int k, const char *comm)
{
	struct proc *p = &procs[k];
	uint64_t entry = *(const uint64_t *)(user_blob + 0x18);	/* e_entry */

	address_space(k);
	memset(p, 0, sizeof(*p));
	p->cr3 = (uint64_t)(uintptr_t)pml4[k];
	p->tgid = (uint32_t)k + 1;
	p->comm = comm;
	p->f.rip = entry;
	p->f.cs = UCODE | 3;
	p->f.rflags = 0x2;
	p->f.rsp = USER_STACK_TOP;
	p->f.ss = UDATA | 3;
	p->f.rdi = (uint64_t)k;
	p->f.rsi = GUEST_N;
}

#ifdef GUEST_PROGRESS
/* Every 16 rounds (A's slice and B's, the same work each time) the rounds
 * done with the guest's wall clock (TSC) and the vCPU thread's CPU time,
 * so a host can take the work rate of any stretch of the run
 * (tests/bench/pyframes-cost-bench.sh). */
static void progress(uint32_t cpu)
{
	static unsigned long rounds;

	if (++rounds % 16)
		return;
	puts_serial("synthetic guest: progress rounds=");
	put_dec(rounds);
	puts_serial(" tsc=");
	put_dec(rdtsc());
	puts_serial(" cpu_us=");
	put_dec(cpu);
	puts_serial("\n");
}
#endif

/* Median of v[0..n) (sorts v). */
static uint32_t median(uint32_t *v, unsigned n)
{
	for (unsigned i = 1; i < n; i++)
		for (unsigned j = i; j && v[j - 1] > v[j]; j--) {
			uint32_t x = v[j];

			v[j] = v[j - 1];
			v[j - 1] = x;
		}
	return n ? v[n / 2] : 0;
}

void syscall_handler(struct frame *f)
{
	if (!(f->cs & 3))
		fault_handler(6, f->rip);	/* a real #UD in the kernel */
	uint32_t t = cpu_us();

	t_user[cur] += t - t_exit;
	if (cur == 0)
		py_slice_out(t - t_exit);
	if (cur == 1 && nr_b_slices < GUEST_ROUNDS)
		b_slice_us[nr_b_slices++] = t - t_exit;
#ifdef GUEST_SLICE_LOG
	/* Each B slice's CPU time as it ends, for a host that pairs windows
	 * of the run (tests/bench/perf-bench.sh): the same few bytes after
	 * every slice, sampled or not. */
	if (cur == 1) {
		puts_serial("b ");
		put_dec(t - t_exit);
		puts_serial("\n");
	}
#endif
#ifdef GUEST_PROGRESS
	if (cur == 1)
		progress(t);
#endif
	work[cur & 1] += cur ? 3 * GUEST_N : GUEST_N;
	f->rip += 2;				/* past the ud2 */
	kfunc(GUEST_K);
	if (++switches >= 2 * GUEST_ROUNDS) {
		t = cpu_us();
		puts_serial("synthetic guest: truth cpu_us user_a=");
		put_dec(t_user[0]);
		puts_serial(" user_b=");
		put_dec(t_user[1]);
		puts_serial(" kernel=");
		put_dec(t - t_start - t_user[0] - t_user[1]);
		puts_serial("\nsynthetic guest: truth work a=");
		put_dec(work[0]);
		puts_serial(" b=");
		put_dec(work[1]);
		py_truth();
		puts_serial("\nsynthetic guest: truth b_slice_cpu_us median=");
		put_dec(median(b_slice_us, nr_b_slices));
		puts_serial(" slices=");
		put_dec(nr_b_slices);
		puts_serial("\nsynthetic guest: done\n");
		guest_exit(0);
	}
	procs[cur].f = *f;
	cur ^= 1;
	*f = procs[cur].f;
	if (cur == 0)
		py_slice_in();
	slot_update(&procs[cur]);
	asm volatile("mov %0, %%cr3" : : "r"(procs[cur].cr3) : "memory");
	t_exit = cpu_us();
}

void kmain(uint64_t mem_size)
{
	struct frame *f = (struct frame *)((uintptr_t)kstack_top - sizeof(struct frame));

	(void)mem_size;
	t_start = cpu_us();
	puts_serial("synthetic guest: start\n");
#ifdef GUEST_QEMU
	/* Under QEMU the host's opvm connects to the channel after boot: wait
	 * for a byte on the console, which the test sends once it has. */
	puts_serial("synthetic guest: waiting for a byte on the console\n");
	while (!(inb(COM1 + 5) & 1))
		;
	(void)inb(COM1);
#endif
	cpu_tables();
	proc_init(0, "proc_a");
	proc_init(1, "proc_b");
#ifdef GUEST_VIRTIO
	vio_init();
#endif
	describe();
	cur = 0;
	py_slice_in();
	slot_update(&procs[0]);
	asm volatile("mov %0, %%cr3" : : "r"(procs[0].cr3) : "memory");
	*f = procs[0].f;
	t_exit = cpu_us();
	enter_frame(f);
}
