// SPDX-License-Identifier: MIT
/*
 * Introspection (vmm/introspect/introspect.h): the state machine that
 * finds the kernel in guest memory and turns what it reads into records
 * of the wire format.
 *
 *   searching   VMCOREINFO not found yet: scan scan_bytes of RAM per poll,
 *               a full pass every retry_ms at most (it appears at the
 *               kernel's subsys_initcall, a second or so into boot)
 *   ready       found and kallsyms sent (or refused: counted)
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest-kmod/opvm_proto.h"
#include "lib/util.h"
#include "vmm/guest/guestmem.h"
#include "vmm/introspect/introspect.h"
#include "vmm/introspect/kallsyms.h"
#include "vmm/introspect/vmcoreinfo.h"

#define SCAN_BYTES_DEFAULT	((uint64_t)256 << 20)
#define RETRY_MS_DEFAULT	1000u
/* __START_KERNEL_map: where x86-64 maps the kernel image, phys_base on */
#define KERNEL_MAP		0xffffffff80000000ull
#define KERNEL_HALF		0xffff800000000000ull
#define PHYS_LIMIT		(1ull << 52)	/* x86-64's physical address width */

enum state { ST_SEARCHING, ST_READY, ST_FAILED };

struct introspect {
	struct guestmem *m;
	struct introspect_config cfg;
	enum state state;
	uint64_t cursor;		/* scan position (guest-physical) */
	uint64_t pass_ms;		/* when the current pass started */
	bool waiting;			/* a pass found nothing: wait retry_ms */
	struct vmcoreinfo vi;
	uint32_t seq;			/* of the records emitted */
	struct introspect_stats st;
	/* the KSYMS record being filled */
	union {
		struct opvm_rec_ksyms k;
		uint8_t bytes[OPVM_REC_MAX];
	} rec;
	unsigned long used;
	introspect_emit_fn emit;
	void *emit_arg;
};

