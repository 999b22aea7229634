// SPDX-License-Identifier: MIT
/*
 * The channel record table and framer (lib/channel.h).  docs/protocol.md is
 * the specification; guest-kmod/opvm_proto.h the layout this table is
 * written from.
 *
 * Framer state machine (one loop in chan_framer_feed()):
 *   - collect a 16-byte header;
 *   - check its framing (magic, length bounds, length vs type); if it is
 *     implausible, framing is lost: drop one byte, then skip to the next
 *     byte that could start a magic (resync), counting what was skipped;
 *   - collect hdr.len bytes, hand the record out, start over.
 * A framed record whose body turns out bad is skipped by its length (work
 * stays linear in the input; a guest able to frame a record could as well
 * have sent a valid one).
 */
#include <endian.h>
#include <stddef.h>
#include <string.h>

#include "lib/array.h"
#include "lib/channel.h"

/* The wire layout is fixed: any change here is a protocol change. */
_Static_assert(sizeof(struct opvm_rec_hdr) == 16, "opvm_rec_hdr is 16 bytes");
_Static_assert(sizeof(struct opvm_slot) == 24, "opvm_slot is 24 bytes");
_Static_assert(sizeof(struct opvm_rec_hello) == 192, "opvm_rec_hello is 192 bytes");
_Static_assert(sizeof(struct opvm_rec_lost) == 24, "opvm_rec_lost is 24 bytes");
_Static_assert(sizeof(struct opvm_rec_proc) == 56, "opvm_rec_proc is 56 bytes");
_Static_assert(sizeof(struct opvm_rec_exit) == 24, "opvm_rec_exit is 24 bytes");
_Static_assert(sizeof(struct opvm_rec_thread) == 40, "opvm_rec_thread is 40 bytes");
_Static_assert(sizeof(struct opvm_rec_cookie) == 64, "opvm_rec_cookie is 64 bytes");
_Static_assert(sizeof(struct opvm_rec_mmap) == 56, "opvm_rec_mmap is 56 bytes");
_Static_assert(sizeof(struct opvm_rec_munmap) == 40, "opvm_rec_munmap is 40 bytes");
_Static_assert(sizeof(struct opvm_hello_switch) == 24, "opvm_hello_switch is 24 bytes");
_Static_assert(sizeof(struct opvm_switch_ring_hdr) == 32, "opvm_switch_ring_hdr is 32 bytes");
_Static_assert(sizeof(struct opvm_switch) == 40, "opvm_switch is 40 bytes");
_Static_assert(sizeof(struct opvm_rec_module) == 88, "opvm_rec_module is 88 bytes");
_Static_assert(sizeof(struct opvm_rec_sync) == 32, "opvm_rec_sync is 32 bytes");
_Static_assert(sizeof(struct opvm_rec_ksyms) == 80, "opvm_rec_ksyms is 80 bytes");
_Static_assert(sizeof(struct opvm_rec_ksyms_end) == 32, "opvm_rec_ksyms_end is 32 bytes");
_Static_assert(sizeof(struct opvm_rec_file_data) == 32, "opvm_rec_file_data is 32 bytes");
_Static_assert(sizeof(struct opvm_rec_file_end) == 32, "opvm_rec_file_end is 32 bytes");
_Static_assert(sizeof(struct opvm_rec_cgroup) == 32, "opvm_rec_cgroup is 32 bytes");
_Static_assert(sizeof(struct opvm_req_fetch) == 72, "opvm_req_fetch is 72 bytes");
_Static_assert(sizeof(struct opvm_req_ksyms) == sizeof(struct opvm_req_fetch),
	       "opvm_req_ksyms is framed by relays that predate it");
_Static_assert(sizeof(struct opvm_req_hello) == sizeof(struct opvm_req_fetch),
	       "opvm_req_hello is framed by relays that predate it");
_Static_assert(OPVM_REC_MAX % OPVM_REC_ALIGN == 0, "OPVM_REC_MAX aligned");
_Static_assert(sizeof(struct opvm_rec_cookie) + OPVM_PATH_MAX <= OPVM_REC_MAX,
	       "a maximal cookie fits in a record");
_Static_assert(OPVM_REC_MAX <= UINT16_MAX, "field offsets fit in 16 bits");

