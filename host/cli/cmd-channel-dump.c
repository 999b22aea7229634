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
#include "host/collect/decoder.h"
#include "host/collect/gstate.h"
#include "lib/log.h"
#include "lib/util.h"

static volatile sig_atomic_t stop;

struct dump {
	FILE *out;
	bool json;
	uint64_t count;		/* 0: no limit */
	uint64_t printed;
	/* scratch for escaped strings: 4 output bytes per input byte */
	char esc[OPVM_PATH_MAX * 4 + 1];
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
			o += sprintf(o, "\\x%02x", c);
		} else {
			*o++ = (char)c;
		}
	}
	*o = '\0';
	return dp->esc;
}

/* A fixed-size guest string field, up to its first NUL. */
#define ESC_FIELD(dp, f) esc(dp, (f), decoder_strnlen((f), sizeof(f)))

static void hex_id(char *out, const uint8_t *id, size_t n)
{
	if (!n) {
		strcpy(out, "-");
		return;
	}
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", id[i]);
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

static void js_str(json_t *o, const char *k, const char *escaped)
{
	json_object_set_new(o, k, json_string(escaped));
}

/* ---- one record --------------------------------------------------------- */

/* HELLO's switch-ring tail, as sent (the decoder checked it separately and
 * counts a refused one in switch_refused). */
static void print_hello_switch(struct dump *dp, const struct opvm_rec_hdr *rec,
			       size_t len, json_t *o)
{
	struct opvm_hello_switch sw;

	if (len < sizeof(struct opvm_rec_hello) + sizeof(sw))
		return;
	memcpy(&sw, (const char *)rec + sizeof(struct opvm_rec_hello), sizeof(sw));
	if (o) {
		js_hex(o, "switch_pa", le64toh(sw.switch_pa));
		js_u64(o, "switch_stride", le32toh(sw.switch_stride));
		js_u64(o, "switch_entries", le32toh(sw.switch_entries));
		js_u64(o, "tsc_khz", le32toh(sw.tsc_khz));
		return;
	}
	fprintf(dp->out, " switch_pa=0x%" PRIx64 " switch_stride=%" PRIu32
		" switch_entries=%" PRIu32 " tsc_khz=%" PRIu32,
		le64toh(sw.switch_pa), le32toh(sw.switch_stride),
		le32toh(sw.switch_entries), le32toh(sw.tsc_khz));
}

/*
 * Prints one record in text or JSON form, relying on what the decoder
 * guarantees its callback (host/collect/decoder.h): lengths checked, HELLO whole.
 */
static void print_record(const struct opvm_rec_hdr *rec, size_t len, void *arg)
{
	struct dump *dp = arg;
	unsigned type = le16toh(rec->type);
	uint32_t seq = le32toh(rec->seq);
	const char *name = decoder_type_name(type);
	json_t *o = NULL;
	FILE *f = dp->out;

	if (dp->count && dp->printed >= dp->count)
		return;
	dp->printed++;
	if (dp->json) {
		o = json_object();
		if (!o)
			return;
		js_u64(o, "seq", seq);
		js_str(o, "type", name);
	} else {
		fprintf(f, "#%" PRIu32 " %s", seq, name);
	}

	switch (type) {
	case OPVM_REC_HELLO: {
		const struct opvm_rec_hello *r = (const void *)rec;
		uint32_t version = le32toh(r->version);

		/* only whole version-1 HELLOs reach us (decoder.h) */
		if (o) {
			js_u64(o, "version", version);
			js_u64(o, "cpus", le32toh(r->nr_cpus));
			js_hex(o, "slot_pa", le64toh(r->slot_pa));
			js_str(o, "release", ESC_FIELD(dp, r->release));
			js_str(o, "anchor", ESC_FIELD(dp, r->anchor_name));
			js_hex(o, "anchor_addr", le64toh(r->anchor_addr));
			js_u64(o, "slot_size", le32toh(r->slot_size));
			js_hex(o, "text", le64toh(r->text_addr));
			print_hello_switch(dp, rec, len, o);
			break;
		}
		fprintf(f, " version=%" PRIu32 " cpus=%" PRIu32 " slot_pa=0x%" PRIx64,
			version, le32toh(r->nr_cpus), le64toh(r->slot_pa));
		fprintf(f, " release=\"%s\"", ESC_FIELD(dp, r->release));
		fprintf(f, " anchor=%s@0x%" PRIx64, ESC_FIELD(dp, r->anchor_name),
			le64toh(r->anchor_addr));
		fprintf(f, " slot_size=%" PRIu32 " text=0x%" PRIx64,
			le32toh(r->slot_size), le64toh(r->text_addr));
		print_hello_switch(dp, rec, len, NULL);
		break;
	}
	case OPVM_REC_LOST: {
		const struct opvm_rec_lost *r = (const void *)rec;

		if (o)
			js_u64(o, "count", le64toh(r->count));
		else
			fprintf(f, " count=%" PRIu64, le64toh(r->count));
		break;
	}
	case OPVM_REC_PROC:
	case OPVM_REC_EXEC: {
		const struct opvm_rec_proc *r = (const void *)rec;

		if (o) {
			js_u64(o, "tgid", le32toh(r->tgid));
			js_u64(o, "ppid", le32toh(r->ppid));
			js_hex(o, "cr3", le64toh(r->cr3));
			js_hex(o, "exe", le64toh(r->exe_cookie));
			js_str(o, "comm", ESC_FIELD(dp, r->comm));
			break;
		}
		fprintf(f, " tgid=%" PRIu32 " ppid=%" PRIu32 " cr3=0x%" PRIx64
			" exe=0x%" PRIx64, le32toh(r->tgid), le32toh(r->ppid),
			le64toh(r->cr3), le64toh(r->exe_cookie));
		fprintf(f, " comm=\"%s\"", ESC_FIELD(dp, r->comm));
		break;
	}
	case OPVM_REC_PROC_EXIT:
	case OPVM_REC_THREAD_EXIT: {
		const struct opvm_rec_exit *r = (const void *)rec;
		uint32_t tid = le32toh(r->tid), tgid = le32toh(r->tgid);

		if (o) {
			js_u64(o, "tid", tid);
			js_u64(o, "tgid", tgid);
		} else if (type == OPVM_REC_PROC_EXIT && tid == tgid) {
			fprintf(f, " tgid=%" PRIu32, tgid);
		} else {
			fprintf(f, " tid=%" PRIu32 " tgid=%" PRIu32, tid, tgid);
		}
		break;
	}
	case OPVM_REC_THREAD: {
		const struct opvm_rec_thread *r = (const void *)rec;

		if (o) {
			js_u64(o, "tid", le32toh(r->tid));
			js_u64(o, "tgid", le32toh(r->tgid));
			js_str(o, "comm", ESC_FIELD(dp, r->comm));
			break;
		}
		fprintf(f, " tid=%" PRIu32 " tgid=%" PRIu32, le32toh(r->tid),
			le32toh(r->tgid));
		fprintf(f, " comm=\"%s\"", ESC_FIELD(dp, r->comm));
		break;
	}
	case OPVM_REC_COOKIE: {
		const struct opvm_rec_cookie *r = (const void *)rec;
		char bid[2 * OPVM_BUILD_ID_MAX + 1];
		size_t plen = le16toh(r->path_len);

		hex_id(bid, r->build_id, r->build_id_len);
		if (o) {
			js_hex(o, "id", le64toh(r->cookie));
			js_str(o, "build_id", r->build_id_len ? bid : "");
			js_str(o, "path", esc(dp, r + 1, plen));
			break;
		}
		fprintf(f, " id=0x%" PRIx64 " build_id=%s", le64toh(r->cookie), bid);
		fprintf(f, " path=\"%s\"", esc(dp, r + 1, plen));
		break;
	}
	case OPVM_REC_MMAP: {
		const struct opvm_rec_mmap *r = (const void *)rec;
		uint32_t prot = le32toh(r->prot);

		if (o) {
			js_u64(o, "tgid", le32toh(r->tgid));
			js_hex(o, "start", le64toh(r->start));
			js_hex(o, "end", le64toh(r->end));
			js_hex(o, "pgoff", le64toh(r->pgoff));
			js_hex(o, "cookie", le64toh(r->cookie));
			js_hex(o, "prot", prot);
			break;
		}
		fprintf(f, " tgid=%" PRIu32 " start=0x%" PRIx64 " end=0x%" PRIx64
			" pgoff=0x%" PRIx64 " cookie=0x%" PRIx64 " prot=%c%c%c",
			le32toh(r->tgid), le64toh(r->start), le64toh(r->end),
			le64toh(r->pgoff), le64toh(r->cookie),
			prot & 1 ? 'r' : '-', prot & 2 ? 'w' : '-',
			prot & 4 ? 'x' : '-');
		break;
	}
	case OPVM_REC_MUNMAP: {
		const struct opvm_rec_munmap *r = (const void *)rec;

		if (o) {
			js_u64(o, "tgid", le32toh(r->tgid));
			js_hex(o, "start", le64toh(r->start));
			js_hex(o, "end", le64toh(r->end));
			break;
		}
		fprintf(f, " tgid=%" PRIu32 " start=0x%" PRIx64 " end=0x%" PRIx64,
			le32toh(r->tgid), le64toh(r->start), le64toh(r->end));
		break;
	}
	case OPVM_REC_MODULE:
	case OPVM_REC_MODULE_FREE: {
		const struct opvm_rec_module *r = (const void *)rec;

		if (o) {
			js_str(o, "name", ESC_FIELD(dp, r->name));
			js_hex(o, "base", le64toh(r->base));
			js_hex(o, "size", le64toh(r->size));
			break;
		}
		fprintf(f, " name=\"%s\"", ESC_FIELD(dp, r->name));
		fprintf(f, " base=0x%" PRIx64 " size=0x%" PRIx64,
			le64toh(r->base), le64toh(r->size));
		break;
	}
	case OPVM_REC_SYNC: {
		const struct opvm_rec_sync *r = (const void *)rec;

		if (o) {
			js_u64(o, "procs", le64toh(r->nr_procs));
			js_u64(o, "modules", le64toh(r->nr_modules));
			break;
		}
		fprintf(f, " procs=%" PRIu64 " modules=%" PRIu64,
			le64toh(r->nr_procs), le64toh(r->nr_modules));
		break;
	}
	default:
		if (o) {
			js_u64(o, "type_code", type);
			js_u64(o, "len", len);
		} else {
			fprintf(f, " type=%u len=%zu", type, len);
		}
		break;
	}

	if (o) {
		json_dumpf(o, f, JSON_COMPACT | JSON_PRESERVE_ORDER);
		json_decref(o);
	}
	fputc('\n', f);
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

static void usage(FILE *f)
{
	fprintf(f,
		"usage: opvm channel-dump [options] SOCKET|FILE|-\n"
		"\n"
		"Decodes the opvm guest channel (port \"" OPVM_PORT_NAME "\") and prints one\n"
		"line per record: '#SEQ TYPE field=value ...'.  SOCKET is the unix socket of\n"
		"the guest's virtserialport chardev (QEMU: -chardev socket,server=on,path=...;\n"
		"libvirt: <channel type='unix'>); only one client can be connected at a time,\n"
		"so stop 'opvm attach' first.  FILE is a saved stream (--raw-out); - is stdin.\n"
		"\n"
		"  -f, --follow         sockets: reconnect when the guest side closes; files:\n"
		"                       wait for more data at the end (like tail -f).\n"
		"                       Without it, a socket is read until EOF or Ctrl-C.\n"
		"  -n, --count N        stop after N records\n"
		"      --raw-out FILE   also save every byte read to FILE\n"
		"      --json           one JSON object per record\n"
		"      --stats          print decoder statistics on stdout at the end\n"
		"                       (they always go to stderr)\n"
		"  -h, --help           this text\n");
}

int cmd_channel_dump(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "follow",  no_argument,       NULL, 'f' },
		{ "count",   required_argument, NULL, 'n' },
		{ "raw-out", required_argument, NULL, 'r' },
		{ "json",    no_argument,       NULL, 'j' },
		{ "stats",   no_argument,       NULL, 's' },
		{ "help",    no_argument,       NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	bool follow = false, stats_out = false, json = false;
	const char *raw_path = NULL, *src;
	enum src_kind kind;
	struct dump *dp = NULL;
	struct gstate *gs = NULL;
	struct decoder *d = NULL;
	const struct decoder_stats *st;
	FILE *raw = NULL;
	uint8_t buf[65536];
	int fd = -1, c, ret = 1;
	struct stat sb;
	char *end;
	unsigned long long cnt = 0;

	optind = 0;	/* 0: a full reset (main() parsed its own options with "+") */
	while ((c = getopt_long(argc, argv, "+fn:h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			follow = true;
			break;
		case 'n':
			errno = 0;
			cnt = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-') {
				pr_err("--count wants a number of records, not '%s'", optarg);
				return 2;
			}
			break;
		case 'r':
			raw_path = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 's':
			stats_out = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc) {
		pr_err("channel-dump reads one SOCKET, FILE or - (stdin)");
		usage(stderr);
		return 2;
	}
	src = argv[optind];

	dp = calloc(1, sizeof(*dp));
	if (!dp) {
		pr_err("out of memory");
		return 1;
	}
	dp->out = stdout;
	dp->count = cnt;
	dp->json = json;

	if (!strcmp(src, "-")) {
		kind = SRC_STDIN;
		fd = STDIN_FILENO;
	} else if (stat(src, &sb) < 0) {
		pr_err("cannot read '%s': %s; give the guest channel's unix socket "
		       "or a file saved with --raw-out", src, strerror(errno));
		goto out_free;
	} else if (S_ISSOCK(sb.st_mode)) {
		kind = SRC_SOCKET;
		fd = util_connect_unix(src);
		if (fd < 0 && !follow) {
			pr_err("cannot connect to '%s': %s; is the guest running, and "
			       "no other opvm connected to it?", src, strerror(-fd));
			goto out_free;
		}
	} else {
		kind = SRC_FILE;
		fd = open(src, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			pr_err("cannot open '%s': %s", src, strerror(errno));
			goto out_free;
		}
	}
	if (raw_path) {
		raw = fopen(raw_path, "wbe");
		if (!raw) {
			pr_err("cannot create '%s': %s", raw_path, strerror(errno));
			goto out_close;
		}
	}
	gs = gstate_new(NULL);
	d = gs ? decoder_new(gs) : NULL;
	if (!d) {
		pr_err("out of memory");
		goto out_close;
	}
	decoder_set_record_fn(d, print_record, dp);
	st = decoder_get_stats(d);
	if (follow || kind == SRC_SOCKET)
		setvbuf(stdout, NULL, _IOLBF, 0);

	/* A Ctrl-C must interrupt a blocking read (no SA_RESTART). */
	util_stop_on_signals(&stop);

	ret = 0;
	while (!stop && !(dp->count && dp->printed >= dp->count)) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;
		int pr;

		if (fd < 0) {	/* socket, following: (re)connect */
			fd = util_connect_unix(src);
			if (fd < 0) {
				nap_ms(500);
				continue;
			}
		}
		pr = poll(&pfd, 1, 500);
		if (pr < 0 && errno != EINTR) {
			pr_err("poll on '%s': %s", src, strerror(errno));
			ret = 1;
			break;
		}
		if (pr <= 0)
			continue;
		n = read(fd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			if (kind == SRC_SOCKET && follow && errno == ECONNRESET)
				n = 0;	/* the guest side went away: reconnect */
			else {
				pr_err("read from '%s': %s", src, strerror(errno));
				ret = 1;
				break;
			}
		}
		if (n == 0) {
			if (!follow)
				break;
			if (kind == SRC_SOCKET) {
				close(fd);
				fd = -1;
				/* a partial record cannot be completed by
				 * the next connection */
				decoder_reset(d);
			} else {
				nap_ms(200);
			}
			continue;
		}
		if (raw && fwrite(buf, 1, (size_t)n, raw) != (size_t)n) {
			pr_err("writing '%s': %s", raw_path, strerror(errno));
			ret = 1;
			break;
		}
		if (decoder_feed(d, buf, (size_t)n) < 0) {
			pr_err("decoder failed: out of memory");
			ret = 1;
			break;
		}
	}
	fflush(stdout);
	if (raw && fflush(raw)) {
		pr_err("writing '%s': %s", raw_path, strerror(errno));
		ret = 1;
	}

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
	if (stats_out)
		print_stats(stdout, st, dp->json);

out_close:
	if (raw)
		fclose(raw);
	if (fd >= 0 && fd != STDIN_FILENO)
		close(fd);
	decoder_free(d);
	gstate_free(gs);
out_free:
	free(dp);
	return ret;
}
