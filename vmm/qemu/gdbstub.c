// SPDX-License-Identifier: MIT
/*
 * GDB remote serial protocol client for QEMU's gdbstub.  See gdbstub.h.
 *
 * Everything the stub sends is treated as untrusted: packets are bounded,
 * checksums are checked, hex is validated, and nothing is trusted to be
 * NUL-terminated.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <linux/sockios.h>

#include "vmm/qemu/gdbstub.h"
#include "lib/clock.h"
#include "lib/hex.h"
#include "lib/unixsock.h"

#define GS_RX_CAP	(64 * 1024)	/* raw bytes buffered from the stub */
#define GS_PKT_CAP	(32 * 1024)	/* largest decoded packet we accept */
#define GS_TX_CAP	(32 * 1024)
#define GS_MEM_CHUNK	1024		/* bytes per "m" request: fits PacketSize 0x1000 */
#define HS_EATEN_MS	1000		/* see rx_reply() */

struct gdbstub {
	int fd;
	int noack;		/* QStartNoAckMode accepted */
	int has_phys;
	int stops_seen;		/* stop replies skipped while waiting for replies */
	int restarts;		/* handshakes restarted: the guest had run */
	int opening;		/* in gdbstub_open_fd()'s handshake */
	/* The batch being read, or one that timed out (see gdbstub_catch_up()):
	 * answers still owed, and whether its marker's answer may still come
	 * (none of its answers read yet). */
	int owed;
	int marker_open;
	/* The fast-path batch sent and not read yet (gdbstub_stop_sample_send()):
	 * its register reads, memory bytes and chunks, the memory check's
	 * result, and the stop replies seen before it went out. */
	int batch_open;
	unsigned batch_n;
	size_t batch_len;
	int batch_chunks, batch_merr, batch_stops;
	/* The next wait for bytes reads the socket before polling it: the
	 * answers are expected to be there already. */
	int rx_try;
	unsigned long waits;	/* polls that waited for the stub */
	unsigned nr_threads;
	unsigned long tids[GDBSTUB_MAX_THREADS];
	/* gdbstub_set_words(): 8-byte reads that go with every sample */
	unsigned nr_words;
	uint64_t word_pa[GDBSTUB_MAX_THREADS], word[GDBSTUB_MAX_THREADS];
	int8_t word_err[GDBSTUB_MAX_THREADS];
	struct gdbstub_layout lay;
	size_t rx_off, rx_len;	/* rx[rx_off, rx_len) not taken yet */
	char rx[GS_RX_CAP];
	char pkt[GS_PKT_CAP + 1];
	char tx[GS_TX_CAP];
	size_t tx_len;
};

/* ---- framing ------------------------------------------------------------- */

