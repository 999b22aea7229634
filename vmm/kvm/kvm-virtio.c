// SPDX-License-Identifier: MIT
/*
 * virtio-mmio console (virtio 1.x MMIO transport, device id 3) with the
 * MULTIPORT feature and one port, named "org.opvm.0": Linux's virtio_console
 * then shows it as /dev/vportNp0 with /sys/class/virtio-ports/vportNp0/name
 * = org.opvm.0, exactly as under QEMU's virtserialport, so opvm.ko needs no
 * VMM-specific code.  Bytes the guest writes to the port go to the sink.
 *
 * Queues (multiport layout): 0 port0 receiveq, 1 port0 transmitq,
 * 2 control receiveq (device -> driver), 3 control transmitq.
 *
 * The rings live in guest memory and the guest may change them under our
 * feet from another vCPU: every index is reduced modulo the queue size or
 * checked, every buffer is translated with bounds checks, chains are bounded
 * by the queue size, and a broken ring sets DEVICE_NEEDS_RESET instead of
 * being trusted.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "guest-kmod/opvm_proto.h"
#include "vmm/kvm/kvm.h"

#define VIRTIO_MMIO_MAGIC		0x74726976u	/* "virt" */
#define VIRTIO_ID_CONSOLE		3
#define VIRTIO_CONSOLE_F_MULTIPORT	1
#define VIRTIO_F_VERSION_1		32

#define VIRTQ_DESC_F_NEXT		1
#define VIRTQ_DESC_F_WRITE		2
#define VIRTQ_DESC_F_INDIRECT		4

#define STATUS_NEEDS_RESET		0x40

/* Control messages (struct virtio_console_control). */
#define VCC_DEVICE_READY	0
#define VCC_DEVICE_ADD		1
#define VCC_PORT_READY		3
#define VCC_CONSOLE_PORT	4
#define VCC_PORT_OPEN		6
#define VCC_PORT_NAME		7

#define NR_QUEUES	4
#define QUEUE_NUM_MAX	256
#define CTRL_PENDING	16

struct vq {
	uint32_t num;
	uint32_t ready;
	uint64_t desc, avail, used;
	uint16_t last_avail;
};

struct ctrl_msg {
	uint32_t id;
	uint16_t event, value;
};

struct kvm_virtio_con {
	uint8_t *mem;
	uint64_t mem_size;
	void (*irq)(void *arg);
	void (*sink)(const void *buf, size_t len, void *arg);
	void *arg;

	uint32_t dev_feat_sel, drv_feat_sel;
	uint64_t drv_features;
	uint32_t queue_sel;
	uint32_t status;
	uint32_t isr;
	struct vq vq[NR_QUEUES];

	/* Control messages waiting for a control receiveq buffer. */
	struct ctrl_msg pending[CTRL_PENDING];
	unsigned nr_pending;
	unsigned open_ports;
};

static void *gpa(struct kvm_virtio_con *vc, uint64_t addr, uint64_t len)
{
	uint64_t end;

	if (__builtin_add_overflow(addr, len, &end) || end > vc->mem_size)
		return NULL;
	return vc->mem + addr;
}

struct kvm_virtio_con *kvm_virtio_con_new(uint8_t *mem, uint64_t mem_size,
					  void (*irq)(void *arg),
					  void (*sink)(const void *buf, size_t len, void *arg),
					  void *arg)
{
	struct kvm_virtio_con *vc = calloc(1, sizeof(*vc));

	if (!vc)
		return NULL;
	vc->mem = mem;
	vc->mem_size = mem_size;
	vc->irq = irq;
	vc->sink = sink;
	vc->arg = arg;
	return vc;
}

void kvm_virtio_con_free(struct kvm_virtio_con *vc)
{
	free(vc);
}

unsigned kvm_virtio_con_open_ports(const struct kvm_virtio_con *vc)
{
	return vc->open_ports;
}

static void con_reset(struct kvm_virtio_con *vc)
{
	vc->dev_feat_sel = vc->drv_feat_sel = 0;
	vc->drv_features = 0;
	vc->queue_sel = 0;
	vc->status = 0;
	vc->isr = 0;
	memset(vc->vq, 0, sizeof(vc->vq));
	vc->nr_pending = 0;
	vc->open_ports = 0;
}

static void broken(struct kvm_virtio_con *vc)
{
	vc->status |= STATUS_NEEDS_RESET;
	vc->isr |= 2;			/* configuration change */
	if (vc->irq)
		vc->irq(vc->arg);
}

