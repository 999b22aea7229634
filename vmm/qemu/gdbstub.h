/* SPDX-License-Identifier: MIT */
/*
 * GDB remote serial protocol client for QEMU's gdbstub (no gdb process).
 *
 * What opvm needs from a QEMU guest, and nothing more: stop every vCPU
 * (all-stop mode, "\x03"), read RIP, CS and CR3 of each vCPU ("Hg" + "g"),
 * read guest-physical memory ("Qqemu.PhyMemMode:1" + "m"), and continue
 * ("c").  The register layout of the "g" packet is learnt from the target
 * description QEMU serves (qXfer:features:read), because it differs between
 * QEMU builds (Debian's 7.2 puts cr0..efer before the x87 state, upstream
 * after the SSE state).
 *
 * QStartNoAckMode is taken when the stub offers it (QEMU 7.2 does not);
 * otherwise no acks are sent at all: QEMU needs none (it keeps its last
 * reply for a resend until a "+" or a "$" comes, and every packet opens
 * with "$"), and an ack owed for a reply read after our "c" would stop the
 * running guest (see tx_begin() in gdbstub.c).  While it keeps a reply, QEMU
 * swallows a "\x03", so an interrupt goes as "+\x03".  No "-" and no lone
 * "+" is ever sent: QEMU takes any byte that reaches a running guest for a
 * stop request ("c" goes with two "+" for that reason).
 *
 * vCPU numbering: QEMU's thread id for a vCPU is its cpu_index + 1; the
 * thread list (qfThreadInfo) is sorted, and position i in it is vCPU i.
 *
 * Errors: 0 or -errno.  -ETIMEDOUT: no answer in time; -EPIPE: the stub
 * went away (QEMU exited); -ESHUTDOWN: the stub reported the target exited
 * ("W"/"X" packet); -EPROTO: an answer we cannot use; -EIO: the stub
 * answered with an error ("Exx").  Not thread-safe: one user at a time.
 */
#ifndef OPVM_GDBSTUB_H
#define OPVM_GDBSTUB_H

#include <stddef.h>
#include <stdint.h>

#define GDBSTUB_MAX_THREADS	256	/* vCPUs we track */

struct gdbstub;

struct gdbstub_regs {
	uint64_t rip;
	uint64_t cr3;
	uint64_t cr0;		/* bit 0 (PE) clear: real mode, CPL 0 */
	uint32_t cs;		/* selector; in protected mode CPL = cs & 3 */
	uint64_t rsp, rbp;	/* for stack unwinding; 0 if the stub has none */
};

/* CPL of a stopped vCPU: 0 in real mode (CS holds a segment, not a
 * selector with a privilege level), else the low bits of CS. */
static inline unsigned gdbstub_regs_cpl(const struct gdbstub_regs *r)
{
	return (r->cr0 & 1) ? (r->cs & 3) : 0;
}

/*
 * Connects to addr and performs the handshake (qSupported, no-ack mode if
 * offered, target description, thread list, physical memory mode).
 * addr: "unix:/path" (no TCP: a gdbstub on a TCP port lets any local
 * user read and write guest memory).  Connecting to QEMU's
 * gdbstub stops the guest (QEMU does that on every new connection); the
 * caller resumes it with gdbstub_continue() when it wants it running.
 * Returns NULL and sets errno; *why (if non-NULL) then names the step that
 * failed (a static string).
 */
struct gdbstub *gdbstub_open(const char *addr, unsigned timeout_ms, const char **why);
/* Same on a connected socket (e.g. one end of a socket pair whose other end
 * QEMU's gdbstub holds); takes fd, and closes it on failure. */
struct gdbstub *gdbstub_open_fd(int fd, unsigned timeout_ms, const char **why);
void gdbstub_close(struct gdbstub *gs);		/* NULL-safe; does not resume */

unsigned gdbstub_nr_threads(const struct gdbstub *gs);
/* 1 if physical memory reads work (QEMU's Qqemu.PhyMemMode). */
int gdbstub_has_phys(const struct gdbstub *gs);
int gdbstub_fd(const struct gdbstub *gs);
/* Times gdbstub_open() had to start its handshake again because a request
 * reached a running guest (its owner resumed it while we connected) and
 * only stopped it: then the guest is stopped by us, not by its owner. */