static int gs_write_all(struct gdbstub *gs, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(gs->fd, buf, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == ECONNRESET ? -EPIPE : -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Starts a new outgoing batch.  No ack goes first, even without
 * QStartNoAckMode (QEMU 7.2 does not offer it): QEMU keeps its last reply
 * for a resend until a "+" or a "$" comes, and needs no ack besides; every
 * packet opens with "$".  A "+" owed for a reply read after our "c" (a late
 * answer, drained) would reach a running guest and stop it ahead of the
 * batch's marker, whose "$" then finds the guest paused and gets answered:
 * our own stop, taken for someone else's pause, and the guest left paused.
 */
static void tx_begin(struct gdbstub *gs)
{
	gs->tx_len = 0;
}

/*
 * "\x03", preceded by "+": QEMU drops any byte but "+" and "$" while it
 * keeps a reply for a resend, "\x03" included.  A running guest is stopped
 * by exactly one of the two (the "+" when no reply is kept, and the
 * "\x03" is then dropped behind the stop reply), a paused one by neither.
 */
static void tx_interrupt(struct gdbstub *gs)
{
	gs->tx[gs->tx_len++] = '+';
	gs->tx[gs->tx_len++] = 0x03;
}

static const char hex_digits[] = "0123456789abcdef";

static int tx_packet(struct gdbstub *gs, const char *payload)
{
	size_t len = strlen(payload);
	unsigned sum = 0;

	/* $ + payload (escaped at most 2x) + #xx */
	if (gs->tx_len + 2 * len + 4 > sizeof(gs->tx))
		return -E2BIG;
	gs->tx[gs->tx_len++] = '$';
	for (size_t i = 0; i < len; i++) {
		char c = payload[i];

		if (c == '$' || c == '#' || c == '}' || c == '*') {
			gs->tx[gs->tx_len++] = '}';
			sum += '}';
			c ^= 0x20;
		}
		gs->tx[gs->tx_len++] = c;
		sum += (unsigned char)c;
	}
	gs->tx[gs->tx_len++] = '#';
	gs->tx[gs->tx_len++] = hex_digits[(sum >> 4) & 15];
	gs->tx[gs->tx_len++] = hex_digits[sum & 15];
	return 0;
}

/* v in hex, no leading zeros, at p; returns the end (not terminated). */
static char *put_hex(char *p, uint64_t v)
{
	int shift = 60;

	while (shift > 0 && !(v >> shift))
		shift -= 4;
	for (; shift >= 0; shift -= 4)
		*p++ = hex_digits[(v >> shift) & 15];
	return p;
}

static int tx_flush(struct gdbstub *gs)
{
	int err = gs_write_all(gs, gs->tx, gs->tx_len);

	gs->tx_len = 0;
	return err;
}

/*
 * The payload rx[from, to) into gs->pkt: escapes and run-length encoding
 * decoded, or, without either (QEMU uses neither in the answers to the
 * sampler's requests), copied.  Returns its length or -EAGAIN (too long).
 */
static int rx_decode(struct gdbstub *gs, size_t from, size_t to)
{
	size_t plen = to - from;
	int out = 0;

	if (!memchr(gs->rx + from, '}', plen) && !memchr(gs->rx + from, '*', plen)) {
		if (plen > GS_PKT_CAP)
			return -EAGAIN;
		memcpy(gs->pkt, gs->rx + from, plen);
		return (int)plen;
	}
	for (size_t k = from; k < to; k++) {
		unsigned char c = (unsigned char)gs->rx[k];

		if (c == '}' && k + 1 < to) {
			c = (unsigned char)gs->rx[++k] ^ 0x20;
		} else if (c == '*' && k + 1 < to && out > 0) {
			int n = (unsigned char)gs->rx[++k] - 29;

			if (n < 0 || out + n > GS_PKT_CAP)
				return -EAGAIN;
			memset(gs->pkt + out, gs->pkt[out - 1], (size_t)n);
			out += n;
			continue;
		}
		if (out >= GS_PKT_CAP)
			return -EAGAIN;
		gs->pkt[out++] = (char)c;
	}
	return out;
}

/*
 * Tries to take one complete packet out of rx.  Returns its decoded length
 * (into gs->pkt, NUL-terminated), 0 if more bytes are needed, or -EAGAIN if
 * a packet was dropped (bad checksum, too long) and parsing should go on.
 */
static int rx_take(struct gdbstub *gs)
{
	size_t i = gs->rx_off, start, hash;
	const char *h;
	unsigned sum = 0;
	int c1, c2, out = 0;

	/* Skip acks and garbage up to the next packet start. */
	while (i < gs->rx_len && gs->rx[i] != '$' && gs->rx[i] != '%')
		i++;
	if (i == gs->rx_len) {
		gs->rx_off = gs->rx_len = 0;
		return 0;
	}
	start = i;
	h = memchr(gs->rx + start + 1, '#', gs->rx_len - start - 1);
	hash = h ? (size_t)(h - gs->rx) : gs->rx_len;
	if (hash + 2 >= gs->rx_len) {
		/* Incomplete: keep it at the front, for the bytes that
		 * complete it, unless it can never fit. */
		memmove(gs->rx, gs->rx + start, gs->rx_len - start);
		gs->rx_len -= start;
		gs->rx_off = 0;
		if (gs->rx_len == sizeof(gs->rx)) {
			gs->rx_len = 0;
			return -EAGAIN;
		}
		return 0;
	}
	c1 = hex_val((unsigned char)gs->rx[hash + 1]);
	c2 = hex_val((unsigned char)gs->rx[hash + 2]);
	for (size_t k = start + 1; k < hash; k++)
		sum += (unsigned char)gs->rx[k];
	if (c1 < 0 || c2 < 0 || (unsigned)(c1 * 16 + c2) != (sum & 0xff)) {
		/* Dropped, not nacked: on a local stream a bad checksum means
		 * a broken stub, not line noise, and QEMU takes a lone "-"
		 * that reaches a running guest for a stop request (the guest
		 * would stay stopped, its stop taken for someone else's).
		 * The caller's reply count then times out and resyncs. */
		out = -EAGAIN;
		goto consume;
	}
	out = rx_decode(gs, start + 1, hash);
	if (out < 0)
		goto consume;
	gs->pkt[out] = '\0';
	if (gs->rx[start] == '%')	/* notification (non-stop mode): not for us */
		out = -EAGAIN;
	if (out == 0)
		out = -ENODATA;		/* empty packet: "unsupported" */
consume:
	/* Taken by moving on, not by moving the rest (a stop's answers
	 * come in one read: a dozen packets, 2-3 KiB). */
	gs->rx_off = hash + 3;
	if (gs->rx_off == gs->rx_len)
		gs->rx_off = gs->rx_len = 0;
	return out;
}

/*
 * Next packet, waiting until deadline (ns, CLOCK_MONOTONIC; 0: do not
 * wait).  Returns its length (0 for an empty packet) or -errno.
 */
static int rx_packet(struct gdbstub *gs, int64_t deadline)
{
	for (;;) {
		int r = rx_take(gs);
		struct pollfd pfd = { .fd = gs->fd, .events = POLLIN };
		int64_t left;
		ssize_t n;

		if (r == -ENODATA)
			return 0;
		if (r > 0)
			return r;
		if (r == -EAGAIN)
			continue;
		if (gs->rx_try) {
			gs->rx_try = 0;
			n = recv(gs->fd, gs->rx + gs->rx_len, sizeof(gs->rx) - gs->rx_len,
				 MSG_DONTWAIT);
			if (n > 0) {
				gs->rx_len += (size_t)n;
				continue;
			}
			if (n == 0 || (errno != EAGAIN && errno != EINTR))
				return -EPIPE;
		}
		left = deadline ? deadline - clk_now_ns() : 0;
		if (left < 0)
			left = 0;
		gs->waits += left > 0;
		r = poll(&pfd, 1, (int)((left + 999999) / 1000000));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -ETIMEDOUT;
		n = recv(gs->fd, gs->rx + gs->rx_len, sizeof(gs->rx) - gs->rx_len, 0);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -EPIPE;
		}
		if (n == 0)
			return -EPIPE;
		gs->rx_len += (size_t)n;
	}
}

static int is_stop_reply(const char *p)
{
	return p[0] == 'T' || p[0] == 'S';
}

static int is_exit_reply(const char *p)
{
	return p[0] == 'W' || p[0] == 'X';
}

/* The reply to a request: skips stop replies, fails on exit replies. */
static int rx_reply(struct gdbstub *gs, int64_t deadline)
{
	for (;;) {
		int n = rx_packet(gs, deadline);

		if (n < 0)
			return n;
		if (n > 0 && is_stop_reply(gs->pkt)) {
			gs->stops_seen++;
			/* Handshake: after a stop reply, an answer that is
			 * coming comes soon; none means the request only
			 * stopped a running guest (see gdbstub_open_fd()). */
			if (gs->opening) {
				int64_t soon = clk_now_ns() + HS_EATEN_MS * 1000000ll;

				if (soon < deadline)
					deadline = soon;
			}
			continue;
		}
		if (n > 0 && is_exit_reply(gs->pkt))
			return -ESHUTDOWN;
		return n;
	}
}

int gdbstub_request(struct gdbstub *gs, const char *cmd, char *reply, size_t cap,
		    unsigned timeout_ms)
{
	int n;

	tx_begin(gs);
	n = tx_packet(gs, cmd);
	if (!n)
		n = tx_flush(gs);
	if (n)
		return n;
	n = rx_reply(gs, clk_now_ns() + (int64_t)timeout_ms * 1000000);
	if (n < 0)
		return n;
	if (reply && cap) {
		size_t k = (size_t)n < cap - 1 ? (size_t)n : cap - 1;

		memcpy(reply, gs->pkt, k);
		reply[k] = '\0';
	}
	return n;
}

/* ---- target description ------------------------------------------------- */

void gdbstub_layout_init(struct gdbstub_layout *l)
{
	*l = (struct gdbstub_layout){ .rip_off = -1, .cs_off = -1, .cr3_off = -1,
				      .cr0_off = -1, .rsp_off = -1, .rbp_off = -1 };
}

/* Value of attribute attr inside element [e, end), into out.  0 or -1. */
static int xml_attr(const char *e, const char *end, const char *attr, char *out, size_t cap)
{
	size_t alen = strlen(attr);

	for (const char *p = e; p + alen + 2 < end; p++) {
		char q;
		const char *v, *ve;

		if ((p[0] != ' ' && p[0] != '\t' && p[0] != '\n') ||
		    memcmp(p + 1, attr, alen) || p[1 + alen] != '=')
			continue;
		q = p[2 + alen];
		if (q != '"' && q != '\'')
			return -1;
		v = p + 3 + alen;
		ve = memchr(v, q, (size_t)(end - v));
		if (!ve || (size_t)(ve - v) >= cap)
			return -1;
		memcpy(out, v, (size_t)(ve - v));
		out[ve - v] = '\0';
		return 0;
	}
	return -1;
}

int gdbstub_layout_parse(struct gdbstub_layout *l, const char *xml, size_t len)
{
	const char *p = xml, *end = xml + len;

	while (p < end) {
		const char *e = memmem(p, (size_t)(end - p), "<reg", 4);
		const char *cmt = memmem(p, (size_t)(end - p), "<!--", 4);
		const char *close;
		char name[32], bits[16], regnum[16];
		long nbits, rn;
		char *ep;

		if (!e)
			break;
		/* Registers inside comments do not exist (QEMU's own XML
		 * comments some out). */
		if (cmt && cmt < e) {
			const char *ce = memmem(cmt + 4, (size_t)(end - cmt - 4), "-->", 3);

			if (!ce)
				break;
			p = ce + 3;
			continue;
		}
		if (e + 4 >= end || (e[4] != ' ' && e[4] != '\t' && e[4] != '\n')) {
			p = e + 4;	/* <reg...> of another name */
			continue;
		}
		close = memchr(e, '>', (size_t)(end - e));
		if (!close)
			return -EPROTO;
		if (xml_attr(e, close, "name", name, sizeof(name)) ||
		    xml_attr(e, close, "bitsize", bits, sizeof(bits)))
			return -EPROTO;
		nbits = strtol(bits, &ep, 10);
		if (*ep || nbits <= 0 || nbits > 1024 || nbits % 8)
			return -EPROTO;
		if (!xml_attr(e, close, "regnum", regnum, sizeof(regnum))) {
			rn = strtol(regnum, &ep, 10);
			/* The "g" packet is in regnum order; a gap would hide
			 * registers of unknown size. */
			if (*ep || rn != l->next_regnum)
				return -EPROTO;
		}
		if (!strcmp(name, "rip") || !strcmp(name, "eip")) {
			l->rip_off = l->next_off;
			l->rip_size = (int)nbits / 8;
		} else if (!strcmp(name, "cs")) {
			l->cs_off = l->next_off;
			l->cs_size = (int)nbits / 8;
		} else if (!strcmp(name, "cr0")) {
			l->cr0_off = l->next_off;
			l->cr0_size = (int)nbits / 8;
		} else if (!strcmp(name, "cr3")) {
			l->cr3_off = l->next_off;
			l->cr3_size = (int)nbits / 8;
		} else if (!strcmp(name, "rsp")) {
			l->rsp_off = l->next_off;
			l->rsp_size = (int)nbits / 8;
		} else if (!strcmp(name, "rbp")) {
			l->rbp_off = l->next_off;
			l->rbp_size = (int)nbits / 8;
		}
		if (l->next_off > 1 << 20)
			return -EPROTO;
		l->next_off += (int)nbits / 8;
		l->next_regnum++;
		p = close + 1;
	}
	return 0;
}

/* Reads a whole qXfer object into a malloc'd buffer. */
static int xfer_read(struct gdbstub *gs, const char *annex, char **out, size_t *out_len,
		     unsigned timeout_ms)
{
	char cmd[160];
	char *buf = NULL;
	size_t len = 0;

	for (int rounds = 0; rounds < 64; rounds++) {
		int n;
		char *nb;

		snprintf(cmd, sizeof(cmd), "qXfer:features:read:%s:%zx,%x", annex, len, 0xf00);
		n = gdbstub_request(gs, cmd, NULL, 0, timeout_ms);
		if (n < 0)
			goto fail;
		if (n < 1 || (gs->pkt[0] != 'm' && gs->pkt[0] != 'l')) {
			n = -EPROTO;
			goto fail;
		}
		nb = realloc(buf, len + (size_t)n);
		if (!nb) {
			n = -ENOMEM;
			goto fail;
		}
		buf = nb;
		memcpy(buf + len, gs->pkt + 1, (size_t)n - 1);
		len += (size_t)n - 1;
		if (gs->pkt[0] == 'l') {
			*out = buf;
			*out_len = len;
			return 0;
		}
		if (n == 1) {
			n = -EPROTO;
			goto fail;
		}
		continue;
fail:
		free(buf);
		return n;
	}
	free(buf);
	return -EPROTO;
}

/* target.xml, following its xi:include elements in order. */
static int learn_layout(struct gdbstub *gs, unsigned timeout_ms)
{
	char *xml = NULL;
	size_t len = 0;
	const char *p, *end;
	int err;

	gdbstub_layout_init(&gs->lay);
	err = xfer_read(gs, "target.xml", &xml, &len, timeout_ms);
	if (err)
		return err;
	p = xml;
	end = xml + len;
	while (p < end) {
		const char *inc = memmem(p, (size_t)(end - p), "<xi:include", 11);
		const char *close;
		char href[128], *sub = NULL;
		size_t sub_len = 0;

		/* Registers written inline before the include come first. */
		err = gdbstub_layout_parse(&gs->lay, p, (size_t)((inc ? inc : end) - p));
		if (err || !inc)
			break;
		close = memchr(inc, '>', (size_t)(end - inc));
		if (!close || xml_attr(inc, close, "href", href, sizeof(href)) ||
		    strchr(href, ':') || strchr(href, ',')) {
			err = -EPROTO;
			break;
		}
		err = xfer_read(gs, href, &sub, &sub_len, timeout_ms);
		if (!err)
			err = gdbstub_layout_parse(&gs->lay, sub, sub_len);
		free(sub);
		if (err)
			break;
		p = close + 1;
	}
	free(xml);
	if (err)
		return err;
	if (gs->lay.rip_off < 0 || gs->lay.cs_off < 0 || gs->lay.cr3_off < 0 ||
	    gs->lay.rip_size > 8 || gs->lay.cs_size > 8 || gs->lay.cr3_size > 8 ||
	    gs->lay.cr0_size > 8)
		return -EPROTO;
	return 0;
}

/* ---- threads ---------------------------------------------------------- */

static int cmp_ulong(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

static int learn_threads(struct gdbstub *gs, unsigned timeout_ms)
{
	const char *cmd = "qfThreadInfo";

	gs->nr_threads = 0;
	for (int rounds = 0; rounds < 4 * GDBSTUB_MAX_THREADS; rounds++) {
		int n = gdbstub_request(gs, cmd, NULL, 0, timeout_ms);
		const char *p;

		if (n < 0)
			return n;
		if (n >= 1 && gs->pkt[0] == 'l')
			break;
		if (n < 2 || gs->pkt[0] != 'm')
			return -EPROTO;
		p = gs->pkt + 1;
		while (*p) {
			const char *dot;
			char *ep;
			unsigned long tid;

			/* "p<pid>.<tid>" in multiprocess form, else "<tid>" */
			if (*p == 'p') {
				dot = strchr(p, '.');
				if (!dot)
					return -EPROTO;
				p = dot + 1;
			}
			tid = strtoul(p, &ep, 16);
			if (ep == p || (*ep && *ep != ','))
				return -EPROTO;
			if (gs->nr_threads < GDBSTUB_MAX_THREADS && tid > 0)
				gs->tids[gs->nr_threads++] = tid;
			p = *ep ? ep + 1 : ep;
		}
		cmd = "qsThreadInfo";
	}
	if (!gs->nr_threads)
		return -EPROTO;
	qsort(gs->tids, gs->nr_threads, sizeof(gs->tids[0]), cmp_ulong);
	return 0;
}

/* ---- public ------------------------------------------------------------- */

/* The handshake on a connected gs->fd; 0 or -errno, *step names the
 * request that failed. */
static int gs_handshake(struct gdbstub *gs, unsigned timeout_ms, const char **step)
{
	int err;

	*step = "qSupported";
	err = gdbstub_request(gs, "qSupported:xmlRegisters=i386", NULL, 0, timeout_ms);
	if (err < 0)
		return err;
	if (strstr(gs->pkt, "QStartNoAckMode+")) {
		*step = "QStartNoAckMode";
		err = gdbstub_request(gs, "QStartNoAckMode", NULL, 0, timeout_ms);
		if (err < 0)
			return err;
		if (!strcmp(gs->pkt, "OK"))
			gs->noack = 1;
	}
	*step = "target description (qXfer:features:read)";
	err = learn_layout(gs, timeout_ms);
	if (err)
		return err;
	*step = "thread list (qfThreadInfo)";
	err = learn_threads(gs, timeout_ms);
	if (err)
		return err;
	*step = "physical memory mode";
	err = gdbstub_request(gs, "Qqemu.PhyMemMode:1", NULL, 0, timeout_ms);
	if (err < 0)
		return err;
	gs->has_phys = err > 0 && !strcmp(gs->pkt, "OK");
	return 0;
}

struct gdbstub *gdbstub_open_fd(int fd, unsigned timeout_ms, const char **why)
{
	struct gdbstub *gs = calloc(1, sizeof(*gs));
	const char *step = "connect";
	int err = -ENOMEM;

	if (!gs)
		goto fail;
	gs->fd = fd;
	/*
	 * The guest's owner may resume it while we talk (a monitor "cont"
	 * between QEMU's stop on our connection and the last answer): a
	 * request that reaches a running guest only stops it (a stop reply
	 * says so) and is never answered.  Then let late answers arrive and
	 * drop them, and start again with the guest stopped, a few times.
	 */
	gs->opening = 1;
	for (int attempt = 0;; attempt++) {
		int stops = gs->stops_seen;

		err = gs_handshake(gs, timeout_ms, &step);
		if (err != -ETIMEDOUT || gs->stops_seen == stops || attempt == 3)
			break;
		gs->restarts++;
		tx_begin(gs);
		tx_interrupt(gs);
		if (tx_flush(gs))
			break;
		while (rx_packet(gs, clk_now_ns() + 300 * 1000000ll) >= 0)
			;
	}
	gs->opening = 0;
	if (!err)
		return gs;
	free(gs);
fail:
	close(fd);
	if (why)
		*why = step;
	errno = err == -ENODATA ? EPROTO : -err;
	return NULL;
}

struct gdbstub *gdbstub_open(const char *addr, unsigned timeout_ms, const char **why)
{
	int fd = -EINVAL;

	if (!strncmp(addr, "unix:", 5))
		fd = unixsock_connect(addr + 5, timeout_ms);
	if (fd < 0) {
		if (why)
			*why = "connect";
		errno = -fd;
		return NULL;
	}
	return gdbstub_open_fd(fd, timeout_ms, why);
}

void gdbstub_close(struct gdbstub *gs)
{
	if (!gs)
		return;
	if (gs->fd >= 0)
		close(gs->fd);
	free(gs);
}

unsigned gdbstub_nr_threads(const struct gdbstub *gs)
{
	return gs->nr_threads;
}

int gdbstub_has_phys(const struct gdbstub *gs)
{
	return gs->has_phys;
}

int gdbstub_handshake_restarts(const struct gdbstub *gs)
{
	return gs->restarts;
}

int gdbstub_fd(const struct gdbstub *gs)
{
	return gs->fd;
}

int gdbstub_drain(struct gdbstub *gs)
{
	int stops = 0;

	for (;;) {
		int n = rx_packet(gs, 0);

		if (n == -ETIMEDOUT)
			return stops;
		if (n < 0)
			return n;
		if (n > 0 && is_stop_reply(gs->pkt))
			stops++;
		else if (n > 0 && is_exit_reply(gs->pkt))
			return -ESHUTDOWN;
	}
}

int gdbstub_interrupt(struct gdbstub *gs, unsigned timeout_ms)
{
	int64_t deadline;
	int err = gdbstub_drain(gs);

	if (err < 0)
		return err;
	if (err > 0)
		return -EALREADY;	/* stopped by someone else meanwhile */
	tx_begin(gs);
	tx_interrupt(gs);
	err = tx_flush(gs);
	if (err)
		return err;
	deadline = clk_now_ns() + (int64_t)timeout_ms * 1000000;
	for (;;) {
		int n = rx_packet(gs, deadline);

		if (n < 0)
			return n;
		if (n > 0 && is_stop_reply(gs->pkt))
			return 0;
		if (n > 0 && is_exit_reply(gs->pkt))
			return -ESHUTDOWN;
	}
}

#define GS_SAMPLE_TIMEOUT_MS	2000

static int parse_le_hex(const char *hex, size_t hex_len, int off, int size, uint64_t *out)
{
	uint64_t v = 0;

	if (off < 0 || size <= 0 || size > 8 || (size_t)(off + size) * 2 > hex_len)
		return -EPROTO;
	for (int i = size - 1; i >= 0; i--) {
		int hi = hex_val((unsigned char)hex[(off + i) * 2]);
		int lo = hex_val((unsigned char)hex[(off + i) * 2 + 1]);

		/* "xx" marks an unavailable register: read as 0. */
		if (hi < 0 || lo < 0) {
			if (hex[(off + i) * 2] != 'x')
				return -EPROTO;
			hi = lo = 0;
		}
		v = v << 8 | (uint64_t)(hi << 4 | lo);
	}
	*out = v;
	return 0;
}

static int parse_regs(const struct gdbstub *gs, size_t n, struct gdbstub_regs *r)
{
	uint64_t cs = 0;
	int err;

	if (n > 0 && gs->pkt[0] == 'E')
		return -EIO;
	err = parse_le_hex(gs->pkt, n, gs->lay.rip_off, gs->lay.rip_size, &r->rip);
	if (!err)
		err = parse_le_hex(gs->pkt, n, gs->lay.cr3_off, gs->lay.cr3_size, &r->cr3);
	if (!err)
		err = parse_le_hex(gs->pkt, n, gs->lay.cs_off, gs->lay.cs_size, &cs);
	r->cr0 = 1;
	if (!err && gs->lay.cr0_off >= 0)
		err = parse_le_hex(gs->pkt, n, gs->lay.cr0_off, gs->lay.cr0_size, &r->cr0);
	r->cs = (uint32_t)cs;
	r->rsp = r->rbp = 0;
	if (!err && gs->lay.rsp_off >= 0)
		err = parse_le_hex(gs->pkt, n, gs->lay.rsp_off, gs->lay.rsp_size, &r->rsp);
	if (!err && gs->lay.rbp_off >= 0)
		err = parse_le_hex(gs->pkt, n, gs->lay.rbp_off, gs->lay.rbp_size, &r->rbp);
	return err;
}

static int parse_mem(const struct gdbstub *gs, size_t n, uint8_t *buf, size_t len)
{
	if (n > 0 && gs->pkt[0] == 'E')
		return -EIO;
	if (n != 2 * len)
		return -EPROTO;
	for (size_t i = 0; i < len; i++) {
		int hi = hex_val((unsigned char)gs->pkt[2 * i]);
		int lo = hex_val((unsigned char)gs->pkt[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EPROTO;
		buf[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

/* "m<pa>,<len>" into cmd (at least 36 bytes). */
static const char *mem_cmd(char *cmd, uint64_t pa, size_t len)
{
	char *p = put_hex(cmd + 1, pa);

	cmd[0] = 'm';
	*p++ = ',';
	*put_hex(p, len) = '\0';
	return cmd;
}

/* Queues the reads of gdbstub_sample(); returns the number of memory
 * chunks requested or -errno. */
static int queue_reads(struct gdbstub *gs, unsigned n, uint64_t pa, size_t len, int merr)
{
	char cmd[64];
	int chunks = 0, err;

	/* Spelt without snprintf: a tick's few packets are most of what
	 * it runs, and the formatter would be most of that. */
	for (unsigned i = 0; i < n; i++) {
		cmd[0] = 'H';
		cmd[1] = 'g';
		*put_hex(cmd + 2, gs->tids[i]) = '\0';
		err = tx_packet(gs, cmd);
		if (!err)
			err = tx_packet(gs, "g");
		if (err)
			return err;
	}
	if (len && !merr) {
		for (size_t off = 0; off < len; off += GS_MEM_CHUNK, chunks++) {
			size_t l = len - off < GS_MEM_CHUNK ? len - off : GS_MEM_CHUNK;

			err = tx_packet(gs, mem_cmd(cmd, pa + off, l));
			if (err)
				return err;
		}
	}
	/* the words go with register reads only (not gdbstub_read_phys()) */
	for (unsigned i = 0; n && i < gs->nr_words; i++) {
		gs->word_err[i] = -ENOENT;
		if (!gs->word_pa[i])
			continue;
		err = tx_packet(gs, mem_cmd(cmd, gs->word_pa[i], 8));
		if (err)
			return err;
	}
	return chunks;
}

/* The words queue_reads() asks for with n register reads. */
static int words_asked(const struct gdbstub *gs, unsigned n)
{
	int k = 0;

	for (unsigned i = 0; n && i < gs->nr_words; i++)
		k += gs->word_pa[i] != 0;
	return k;
}

int gdbstub_set_words(struct gdbstub *gs, const uint64_t *pa, unsigned n)
{
	if (n > GDBSTUB_MAX_THREADS)
		return -EINVAL;
	if (gs->batch_open)
		return -EBUSY;	/* its answers are counted with these */
	if (n && !gs->has_phys)
		return -ENOTSUP;
	for (unsigned i = 0; i < n; i++) {
		gs->word_pa[i] = pa[i];
		gs->word_err[i] = -ENOENT;
	}
	gs->nr_words = n;
	return 0;
}

int gdbstub_word(const struct gdbstub *gs, unsigned i, uint64_t *v)
{
	if (i >= gs->nr_words)
		return -ENOENT;
	*v = gs->word[i];
	return gs->word_err[i];
}

/*
 * The next answer of the batch in flight, into gs->pkt.  The marker's
 * answer ("QC...", only ever first) is not one of the owed answers: it sets
 * *marker and the one after it is read.
 */
static int batch_reply(struct gdbstub *gs, int64_t deadline, int *marker)
{
	for (;;) {
		int r = rx_reply(gs, deadline);

		if (r < 0)
			return r;
		if (gs->marker_open && !strncmp(gs->pkt, "QC", 2)) {
			gs->marker_open = 0;
			*marker = 1;
			continue;
		}
		gs->marker_open = 0;
		gs->owed--;
		return r;
	}
}

/* The answers to the words queue_reads() asked for, in order. */
static int read_words(struct gdbstub *gs, int64_t deadline, int *marker)
{
	for (unsigned i = 0; i < gs->nr_words; i++) {
		uint8_t b[8];
		int r;

		if (!gs->word_pa[i])
			continue;
		r = batch_reply(gs, deadline, marker);
		if (r < 0)
			return r;
		gs->word_err[i] = (int8_t)parse_mem(gs, (size_t)r, b, sizeof(b));
		if (!gs->word_err[i])
			gs->word[i] = (uint64_t)b[0] | (uint64_t)b[1] << 8 | (uint64_t)b[2] << 16 |
				      (uint64_t)b[3] << 24 | (uint64_t)b[4] << 32 |
				      (uint64_t)b[5] << 40 | (uint64_t)b[6] << 48 |
				      (uint64_t)b[7] << 56;
	}
	return 0;
}

/* Reads the answers to queue_reads() in order; all of them, even after a
 * bad one, so the stream stays in step.  On -ETIMEDOUT, gs->owed says how
 * many are still to come. */
static int read_replies(struct gdbstub *gs, struct gdbstub_regs *regs, unsigned n,
			void *buf, size_t len, int chunks, int *mem_err, int *marker)
{
	int64_t deadline = clk_now_ns() + GS_SAMPLE_TIMEOUT_MS * 1000000ll;
	int err = 0, ignored = 0;

	gs->owed = (int)(2 * n) + chunks + words_asked(gs, n);
	gs->marker_open = marker != NULL;
	if (!marker)
		marker = &ignored;
	for (unsigned i = 0; i < n; i++) {
		int r = batch_reply(gs, deadline, marker);

		if (r < 0)
			return r;
		if (strcmp(gs->pkt, "OK") && !err)
			err = -EPROTO;
		r = batch_reply(gs, deadline, marker);
		if (r < 0)
			return r;
		if (!err)
			err = parse_regs(gs, (size_t)r, &regs[i]);
	}
	for (int c = 0; c < chunks; c++) {
		size_t off = (size_t)c * GS_MEM_CHUNK;
		size_t l = len - off < GS_MEM_CHUNK ? len - off : GS_MEM_CHUNK;
		int r = batch_reply(gs, deadline, marker);

		if (r < 0)
			return r;
		if (!*mem_err)
			*mem_err = parse_mem(gs, (size_t)r, (uint8_t *)buf + off, l);
	}
	if (n) {
		int r = read_words(gs, deadline, marker);

		if (r < 0)
			return r;
	}
	return err;
}

int gdbstub_catch_up(struct gdbstub *gs, unsigned timeout_ms, int *marker)
{
	int64_t deadline = clk_now_ns() + (int64_t)timeout_ms * 1000000;

	*marker = 0;
	while (gs->owed > 0) {
		int r = batch_reply(gs, deadline, marker);

		if (r < 0)
			return r;
	}
	gs->marker_open = 0;
	return 0;
}

static int check_mem(const struct gdbstub *gs, uint64_t pa, size_t len)
{
	if (len && !gs->has_phys)
		return -ENOTSUP;
	if (len > 64 * 1024 || (len && pa + len < pa))
		return -EINVAL;
	return 0;
}

int gdbstub_sample(struct gdbstub *gs, struct gdbstub_regs *regs, unsigned nr,
		   uint64_t pa, void *buf, size_t len, int *mem_err)
{
	unsigned n = nr < gs->nr_threads ? nr : gs->nr_threads;
	int merr = check_mem(gs, pa, len), chunks, err;

	tx_begin(gs);
	chunks = queue_reads(gs, n, pa, len, merr);
	if (chunks < 0)
		return chunks;
	err = tx_flush(gs);
	if (err)
		return err;
	err = read_replies(gs, regs, n, buf, len, chunks, &merr, NULL);
	if (mem_err)
		*mem_err = merr;
	return err;
}

int gdbstub_stop_sample_send(struct gdbstub *gs, unsigned nr, uint64_t pa, size_t len,
			     int resume)
{
	unsigned n = nr < gs->nr_threads ? nr : gs->nr_threads;
	int merr = check_mem(gs, pa, len), chunks, err;

	gs->batch_open = 0;
	if (!n)
		return -EINVAL;
	err = gdbstub_drain(gs);
	if (err < 0)
		return err;
	if (err > 0)
		return -EALREADY;
	/*
	 * The batch opens with a marker packet, "qC".  A running guest is
	 * stopped by its "$" (QEMU 7.2 takes any byte reaching a running
	 * guest for a stop request and drops that byte), so the rest of it
	 * is noise to QEMU and gets no answer; a guest that was not running
	 * answers it.  The "\x03" after it is then noise either way.
	 */
	tx_begin(gs);
	err = tx_packet(gs, "qC");
	if (err)
		return err;
	gs->tx[gs->tx_len++] = 0x03;
	chunks = queue_reads(gs, n, pa, len, merr);
	if (chunks < 0)
		return chunks;
	if (resume) {
		err = tx_packet(gs, "c");
		if (err)
			return err;
	}
	/* QEMU stops the VM while handling "\x03", announces it with a stop
	 * reply, and only then reads on: a stop reply before the answers
	 * means the guest ran and was stopped for them. */
	gs->batch_stops = gs->stops_seen;
	err = tx_flush(gs);
	if (err)
		return err;
	gs->batch_open = 1;
	gs->batch_n = n;
	gs->batch_len = len;
	gs->batch_chunks = chunks;
	gs->batch_merr = merr;
	return 0;
}

/* The answers to the open batch; try: they are expected in the socket
 * already (read it before waiting). */
static int batch_recv(struct gdbstub *gs, struct gdbstub_regs *regs, void *buf, int try,
		      int *mem_err, int *stopped)
{
	int merr = gs->batch_merr, marker = 0, err;

	*stopped = 0;
	if (!gs->batch_open)
		return -EINVAL;
	gs->batch_open = 0;
	gs->rx_try = try;
	err = read_replies(gs, regs, gs->batch_n, buf, gs->batch_len, gs->batch_chunks,
			   &merr, &marker);
	gs->rx_try = 0;
	if (err == -ETIMEDOUT && gs->marker_open)
		*stopped = -1;	/* not known yet: gdbstub_catch_up() tells */
	else if (!marker)
		*stopped = gs->stops_seen != gs->batch_stops;
	else if (gs->stops_seen != gs->batch_stops)
		*stopped = 2;	/* paused by someone else meanwhile */
	if (mem_err)
		*mem_err = merr;
	return err;
}

int gdbstub_stop_sample_recv(struct gdbstub *gs, struct gdbstub_regs *regs, void *buf,
			     int *mem_err, int *stopped)
{
	return batch_recv(gs, regs, buf, 1, mem_err, stopped);
}

int gdbstub_stop_sample(struct gdbstub *gs, struct gdbstub_regs *regs, unsigned nr,
			uint64_t pa, void *buf, size_t len, int resume, int *mem_err,
			int *stopped)
{
	int err = gdbstub_stop_sample_send(gs, nr, pa, len, resume);

	*stopped = 0;
	if (err)
		return err;
	return batch_recv(gs, regs, buf, 0, mem_err, stopped);
}

unsigned long gdbstub_waits(const struct gdbstub *gs)
{
	return gs->waits;
}

int gdbstub_read_regs(struct gdbstub *gs, unsigned vcpu, struct gdbstub_regs *out)
{
	char cmd[32];
	int n;

	if (vcpu >= gs->nr_threads)
		return -EINVAL;
	snprintf(cmd, sizeof(cmd), "Hg%lx", gs->tids[vcpu]);
	n = gdbstub_request(gs, cmd, NULL, 0, GS_SAMPLE_TIMEOUT_MS);
	if (n < 0)
		return n;
	if (strcmp(gs->pkt, "OK"))
		return -EPROTO;
	n = gdbstub_request(gs, "g", NULL, 0, GS_SAMPLE_TIMEOUT_MS);
	if (n < 0)
		return n;
	return parse_regs(gs, (size_t)n, out);
}

int gdbstub_read_phys(struct gdbstub *gs, uint64_t pa, void *buf, size_t len)
{
	int merr = 0, err;

	if (!gs->has_phys)
		return -ENOTSUP;
	if (!len)
		return 0;
	err = gdbstub_sample(gs, NULL, 0, pa, buf, len, &merr);
	return err ? err : merr;
}

int gdbstub_continue(struct gdbstub *gs)
{
	int err;

	/*
	 * "++" first: the guest's owner may have resumed it since we stopped
	 * it (a monitor "cont"), and the "$" of a bare "c" reaching a running
	 * guest would only stop it, for good.  The first "+" acks the reply
	 * QEMU may keep for a resend (it ignores other bytes then, "$" aside),
	 * the second stops a running guest, the "c" resumes it; a stopped
	 * guest takes both as noise.  The stop reply a running guest sends
	 * then reads, next tick, as someone else's pause: the probe finds it
	 * running.  Acks nothing owed after it (see above).
	 */
	tx_begin(gs);
	gs->tx[gs->tx_len++] = '+';
	gs->tx[gs->tx_len++] = '+';
	err = tx_packet(gs, "c");
	return err ? err : tx_flush(gs);
}

/* The signal number of stop reply p ("T05thread:...", "S05"), or -1. */
static int stop_signal(const char *p)
{
	int hi = hex_val((unsigned char)p[1]), lo = hi < 0 ? -1 : hex_val((unsigned char)p[2]);

	return lo < 0 ? -1 : hi * 16 + lo;
}

/*
 * "Hc" and "s" in one write: QEMU answers the "Hc" (OK, or an error, and
 * then steps the vCPU it stepped before), resumes the guest with that vCPU
 * in single-step mode, and stops it again after one instruction.  Under
 * TCG, turning single-step on and off makes QEMU drop all its translated
 * code, which is why the sampler sends it.
 */
int gdbstub_step(struct gdbstub *gs, unsigned vcpu, unsigned timeout_ms, int *sig)
{
	int64_t deadline = clk_now_ns() + (int64_t)timeout_ms * 1000000;
	char cmd[32];
	int n;

	if (vcpu >= gs->nr_threads)
		return -EINVAL;
	snprintf(cmd, sizeof(cmd), "Hc%lx", gs->tids[vcpu]);
	tx_begin(gs);
	n = tx_packet(gs, cmd);
	if (!n)
		n = tx_packet(gs, "s");
	if (!n)
		n = tx_flush(gs);
	if (n)
		return n;
	n = rx_reply(gs, deadline);		/* the "Hc"'s: OK or Exx */
	if (n < 0)
		return n;
	for (;;) {
		n = rx_packet(gs, deadline);
		if (n < 0)
			return n;
		if (n > 0 && is_exit_reply(gs->pkt))
			return -ESHUTDOWN;
		if (n > 0 && is_stop_reply(gs->pkt)) {
			*sig = stop_signal(gs->pkt);
			return 0;
		}
	}
}

int gdbstub_wait_read(struct gdbstub *gs, unsigned timeout_ms)
{
	int64_t deadline = clk_now_ns() + (int64_t)timeout_ms * 1000000;
	struct timespec pause = { .tv_nsec = 200000 };

	for (;;) {
		int queued = 0;

		/* A unix stream socket's SIOCOUTQ counts the bytes the peer has
		 * not read yet. */
		if (ioctl(gs->fd, SIOCOUTQ, &queued) < 0)
			return -errno;
		if (queued == 0)
			return 0;
		if (clk_now_ns() >= deadline)
			return -ETIMEDOUT;
		nanosleep(&pause, NULL);
	}
}

int gdbstub_settle(struct gdbstub *gs, unsigned timeout_ms)
{
	int64_t deadline = clk_now_ns() + (int64_t)timeout_ms * 1000000;
	int stops = 0, err;

	tx_begin(gs);
	err = tx_packet(gs, "qC");
	if (!err)
		err = tx_flush(gs);
	if (err)
		return err;
	for (;;) {
		int n = rx_packet(gs, deadline);

		if (n == -ETIMEDOUT)
			return stops ? 1 : -ETIMEDOUT;
		if (n < 0)
			return n;
		if (n > 0 && is_stop_reply(gs->pkt))
			stops++;
		else if (n > 0 && is_exit_reply(gs->pkt))
			return -ESHUTDOWN;
		else if (!strncmp(gs->pkt, "QC", 2))
			return stops > 0;
	}
}