/* Ring element accessors.  The guest may write concurrently: loads of the
 * avail index are acquire, stores of the used index release. */
static uint16_t avail_idx(struct kvm_virtio_con *vc, struct vq *q)
{
	uint16_t *p = gpa(vc, q->avail + 2, 2);

	return p ? __atomic_load_n(p, __ATOMIC_ACQUIRE) : q->last_avail;
}

static int avail_head(struct kvm_virtio_con *vc, struct vq *q, uint16_t i, uint16_t *head)
{
	uint16_t *p = gpa(vc, q->avail + 4 + 2ull * (i % q->num), 2);

	if (!p)
		return -EFAULT;
	*head = __atomic_load_n(p, __ATOMIC_RELAXED);
	return *head < q->num ? 0 : -EINVAL;
}

static int used_push(struct kvm_virtio_con *vc, struct vq *q, uint16_t head, uint32_t len)
{
	uint16_t *idxp = gpa(vc, q->used + 2, 2);
	uint8_t *elem;
	uint16_t idx;

	if (!idxp)
		return -EFAULT;
	idx = __atomic_load_n(idxp, __ATOMIC_RELAXED);
	elem = gpa(vc, q->used + 4 + 8ull * (idx % q->num), 8);
	if (!elem)
		return -EFAULT;
	uint32_t id = head;

	memcpy(elem, &id, 4);
	memcpy(elem + 4, &len, 4);
	__atomic_store_n(idxp, (uint16_t)(idx + 1), __ATOMIC_RELEASE);
	return 0;
}

struct desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

static int desc_get(struct kvm_virtio_con *vc, struct vq *q, uint16_t i, struct desc *d)
{
	void *p = i < q->num ? gpa(vc, q->desc + 16ull * i, 16) : NULL;

	if (!p)
		return -EFAULT;
	memcpy(d, p, sizeof(*d));
	if (d->flags & VIRTQ_DESC_F_INDIRECT)
		return -EINVAL;		/* not offered */
	return 0;
}

/* Pops one chain from q.  For each buffer, fn(buf, len, writable) returns
 * how many bytes it wrote (for writable buffers).  Returns 1 if a chain was
 * consumed, 0 if the queue is empty, -errno if the ring is broken. */
static int vq_pop(struct kvm_virtio_con *vc, struct vq *q,
		  uint32_t (*fn)(struct kvm_virtio_con *vc, uint8_t *buf, uint32_t len,
				 int writable, void *arg), void *arg)
{
	uint16_t head, idx = avail_idx(vc, q), i;
	uint32_t written = 0;
	struct desc d;
	int err;

	if (!q->ready || !q->num || idx == q->last_avail)
		return 0;
	if ((uint16_t)(idx - q->last_avail) > q->num)
		return -EINVAL;
	err = avail_head(vc, q, q->last_avail, &head);
	if (err)
		return err;
	i = head;
	for (uint32_t n = 0; ; n++) {
		uint8_t *buf;

		if (n >= q->num)
			return -ELOOP;
		err = desc_get(vc, q, i, &d);
		if (err)
			return err;
		buf = gpa(vc, d.addr, d.len);
		if (!buf)
			return -EFAULT;
		written += fn(vc, buf, d.len, !!(d.flags & VIRTQ_DESC_F_WRITE), arg);
		if (!(d.flags & VIRTQ_DESC_F_NEXT))
			break;
		i = d.next;
	}
	q->last_avail++;
	err = used_push(vc, q, head, written);
	return err ? err : 1;
}

static uint32_t tx_buf(struct kvm_virtio_con *vc, uint8_t *buf, uint32_t len,
		       int writable, void *arg)
{
	if (!writable && len && vc->sink)
		vc->sink(buf, len, vc->arg);
	return 0;
}

/* Writes one pending control message into a control receiveq buffer. */
static uint32_t ctrl_fill(struct kvm_virtio_con *vc, uint8_t *buf, uint32_t len,
			  int writable, void *arg)
{
	const struct ctrl_msg *m = arg;
	uint32_t need = 8;

	/* Only the first writable buffer of the chain gets the message. */
	if (!writable || !m || len < need)
		return 0;
	memcpy(buf, &m->id, 4);
	memcpy(buf + 4, &m->event, 2);
	memcpy(buf + 6, &m->value, 2);
	if (m->event == VCC_PORT_NAME) {
		size_t nl = strlen(OPVM_PORT_NAME);

		if (len < need + nl)
			return need;
		memcpy(buf + need, OPVM_PORT_NAME, nl);
		need += (uint32_t)nl;
	}
	return need;
}