#define HDR_LEN		sizeof(struct opvm_rec_hdr)
/* Bytes of HELLO needed to read its version (header + version + nr_cpus). */
#define HELLO_MIN_LEN	(HDR_LEN + 8)
/* The magic's bytes on the wire (little-endian "OV": 'O', 'V'). */
#define MAGIC_B0	(OPVM_PROTO_MAGIC & 0xff)
#define MAGIC_B1	(OPVM_PROTO_MAGIC >> 8)

/* ---- record table ---------------------------------------------------------- */

/* One field of struct S: its offset and size come from the header itself. */
#define FLD(S, m, key, k, fl)						\
	{ .name = (key), .off = offsetof(struct S, m),			\
	  .size = sizeof(((struct S *)0)->m), .kind = (k), .flags = (fl) }
#define FLEN(S, m, mx)							\
	{ .name = #m, .off = offsetof(struct S, m),			\
	  .size = sizeof(((struct S *)0)->m), .kind = CHAN_F_LEN, .max = (mx) }
#define FREF(S, m, key, k, idx)						\
	{ .name = (key), .off = offsetof(struct S, m),			\
	  .size = sizeof(((struct S *)0)->m), .kind = (k), .count = (idx) }
/* A field of HELLO's optional switch-ring tail, which follows the fixed
 * part when hdr.len covers it (opvm_proto.h). */
#define FSW(m, key, k)							\
	{ .name = (key),						\
	  .off = sizeof(struct opvm_rec_hello) +			\
		 offsetof(struct opvm_hello_switch, m),			\
	  .size = sizeof(((struct opvm_hello_switch *)0)->m), .kind = (k), \
	  .flags = CHAN_F_OPTIONAL }

static const struct chan_field hello_fields[] = {
	FLD(opvm_rec_hello, version, "version", CHAN_F_U32, 0),
	FLD(opvm_rec_hello, nr_cpus, "cpus", CHAN_F_U32, 0),
	FLD(opvm_rec_hello, slot_pa, "slot_pa", CHAN_F_X64, 0),
	FLD(opvm_rec_hello, release, "release", CHAN_F_STR, 0),
	FLD(opvm_rec_hello, anchor_name, "anchor", CHAN_F_STR, CHAN_F_TEXT_BARE),
	FLD(opvm_rec_hello, anchor_addr, "anchor_addr", CHAN_F_X64, CHAN_F_TEXT_AT),
	FLD(opvm_rec_hello, slot_size, "slot_size", CHAN_F_U32, 0),
	FLD(opvm_rec_hello, text_addr, "text", CHAN_F_X64, 0),
	FSW(switch_pa, "switch_pa", CHAN_F_X64),
	FSW(switch_stride, "switch_stride", CHAN_F_U32),
	FSW(switch_entries, "switch_entries", CHAN_F_U32),
	FSW(tsc_khz, "tsc_khz", CHAN_F_U32),
};

static const struct chan_field lost_fields[] = {
	FLD(opvm_rec_lost, count, "count", CHAN_F_U64, 0),
};

static const struct chan_field proc_fields[] = {
	FLD(opvm_rec_proc, tgid, "tgid", CHAN_F_U32, 0),
	FLD(opvm_rec_proc, ppid, "ppid", CHAN_F_U32, 0),
	FLD(opvm_rec_proc, cr3, "cr3", CHAN_F_X64, 0),
	FLD(opvm_rec_proc, exe_cookie, "exe", CHAN_F_X64, 0),
	FLD(opvm_rec_proc, comm, "comm", CHAN_F_STR, 0),
};

/* PROC_EXIT is sent with tid == tgid: text shows the tgid alone then. */
static const struct chan_field proc_exit_fields[] = {
	FLD(opvm_rec_exit, tid, "tid", CHAN_F_U32, CHAN_F_TEXT_SAME),
	FLD(opvm_rec_exit, tgid, "tgid", CHAN_F_U32, 0),
};

static const struct chan_field thread_exit_fields[] = {
	FLD(opvm_rec_exit, tid, "tid", CHAN_F_U32, 0),
	FLD(opvm_rec_exit, tgid, "tgid", CHAN_F_U32, 0),
};

static const struct chan_field thread_fields[] = {
	FLD(opvm_rec_thread, tid, "tid", CHAN_F_U32, 0),
	FLD(opvm_rec_thread, tgid, "tgid", CHAN_F_U32, 0),
	FLD(opvm_rec_thread, comm, "comm", CHAN_F_STR, 0),
};

