// SPDX-License-Identifier: MIT
/*
 * Attribution's Python frames: the indices of lib/pynames.h a sampler put
 * at the end of a sample's chain (its nr_py), turned into ids of the guest tree's Python frame table
 * (host/collect/store.h, "Python frames"), defined there the first time
 * each is met.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "host/collect/attribution-priv.h"
#include "lib/pynames.h"

/* The interpreter: the executable, or where introspection did not name
 * it, the mapped file called python3.N (the one the sampler found its
 * symbols in); the process's name when neither is known. */
const char *attribution_py_image(const struct gstate_process *p)
{
	if (p->exe)
		return p->exe->path;
	for (size_t i = 0; i < p->nr_maps; i++) {
		const char *path = p->maps[i].cookie ? p->maps[i].cookie->path : NULL;
		const char *b = path ? strrchr(path, '/') : NULL;

		if (b && !strncmp(b + 1, "python3.", 8))
			return path;
	}
	return attribution_proc_app(p);
}

/* The store id of the sampler's index idx: 0 or -errno. */
static int py_id(struct attribution *s, uint64_t idx, uint32_t *id)
{
	const struct pyname *n;

	if (idx >= PYNAMES_MAX)
		return -ERANGE;
	if (!s->py_map && !(s->py_map = calloc(PYNAMES_MAX, sizeof(*s->py_map))))
		return -ENOMEM;
	if (s->py_map[idx]) {
		*id = s->py_map[idx] - 1;
		return 0;
	}
	n = pynames_get(s->py, idx);
	if (!n)
		return -ENOENT;		/* not published: no sampler makes that */
	if (!s->pyt && !s->pyt_failed && !(s->pyt = store_python_open(s->st)))
		s->pyt_failed = true;
	if (!s->pyt || store_python_add(s->pyt, n->name, n->file, n->first_line, n->line, id))
		return -ENOSPC;
	s->py_map[idx] = *id + 1;
	return 0;
}

void attribution_py_reset(struct attribution *s)
{
	store_python_close(s->pyt);
	s->pyt = NULL;
	s->pyt_failed = false;
	if (s->py_map)
		memset(s->py_map, 0, PYNAMES_MAX * sizeof(*s->py_map));
}

unsigned attribution_py_ids(struct attribution *s, const struct opvm_sample *x, uint32_t *ids,
			    unsigned max)
{
	const uint64_t *py;
	unsigned n = 0;

	if (!s->py || !x->nr_py)
		return 0;
	py = x->chain + (x->nr_chain - x->nr_py);	/* nr_py <= nr_chain: the ring's */
	for (; n < x->nr_py && n < max; n++) {
		if (py_id(s, py[n], &ids[n])) {
			/* its callers without it would be a lie about who
			 * called whom: the rest is left out */
			s->stats.python_unnamed++;
			break;
		}
	}
	return n;
}
