// SPDX-License-Identifier: MIT
/*
 * Names for user binaries the host has no file of, read from guest memory:
 * each image with samples (attribution's image_used) whose build-id the
 * guest's cache holds neither as a binary nor as memory symbols is looked
 * up in the guest-state model (a process that maps it executable, whoever
 * announced it: opvm.ko or introspection), its .dynsym read through that
 * process's page tables (introspect_image_syms()) and the ELF made put in
 * the cache (fetch_memsyms_put()), where the reports find it.
 *
 * Bounded: MEMSYMS_WANT_MAX images a session, MEMSYMS_PER_POLL read per
 * poll of the collector's loop (all that wait at its last sync, whose
 * samples may be the first of an image), MEMSYMS_TRIES attempts each;
 * introspection caps the pages.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "host/collect/collector-priv.h"
#include "host/collect/fetch.h"
#include "vmm/introspect/introspect.h"

#define MEMSYMS_WANT_MAX	1024u
#define MEMSYMS_PER_POLL	4u
#define MEMSYMS_TRIES		3u
#define MEMSYMS_CANDIDATES	4u	/* mappings tried per attempt */

struct mwant {
	uint8_t bid[OPVM_BUILD_ID_MAX];
	uint8_t len;
	uint8_t tries;
	bool done;
};

struct cmemsyms {
	struct mwant w[MEMSYMS_WANT_MAX];
	unsigned n, next;
};

struct mcand {
	uint64_t cr3;
	struct introspect_map map;
};

struct mfind {
	const struct mwant *w;
	struct mcand c[MEMSYMS_CANDIDATES];
	unsigned n;
};

void cguest_memsyms_want(struct cguest *g, const struct gstate_cookie *ck)
{
	struct cmemsyms *m = g->msy;

	if (!g->intro || !ck->build_id_len || ck->build_id_len > OPVM_BUILD_ID_MAX)
		return;
	if (!m && !(m = g->msy = calloc(1, sizeof(*m))))
		return;
	for (unsigned i = 0; i < m->n; i++)
		if (m->w[i].len == ck->build_id_len &&
		    !memcmp(m->w[i].bid, ck->build_id, ck->build_id_len))
			return;
	if (m->n == MEMSYMS_WANT_MAX)
		return;
	memcpy(m->w[m->n].bid, ck->build_id, ck->build_id_len);
	m->w[m->n].len = ck->build_id_len;
	m->n++;
}

/* A process's executable mappings of the wanted build-id, one a process. */
static int find_proc(const struct gstate_process *p, void *arg)
{
	struct mfind *f = arg;

	for (size_t i = 0; i < p->nr_maps && p->cr3; i++) {
		const struct gstate_mapping *mp = &p->maps[i];
		const struct gstate_cookie *c = mp->cookie;

		if (!c || c->build_id_len != f->w->len || memcmp(c->build_id, f->w->bid, f->w->len))
			continue;
		f->c[f->n++] = (struct mcand){ p->cr3, { mp->start, mp->end, mp->pgoff } };
		break;
	}
	return f->n == MEMSYMS_CANDIDATES;
}

/* One attempt at w: 1 when it is settled (made, cached, or given up). */
static bool want_try(struct cguest *g, struct mwant *w)
{
	struct mfind f = { .w = w };
	int rc = -ENOENT;

	if (!fetch_memsyms_due(g->fetch, w->bid, w->len))
		return true;	/* its binary or its symbols are there */
	gstate_for_each_proc(g->gs, find_proc, &f);
	for (unsigned i = 0; i < f.n && (rc == -ENOENT || rc == -EINVAL); i++) {
		void *elf;
		size_t len;

		rc = introspect_image_syms(g->intro, f.c[i].cr3, &f.c[i].map, w->bid, w->len,
					   &elf, &len);
		if (!rc)
			rc = fetch_memsyms_put(g->fetch, w->bid, w->len, elf, len);
		free(elf);
	}
	/* only pages not resident, or no process to read, may change */
	return rc != -ENOENT || ++w->tries >= MEMSYMS_TRIES;
}

void cguest_memsyms_poll(struct cguest *g, bool all)
{
	struct cmemsyms *m = g->msy;
	unsigned tried = 0, most = all ? MEMSYMS_WANT_MAX : MEMSYMS_PER_POLL;

	if (!m || !g->intro)
		return;
	for (unsigned k = 0; k < m->n && tried < most; k++) {
		struct mwant *w = &m->w[(m->next + k) % m->n];

		if (w->done)
			continue;
		tried++;
		w->done = want_try(g, w);
	}
	m->next = m->n ? (m->next + tried) % m->n : 0;
}

void cguest_memsyms_free(struct cguest *g)
{
	free(g->msy);
	g->msy = NULL;
}