static const struct chan_field cookie_fields[] = {
	FLD(opvm_rec_cookie, cookie, "id", CHAN_F_X64, CHAN_F_NONZERO),
	FREF(opvm_rec_cookie, build_id, "build_id", CHAN_F_BYTES, 3),
	{ .name = "path", .off = sizeof(struct opvm_rec_cookie),
	  .kind = CHAN_F_TAIL, .count = 4 },
	FLEN(opvm_rec_cookie, build_id_len, OPVM_BUILD_ID_MAX),
	FLEN(opvm_rec_cookie, path_len, OPVM_PATH_MAX),
};

static const struct chan_field mmap_fields[] = {
	FLD(opvm_rec_mmap, tgid, "tgid", CHAN_F_U32, 0),
	FLD(opvm_rec_mmap, start, "start", CHAN_F_X64, 0),
	FLD(opvm_rec_mmap, end, "end", CHAN_F_X64, 0),
	FLD(opvm_rec_mmap, pgoff, "pgoff", CHAN_F_X64, 0),
	FLD(opvm_rec_mmap, cookie, "cookie", CHAN_F_X64, 0),
	FLD(opvm_rec_mmap, prot, "prot", CHAN_F_PROT, 0),
};

static const struct chan_field munmap_fields[] = {
	FLD(opvm_rec_munmap, tgid, "tgid", CHAN_F_U32, 0),
	FLD(opvm_rec_munmap, start, "start", CHAN_F_X64, 0),
	FLD(opvm_rec_munmap, end, "end", CHAN_F_X64, 0),
};

static const struct chan_field module_fields[] = {
	FLD(opvm_rec_module, name, "name", CHAN_F_STR, 0),
	FLD(opvm_rec_module, base, "base", CHAN_F_X64, 0),
	FLD(opvm_rec_module, size, "size", CHAN_F_X64, 0),
};

static const struct chan_field sync_fields[] = {
	FLD(opvm_rec_sync, nr_procs, "procs", CHAN_F_U64, 0),
	FLD(opvm_rec_sync, nr_modules, "modules", CHAN_F_U64, 0),
};

/* The entries are binary: channel-dump prints them escaped, in full. */
static const struct chan_field ksyms_fields[] = {
	FLD(opvm_rec_ksyms, module, "module", CHAN_F_STR, 0),
	FLD(opvm_rec_ksyms, nr, "nr", CHAN_F_U32, 0),
	{ .name = "entries", .off = sizeof(struct opvm_rec_ksyms),
	  .kind = CHAN_F_TAIL, .count = 3 },
	FLEN(opvm_rec_ksyms, bytes, OPVM_REC_MAX - sizeof(struct opvm_rec_ksyms)),
};

static const struct chan_field ksyms_end_fields[] = {
	FLD(opvm_rec_ksyms_end, nr_syms, "syms", CHAN_F_U64, 0),
	FLD(opvm_rec_ksyms_end, flags, "flags", CHAN_F_U32, 0),
};

static const struct chan_field file_data_fields[] = {
	FLD(opvm_rec_file_data, req_id, "req", CHAN_F_U32, CHAN_F_NONZERO),
	FLD(opvm_rec_file_data, offset, "offset", CHAN_F_U64, 0),
	{ .name = "data", .off = sizeof(struct opvm_rec_file_data),
	  .kind = CHAN_F_TAIL, .count = 3 },
	FLEN(opvm_rec_file_data, bytes, OPVM_REC_MAX - sizeof(struct opvm_rec_file_data)),
};

static const struct chan_field file_end_fields[] = {
	FLD(opvm_rec_file_end, req_id, "req", CHAN_F_U32, CHAN_F_NONZERO),
	FLD(opvm_rec_file_end, status, "status", CHAN_F_U32, 0),
	FLD(opvm_rec_file_end, size, "size", CHAN_F_U64, 0),
};

static const struct chan_field cgroup_fields[] = {
	FLD(opvm_rec_cgroup, tgid, "tgid", CHAN_F_U32, 0),
	FLD(opvm_rec_cgroup, id, "id", CHAN_F_U64, 0),
	{ .name = "path", .off = sizeof(struct opvm_rec_cgroup),
	  .kind = CHAN_F_TAIL, .count = 4 },
	FLD(opvm_rec_cgroup, flags, "flags", CHAN_F_U32, 0),
	FLEN(opvm_rec_cgroup, path_len, OPVM_CGROUP_PATH_MAX),
};

