// SPDX-License-Identifier: GPL-2.0
/*
 * The event FIFO between the hooks (atomic context, any CPU) and the worker.
 *
 * Fixed size, allocated at load: a hook never allocates.  A full FIFO drops
 * the event and counts it as a lost record.  The consumer (the worker in
 * describe.c) is woken through the callback given to opvm_events_init(), so
 * this layer calls nothing above it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/file.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/vmalloc.h>
#include "opvm.h"

static struct {
	spinlock_t lock;
	struct opvm_event *ev;
	unsigned int nr;	/* power of two */
	unsigned int head;	/* next slot to fill */
	unsigned int tail;	/* next slot to pop */
	void (*ready)(void);	/* an event was published */
} fifo;

int opvm_events_init(unsigned int nr, void (*ready)(void))
{
	spin_lock_init(&fifo.lock);
	fifo.ready = ready;
	fifo.nr = roundup_pow_of_two(max(nr, 64U));
	fifo.ev = vcalloc(fifo.nr, sizeof(*fifo.ev));
	return fifo.ev ? 0 : -ENOMEM;
}

/* Drop the references an event holds (mmput() and fput() may sleep). */
void opvm_event_release(struct opvm_event *ev)
{
	if (ev->mm)
		mmput(ev->mm);
	if (ev->file)
		fput(ev->file);
	ev->mm = NULL;
	ev->file = NULL;
}

void opvm_events_exit(void)
{
	struct opvm_event ev;

	while (opvm_event_pop(&ev))
		opvm_event_release(&ev);
	vfree(fifo.ev);
	fifo.ev = NULL;
}

/*
 * On success returns with fifo.lock held (irqs saved in *flags); the caller
 * fills the event and calls opvm_event_commit().  Holding the lock keeps the
 * worker from popping a half-filled slot; fills are a few stores.
 */
struct opvm_event *opvm_event_reserve(unsigned long *flags)
{
	struct opvm_event *ev;

	spin_lock_irqsave(&fifo.lock, *flags);
	if (fifo.head - fifo.tail >= fifo.nr) {
		spin_unlock_irqrestore(&fifo.lock, *flags);
		opvm_ring_lost(1);
		return NULL;
	}
	ev = &fifo.ev[fifo.head & (fifo.nr - 1)];
	memset(ev, 0, sizeof(*ev));
	return ev;
}

void opvm_event_commit(struct opvm_event *ev, unsigned long flags)
{
	fifo.head++;
	spin_unlock_irqrestore(&fifo.lock, flags);
	fifo.ready();
}

bool opvm_event_pop(struct opvm_event *out)
{
	unsigned long flags;
	bool got = false;

	spin_lock_irqsave(&fifo.lock, flags);
	if (fifo.tail != fifo.head) {
		*out = fifo.ev[fifo.tail & (fifo.nr - 1)];
		fifo.tail++;
		got = true;
	}
	spin_unlock_irqrestore(&fifo.lock, flags);
	return got;
}

/* Events published so far and not yet popped. */
unsigned int opvm_events_pending(void)
{
	unsigned long flags;
	unsigned int n;

	spin_lock_irqsave(&fifo.lock, flags);
	n = fifo.head - fifo.tail;
	spin_unlock_irqrestore(&fifo.lock, flags);
	return n;
}
