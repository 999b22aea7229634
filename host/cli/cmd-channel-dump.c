// SPDX-License-Identifier: MIT
/*
 * opvm channel-dump: decode a guest channel as text, one line per record.
 *
 * Reads the bytes the guest module writes to its "org.opvm.0" port from the
 * unix socket QEMU or libvirt exposes for it, from a file (for instance one
 * saved with --raw-out), or from stdin, runs them through the same decoder
 * and guest-state model the collector uses, and prints what it understood.
 * The guest's strings are printed escaped: a hostile guest cannot drive the
 * terminal.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "host/cli/commands.h"
#include "host/cli/options.h"
#include "host/collect/decoder.h"
#include "host/collect/gstate.h"
#include "lib/log.h"
#include "lib/hex.h"
#include "lib/signals.h"
#include "lib/unixsock.h"
#include "lib/channel.h"
#include "lib/numparse.h"

static volatile sig_atomic_t stop;

struct dump {
	FILE *out;
	bool json;
	uint64_t count;		/* 0: no limit */
	uint64_t printed;
	/* scratch for escaped strings: 4 output bytes per input byte */
	char esc[OPVM_PATH_MAX * 4 + 1];
	char hex[2 * OPVM_BUILD_ID_MAX + 1];	/* a build-id in hex */
};

/* Guest bytes -> printable ASCII: \xNN for control and non-ASCII bytes,
 * backslash and double quote escaped. */
static const char *esc(struct dump *dp, const void *data, size_t n)
{
	const unsigned char *s = data;
	char *o = dp->esc;

	if (n > OPVM_PATH_MAX)
		n = OPVM_PATH_MAX;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];

		if (c == '\\' || c == '"') {
			*o++ = '\\';
			*o++ = (char)c;
		} else if (c < 0x20 || c >= 0x7f) {
			*o++ = '\\';
			*o++ = 'x';
			*o++ = "0123456789abcdef"[c >> 4];
			*o++ = "0123456789abcdef"[c & 15];
		} else {
			*o++ = (char)c;
		}
	}
	*o = '\0';
	return dp->esc;
}

static void hex_id(char *out, const uint8_t *id, size_t n)
{
	if (!n) {
		strcpy(out, "-");
		return;
	}
	hex_encode(id, n, out);
}

/* ---- JSON ----------------------------------------------------------------- */

static void js_u64(json_t *o, const char *k, uint64_t v)
{
	/* beyond 2^53 a JSON number is not exact in most readers */
	if (v <= (UINT64_C(1) << 53)) {
		json_object_set_new(o, k, json_integer((json_int_t)v));
	} else {
		char b[24];

		snprintf(b, sizeof(b), "%" PRIu64, v);
		json_object_set_new(o, k, json_string(b));
	}
}

static void js_hex(json_t *o, const char *k, uint64_t v)
{
	char b[24];

	snprintf(b, sizeof(b), "0x%" PRIx64, v);
	json_object_set_new(o, k, json_string(b));
}

/* ---- one record --------------------------------------------------------- */

/*
 * A string-like field, escaped, into dp->esc: fixed-size names up to their
 * first NUL, build-ids in hex ("" when empty, the text form shows "-"),
 * tails as their counted bytes.  The decoder has checked the counts
 * against the record (chan_rec_check()).
 */
static const char *field_str(struct dump *dp, const struct opvm_rec_hdr *rec,
			     const struct chan_rec_type *t,
			     const struct chan_field *f)
{
	const char *p = (const char *)rec + f->off;
	size_t n;

	switch (f->kind) {
	case CHAN_F_STR:
		return esc(dp, p, chan_strnlen(p, f->size));
	case CHAN_F_BYTES:
		n = chan_field_num(rec, &t->fields[f->count]);
		if (n > f->size || n > OPVM_BUILD_ID_MAX)
			n = 0;	/* cannot happen after chan_rec_check() */
		hex_id(dp->hex, (const uint8_t *)p, n);
		return dp->json && !n ? "" : dp->hex;
	default:	/* CHAN_F_TAIL */
		return esc(dp, p, chan_field_num(rec, &t->fields[f->count]));
	}
}

static void field_json(struct dump *dp, json_t *o, const struct opvm_rec_hdr *rec,
		       const struct chan_rec_type *t, const struct chan_field *f)
{
	switch (f->kind) {
	case CHAN_F_U32:
	case CHAN_F_U64:
		js_u64(o, f->name, chan_field_num(rec, f));
		break;
	case CHAN_F_X64:
	case CHAN_F_PROT:
		js_hex(o, f->name, chan_field_num(rec, f));
		break;
	case CHAN_F_LEN:
		break;
	default:
		json_object_set_new(o, f->name, json_string(field_str(dp, rec, t, f)));
		break;
	}
}

