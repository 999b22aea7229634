// SPDX-License-Identifier: GPL-2.0
/*
 * The record ring and /dev/opvm.
 *
 * A byte ring of whole records.  Writers (the worker, occasionally other
 * contexts) append under a spinlock; the one reader (the relay) copies whole
 * records to user space without the spinlock: [tail, head) is never written
 * while the reader owns it, and tail only moves after the copy.
 *
 * The bottom layer: it calls nothing else in the module.  A "sync" written
 * or "ksym" written to /dev/opvm is passed up through the callbacks
 * opvm_dev_register() got.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/wait.h>
#include "opvm.h"

static struct {
	spinlock_t lock;	/* head, seq, lost */
	struct mutex rlock;	/* one reader at a time: owns tail */
	wait_queue_head_t wait;
	u8 *buf;
	size_t size;		/* power of two, multiple of OPVM_REC_ALIGN */
	u64 head;		/* bytes ever written */
	u64 tail;		/* bytes ever consumed */
	u32 seq;
	u64 lost;		/* dropped, not yet reported */
	u64 lost_total;
	bool awaiting_hello;	/* reset: drop all but HELLO, uncounted */
	bool hello_queued;	/* a HELLO since load or the last reset: the
				 * relay's records may follow it */
} ring;

/* The worker's resync request, set before /dev/opvm exists. */
static void (*opvm_dev_on_sync)(void);
static void (*opvm_dev_on_ksyms)(bool modules_only);

int opvm_ring_init(size_t size)
{
	spin_lock_init(&ring.lock);
	mutex_init(&ring.rlock);
	init_waitqueue_head(&ring.wait);
	ring.size = roundup_pow_of_two(max_t(size_t, size, 4 * OPVM_REC_MAX));
	ring.buf = vzalloc(ring.size);
	return ring.buf ? 0 : -ENOMEM;
}

void opvm_ring_exit(void)
{
	vfree(ring.buf);
	ring.buf = NULL;
}

static void ring_copy_in(u64 pos, const void *src, size_t len)
{
	size_t off = pos & (ring.size - 1);
	size_t first = min(len, ring.size - off);

	memcpy(ring.buf + off, src, first);
	memcpy(ring.buf, (const u8 *)src + first, len - first);
}

static void ring_copy_out(void *dst, u64 pos, size_t len)
{
	size_t off = pos & (ring.size - 1);
	size_t first = min(len, ring.size - off);

	memcpy(dst, ring.buf + off, first);
	memcpy((u8 *)dst + first, ring.buf, len - first);
}

/* Caller holds ring.lock and has checked there is room. */
static void ring_append(struct opvm_rec_hdr *hdr)
{
	hdr->magic = OPVM_PROTO_MAGIC;
	hdr->seq = ring.seq++;
	hdr->reserved = 0;
	ring_copy_in(ring.head, hdr, hdr->len);
	ring.head += hdr->len;
}

static size_t ring_room(void)
{
	return ring.size - (size_t)(ring.head - READ_ONCE(ring.tail));
}

/* Caller holds ring.lock.  Emits the pending LOST record if it fits. */
static void ring_flush_lost(void)
{
	struct opvm_rec_lost rec = {
		.hdr.type = OPVM_REC_LOST,
		.hdr.len = sizeof(rec),
	};

	if (!ring.lost || ring.awaiting_hello || ring_room() < sizeof(rec))
		return;
	rec.count = ring.lost;
	ring.lost = 0;
	ring_append(&rec.hdr);
}