struct ctrl_fill_arg {
	const struct ctrl_msg *m;
	int done;
};

static uint32_t ctrl_fill_once(struct kvm_virtio_con *vc, uint8_t *buf, uint32_t len,
			       int writable, void *arg)
{
	struct ctrl_fill_arg *a = arg;
	uint32_t w;

	if (a->done || !writable)
		return 0;
	w = ctrl_fill(vc, buf, len, writable, (void *)a->m);
	a->done = 1;
	return w;
}

static void ctrl_flush(struct kvm_virtio_con *vc)
{
	struct vq *q = &vc->vq[2];
	int sent = 0;

	while (vc->nr_pending) {
		struct ctrl_fill_arg a = { .m = &vc->pending[0], .done = 0 };
		int r = vq_pop(vc, q, ctrl_fill_once, &a);

		if (r < 0) {
			broken(vc);
			return;
		}
		if (!r)
			break;
		sent = 1;
		memmove(&vc->pending[0], &vc->pending[1],
			(vc->nr_pending - 1) * sizeof(vc->pending[0]));
		vc->nr_pending--;
	}
	if (sent) {
		vc->isr |= 1;
		if (vc->irq)
			vc->irq(vc->arg);
	}
}

static void ctrl_queue(struct kvm_virtio_con *vc, uint32_t id, uint16_t event,
		       uint16_t value)
{
	if (vc->nr_pending >= CTRL_PENDING)
		return;		/* a driver that never reads: drop */
	vc->pending[vc->nr_pending++] = (struct ctrl_msg){ id, event, value };
}

static uint32_t ctrl_rx(struct kvm_virtio_con *vc, uint8_t *buf, uint32_t len,
			int writable, void *arg)
{
	uint32_t id;
	uint16_t event, value;

	if (writable || len < 8)
		return 0;
	memcpy(&id, buf, 4);
	memcpy(&event, buf + 4, 2);
	memcpy(&value, buf + 6, 2);
	switch (event) {
	case VCC_DEVICE_READY:
		if (value)
			ctrl_queue(vc, 0, VCC_DEVICE_ADD, 0);
		break;
	case VCC_PORT_READY:
		if (id == 0 && value) {
			ctrl_queue(vc, 0, VCC_PORT_NAME, 1);
			ctrl_queue(vc, 0, VCC_PORT_OPEN, 1);	/* host side is connected */
		}
		break;
	case VCC_PORT_OPEN:
		if (id == 0) {
			if (value)
				vc->open_ports |= 1u;
			else
				vc->open_ports &= ~1u;
		}
		break;
	default:
		break;
	}
	return 0;
}

static void queue_notify(struct kvm_virtio_con *vc, uint32_t qi)
{
	int r, any = 0;

	if (qi >= NR_QUEUES)
		return;
	switch (qi) {
	case 1:		/* port 0 transmitq: guest -> host bytes */
	case 3:		/* control transmitq */
		for (unsigned n = 0; n < QUEUE_NUM_MAX; n++) {
			r = vq_pop(vc, &vc->vq[qi], qi == 1 ? tx_buf : ctrl_rx, NULL);
			if (r < 0) {
				broken(vc);
				return;
			}
			if (!r)
				break;
			any = 1;
		}
		if (any) {
			vc->isr |= 1;
			if (vc->irq)
				vc->irq(vc->arg);
		}
		if (qi == 3)
			ctrl_flush(vc);
		break;
	case 2:		/* new control receive buffers */
		ctrl_flush(vc);
		break;
	default:	/* port 0 receiveq: we never send data to the guest */
		break;
	}
}

static uint32_t config_read(struct kvm_virtio_con *vc, uint64_t off, uint32_t len)
{
	/* struct virtio_console_config: cols, rows, max_nr_ports, emerg_wr */
	uint8_t cfg[12] = { 0 };
	uint32_t max_ports = 1, v = 0;

	memcpy(cfg + 4, &max_ports, 4);
	if (off < sizeof(cfg) && len <= sizeof(cfg) - off)
		memcpy(&v, cfg + off, len);
	return v;
}