static void field_text(struct dump *dp, const struct opvm_rec_hdr *rec,
		       const struct chan_rec_type *t, unsigned i)
{
	const struct chan_field *f = &t->fields[i];
	uint64_t v = chan_field_num(rec, f);
	FILE *out = dp->out;

	if (f->flags & CHAN_F_TEXT_AT) {
		fprintf(out, "@0x%" PRIx64, v);
		return;
	}
	if ((f->flags & CHAN_F_TEXT_SAME) && i + 1 < t->nr_fields &&
	    v == chan_field_num(rec, &t->fields[i + 1]))
		return;
	switch (f->kind) {
	case CHAN_F_U32:
	case CHAN_F_U64:
		fprintf(out, " %s=%" PRIu64, f->name, v);
		break;
	case CHAN_F_X64:
		fprintf(out, " %s=0x%" PRIx64, f->name, v);
		break;
	case CHAN_F_PROT:
		fprintf(out, " %s=%c%c%c", f->name, v & 1 ? 'r' : '-',
			v & 2 ? 'w' : '-', v & 4 ? 'x' : '-');
		break;
	case CHAN_F_LEN:
		break;
	case CHAN_F_BYTES:
		fprintf(out, " %s=%s", f->name, field_str(dp, rec, t, f));
		break;
	default:
		fprintf(out, (f->flags & CHAN_F_TEXT_BARE) ? " %s=%s" : " %s=\"%s\"",
			f->name, field_str(dp, rec, t, f));
		break;
	}
}

/*
 * Prints one record in text or JSON form, field by field from the record
 * table (lib/channel.h), relying on what the decoder guarantees its
 * callback (host/collect/decoder.h): lengths checked, HELLO whole.
 */
static void print_record(const struct opvm_rec_hdr *rec, size_t len, void *arg)
{
	struct dump *dp = arg;
	unsigned type = le16toh(rec->type);
	uint32_t seq = le32toh(rec->seq);
	const struct chan_rec_type *t = chan_rec_type(type);
	json_t *o = NULL;

	if (dp->count && dp->printed >= dp->count)
		return;
	dp->printed++;
	if (dp->json) {
		o = json_object();
		if (!o)
			return;
		js_u64(o, "seq", seq);
		json_object_set_new(o, "type", json_string(chan_type_name(type)));
	} else {
		fprintf(dp->out, "#%" PRIu32 " %s", seq, chan_type_name(type));
	}
	for (unsigned i = 0; t && i < t->nr_fields; i++) {
		if (!chan_field_present(&t->fields[i], len))
			continue;
		if (o)
			field_json(dp, o, rec, t, &t->fields[i]);
		else
			field_text(dp, rec, t, i);
	}
	if (!t && o) {
		js_u64(o, "type_code", type);
		js_u64(o, "len", len);
	} else if (!t) {
		fprintf(dp->out, " type=%u len=%zu", type, len);
	}
	if (o) {
		json_dumpf(o, dp->out, JSON_COMPACT | JSON_PRESERVE_ORDER);
		json_decref(o);
	}
	fputc('\n', dp->out);
}

void channel_dump_record(FILE *out, bool json, const struct opvm_rec_hdr *rec,
			 size_t len)
{
	/* one scratch area, kept: the fuzz target prints every record */
	static struct dump *dp;

	if (!dp)
		dp = malloc(sizeof(*dp));
	if (!dp)
		return;
	memset(dp, 0, offsetof(struct dump, esc));
	dp->out = out;
	dp->json = json;
	print_record(rec, len, dp);
}

/* ---- statistics --------------------------------------------------------- */

#define STATS_FIELDS(X)							\
	X(bytes) X(records) X(bad_records) X(skipped_bytes) X(resyncs)	\
	X(seq_gaps) X(seq_backwards) X(refused) X(unknown_types)	\
	X(version_mismatch) X(ignored) X(before_hello) X(hellos)	\
	X(lost_records) X(guest_lost) X(syncs) X(buffered_peak)		\
	X(switch_refused)

static void print_stats(FILE *f, const struct decoder_stats *st, bool json)
{
	if (json) {
		json_t *o = json_object(), *s = json_object();

		if (!o || !s) {
			json_decref(o);
			json_decref(s);
			return;
		}
#define X(n) js_u64(s, #n, st->n);
		STATS_FIELDS(X)
#undef X
		json_object_set_new(o, "stats", s);
		json_dumpf(o, f, JSON_COMPACT | JSON_PRESERVE_ORDER);
		fputc('\n', f);
		json_decref(o);
		return;
	}
	fputs("STATS", f);
#define X(n) fprintf(f, " " #n "=%" PRIu64, st->n);
	STATS_FIELDS(X)
#undef X
	fputc('\n', f);
}