int opvm_ring_put(void *rec)
{
	struct opvm_rec_hdr *hdr = rec;
	unsigned long flags;
	size_t need = hdr->len;
	int ret = 0;

	if (WARN_ON_ONCE(hdr->len < sizeof(*hdr) || hdr->len > OPVM_REC_MAX ||
			 hdr->len % OPVM_REC_ALIGN))
		return -EINVAL;
	spin_lock_irqsave(&ring.lock, flags);
	if (ring.awaiting_hello) {
		/* Anything before the new HELLO predates its walk. */
		if (hdr->type != OPVM_REC_HELLO) {
			spin_unlock_irqrestore(&ring.lock, flags);
			return 0;
		}
		ring.awaiting_hello = false;
	}
	if (hdr->type == OPVM_REC_HELLO)
		ring.lost = 0;	/* drops before a HELLO concern no one now */
	if (hdr->type == OPVM_REC_HELLO && ring_room() >= need)
		ring.hello_queued = true;
	if (ring.lost)
		need += sizeof(struct opvm_rec_lost);
	if (ring_room() < need) {
		ring.lost++;
		ring.lost_total++;
		ret = -ENOSPC;
	} else {
		ring_flush_lost();
		ring_append(hdr);
	}
	spin_unlock_irqrestore(&ring.lock, flags);
	if (!ret)
		wake_up_interruptible(&ring.wait);
	return ret;
}

void opvm_ring_lost(u64 n)
{
	unsigned long flags;

	spin_lock_irqsave(&ring.lock, flags);
	ring.lost += n;
	ring.lost_total += n;
	spin_unlock_irqrestore(&ring.lock, flags);
}

u64 opvm_ring_lost_total(void)
{
	return READ_ONCE(ring.lost_total);
}

static bool ring_empty(void)
{
	return READ_ONCE(ring.head) == READ_ONCE(ring.tail);
}

/* read(): as many whole records as fit in count; at least one or -EINVAL. */
static ssize_t opvm_dev_read(struct file *file, char __user *ubuf,
			     size_t count, loff_t *ppos)
{
	unsigned long flags;
	u64 head, pos;
	size_t n = 0;
	ssize_t ret;

	if (mutex_lock_interruptible(&ring.rlock))
		return -ERESTARTSYS;
	while (ring_empty()) {
		mutex_unlock(&ring.rlock);
		if (file->f_flags & O_NONBLOCK)
			return -EAGAIN;
		if (wait_event_interruptible(ring.wait, !ring_empty()))
			return -ERESTARTSYS;
		if (mutex_lock_interruptible(&ring.rlock))
			return -ERESTARTSYS;
	}
	spin_lock_irqsave(&ring.lock, flags);
	head = ring.head;
	spin_unlock_irqrestore(&ring.lock, flags);

	for (pos = ring.tail; pos < head;) {
		struct opvm_rec_hdr hdr;

		ring_copy_out(&hdr, pos, sizeof(hdr));
		if (n + hdr.len > count)
			break;
		n += hdr.len;
		pos += hdr.len;
	}
	if (!n) {
		ret = -EINVAL;	/* buffer smaller than one record */
		goto out;
	}
	{
		size_t off = ring.tail & (ring.size - 1);
		size_t first = min(n, ring.size - off);

		if (copy_to_user(ubuf, ring.buf + off, first) ||
		    copy_to_user(ubuf + first, ring.buf, n - first)) {
			ret = -EFAULT;
			goto out;
		}
	}
	spin_lock_irqsave(&ring.lock, flags);
	WRITE_ONCE(ring.tail, ring.tail + n);
	ring_flush_lost();	/* room again: report drops right away */
	spin_unlock_irqrestore(&ring.lock, flags);
	ret = n;
out:
	mutex_unlock(&ring.rlock);
	return ret;
}

/* Record types the relay may write: what it reads in the guest for the
 * host (kernel symbols, files), never what describes processes or
 * mappings. */
static bool relay_type(u16 type)
{
	return type == OPVM_REC_KSYMS || type == OPVM_REC_KSYMS_END ||
	       type == OPVM_REC_FILE_DATA || type == OPVM_REC_FILE_END;
}

/*
 * One record from the relay, numbered like the module's own.  Taken only
 * while the ring is at most half full, so this bulk data never takes the
 * room process and mapping records need: -EAGAIN tells the relay to try
 * again later (also before the first HELLO after load or a resync: the
 * host forgets a transfer that a HELLO interrupts).
 */