#define REC_MIN(T, S, min, f)						\
	[OPVM_REC_##T] = { .name = #T, .size = sizeof(struct S),	\
			   .min_len = (min), .fields = (f),		\
			   .nr_fields = ARRAY_SIZE(f) }
#define REC(T, S, f)	REC_MIN(T, S, sizeof(struct S), f)

static const struct chan_rec_type rec_types[OPVM_REC_TYPE_MAX] = {
	REC_MIN(HELLO, opvm_rec_hello, HELLO_MIN_LEN, hello_fields),
	REC(LOST, opvm_rec_lost, lost_fields),
	REC(PROC, opvm_rec_proc, proc_fields),
	REC(EXEC, opvm_rec_proc, proc_fields),
	REC(PROC_EXIT, opvm_rec_exit, proc_exit_fields),
	REC(THREAD, opvm_rec_thread, thread_fields),
	REC(THREAD_EXIT, opvm_rec_exit, thread_exit_fields),
	REC(COOKIE, opvm_rec_cookie, cookie_fields),
	REC(MMAP, opvm_rec_mmap, mmap_fields),
	REC(MUNMAP, opvm_rec_munmap, munmap_fields),
	REC(MODULE, opvm_rec_module, module_fields),
	REC(MODULE_FREE, opvm_rec_module, module_fields),
	REC(SYNC, opvm_rec_sync, sync_fields),
	REC(KSYMS, opvm_rec_ksyms, ksyms_fields),
	REC(KSYMS_END, opvm_rec_ksyms_end, ksyms_end_fields),
	REC(FILE_DATA, opvm_rec_file_data, file_data_fields),
	REC(FILE_END, opvm_rec_file_end, file_end_fields),
	REC(CGROUP, opvm_rec_cgroup, cgroup_fields),
};

const struct chan_rec_type *chan_rec_type(unsigned type)
{
	return type < OPVM_REC_TYPE_MAX && rec_types[type].name ?
	       &rec_types[type] : NULL;
}

const char *chan_type_name(unsigned type)
{
	const struct chan_rec_type *t = chan_rec_type(type);

	return t ? t->name : "UNKNOWN";
}

size_t chan_type_min_len(unsigned type)
{
	const struct chan_rec_type *t = chan_rec_type(type);

	return t ? t->min_len : 0;
}

size_t chan_strnlen(const char *s, size_t max)
{
	const char *nul = memchr(s, 0, max);

	return nul ? (size_t)(nul - s) : max;
}

uint64_t chan_field_num(const void *rec, const struct chan_field *f)
{
	const uint8_t *p = (const uint8_t *)rec + f->off;
	uint16_t v16;
	uint32_t v32;
	uint64_t v64;

	switch (f->size) {
	case 1:
		return *p;
	case 2:
		memcpy(&v16, p, 2);
		return le16toh(v16);
	case 4:
		memcpy(&v32, p, 4);
		return le32toh(v32);
	case 8:
		memcpy(&v64, p, 8);
		return le64toh(v64);
	default:
		return 0;
	}
}

bool chan_field_present(const struct chan_field *f, size_t len)
{
	return !(f->flags & CHAN_F_OPTIONAL) || (size_t)f->off + f->size <= len;
}

bool chan_rec_check(const void *rec, size_t len)
{
	const struct opvm_rec_hdr *h = rec;
	const struct chan_rec_type *t = chan_rec_type(le16toh(h->type));

	if (!t || len < t->size)
		return false;
	for (unsigned i = 0; i < t->nr_fields; i++) {
		const struct chan_field *f = &t->fields[i];

		if (!chan_field_present(f, len))
			continue;
		if (f->kind == CHAN_F_LEN && chan_field_num(rec, f) > f->max)
			return false;
		if ((f->flags & CHAN_F_NONZERO) && !chan_field_num(rec, f))
			return false;
		/* LEN fields were checked against their max above or will
		 * be below; a TAIL must also end inside the record */
		if (f->kind == CHAN_F_TAIL &&
		    f->off + chan_field_num(rec, &t->fields[f->count]) > len)
			return false;
	}
	return true;
}

/* ---- framer ------------------------------------------------------------------ */

