// SPDX-License-Identifier: MIT
/*
 * JIT runtimes' perf maps and jitdumps from the guest
 * (host/collect/fetch-priv.h, fetch.h): a table of the processes with
 * samples in anonymous memory, each one's map and dump asked for, then
 * asked again from where they stopped every FETCH_PERFMAP_EVERY_MS
 * (runtimes append as they compile), the bytes appended to
 * <guest>/perfmaps/<tgid>.map and <tgid>.dump in the session,
 * FETCH_PERFMAP_MAX each at most.  The guest chooses nothing here but the
 * bytes: the paths asked for and the files' names are the host's, made
 * from the tgid (a number); what the bytes say is the reports' to check
 * (symbols/perfmap.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/collect/fetch-priv.h"
#include "host/collect/fetch.h"
#include "host/collect/stats.h"
#include "lib/safepath.h"

enum pm_state { PM_IDLE, PM_ACTIVE, PM_DONE };
enum pm_kind { PM_MAP, PM_DUMP };	/* /tmp/perf-PID.map, /tmp/jit-PID.dump */

struct pmap {
	int64_t tgid;
	uint8_t state;		/* enum pm_state; PM_DONE: never again */
	uint8_t kind;		/* enum pm_kind */
	uint8_t absent;		/* -ENOENT answers in a row */
	uint64_t have;		/* bytes in the session's file */
	uint64_t next_ms;	/* not asked before (0: at once) */
	uint64_t requests, grew;	/* transfers, those that brought bytes */
	uint64_t got;		/* bytes of the open transfer */
	int32_t last;		/* the last answer's status */
};

struct fetch_pmaps {
	int gfd;		/* <session>/guests/<guest> */
	int dfd;		/* its perfmaps/, -1 until the first byte */
	mode_t mode;
	struct pmap *maps;	/* a map and a dump of FETCH_MAX_PERFMAPS
				 * processes */
	size_t nr;
	struct pmap *cur;	/* in transfer */
	int fd;			/* cur's file, or -1 */
	uint64_t now_ms;	/* of the latest fetch_pmaps_next() */
	struct {
		uint64_t requests, transfers_grew, bytes, absent, refused, capped;
		uint64_t bad_order, full, io_errors, timeouts, gone;
	} st;
};

struct fetch_pmaps *fetch_pmaps_new(int gfd, mode_t mode)
{
	struct fetch_pmaps *pm = calloc(1, sizeof(*pm));

	if (!pm)
		return NULL;
	pm->maps = calloc(2 * FETCH_MAX_PERFMAPS, sizeof(*pm->maps));
	if (!pm->maps) {
		free(pm);
		return NULL;
	}
	pm->gfd = gfd;
	pm->dfd = pm->fd = -1;
	pm->mode = mode;
	return pm;
}

void fetch_pmaps_free(struct fetch_pmaps *pm)
{
	if (!pm)
		return;
	if (pm->fd >= 0)
		close(pm->fd);
	if (pm->dfd >= 0)
		close(pm->dfd);
	free(pm->maps);
	free(pm);
}

void fetch_pmaps_want(struct fetch_pmaps *pm, int64_t tgid)
{
	size_t i;

	if (tgid <= 0 || tgid > INT32_MAX)
		return;
	for (i = 0; i < pm->nr; i++)
		if (pm->maps[i].tgid == tgid)
			return;		/* asked already, and again on its clock */
	if (pm->nr == 2 * FETCH_MAX_PERFMAPS) {
		pm->st.full++;
		return;
	}
	pm->maps[pm->nr++] = (struct pmap){ .tgid = tgid, .kind = PM_MAP };
	pm->maps[pm->nr++] = (struct pmap){ .tgid = tgid, .kind = PM_DUMP };
}

/* The guest path (the relay takes no other shape) or the session's file
 * name of m. */
static void pm_name(const struct pmap *m, int guest, char *buf, size_t len)
{
	if (m->kind == PM_DUMP)
		snprintf(buf, len, guest ? "/tmp/jit-%lld.dump" : "%lld.dump", (long long)m->tgid);
	else
		snprintf(buf, len, guest ? "/tmp/perf-%lld.map" : "%lld.map", (long long)m->tgid);
}

int fetch_pmaps_next(struct fetch_pmaps *pm, uint64_t now_ms, char *path, size_t len,
		     uint64_t *offset, uint64_t *max)
{
	struct pmap *best = NULL;

	pm->now_ms = now_ms;
	if (pm->cur)
		return 0;
	/* the one waiting longest */
	for (size_t i = 0; i < pm->nr; i++) {
		struct pmap *m = &pm->maps[i];

		if (m->state == PM_IDLE && m->next_ms <= now_ms &&
		    (!best || m->next_ms < best->next_ms))
			best = m;
	}
	if (!best)
		return 0;
	pm_name(best, 1, path, len);
	*offset = best->have;
	*max = FETCH_PERFMAP_MAX;
	best->state = PM_ACTIVE;
	best->requests++;
	best->got = 0;
	pm->st.requests++;
	pm->cur = best;
	return 1;
}