static ssize_t opvm_dev_write_rec(const char __user *ubuf, size_t count)
{
	struct opvm_rec_hdr *hdr;
	ssize_t ret = count;

	if (count < sizeof(*hdr) || count > OPVM_REC_MAX || count % OPVM_REC_ALIGN)
		return -EINVAL;
	hdr = kmalloc(count, GFP_KERNEL);
	if (!hdr)
		return -ENOMEM;
	if (copy_from_user(hdr, ubuf, count)) {
		ret = -EFAULT;
		goto out;
	}
	if (hdr->magic != OPVM_PROTO_MAGIC || hdr->len != count ||
	    !relay_type(hdr->type)) {
		ret = -EINVAL;
		goto out;
	}
	if (opvm_ring_put_bulk(hdr))
		ret = -EAGAIN;
out:
	kfree(hdr);
	return ret;
}

int opvm_ring_put_bulk(struct opvm_rec_hdr *hdr)
{
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&ring.lock, flags);
	if (!ring.hello_queued || ring.lost ||
	    ring_room() < ring.size / 2 + hdr->len)
		ret = -EAGAIN;
	else
		ring_append(hdr);
	spin_unlock_irqrestore(&ring.lock, flags);
	if (!ret)
		wake_up_interruptible(&ring.wait);
	return ret;
}

/*
 * write(): "sync" asks for a fresh start: the unread records are dropped and
 * HELLO, the walk and SYNC are sent again.  The relay writes it when a host
 * connects to the port, so every host session starts with HELLO.  "ksym"
 * asks opvm.ko to send the kernel's symbols itself (ksyms.c): the relay
 * writes it when kptr_restrict shows it only zeros.  "kmod" asks for the
 * modules' symbols only (the host found vmlinux's elsewhere: no line of
 * /proc/kallsyms needs formatting).  Anything else must be
 * one whole record of a relay type (opvm_dev_write_rec()).
 */
static ssize_t opvm_dev_write(struct file *file, const char __user *ubuf,
			      size_t count, loff_t *ppos)
{
	char cmd[8] = "";

	if (count != 4)
		return opvm_dev_write_rec(ubuf, count);
	if (copy_from_user(cmd, ubuf, min(count, sizeof(cmd) - 1)))
		return -EFAULT;
	if (!strncmp(cmd, "ksym", 4) || !strncmp(cmd, "kmod", 4)) {
		opvm_dev_on_ksyms(cmd[1] == 'm');
		return count;
	}
	if (strncmp(cmd, "sync", 4))
		return -EINVAL;
	/*
	 * Empty the ring now, so the next read returns HELLO; the worker
	 * sends it with the walk on its next run.
	 */
	opvm_ring_reset();
	opvm_dev_on_sync();
	return count;
}

/*
 * Drop everything unread and restart seq at 0; until the next HELLO, records
 * are dropped without being counted.
 */
void opvm_ring_reset(void)
{
	unsigned long flags;

	mutex_lock(&ring.rlock);
	spin_lock_irqsave(&ring.lock, flags);
	WRITE_ONCE(ring.tail, ring.head);
	ring.seq = 0;
	ring.lost = 0;
	ring.awaiting_hello = true;
	ring.hello_queued = false;
	spin_unlock_irqrestore(&ring.lock, flags);
	mutex_unlock(&ring.rlock);
}

static __poll_t opvm_dev_poll(struct file *file, poll_table *wait)
{
	poll_wait(file, &ring.wait, wait);
	return ring_empty() ? 0 : EPOLLIN | EPOLLRDNORM;
}

static const struct file_operations opvm_dev_fops = {
	.owner = THIS_MODULE,
	.read = opvm_dev_read,
	.write = opvm_dev_write,
	.poll = opvm_dev_poll,
	.llseek = noop_llseek,
};

static struct miscdevice opvm_miscdev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "opvm",
	.fops = &opvm_dev_fops,
	.mode = 0600,
};

int opvm_dev_register(void (*on_sync)(void), void (*on_ksyms)(bool modules_only))
{
	opvm_dev_on_sync = on_sync;
	opvm_dev_on_ksyms = on_ksyms;
	return misc_register(&opvm_miscdev);
}

void opvm_dev_unregister(void)
{
	misc_deregister(&opvm_miscdev);
}