void chan_framer_init(struct chan_framer *f)
{
	memset(f, 0, offsetof(struct chan_framer, buf));
}

void chan_framer_reset(struct chan_framer *f)
{
	/* A partial record from the old connection can never complete. */
	f->st.skipped_bytes += f->have;
	f->have = 0;
	f->lost_sync = false;
}

static void hdr_read(const uint8_t *p, struct chan_hdr *h, uint16_t *magic)
{
	struct opvm_rec_hdr raw;

	memcpy(&raw, p, sizeof(raw));
	*magic = le16toh(raw.magic);
	h->type = le16toh(raw.type);
	h->len = le32toh(raw.len);
	h->seq = le32toh(raw.seq);
}

/* Framing check on a complete header (lenient: see struct chan_framer). */
static bool hdr_plausible(const struct chan_framer *f, const uint8_t *p,
			  struct chan_hdr *h)
{
	uint16_t magic;
	size_t min;

	hdr_read(p, h, &magic);
	if (magic != OPVM_PROTO_MAGIC)
		return false;
	if (h->len < HDR_LEN || h->len > OPVM_REC_MAX ||
	    h->len % OPVM_REC_ALIGN)
		return false;
	min = chan_type_min_len(h->type);
	if (min && h->len < min && (!f->lenient || h->type == OPVM_REC_HELLO))
		return false;
	return true;
}

/* Drop buf[0..n) (n <= have), keeping the rest at the start of buf. */
static void buf_consume(struct chan_framer *f, size_t n)
{
	f->have -= n;
	if (f->have)
		memmove(f->buf, f->buf + n, f->have);
}

/*
 * Framing is lost at buf[0]: drop that byte and everything up to the next
 * byte that may start a magic.  Only called with have <= HDR_LEN, so the
 * work per dropped byte is constant.
 */
static void lose_sync(struct chan_framer *f)
{
	const uint8_t *m;
	size_t skip;

	if (!f->lost_sync) {
		f->lost_sync = true;
		f->st.resyncs++;
	}
	m = f->have > 1 ? memchr(f->buf + 1, MAGIC_B0, f->have - 1) : NULL;
	skip = m ? (size_t)(m - f->buf) : f->have;
	f->st.skipped_bytes += skip;
	buf_consume(f, skip);
}

/* Move up to want - have bytes from the input into buf (want never exceeds
 * OPVM_REC_MAX).  Returns true when buf holds at least want bytes. */
static bool buf_fill(struct chan_framer *f, size_t want, const uint8_t **in,
		     size_t *left)
{
	size_t n;

	if (f->have >= want)	/* a header is already held */
		return true;
	n = want - f->have;
	if (n > *left)
		n = *left;
	memcpy(f->buf + f->have, *in, n);
	f->have += n;
	*in += n;
	*left -= n;
	if (f->have > f->st.buffered_peak)
		f->st.buffered_peak = f->have;
	return f->have == want;
}

void chan_framer_feed(struct chan_framer *f, const void *data, size_t len,
		      chan_frame_fn fn, void *arg)
{
	const uint8_t *in = data;
	size_t left = len;
	struct chan_hdr h;

	if (!len)
		return;		/* data may be NULL then */
	f->st.bytes += len;
	for (;;) {
		/* While lost with nothing buffered, skip input quickly. */
		if (f->lost_sync && !f->have && left) {
			const uint8_t *m = memchr(in, MAGIC_B0, left);
			size_t skip = m ? (size_t)(m - in) : left;

			f->st.skipped_bytes += skip;
			in += skip;
			left -= skip;
		}
		if (!buf_fill(f, HDR_LEN, &in, &left)) {
			/* The input is used up.  Bytes that cannot start a
			 * magic are garbage already: drop them now rather
			 * than wait for the rest of a header. */
			if ((f->have >= 1 && f->buf[0] != MAGIC_B0) ||
			    (f->have >= 2 && f->buf[1] != MAGIC_B1)) {
				lose_sync(f);
				continue;
			}
			return;
		}
		if (!hdr_plausible(f, f->buf, &h)) {
			lose_sync(f);
			continue;
		}
		f->lost_sync = false;
		if (!buf_fill(f, h.len, &in, &left))
			return;		/* left == 0: wait for the rest */
		fn(f->buf, &h, arg);
		f->have = 0;
	}
}
