// SPDX-License-Identifier: MIT
/*
 * A guest's CPython processes for the samplers (vmm/guest/pyguest.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmm/guest/guestmem.h"
#include "vmm/guest/pyguest.h"

/* One address space: unresolved until its first sample, then found or
 * failed.  Its symbols may not be readable yet (a sample while ld.so has
 * not touched them): tried again RETRY_EVERY samples later. */
enum { AS_NEW = 0, AS_OK, AS_FAILED };
#define RETRY_EVERY	16

struct pyas {
	uint64_t cr3, exe_base;
	uint32_t version;
	int state;
	unsigned wait;			/* samples until the next try */
	struct pyframes_target t;
	struct pyframes_layout l;
};

struct pyguest {
	_Atomic(struct sampler_python *) pub;
	struct pyas as[SAMPLER_PYTHON_MAX];
	unsigned nr;
	struct pyguest_stats st;
};

struct pyguest *pyguest_new(void)
{
	return calloc(1, sizeof(struct pyguest));
}

void pyguest_free(struct pyguest *pg)
{
	if (!pg)
		return;
	free(atomic_exchange(&pg->pub, NULL));
	free(pg);
}

void pyguest_publish(struct pyguest *pg, const struct sampler_python *set)
{
	struct sampler_python *c = malloc(sizeof(*c));

	if (!c)
		return;		/* the old set stays */
	*c = *set;
	if (c->nr > SAMPLER_PYTHON_MAX)
		c->nr = SAMPLER_PYTHON_MAX;
	free(atomic_exchange(&pg->pub, c));
}

/* The entry of cr3 in the old table, to keep what it resolved. */
static const struct pyas *old_entry(const struct pyas *old, unsigned n, uint64_t cr3,
				    uint64_t base)
{
	for (unsigned i = 0; i < n; i++)
		if (old[i].cr3 == cr3 && old[i].exe_base == base && old[i].state == AS_OK)
			return &old[i];
	return NULL;
}

void pyguest_take(struct pyguest *pg)
{
	struct sampler_python *c = atomic_exchange(&pg->pub, NULL);
	struct pyas old[SAMPLER_PYTHON_MAX];
	unsigned n = pg->nr;

	if (!c)
		return;
	memcpy(old, pg->as, n * sizeof(old[0]));
	for (unsigned i = 0; i < c->nr; i++) {
		const struct pyas *o = old_entry(old, n, c->as[i].cr3, c->as[i].exe_base);

		if (o) {
			pg->as[i] = *o;
			continue;
		}
		pg->as[i] = (struct pyas){ .cr3 = c->as[i].cr3, .exe_base = c->as[i].exe_base,
					   .version = c->as[i].version };
	}
	pg->nr = c->nr;
	if (pg->nr > pg->st.spaces)
		pg->st.spaces = pg->nr;
	free(c);
}

static struct pyas *find(const struct pyguest *pg, uint64_t cr3)
{
	for (unsigned i = 0; i < pg->nr; i++)
		if (pg->as[i].cr3 == cr3)
			return (struct pyas *)&pg->as[i];
	return NULL;
}

unsigned pyguest_nr(const struct pyguest *pg)
{
	return pg->nr;
}

int pyguest_is_python(const struct pyguest *pg, uint64_t cr3)
{
	return find(pg, cr3) != NULL;
}

/* The interpreter of a: its symbols from its .dynsym in guest memory,
 * the version from Py_Version or else the executable's name. */
static int resolve(struct pyguest *pg, struct pyas *a, const struct unwind_mem *m)
{
	int err = pyframes_dynsym(m, a->exe_base, &a->t);

	if (!err && !a->t.version)
		a->t.version = a->version;
	if (!err && a->version && (a->t.version >> 16) != (a->version >> 16))
		err = -EINVAL;		/* its name says another version */
	if (!err)
		err = pyframes_layout(m, &a->t, &a->l, &pg->st.fr);
	if (err == -EFAULT) {		/* not resident yet: later */
		a->wait = RETRY_EVERY;
		pg->st.resolve_retries++;
		return err;
	}
	a->state = err ? AS_FAILED : AS_OK;
	if (err)
		pg->st.resolve_failed++;
	else
		pg->st.resolved++;
	return err;
}