int gdbstub_handshake_restarts(const struct gdbstub *gs);

/*
 * Sends "+\x03" and waits up to timeout_ms for the stop reply.  Returns 0
 * when the guest is stopped, -ETIMEDOUT when no stop reply came (the guest
 * was not running: QEMU ignores "\x03" then), -EPIPE, -ESHUTDOWN.
 */
int gdbstub_interrupt(struct gdbstub *gs, unsigned timeout_ms);

/*
 * Reads without blocking whatever the stub sent unprompted.  Returns the
 * number of stop replies seen (QEMU sends one whenever the VM stops for
 * another reason: a pause from the monitor, a new gdb connection), or
 * -EPIPE / -ESHUTDOWN.
 */
int gdbstub_drain(struct gdbstub *gs);

/*
 * With the guest stopped: reads the registers of every vCPU in regs[0..n)
 * (n = min(nr, gdbstub_nr_threads)), and, if len > 0, len bytes of guest-
 * physical memory at pa into buf.  All requests go out in one write and the
 * answers are read back in order, so the cost is one round trip.
 * Returns 0, or -errno; *mem_err gets the memory read's own result (0 or
 * -EIO), so registers stay usable when the memory is not.
 */
int gdbstub_sample(struct gdbstub *gs, struct gdbstub_regs *regs, unsigned nr,
		   uint64_t pa, void *buf, size_t len, int *mem_err);

/*
 * The sampler's fast path: "\x03", the reads of gdbstub_sample() and, if
 * resume, "c" go out in one write.  QEMU stops the guest when it reads
 * "\x03", sends a stop reply, answers the reads and (resume) lets the guest
 * run again, all in one pass of its main loop: the guest is stopped for no
 * round trip at all, and nothing else (a monitor command) can come in
 * between.  *stopped = 1 when we stopped it: without resume, the caller
 * must gdbstub_continue().  *stopped = 0 means the guest was not running
 * and nobody announced a stop (QEMU ignores "\x03" then), 2 that it had
 * been paused by someone else (a monitor "stop") while the write was on
 * its way; the values are then those of a paused guest, and with resume
 * "c" has restarted it: after 2, the caller stops it again to restore
 * that pause.  Use resume only when the guest is known to run (see
 * gdbstub-sampler.c).  nr must be at least 1.
 * Returns -EALREADY, without sending anything, when the stub had announced
 * a stop nobody asked for (someone else paused the guest).
 * On -ETIMEDOUT (a slow QEMU), *stopped is -1 when no answer came yet, so
 * whether the guest had been running is not known: without resume, the
 * caller sends the "c" the write lacked (the guest was stopped by it, or by
 * someone else, whose pause gdbstub_catch_up() then reveals).
 */
int gdbstub_stop_sample(struct gdbstub *gs, struct gdbstub_regs *regs, unsigned nr,
			uint64_t pa, void *buf, size_t len, int resume, int *mem_err,
			int *stopped);

/*
 * gdbstub_stop_sample() in two halves, for a caller that lets the answers
 * gather before it reads them: each answer QEMU writes (an ack and a reply
 * per request) would otherwise wake a reader that waits on the socket.
 * _send() sends the batch (-EALREADY, -EINVAL as above); _recv(), called
 * once with nothing else sent in between, reads its answers as
 * gdbstub_stop_sample() does, taking what the socket holds before it waits
 * for the rest; regs and buf must hold the nr and len given to _send().
 */
int gdbstub_stop_sample_send(struct gdbstub *gs, unsigned nr, uint64_t pa, size_t len,
			     int resume);
int gdbstub_stop_sample_recv(struct gdbstub *gs, struct gdbstub_regs *regs, void *buf,
			     int *mem_err, int *stopped);
/* How many times the client has waited on the socket for the stub (a poll
 * with a timeout): a statistic, for tests and the sampler's cost. */
unsigned long gdbstub_waits(const struct gdbstub *gs);

/*
 * 8-byte guest-physical reads that go out with every later sample's
 * register reads, in the same write (gdbstub_sample(), gdbstub_stop_sample()
 * with nr > 0): pa[i] 0 reads nothing.  The gdbstub sampler reads each
 * vCPU's current-task pointer this way (vmm/introspect/kcurrent.h).  n at
 * most GDBSTUB_MAX_THREADS; 0 stops them.  Returns 0, -EINVAL, -ENOTSUP
 * (no PhyMemMode).
 */
