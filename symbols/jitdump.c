// SPDX-License-Identifier: MIT
/*
 * A JIT runtime's jitdump (symbols/jitdump.h) into the perf map builder
 * (symbols/pmbuild.h): the file header checked, then records walked by
 * their sizes, loads and moves taken as entries, every other kind skipped.
 * Written from perf's jitdump specification (tools/perf/Documentation/
 * jitdump-specification.txt in the Linux tree, version 1 of the header).
 * The bytes are a guest process's: every size is checked against what is
 * left before it is used, and a code_index is only ever a key (of the
 * loads seen so far).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/jitdump.h"
#include "symbols/pmbuild.h"

enum { JD_LOAD = 0, JD_MOVE = 1, JD_DEBUG_INFO = 2, JD_CLOSE = 3, JD_UNWINDING = 4 };

#define HDR_SIZE	40	/* magic ... flags */
#define REC_SIZE	16	/* id, total_size, timestamp */
#define LOAD_FIXED	40	/* pid, tid, vma, code_addr, code_size, code_index */
#define MOVE_FIXED	48	/* pid, tid, vma, old, new, code_size, code_index */
#define EM_X86_64_ID	62

/* A load by its code_index, for the moves that name it. */
struct jd_fn {
	uint64_t index;
	const char *name;
	size_t nlen;
	const uint8_t *code;
	uint64_t size;
	int used;
};

struct jd_ctx {
	struct pmbuild *b;
	struct jitdump_stats *st;
	struct jd_fn *fn;	/* open addressing, cap a power of two */
	size_t nfn, cap;
};

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static size_t fn_slot(const struct jd_fn *t, size_t cap, uint64_t index)
{
	size_t h = (size_t)((index * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);

	while (t[h].used && t[h].index != index)
		h = (h + 1) & (cap - 1);
	return h;
}

/* Keeps f as the load of its code_index (a later load of an index
 * replaces the earlier): 0 or -ENOMEM. */
static int fn_put(struct jd_ctx *c, const struct jd_fn *f)
{
	size_t h;

	if (2 * (c->nfn + 1) > c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 256;
		struct jd_fn *t = calloc(cap, sizeof(*t));

		if (!t)
			return -ENOMEM;
		for (size_t i = 0; i < c->cap; i++)
			if (c->fn[i].used)
				t[fn_slot(t, cap, c->fn[i].index)] = c->fn[i];
		free(c->fn);
		c->fn = t;
		c->cap = cap;
	}
	h = fn_slot(c->fn, c->cap, f->index);
	c->nfn += !c->fn[h].used;
	c->fn[h] = *f;
	c->fn[h].used = 1;
	return 0;
}

/* The entry of one function at addr: taken or counted; 0 or -ENOMEM. */
static int fn_add(struct jd_ctx *c, const struct jd_fn *f, uint64_t addr)
{
	int ret;

	if (!pmbuild_range_ok(addr, f->size)) {
		c->st->bad_range++;
		return 1;
	}
	ret = pmbuild_add(c->b, addr, f->size, f->name, f->nlen, f->code);
	if (ret < 0)
		return ret;
	if (ret == PMB_CAPPED) {
		c->st->capped++;
		return 1;
	}
	c->st->fixed_names += ret == PMB_FIXED;
	return 0;
}

/* JIT_CODE_LOAD: fixed fields, the name with its NUL, then code_size
 * bytes of code, all inside the record's n bytes (p: after its header). */
static int rec_load(struct jd_ctx *c, const uint8_t *p, size_t n)
{
	struct jd_fn f = { 0 };
	const char *name = (const char *)p + LOAD_FIXED;
	const char *nul;
	uint64_t addr;
	int ret;

	nul = n > LOAD_FIXED ? memchr(name, '\0', n - LOAD_FIXED) : NULL;
	if (!nul || (size_t)(nul - name) > PERFMAP_MAX_LINE || !(nul - name)) {
		c->st->bad++;
		return 0;
	}
	addr = rd64(p + 16);
	f = (struct jd_fn){ .index = rd64(p + 32), .name = name, .nlen = (size_t)(nul - name),
			    .size = rd64(p + 24) };
	if (f.size > n - LOAD_FIXED - f.nlen - 1) {
		c->st->bad++;	/* the code does not fit the record */
		return 0;
	}
	f.code = (const uint8_t *)nul + 1;
	ret = fn_add(c, &f, addr);
	if (ret)
		return ret < 0 ? ret : 0;
	c->st->loads++;
	c->st->code_bytes += f.size;
	return fn_put(c, &f);
}

/* JIT_CODE_MOVE: the load of its code_index, now at new_code_addr. */
static int rec_move(struct jd_ctx *c, const uint8_t *p, size_t n)
{
	uint64_t index, size;
	struct jd_fn *f;
	int ret;

	if (n < MOVE_FIXED) {
		c->st->bad++;
		return 0;
	}
	size = rd64(p + 32);
	index = rd64(p + 40);
	f = c->cap ? &c->fn[fn_slot(c->fn, c->cap, index)] : NULL;
	if (!f || !f->used || f->size != size) {
		c->st->unmatched++;	/* the spec: a move follows its load,
					 * and the size does not change */
		return 0;
	}
	ret = fn_add(c, f, rd64(p + 24));
	if (ret)
		return ret < 0 ? ret : 0;
	c->st->moves++;
	return 0;
}

/* A record opvm does not use: debug info (the line tables are not read),
 * unwinding info, close, or an id the spec does not define. */
static void skip(struct jitdump_stats *st, uint32_t id)
{
	st->skipped++;
	if (id > JD_UNWINDING)
		st->unknown++;
}

/* The file header: 1 if this host reads the records after it (*at: where
 * they start). */
static int header_ok(const uint8_t *buf, size_t len, size_t *at)
{
	uint32_t size;

	if (len < HDR_SIZE || rd32(buf) != JITDUMP_MAGIC || rd32(buf + 4) != JITDUMP_VERSION ||
	    rd32(buf + 12) != EM_X86_64_ID)
		return 0;
	size = rd32(buf + 8);
	if (size < HDR_SIZE || size > JITDUMP_MAX_HEADER || size > len)
		return 0;
	*at = size;
	return 1;
}

int jitdump_take(struct pmbuild *b, const uint8_t *buf, size_t len, struct jitdump_stats *st)
{
	struct jd_ctx c = { .b = b, .st = st };
	size_t at;
	int ret = 0;

	if (!header_ok(buf, len, &at)) {
		/* a runtime still writing its header is not hostile, but
		 * nothing can be read of it either */
		st->bad_header = 1;
		return 0;
	}
	while (!ret && at < len) {
		uint32_t id, size;

		if (len - at < REC_SIZE) {
			st->partial = 1;
			break;
		}
		id = rd32(buf + at);
		size = rd32(buf + at + 4);
		if (size < REC_SIZE) {
			st->bad_size = 1;	/* no way to the next record */
			break;
		}
		if (size > len - at) {
			st->partial = 1;	/* the runtime is writing it */
			break;
		}
		st->records++;
		if (id == JD_LOAD)
			ret = rec_load(&c, buf + at + REC_SIZE, size - REC_SIZE);
		else if (id == JD_MOVE)
			ret = rec_move(&c, buf + at + REC_SIZE, size - REC_SIZE);
		else
			skip(st, id);
		at += size;
	}
	free(c.fn);
	return ret;
}
