// SPDX-License-Identifier: MIT
/*
 * The channel record table and framer (lib/channel.c): the table covers
 * every record type of opvm_proto.h with fields inside their struct, body
 * checks refuse each lie a COOKIE can tell, and the framer frames the same
 * records however the stream is split, and channel-dump's printer shows
 * HELLO's optional tail from the same table.  The decoder's behaviour on
 * top of them is test-decoder's.
 */
#include <endian.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "host/cli/commands.h"
#include "lib/channel.h"

static void test_table_complete(void **state)
{
	for (unsigned type = OPVM_REC_HELLO; type < OPVM_REC_TYPE_MAX; type++) {
		const struct chan_rec_type *t = chan_rec_type(type);
		uint8_t used[OPVM_REC_MAX] = { 0 };

		assert_non_null(t);
		assert_string_equal(chan_type_name(type), t->name);
		assert_true(t->size >= sizeof(struct opvm_rec_hdr));
		assert_int_equal(t->size % OPVM_REC_ALIGN, 0);
		assert_true(t->min_len <= t->size);
		assert_int_equal(chan_type_min_len(type), t->min_len);
		assert_true(t->nr_fields > 0);
		for (unsigned i = 0; i < t->nr_fields; i++) {
			const struct chan_field *f = &t->fields[i];

			assert_non_null(f->name);
			if (f->kind == CHAN_F_TAIL) {
				/* the tail starts right after the fixed part */
				assert_int_equal(f->off, t->size);
				assert_int_equal(t->fields[f->count].kind, CHAN_F_LEN);
				continue;
			}
			assert_true(f->off >= sizeof(struct opvm_rec_hdr));
			if (f->flags & CHAN_F_OPTIONAL)
				assert_true(f->off >= t->size &&
					    f->off + f->size <= OPVM_REC_MAX);
			else
				assert_true(f->off + f->size <= t->size);
			if (f->kind == CHAN_F_BYTES)
				assert_int_equal(t->fields[f->count].kind, CHAN_F_LEN);
			if (f->kind != CHAN_F_STR && f->kind != CHAN_F_BYTES)
				assert_true(f->size == 1 || f->size == 2 ||
					    f->size == 4 || f->size == 8);
			/* no two fields share a byte */
			for (unsigned b = f->off; b < f->off + f->size; b++)
				assert_int_equal(used[b]++, 0);
		}
	}
	assert_null(chan_rec_type(0));
	assert_null(chan_rec_type(OPVM_REC_TYPE_MAX));
	assert_string_equal(chan_type_name(999), "UNKNOWN");
	assert_int_equal(chan_type_min_len(999), 0);
	assert_int_equal(chan_type_min_len(OPVM_REC_HELLO), 24);
	assert_int_equal(chan_type_min_len(OPVM_REC_MMAP), sizeof(struct opvm_rec_mmap));
	assert_int_equal(chan_strnlen("abc\0def", 7), 3);
	assert_int_equal(chan_strnlen("abcdefgh", 4), 4);
}

static size_t cookie(uint8_t *buf, uint64_t id, uint8_t bid_len, uint16_t path_len,
		     size_t len)
{
	struct opvm_rec_cookie c = { 0 };

	c.hdr.magic = htole16(OPVM_PROTO_MAGIC);
	c.hdr.type = htole16(OPVM_REC_COOKIE);
	c.hdr.len = htole32((uint32_t)len);
	c.cookie = htole64(id);
	c.build_id_len = bid_len;
	c.path_len = htole16(path_len);
	memset(buf, 'p', len);
	memcpy(buf, &c, sizeof(c));
	return len;
}

static void test_check_cookie(void **state)
{
	_Alignas(8) uint8_t buf[OPVM_REC_MAX];

	assert_true(chan_rec_check(buf, cookie(buf, 7, 20, 8, 72)));
	assert_true(chan_rec_check(buf, cookie(buf, 7, 32, 4096, 64 + 4096)));
	assert_false(chan_rec_check(buf, cookie(buf, 0, 20, 8, 72)));	 /* id 0 */
	assert_false(chan_rec_check(buf, cookie(buf, 7, 33, 8, 72)));	 /* build-id */
	assert_false(chan_rec_check(buf, cookie(buf, 7, 20, 9, 72)));	 /* tail */
	assert_false(chan_rec_check(buf, cookie(buf, 7, 20, 4097, 8192))); /* max */
	assert_false(chan_rec_check(buf, cookie(buf, 7, 20, 0, 56)));	 /* short */
	/* an unknown type has no table entry to check against */
	((struct opvm_rec_hdr *)buf)->type = htole16(200);
	assert_false(chan_rec_check(buf, 72));
}