int introspect_parse_mode(const char *s, enum introspect_mode *out)
{
	static const char *const names[] = { "auto", "off", "only" };

	for (unsigned i = 0; i < 3; i++) {
		if (s && !strcmp(s, names[i])) {
			*out = (enum introspect_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *introspect_mode_name(enum introspect_mode m)
{
	return m == INTROSPECT_OFF ? "off" : m == INTROSPECT_ONLY ? "only" : "auto";
}

struct introspect *introspect_new(struct guestmem *m, const struct introspect_config *cfg)
{
	struct introspect *in;

	if (!m) {
		errno = EINVAL;
		return NULL;
	}
	in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	in->m = m;
	if (cfg)
		in->cfg = *cfg;
	if (!in->cfg.scan_bytes)
		in->cfg.scan_bytes = SCAN_BYTES_DEFAULT;
	if (!in->cfg.retry_ms)
		in->cfg.retry_ms = RETRY_MS_DEFAULT;
	in->st.state = "searching";
	return in;
}

void introspect_free(struct introspect *in)
{
	free(in);
}

void introspect_no_ksyms(struct introspect *in)
{
	if (in)
		in->cfg.no_ksyms = 1;
}

const struct introspect_stats *introspect_get_stats(const struct introspect *in)
{
	return &in->st;
}

/* Header and padding of a record built in place, then out it goes. */
static void emit(struct introspect *in, void *rec, unsigned type, size_t len)
{
	struct opvm_rec_hdr *h = rec;
	size_t padded = (len + OPVM_REC_ALIGN - 1) & ~(size_t)(OPVM_REC_ALIGN - 1);

	memset((uint8_t *)rec + len, 0, padded - len);
	h->magic = htole16(OPVM_PROTO_MAGIC);
	h->type = htole16((uint16_t)type);
	h->len = htole32((uint32_t)padded);
	h->seq = htole32(in->seq++);
	h->reserved = 0;
	in->emit(in->emit_arg, rec, padded);
}

/* ---- kernel memory ------------------------------------------------------ */

/* unwind_mem read over the kernel's page tables (arg: the introspector). */
static int kread(void *arg, uint64_t va, void *buf, size_t len)
{
	struct introspect *in = arg;

	if (va < KERNEL_HALF || va + len < va)
		return -EFAULT;
	return guestmem_read_virt(in->m, in->st.pgd_gpa, va, buf, len) ? -EFAULT : 0;
}

/* ---- kallsyms -> KSYMS ---------------------------------------------------- */

static void ksyms_flush(struct introspect *in)
{
	if (!in->rec.k.nr)
		return;
	in->rec.k.nr = htole32(in->rec.k.nr);
	in->rec.k.bytes = htole16(in->rec.k.bytes);
	emit(in, &in->rec, OPVM_REC_KSYMS, in->used);
	memset(&in->rec.k, 0, sizeof(in->rec.k));
	in->used = sizeof(in->rec.k);
}

static int ksym_one(void *arg, uint64_t addr, char type, const char *name, size_t len)
{
	struct introspect *in = arg;

	if (len == 5 && !memcmp(name, "_text", 5) && !in->st.text_addr)
		in->st.text_addr = addr;
	if (!strchr("tTwW", type) || !type || len > OPVM_KSYM_NAME_MAX || !addr) {
		in->st.ksyms_other++;
		return 0;
	}
	if (opvm_ksyms_add(&in->rec.k, &in->used, addr, type, name, len)) {
		ksyms_flush(in);
		if (opvm_ksyms_add(&in->rec.k, &in->used, addr, type, name, len)) {
			in->st.ksyms_other++;
			return 0;
		}
	}
	in->st.ksyms_sent++;
	return 0;
}

static void ksyms_send(struct introspect *in, uint64_t t0)
{
	struct unwind_mem um = { kread, in };
	struct kallsyms_addrs a = {
		.names = in->vi.ks_names, .num_syms = in->vi.ks_num_syms,
		.token_table = in->vi.ks_token_table, .token_index = in->vi.ks_token_index,
		.offsets = in->vi.ks_offsets, .relative_base = in->vi.ks_relative_base,
		.addresses = in->vi.ks_addresses,
	};
	struct kallsyms_result res;
	struct opvm_rec_ksyms_end e;
	int rc;

	memset(&in->rec.k, 0, sizeof(in->rec.k));
	in->used = sizeof(in->rec.k);
	rc = kallsyms_decode(&um, &a, ksym_one, in, &res, in->st.last_error,
			     sizeof(in->st.last_error));
	in->st.nr_syms = res.nr_syms;
	in->st.ksyms_bad = res.bad;
	in->st.ksyms_unsorted = res.unsorted;
	in->st.ksyms_bytes_read = res.bytes_read;
	if (rc) {
		in->st.refused++;
		return;
	}
	ksyms_flush(in);
	memset(&e, 0, sizeof(e));
	e.nr_syms = htole64(in->st.ksyms_sent);
	emit(in, &e, OPVM_REC_KSYMS_END, sizeof(e));
	in->st.kallsyms_ms = util_now_ms() - t0;
}

/* ---- finding the kernel --------------------------------------------------- */

/* VMCOREINFO found at gpa: work out the kernel page-table root and check
 * that it maps what VMCOREINFO points at.  false: refused (counted). */
static bool kernel_found(struct introspect *in, uint64_t gpa)
{
	uint64_t pgd, probe, pa;

	/* phys_base is signed (load address less the virtual slide): the sum
	 * wraps, and what it gives must be a page inside physical space */
	pgd = in->vi.swapper_pg_dir - KERNEL_MAP + in->vi.phys_base;
	if (in->vi.swapper_pg_dir < KERNEL_MAP || pgd >= PHYS_LIMIT || (pgd & 4095)) {
		snprintf(in->st.last_error, sizeof(in->st.last_error),
			 "VMCOREINFO at %#llx: no usable page-table root (%#llx, phys_base %#llx)",
			 (unsigned long long)gpa, (unsigned long long)in->vi.swapper_pg_dir,
			 (unsigned long long)in->vi.phys_base);
		return false;
	}
	guestmem_set_paging_levels(in->m, in->vi.l5 ? 5 : 4);
	/* the root must map itself where VMCOREINFO says it is */
	probe = in->vi.swapper_pg_dir;
	if (guestmem_virt_to_phys(in->m, pgd, probe, &pa) || pa != pgd) {
		snprintf(in->st.last_error, sizeof(in->st.last_error),
			 "VMCOREINFO at %#llx: its page tables do not map the kernel",
			 (unsigned long long)gpa);
		return false;
	}
	in->st.vmcoreinfo_gpa = gpa;
	in->st.pgd_gpa = pgd;
	in->st.kernel_offset = in->vi.kernel_offset;
	in->st.stext = in->vi.stext;
	snprintf(in->st.release, sizeof(in->st.release), "%s", in->vi.release);
	return true;
}

static void search(struct introspect *in, uint64_t now, uint64_t t0)
{
	uint64_t gpa = 0;
	int rc;

	if (in->waiting && now - in->pass_ms < in->cfg.retry_ms)
		return;
	if (in->waiting || !in->pass_ms) {
		in->waiting = false;
		in->pass_ms = now;
	}
	rc = vmcoreinfo_find(in->m, &in->cursor, in->cfg.scan_bytes, &in->vi, &gpa,
			     &in->st.scanned_bytes);
	if (rc == -ENOENT) {
		in->st.passes++;
		in->waiting = true;
		return;
	}
	if (rc <= 0)
		return;
	if (!kernel_found(in, gpa)) {
		in->st.refused++;
		in->cursor = gpa + 4096;	/* go on past it */
		return;
	}
	in->state = ST_READY;
	in->st.state = "ready";
	if (!(in->vi.have & VMCI_KALLSYMS)) {
		snprintf(in->st.last_error, sizeof(in->st.last_error),
			 "VMCOREINFO lists no kallsyms tables (Linux before 6.0?)");
		return;
	}
	if (!in->cfg.no_ksyms)
		ksyms_send(in, t0);
}

int introspect_poll(struct introspect *in, uint64_t now_ms, introspect_emit_fn fn, void *arg)
{
	if (!in || !fn)
		return -EINVAL;
	in->emit = fn;
	in->emit_arg = arg;
	if (in->state == ST_SEARCHING)
		search(in, now_ms, util_now_ms());
	return 0;
}