/* The sampling thread's CPU time: what the reads cost the host. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static unsigned read_as(struct pyguest *pg, struct pyas *a, const struct unwind_mem *m,
			uint32_t tid, struct pyframe *out, unsigned max, int check)
{
	unsigned n;

	pg->st.samples++;
	if (a->state == AS_NEW && (!a->wait || !--a->wait))
		resolve(pg, a, m);
	if (a->state != AS_OK) {
		pg->st.unresolved++;
		return 0;
	}
	if (!tid) {
		pg->st.no_tid++;
		return 0;
	}
	n = pyframes_read(m, &a->t, &a->l, tid, out, max, &pg->st.fr);
	if (n && check) {
		if (m->read == guestmem_view_read) {
			struct guestmem_view *v = m->arg;

			guestmem_view_reset(v, v->cr3, PYGUEST_PAGES);
		}
		n = pyframes_validate(m, &a->t, &a->l, tid, out, n, &pg->st.fr);
	}
	if (n)
		pg->st.with_frames++;
	return n;
}

unsigned pyguest_read(struct pyguest *pg, const struct unwind_mem *m, uint64_t cr3, uint32_t tid,
		      struct pyframe *out, unsigned max, int check)
{
	struct pyas *a = find(pg, cr3);
	uint64_t t0;
	unsigned n;

	if (!a)
		return 0;
	t0 = cpu_ns();
	n = read_as(pg, a, m, tid, out, max, check);
	pg->st.cost_ns += cpu_ns() - t0;
	return n;
}

void pyguest_get_stats(const struct pyguest *pg, struct pyguest_stats *out)
{
	*out = pg->st;
}

void pyguest_describe(const struct pyguest *pg, char *buf, size_t len)
{
	const struct pyguest_stats *s = &pg->st;

	if (!len)
		return;
	buf[0] = '\0';
	if (!s->samples) {
		if (s->spaces)
			snprintf(buf, len, "python: %llu CPython processes seen, no sample in "
				 "them\n", (unsigned long long)s->spaces);
		return;
	}
	snprintf(buf, len,
		 "python: %llu of %llu samples in CPython processes read Python frames\n"
		 "  (%llu frames; thread not known %llu, no thread state %llu, idle %llu,\n"
		 "  unreadable %llu, refused %llu: runtime %llu, loops %llu, frames %llu,\n"
		 "  code %llu, names %llu; interpreters found %llu, not %llu (%llu tries\n"
		 "  too early, %llu samples before found); offsets from _Py_DebugOffsets\n"
		 "  %llu, from the table %llu, forged %llu; %llu B read)\n",
		 (unsigned long long)s->with_frames, (unsigned long long)s->samples,
		 (unsigned long long)s->fr.frames, (unsigned long long)s->no_tid,
		 (unsigned long long)s->fr.no_thread, (unsigned long long)s->fr.idle,
		 (unsigned long long)s->fr.unreadable,
		 (unsigned long long)(s->fr.bad_runtime + s->fr.loops + s->fr.bad_frame +
				      s->fr.bad_code + s->fr.bad_string),
		 (unsigned long long)s->fr.bad_runtime, (unsigned long long)s->fr.loops,
		 (unsigned long long)s->fr.bad_frame, (unsigned long long)s->fr.bad_code,
		 (unsigned long long)s->fr.bad_string,
		 (unsigned long long)s->resolved, (unsigned long long)s->resolve_failed,
		 (unsigned long long)s->resolve_retries, (unsigned long long)s->unresolved,
		 (unsigned long long)s->fr.layout_published,
		 (unsigned long long)s->fr.layout_table, (unsigned long long)s->fr.bad_offsets,
		 (unsigned long long)s->fr.bytes);
}