/* ---- input -------------------------------------------------------------- */

enum src_kind { SRC_STDIN, SRC_FILE, SRC_SOCKET };

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);	/* a signal cuts it short: fine */
}

/* What the command was asked to do, and the input it reads. */
struct dump_run {
	int follow, stats_out, json;	/* ints: option rows set them */
	unsigned long long count;
	const char *raw_path, *src;
	enum src_kind kind;
	int fd;
	FILE *raw;
};

#define DR struct dump_run
static const struct opt_def dump_options[] = {
	{ .name = "follow", .key = 'f', .help = "sockets: reconnect when the guest side "
	  "closes; files: wait for more data at the end (like tail -f).  Without it, a "
	  "socket is read until EOF or Ctrl-C.", OPT_FLAG(DR, follow) },
	{ .name = "count", .key = 'n', .metavar = "N", .help = "stop after N records",
	  OPT_UINT(DR, count, 0, UINT64_MAX), .want = "a number of records" },
	{ .name = "raw-out", .metavar = "FILE", .help = "also save every byte read to FILE",
	  OPT_STRING(DR, raw_path) },
	{ .name = "json", .help = "one JSON object per record", OPT_FLAG(DR, json) },
	{ .name = "stats", .help = "print decoder statistics on stdout at the end (they "
	  "always go to stderr)", OPT_FLAG(DR, stats_out) },
	{ 0 },
};
#undef DR

static const char dump_usage[] =
	"usage: opvm channel-dump [options] SOCKET|FILE|-\n"
	"\n"
	"Decodes the opvm guest channel (port \"" OPVM_PORT_NAME "\") and prints one\n"
	"line per record: '#SEQ TYPE field=value ...'.  SOCKET is the unix socket of\n"
	"the guest's virtserialport chardev (QEMU: -chardev socket,server=on,path=...;\n"
	"libvirt: <channel type='unix'>); only one client can be connected at a time,\n"
	"so stop 'opvm attach' first.  FILE is a saved stream (--raw-out); - is stdin.\n"
	"\n";

/* Returns -1 to go on, or the exit status. */
static int parse_args(struct dump_run *r, int argc, char **argv)
{
	const struct opt_group groups[] = { { NULL, dump_options, r }, { 0 } };
	const struct opts_cmd cmd = { .name = "channel-dump", .usage = dump_usage,
				      .groups = groups, .flags = OPTS_STOP };
	int ret = opts_parse(&cmd, argc, argv, NULL, NULL);

	if (ret)
		return ret == 1 ? 0 : 2;
	if (optind + 1 != argc) {
		log_err("channel-dump reads one SOCKET, FILE or - (stdin)");
		opts_help(stderr, &cmd);
		return 2;
	}
	r->src = argv[optind];
	return -1;
}

/* Opens the input (a socket that is not there yet is fine with --follow)
 * and the --raw-out file.  Returns 0, or -1 after printing why. */