int gdbstub_set_words(struct gdbstub *gs, const uint64_t *pa, unsigned n);
/* Word i of the last sample (the guest's little-endian bytes as a number): 0, or
 * -ENOENT (none asked), -EIO/-EPROTO (the stub could not read it). */
int gdbstub_word(const struct gdbstub *gs, unsigned i, uint64_t *v);

/*
 * After gdbstub_sample() or gdbstub_stop_sample() timed out: reads the
 * answers still owed, so the stream is in step again.  *marker = 1 when the
 * stop_sample marker's answer was among them (the guest had been paused by
 * someone else before that write came, and a "c" sent since undid that).
 * 0 when all came, -ETIMEDOUT (call again), or -errno.
 */
int gdbstub_catch_up(struct gdbstub *gs, unsigned timeout_ms, int *marker);

int gdbstub_read_regs(struct gdbstub *gs, unsigned vcpu, struct gdbstub_regs *out);
/* Guest-physical read (len <= 64 KiB).  -ENOTSUP without PhyMemMode. */
int gdbstub_read_phys(struct gdbstub *gs, uint64_t pa, void *buf, size_t len);

/* Resumes every vCPU ("c"), whether the guest is stopped or was resumed by
 * someone else meanwhile (see gdbstub.c); no reply is expected. */
int gdbstub_continue(struct gdbstub *gs);

/*
 * With the guest stopped by us: steps vCPU vcpu one instruction ("Hc" +
 * "s"; the guest runs meanwhile, then stops again) and reads the step's
 * stop reply; *sig gets its signal (5: the step ended; 2: someone else
 * paused the guest first, the pause holds).  The guest is left stopped
 * after a 5: the caller continues it.  -ETIMEDOUT: no stop reply yet (the
 * vCPU did not run its instruction: one comes later, a stop of ours).
 */
int gdbstub_step(struct gdbstub *gs, unsigned vcpu, unsigned timeout_ms, int *sig);

/*
 * Waits until QEMU has read everything we sent (QEMU acts on gdbstub bytes
 * as it reads them, in the same main-loop pass).  Before closing: a "c"
 * still queued when the gdbstub is removed would never run.  0, -ETIMEDOUT,
 * or -errno (unix sockets only: the queue is SIOCOUTQ).
 */
int gdbstub_wait_read(struct gdbstub *gs, unsigned timeout_ms);

/*
 * Sends "qC" and reads up to its answer: 1 if a stop reply came before it,
 * or instead of it (the "qC" reached a running guest and only stopped it),
 * 0 if only the answer came (the guest was stopped and nothing stopped it
 * meanwhile), -ETIMEDOUT if nothing came, -errno.  The sampler's way out
 * (gdbstub-sampler.c) after a "\x03" that was not answered in time.
 */
int gdbstub_settle(struct gdbstub *gs, unsigned timeout_ms);

/* Sends one packet and waits for its reply (stop replies that arrive first
 * are skipped).  reply is NUL-terminated; returns its length or -errno. */
int gdbstub_request(struct gdbstub *gs, const char *cmd, char *reply, size_t cap,
		    unsigned timeout_ms);

/*
 * Register layout helper, exposed for tests: walks a target-description XML
 * fragment and records the byte offset and size of the registers named
 * rip, cs, cr0 and cr3 in the "g" packet.  *next_off is the offset of the next
 * register (in/out, so fragments chain).  Returns 0 or -EPROTO.
 */
struct gdbstub_layout {
	int rip_off, rip_size;
	int cs_off, cs_size;
	int cr3_off, cr3_size;
	int cr0_off, cr0_size;	/* -1 if the stub has no cr0: PE assumed */
	int rsp_off, rsp_size;	/* -1 if absent */
	int rbp_off, rbp_size;
	int next_off;		/* bytes covered so far */
	int next_regnum;
};
void gdbstub_layout_init(struct gdbstub_layout *l);
int gdbstub_layout_parse(struct gdbstub_layout *l, const char *xml, size_t len);

#endif /* OPVM_GDBSTUB_H */