/* cur's file in perfmaps/, made at its first byte: 0 or -errno. */
static int pm_file(struct fetch_pmaps *pm)
{
	char name[32], err[256];
	struct stat sb;

	if (pm->fd >= 0)
		return 0;
	if (pm->dfd < 0) {
		if (pm->gfd < 0)
			return -EBADF;
		pm->dfd = safepath_open_sub(pm->gfd, "perfmaps", "perfmaps",
					    (pm->mode & 0066) ? 0755 : 0700,
					    SAFEPATH_CREATE, err, sizeof(err));
		if (pm->dfd < 0)
			return pm->dfd;
	}
	pm_name(pm->cur, 0, name, sizeof(name));
	/* O_NONBLOCK: a FIFO planted at the name must not block */
	pm->fd = openat(pm->dfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
			pm->mode);
	if (pm->fd < 0)
		return -errno;
	if (fstat(pm->fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_nlink != 1) {
		close(pm->fd);
		pm->fd = -1;
		return -EINVAL;
	}
	return 0;
}

int fetch_pmaps_data(struct fetch_pmaps *pm, uint64_t offset, const void *buf, size_t n)
{
	struct pmap *m = pm->cur;
	int err;

	if (!m)
		return -ENOENT;
	if (offset != m->have) {
		pm->st.bad_order++;
		return -EPROTO;
	}
	if (n > FETCH_PERFMAP_MAX - m->have) {
		pm->st.capped++;
		return -EFBIG;
	}
	err = pm_file(pm);
	if (!err && n && pwrite(pm->fd, buf, n, (off_t)offset) != (ssize_t)n)
		err = -EIO;
	if (err) {
		pm->st.io_errors++;
		return err;
	}
	m->have += n;
	m->got += n;
	pm->st.bytes += n;
	return 0;
}

/* When cur is asked again after an answer of status: never (PM_DONE) for
 * a map at its cap, one the guest refuses, or one absent too often. */
static void pm_schedule(struct fetch_pmaps *pm, struct pmap *m, int32_t status, uint64_t now)
{
	m->state = PM_IDLE;
	m->next_ms = now + FETCH_PERFMAP_EVERY_MS;
	m->last = status;
	if (status == -ENOENT) {
		pm->st.absent++;
		if (++m->absent >= FETCH_PERFMAP_ABSENT_TRIES)
			m->state = PM_DONE;
		return;
	}
	if (status != -EFBIG && status != -ETIMEDOUT && status != -EAGAIN && status != -EPROTO)
		m->absent = 0;
	if (status == -ETIMEDOUT)
		pm->st.timeouts++;
	if (status == -ESRCH) {
		/* the process is gone: its owner, which the relay checks the
		 * file's against, with it; what came before stays */
		pm->st.gone++;
		m->state = PM_DONE;
		return;
	}
	if (status == -EFBIG || m->have >= FETCH_PERFMAP_MAX) {
		pm->st.capped += status == -EFBIG;
		m->state = PM_DONE;
	} else if (status && status != -ETIMEDOUT && status != -EAGAIN && status != -EPROTO) {
		pm->st.refused++;	/* not a regular file of its owner, ... */
		m->state = PM_DONE;
	}
}

void fetch_pmaps_end(struct fetch_pmaps *pm, int32_t status, uint64_t size, uint64_t now_ms)
{
	struct pmap *m = pm->cur;

	if (!m)
		return;
	if (!status && size != m->have) {
		pm->st.bad_order++;	/* the relay's count is not ours */
		status = -EPROTO;
	}
	if (m->got) {
		m->grew++;
		pm->st.transfers_grew++;
	}
	if (pm->fd >= 0)
		close(pm->fd);
	pm->fd = -1;
	pm->cur = NULL;
	pm_schedule(pm, m, status, now_ms ? now_ms : pm->now_ms);
}

uint64_t fetch_pmaps_bytes(const struct fetch_pmaps *pm)
{
	return pm->st.bytes;
}

json_t *fetch_pmaps_json(const struct fetch_pmaps *pm)
{
	json_t *maps = json_array(), *o;

#define C(v) stats_json_count(v)
	for (size_t i = 0; maps && i < pm->nr; i++) {
		const struct pmap *m = &pm->maps[i];

		if (json_array_append_new(maps, json_pack("{s:I,s:s,s:o,s:o,s:o,s:i,s:b}",
				"pid", (json_int_t)m->tgid,
				"kind", m->kind == PM_DUMP ? "jitdump" : "map", "bytes", C(m->have),
				"requests", C(m->requests), "grew", C(m->grew),
				"last_status", (int)m->last, "done", m->state == PM_DONE))) {
			json_decref(maps);
			return NULL;
		}
	}
	o = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		"requests", C(pm->st.requests), "grew", C(pm->st.transfers_grew),
		"bytes", C(pm->st.bytes), "absent", C(pm->st.absent),
		"refused", C(pm->st.refused), "capped", C(pm->st.capped),
		"bad_order", C(pm->st.bad_order), "table_full", C(pm->st.full),
		"io_errors", C(pm->st.io_errors), "timeouts", C(pm->st.timeouts),
		"gone", C(pm->st.gone),
		"max_bytes", C(FETCH_PERFMAP_MAX), "maps", maps ? maps : json_null());
#undef C
	return o;
}