static int src_open(struct dump_run *r)
{
	struct stat sb;

	if (!strcmp(r->src, "-")) {
		r->kind = SRC_STDIN;
		r->fd = STDIN_FILENO;
	} else if (stat(r->src, &sb) < 0) {
		log_err("cannot read '%s': %s; give the guest channel's unix socket "
			"or a file saved with --raw-out", r->src, strerror(errno));
		return -1;
	} else if (S_ISSOCK(sb.st_mode)) {
		r->kind = SRC_SOCKET;
		r->fd = unixsock_connect(r->src, UNIXSOCK_CONNECT_MS);
		if (r->fd < 0 && !r->follow) {
			log_err("cannot connect to '%s': %s; is the guest running, and "
				"no other opvm connected to it?", r->src, strerror(-r->fd));
			return -1;
		}
	} else {
		r->kind = SRC_FILE;
		r->fd = open(r->src, O_RDONLY | O_CLOEXEC);
		if (r->fd < 0) {
			log_err("cannot open '%s': %s", r->src, strerror(errno));
			return -1;
		}
	}
	if (r->raw_path) {
		r->raw = fopen(r->raw_path, "wbe");
		if (!r->raw) {
			log_err("cannot create '%s': %s", r->raw_path, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/*
 * One read from the input into the decoder (and --raw-out).  Returns 1 to
 * go on, 0 at the end of the input, -1 after printing a failure.
 */
static int dump_step(struct dump_run *r, struct decoder *d, uint8_t *buf,
		     size_t size)
{
	struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
	ssize_t n;
	int pr;

	if (r->fd < 0) {	/* socket, following: (re)connect */
		r->fd = unixsock_connect(r->src, UNIXSOCK_CONNECT_MS);
		if (r->fd < 0)
			nap_ms(500);
		return 1;
	}
	pr = poll(&pfd, 1, 500);
	if (pr < 0 && errno != EINTR) {
		log_err("poll on '%s': %s", r->src, strerror(errno));
		return -1;
	}
	if (pr <= 0)
		return 1;
	n = read(r->fd, buf, size);
	if (n < 0) {
		if (errno == EINTR || errno == EAGAIN)
			return 1;
		if (r->kind != SRC_SOCKET || !r->follow || errno != ECONNRESET) {
			log_err("read from '%s': %s", r->src, strerror(errno));
			return -1;
		}
		n = 0;	/* the guest side went away: reconnect */
	}
	if (n == 0) {
		if (!r->follow)
			return 0;
		if (r->kind == SRC_SOCKET) {
			close(r->fd);
			r->fd = -1;
			/* a partial record cannot be completed by the next
			 * connection */
			decoder_reset(d);
		} else {
			nap_ms(200);
		}
		return 1;
	}
	if (r->raw && fwrite(buf, 1, (size_t)n, r->raw) != (size_t)n) {
		log_err("writing '%s': %s", r->raw_path, strerror(errno));
		return -1;
	}
	decoder_feed(d, buf, (size_t)n);
	return 1;
}

static void print_summary(const struct decoder *d)
{
	const struct decoder_stats *st = decoder_get_stats(d);

	fprintf(stderr, "opvm: channel-dump: %" PRIu64 " bytes, %" PRIu64
		" records, %" PRIu64 " bad, %" PRIu64 " resyncs (%" PRIu64
		" bytes skipped), %" PRIu64 " seq gaps, %" PRIu64 " refused, %"
		PRIu64 " unknown, %" PRIu64 " version mismatches (%" PRIu64
		" ignored), %" PRIu64 " before HELLO, %" PRIu64
		" LOST records (%" PRIu64 " dropped by the guest)\n",
		st->bytes, st->records, st->bad_records, st->resyncs,
		st->skipped_bytes, st->seq_gaps, st->refused, st->unknown_types,
		st->version_mismatch, st->ignored, st->before_hello,
		st->lost_records, st->guest_lost);
	if (decoder_buffered(d))
		fprintf(stderr, "opvm: channel-dump: the input ended inside a "
			"record (%zu bytes held)\n", decoder_buffered(d));
}

int cmd_channel_dump(int argc, char **argv)
{
	struct dump_run r = { .fd = -1 };
	struct dump *dp = NULL;
	struct gstate *gs = NULL;
	struct decoder *d = NULL;
	uint8_t buf[65536];
	int ret = parse_args(&r, argc, argv), step;

	if (ret >= 0)
		return ret;
	ret = 1;
	dp = calloc(1, sizeof(*dp));
	if (!dp) {
		log_err("out of memory");
		return 1;
	}
	dp->out = stdout;
	dp->count = r.count;
	dp->json = r.json;
	if (src_open(&r) < 0)
		goto out;
	gs = gstate_new(NULL);
	d = gs ? decoder_new(gs) : NULL;
	if (!d) {
		log_err("out of memory");
		goto out;
	}
	decoder_set_record_fn(d, print_record, dp);
	if (r.follow || r.kind == SRC_SOCKET)
		setvbuf(stdout, NULL, _IOLBF, 0);

	/* A Ctrl-C must interrupt a blocking read (no SA_RESTART). */
	signals_stop_on(&stop);

	ret = 0;
	while (!stop && !(dp->count && dp->printed >= dp->count)) {
		step = dump_step(&r, d, buf, sizeof(buf));
		if (step <= 0) {
			ret = step < 0;
			break;
		}
	}
	fflush(stdout);
	if (r.raw && fflush(r.raw)) {
		log_err("writing '%s': %s", r.raw_path, strerror(errno));
		ret = 1;
	}
	print_summary(d);
	if (r.stats_out)
		print_stats(stdout, decoder_get_stats(d), dp->json);
out:
	if (r.raw)
		fclose(r.raw);
	if (r.fd >= 0 && r.fd != STDIN_FILENO)
		close(r.fd);
	decoder_free(d);
	gstate_free(gs);
	free(dp);
	return ret;
}