struct seen {
	unsigned n;
	uint32_t seq[64];
};

static void on_frame(const uint8_t *rec, const struct chan_hdr *h, void *arg)
{
	struct seen *s = arg;

	if (s->n < 64)
		s->seq[s->n] = h->seq;
	s->n++;
}

static void test_framer_splits(void **state)
{
	_Alignas(8) uint8_t stream[8 * 24 + 5];
	static struct chan_framer f;
	struct seen whole = { 0 }, bytes = { 0 };
	size_t off = 0;

	/* garbage, then eight LOST records */
	memcpy(stream, "xOVyz", 5);
	off = 5;
	for (uint32_t i = 0; i < 8; i++) {
		struct opvm_rec_lost r = { 0 };

		r.hdr.magic = htole16(OPVM_PROTO_MAGIC);
		r.hdr.type = htole16(OPVM_REC_LOST);
		r.hdr.len = htole32(sizeof(r));
		r.hdr.seq = htole32(i);
		memcpy(stream + off, &r, sizeof(r));
		off += sizeof(r);
	}
	chan_framer_init(&f);
	chan_framer_feed(&f, stream, off, on_frame, &whole);
	assert_int_equal(whole.n, 8);
	assert_int_equal(f.st.skipped_bytes, 5);
	assert_int_equal(f.st.resyncs, 1);
	assert_int_equal(f.st.bytes, off);

	chan_framer_init(&f);
	for (size_t i = 0; i < off; i++)
		chan_framer_feed(&f, stream + i, 1, on_frame, &bytes);
	assert_int_equal(bytes.n, 8);
	assert_memory_equal(whole.seq, bytes.seq, 8 * sizeof(uint32_t));
	assert_int_equal(f.st.skipped_bytes, 5);
	assert_true(f.st.buffered_peak <= sizeof(struct opvm_rec_lost));

	/* half a record, then a reset: counted as skipped, never framed */
	chan_framer_feed(&f, stream + 5, 10, on_frame, &bytes);
	assert_int_equal(f.have, 10);
	chan_framer_reset(&f);
	assert_int_equal(f.have, 0);
	assert_int_equal(f.st.skipped_bytes, 15);
	assert_int_equal(bytes.n, 8);
}

/* HELLO's optional switch-ring tail is printed when the record carries it,
 * and only then (channel-dump's printer, driven by the same table). */
static void test_print_hello_tail(void **state)
{
	_Alignas(8) uint8_t buf[sizeof(struct opvm_rec_hello) +
				sizeof(struct opvm_hello_switch)] = { 0 };
	struct opvm_rec_hello h = { 0 };
	struct opvm_hello_switch sw = { 0 };
	char *out = NULL;
	size_t n = 0;
	FILE *f;

	h.hdr.magic = htole16(OPVM_PROTO_MAGIC);
	h.hdr.type = htole16(OPVM_REC_HELLO);
	h.hdr.len = htole32(sizeof(buf));
	h.version = htole32(OPVM_PROTO_VERSION);
	h.nr_cpus = htole32(2);
	h.slot_size = htole32(sizeof(struct opvm_slot));
	strcpy(h.anchor_name, "printk");
	sw.switch_pa = htole64(0x5000);
	sw.switch_stride = htole32(1344);
	sw.switch_entries = htole32(32);
	sw.tsc_khz = htole32(2000000);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &sw, sizeof(sw));
	assert_true(chan_rec_check(buf, sizeof(buf)));

	f = open_memstream(&out, &n);
	assert_non_null(f);
	channel_dump_record(f, false, (void *)buf, sizeof(buf));
	channel_dump_record(f, false, (void *)buf, sizeof(h));
	channel_dump_record(f, true, (void *)buf, sizeof(buf));
	fclose(f);
	assert_non_null(strstr(out, " text=0x0 switch_pa=0x5000 switch_stride=1344 "
			       "switch_entries=32 tsc_khz=2000000\n#0 HELLO "));
	assert_non_null(strstr(out, " text=0x0\n{"));	/* no tail: none */
	assert_non_null(strstr(out, "\"switch_pa\":\"0x5000\",\"switch_stride\":1344,"
			       "\"switch_entries\":32,\"tsc_khz\":2000000}"));
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_complete),
		cmocka_unit_test(test_check_cookie),
		cmocka_unit_test(test_framer_splits),
		cmocka_unit_test(test_print_hello_tail),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
