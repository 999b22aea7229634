// SPDX-License-Identifier: MIT
/*
 * Symbol resolution for JIT code (symres_jit_image(), symbols/symres.h): a
 * process's anonymous memory named by the perf map its runtime wrote in
 * the guest, which the collector stored in the session under a name of
 * its own (<session>/guests/<guest>/perfmaps/<tgid>.map: the tgid is a
 * number the host formats, the guest's name one path component), and its
 * jitdump beside it (<tgid>.dump).  Both are the guest's: symbols/perfmap.c
 * and symbols/jitdump.c read them as hostile.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols/symres-priv.h"

/* The session's perf map of tgid, parsed into si (SIMAGE_OK), or why not
 * in si->reason (SIMAGE_ANON).  -ENOMEM or 0. */
static int jit_load(struct symres *r, struct simage *si, const char *guest, int64_t tgid)
{
	char dir[4096], name[32], dump[32];
	int dfd;

	si->state = SIMAGE_ANON;
	snprintf(si->reason, sizeof(si->reason), "{anon}: anonymous memory (no perf map or jitdump of pid %lld)",
		 (long long)tgid);
	if (!r->session_dir || !symres_guest_component(guest) || tgid <= 0)
		return 0;
	if (snprintf(dir, sizeof(dir), "%s/guests/%s/perfmaps", r->session_dir, guest) >=
	    (int)sizeof(dir))
		return 0;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return 0;
	snprintf(name, sizeof(name), "%lld.map", (long long)tgid);
	snprintf(dump, sizeof(dump), "%lld.dump", (long long)tgid);
	si->pm = perfmap_load(dfd, name, dump);
	close(dfd);
	if (!si->pm)
		return errno == ENOMEM ? -ENOMEM : 0;
	si->state = SIMAGE_OK;
	si->reason[0] = '\0';
	return 0;
}

struct simage *symres_jit_image(struct symres *r, const char *guest, int64_t tgid)
{
	struct simage *si;
	char *key;
	bool fresh;

	/* "{jit}" cannot be a store image name: store names are mangled
	 * guest paths or the store's own {tags}, and none is {jit} */
	if (asprintf(&key, "%s\1{jit}\1%lld", guest ? guest : "", (long long)tgid) < 0)
		return NULL;
	si = symres_image_of(r, key, &fresh);
	if (!si || !fresh)
		return si;
	si->kind = SK_JIT;
	if (jit_load(r, si, guest, tgid) || symres_image_put(r, si)) {
		perfmap_free(si->pm);
		free(si->key);
		free(si);
		return NULL;
	}
	return si;
}

int simage_is_jit(const struct simage *si)
{
	return si->kind == SK_JIT && si->pm;
}

const struct perfmap_stats *simage_perfmap_stats(const struct simage *si)
{
	return si->pm ? perfmap_stats(si->pm) : NULL;
}

long simage_jit_code(const struct simage *si, uint64_t addr, uint8_t *buf, size_t len)
{
	return si->kind == SK_JIT && si->pm ? perfmap_code(si->pm, addr, buf, len) : -1;
}
