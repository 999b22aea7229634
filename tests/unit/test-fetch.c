// SPDX-License-Identifier: MIT
/*
 * What the guest sends for reports (host/collect/fetch.c): KSYMS records
 * become kallsyms text lines (hostile names made single printable tokens,
 * lying lengths and non-text entries refused and counted, the output
 * bounded), a transfer lands in <guest>/kallsyms (0600) only at KSYMS_END
 * or at the end of the session, a HELLO abandons an open transfer, and the
 * file reads back through symbols/ksyms like a System.map.
 */
#include <endian.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/collect/fetch.h"
#include "lib/channel.h"
#include "symbols/ksyms.h"

struct krec {
	_Alignas(8) uint8_t buf[OPVM_REC_MAX];
	size_t used;		/* bytes of entries */
	uint32_t nr;
};

static void krec_init(struct krec *k)
{
	memset(k, 0, sizeof(*k));
}

static void krec_add(struct krec *k, uint64_t addr, char type, const char *name, int nlen)
{
	uint8_t *p = k->buf + sizeof(struct opvm_rec_ksyms) + k->used;
	uint64_t le = htole64(addr);
	size_t n = strlen(name);

	memcpy(p, &le, 8);
	p[8] = (uint8_t)type;
	p[9] = (uint8_t)(nlen >= 0 ? nlen : (int)n);
	memcpy(p + 10, name, n);
	k->used += 10 + n;
	k->nr++;
}

/* Finishes the record; returns its length. */
static size_t krec_done(struct krec *k, const char *module)
{
	struct opvm_rec_ksyms *r = (void *)k->buf;
	size_t len = (sizeof(*r) + k->used + 7) & ~(size_t)7;

	r->hdr.magic = htole16(OPVM_PROTO_MAGIC);
	r->hdr.type = htole16(OPVM_REC_KSYMS);
	r->hdr.len = htole32((uint32_t)len);
	r->nr = htole32(k->nr);
	r->bytes = htole16((uint16_t)k->used);
	strncpy(r->module, module, sizeof(r->module));
	return len;
}

static void test_text(void **state)
{
	struct krec k;
	char out[4096];
	uint64_t ok, bad, capped;
	size_t len, n;

	krec_init(&k);
	krec_add(&k, 0xffffffff81000000, 'T', "_text", -1);
	krec_add(&k, 0xffffffff81001000, 't', "a b\t\x1b[x]", -1);
	krec_add(&k, 0, 'T', "hidden", -1);		/* kptr_restrict */
	krec_add(&k, 0xffffffff81002000, 'D', "data", -1);	/* not text */
	krec_add(&k, 0xffffffff81003000, 'W', "weak", -1);
	len = krec_done(&k, "mod ]x");
	assert_true(chan_rec_check(k.buf, len));
	n = fetch_ksyms_text(k.buf, len, out, sizeof(out), &ok, &bad, &capped);
	out[n] = '\0';
	assert_int_equal(ok, 3);
	assert_int_equal(bad, 2);
	assert_int_equal(capped, 0);
	assert_string_equal(out,
		"ffffffff81000000 T _text\t[mod??x]\n"
		"ffffffff81001000 t a?b???x?\t[mod??x]\n"
		"ffffffff81003000 W weak\t[mod??x]\n");

	/* a short buffer: whole lines only, the rest counted */
	n = fetch_ksyms_text(k.buf, len, out, 40, &ok, &bad, &capped);
	assert_int_equal(ok, 1);
	assert_int_equal(capped, 2);
	assert_true(n <= 40);

	/* a name length that runs past the entries ends the record */
	krec_init(&k);
	krec_add(&k, 0xffffffff81000000, 'T', "_text", -1);
	krec_add(&k, 0xffffffff81000010, 'T', "x", 100);
	len = krec_done(&k, "");
	n = fetch_ksyms_text(k.buf, len, out, sizeof(out), &ok, &bad, &capped);
	assert_int_equal(ok, 1);
	assert_int_equal(bad, 1);
	out[n] = '\0';
	assert_string_equal(out, "ffffffff81000000 T _text\n");
}

static void put_end(const char *dir, struct fetch *f, uint64_t nr)
{
	struct opvm_rec_ksyms_end e = { 0 };

	(void)dir;
	e.hdr.magic = htole16(OPVM_PROTO_MAGIC);
	e.hdr.type = htole16(OPVM_REC_KSYMS_END);
	e.hdr.len = htole32(sizeof(e));
	e.nr_syms = htole64(nr);
	fetch_record(f, &e.hdr, sizeof(e));
}

static void put_hello(struct fetch *f)
{
	struct opvm_rec_hello h = { 0 };

	h.hdr.magic = htole16(OPVM_PROTO_MAGIC);
	h.hdr.type = htole16(OPVM_REC_HELLO);
	h.hdr.len = htole32(sizeof(h));
	fetch_record(f, &h.hdr, sizeof(h));
}

static void test_transfer(void **state)
{
	char dir[] = "/tmp/test-fetch.XXXXXX", path[256], part[256], err[128];
	struct fetch *f;
	struct ksyms *ks;
	struct stat sb;
	struct krec k;
	size_t len;
	uint64_t a;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/kallsyms", dir);
	snprintf(part, sizeof(part), "%s/kallsyms.part", dir);
	f = fetch_new(dir);
	assert_non_null(f);

	krec_init(&k);
	krec_add(&k, 0xffffffff81000000, 'T', "_text", -1);
	krec_add(&k, 0xffffffff81000100, 'T', "printk", -1);
	len = krec_done(&k, "");
	fetch_record(f, (void *)k.buf, len);
	assert_int_equal(stat(path, &sb), -1);		/* not before the end */
	assert_int_equal(stat(part, &sb), 0);
	put_hello(f);					/* a new stream: dropped */
	assert_int_equal(stat(part, &sb), -1);

	fetch_record(f, (void *)k.buf, len);
	krec_init(&k);
	krec_add(&k, 0xffffffffc0200000, 't', "port_fops_write", -1);
	len = krec_done(&k, "virtio_console");
	fetch_record(f, (void *)k.buf, len);
	put_end(dir, f, 3);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_int_equal(fetch_get_stats(f)->ksyms_syms, 3);
	assert_int_equal(fetch_get_stats(f)->ksyms_done, 1);
	assert_int_equal(fetch_get_stats(f)->ksyms_end_mismatch, 0);
	put_end(dir, f, 5);	/* an END with nothing open, a wrong count */
	assert_int_equal(fetch_get_stats(f)->ksyms_end_mismatch, 1);

	ks = ksyms_open(path, err, sizeof(err));
	assert_non_null(ks);
	assert_int_equal(ksyms_addr(ks, "printk", &a), 0);
	assert_int_equal(a, 0xffffffff81000100);
	assert_int_equal(ksyms_nr(ks), 2);	/* module symbols are the .ko's */
	ksyms_free(ks);

	/* a session that ends mid-transfer keeps what came */
	unlink(path);
	fetch_record(f, (void *)k.buf, len);
	fetch_free(f);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(stat(part, &sb), -1);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_transfer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