/* A register read at a 4-byte aligned offset below the config space. */
static uint32_t reg_read(const struct kvm_virtio_con *vc, const struct vq *q, uint64_t off)
{
	uint32_t v = 0;

	switch (off) {
	case 0x000: v = VIRTIO_MMIO_MAGIC; break;
	case 0x004: v = 2; break;
	case 0x008: v = VIRTIO_ID_CONSOLE; break;
	case 0x00c: v = 0x4d56504f; break;	/* "OPVM" */
	case 0x010:
		v = vc->dev_feat_sel == 0 ? 1u << VIRTIO_CONSOLE_F_MULTIPORT :
		    vc->dev_feat_sel == 1 ? 1u << (VIRTIO_F_VERSION_1 - 32) : 0;
		break;
	case 0x034: v = vc->queue_sel < NR_QUEUES ? QUEUE_NUM_MAX : 0; break;
	case 0x044: v = vc->queue_sel < NR_QUEUES ? q->ready : 0; break;
	case 0x060: v = vc->isr; break;
	case 0x070: v = vc->status; break;
	case 0x0fc: v = 0; break;
	default: v = 0; break;
	}
	return v;
}

/* QueueReady: validate the ring placement once; every access re-checks. */
static void queue_set_ready(struct kvm_virtio_con *vc, struct vq *q, uint32_t v)
{
	if (!v) {
		q->ready = 0;
		return;
	}
	if (!q->num || q->num > QUEUE_NUM_MAX || (q->num & (q->num - 1)) ||
	    !gpa(vc, q->desc, 16ull * q->num) ||
	    !gpa(vc, q->avail, 6 + 2ull * q->num) ||
	    !gpa(vc, q->used, 6 + 8ull * q->num)) {
		broken(vc);
		return;
	}
	q->ready = 1;
	q->last_avail = 0;
}

/* A register write at a 4-byte aligned offset below the config space. */
static void reg_write(struct kvm_virtio_con *vc, struct vq *q, uint64_t off, uint32_t v)
{
	switch (off) {
	case 0x014: vc->dev_feat_sel = v; break;
	case 0x020:
		if (vc->drv_feat_sel < 2) {
			uint64_t mask = 0xffffffffull << (32 * vc->drv_feat_sel);
			uint64_t offered = (1ull << VIRTIO_CONSOLE_F_MULTIPORT) |
					   (1ull << VIRTIO_F_VERSION_1);

			vc->drv_features = (vc->drv_features & ~mask) |
					   (((uint64_t)v << (32 * vc->drv_feat_sel)) & offered);
		}
		break;
	case 0x024: vc->drv_feat_sel = v; break;
	case 0x030: vc->queue_sel = v; break;
	case 0x038:
		if (vc->queue_sel < NR_QUEUES && !q->ready)
			q->num = v;
		break;
	case 0x044:
		if (vc->queue_sel < NR_QUEUES)
			queue_set_ready(vc, q, v);
		break;
	case 0x050: queue_notify(vc, v); break;
	case 0x064: vc->isr &= ~v; break;
	case 0x070:
		if (!v)
			con_reset(vc);
		else
			vc->status = v;
		break;
	case 0x080: q->desc = (q->desc & ~0xffffffffull) | v; break;
	case 0x084: q->desc = (q->desc & 0xffffffffull) | (uint64_t)v << 32; break;
	case 0x090: q->avail = (q->avail & ~0xffffffffull) | v; break;
	case 0x094: q->avail = (q->avail & 0xffffffffull) | (uint64_t)v << 32; break;
	case 0x0a0: q->used = (q->used & ~0xffffffffull) | v; break;
	case 0x0a4: q->used = (q->used & 0xffffffffull) | (uint64_t)v << 32; break;
	default: break;
	}
}

void kvm_virtio_con_mmio(struct kvm_virtio_con *vc, uint64_t off, void *data,
			 uint32_t len, int is_write)
{
	struct vq *q = &vc->vq[vc->queue_sel < NR_QUEUES ? vc->queue_sel : 0];
	uint32_t v = 0;

	if (len > 4 || !len)
		return;
	if (off >= 0x100) {
		if (!is_write) {
			v = config_read(vc, off - 0x100, len);
			memcpy(data, &v, len);
		}
		return;		/* the console config is read-only for us */
	}
	if (len != 4 || off % 4) {
		if (!is_write)
			memset(data, 0, len);
		return;
	}
	if (!is_write) {
		v = reg_read(vc, q, off);
		memcpy(data, &v, 4);
		return;
	}
	memcpy(&v, data, 4);
	reg_write(vc, q, off, v);
}
