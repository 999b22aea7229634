// SPDX-License-Identifier: MIT
/*
 * Attribution's Python frames: the words of lib/pynames.h a sampler put in
 * a sample's chain, turned into ids of the guest tree's Python frame table
 * (host/collect/store.h, "Python frames"), defined there the first time
 * each is met.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "host/collect/attribution-priv.h"
#include "lib/pynames.h"

bool attribution_has_py(const struct attribution *s, const struct opvm_sample *x)
{
	if (!s->py)
		return false;
	for (unsigned i = 0; i < x->nr_chain; i++)
		if (pynames_is_word(x->chain[i]))
			return true;
	return false;
}

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
static int py_id(struct attribution *s, uint32_t idx, uint32_t *id)
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

unsigned attribution_py_ids(struct attribution *s, const struct opvm_sample *x, uint32_t *ids,
			    unsigned max)
{
	unsigned n = 0;

	if (!s->py)
		return 0;
	for (unsigned i = 0; i < x->nr_chain && n < max; i++) {
		if (!pynames_is_word(x->chain[i]))
			continue;
		if (py_id(s, pynames_word_index(x->chain[i]), &ids[n])) {
			/* its callers without it would be a lie about who
			 * called whom: the rest is left out */
			s->stats.python_unnamed++;
			break;
		}
		n++;
	}
	return n;
}
