/* SPDX-License-Identifier: MIT */
/*
 * What fetch.c (the requests, the channel's records), fetch-ksame.c (a
 * kernel-symbol transfer held against the stored one) and fetch-perfmap.c
 * (the perf maps' table and their files in the session) share.  Not for
 * use outside host/collect/fetch*.c.
 *
 * A perf map transfer is one FETCH flagged OPVM_FETCH_F_PERFMAP for
 * /tmp/perf-<tgid>.map from the bytes the host has on: FILE_DATA appended
 * to <guest>/perfmaps/<tgid>.map, FILE_END; a jitdump's the same for
 * /tmp/jit-<tgid>.dump into <tgid>.dump.  fetch.c keeps one request of
 * any kind open at a time and routes the records of a perf-map request
 * here.
 */
#ifndef OPVM_FETCH_PRIV_H
#define OPVM_FETCH_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "guest-kmod/opvm_proto.h"

/* What a kallsyms transfer holds: vmlinux's symbols, the modules'. */
#define FETCH_KIND_VMLINUX	1u
#define FETCH_KIND_MODULES	2u
/* Longest text line of one entry: 16 hex digits, type, name, module. */
#define FETCH_KLINE_MAX	(16 + 3 + OPVM_KSYM_NAME_MAX + 3 + OPVM_MODNAME_LEN + 2)

/*
 * A transfer held against <guest>/kallsyms (fetch-ksame.c): while its
 * lines repeat the stored file's, nothing is written.  ksame_open(): the
 * stored file of the guest's directory gfd (not closed, not owned; a
 * regular file, never through a link), or NULL if there is none.
 * ksame_match(): the bytes of whole lines at the start of text[n] (lines
 * of one kind, FETCH_KIND_*) that are the stored file's next lines of that
 * kind; after a shorter answer the comparison is over.  ksame_more():
 * whether the stored file has lines of kinds beyond those matched (the
 * transfer had fewer).  ksame_copy(): the lines that matched, in the
 * stored file's order, written to fd: the part file's start.  0 or -EIO.
 */
struct ksame;
struct ksame *ksame_open(int gfd);
void ksame_close(struct ksame *s);	/* NULL-safe */
size_t ksame_match(struct ksame *s, unsigned kind, const char *text, size_t n);
bool ksame_more(struct ksame *s, unsigned kinds);
int ksame_copy(struct ksame *s, int fd);

struct fetch_pmaps;

/* gfd: <session>/guests/<guest> (not closed, not owned); mode: the
 * session's file mode.  NULL on ENOMEM. */
struct fetch_pmaps *fetch_pmaps_new(int gfd, mode_t mode);
void fetch_pmaps_free(struct fetch_pmaps *pm);	/* NULL-safe */
/* Process tgid has samples in anonymous memory: its map and its dump are
 * asked for (each again only once FETCH_PERFMAP_EVERY_MS passed since its
 * last time). */
void fetch_pmaps_want(struct fetch_pmaps *pm, int64_t tgid);
/* The map to ask for now, if any: 1 with its guest path (the host's
 * format, from the tgid), the offset to read from and the bytes at most
 * (the cap less what it has); the map is in transfer from then on.  0:
 * none is due. */
int fetch_pmaps_next(struct fetch_pmaps *pm, uint64_t now_ms, char *path, size_t len,
		     uint64_t *offset, uint64_t *max);
/* The transfer's FILE_DATA: 0, or -errno (out of order, over the cap,
 * I/O): the transfer is given up (what came before stays). */
int fetch_pmaps_data(struct fetch_pmaps *pm, uint64_t offset, const void *buf, size_t n);
/* The transfer's FILE_END (the guest's status and its size: where it
 * stopped), or status -ETIMEDOUT/-EAGAIN from the host (no answer, the
 * channel full): the map is asked again later, or never (absent several
 * times, capped, refused). */
void fetch_pmaps_end(struct fetch_pmaps *pm, int32_t status, uint64_t size, uint64_t now_ms);
/* Bytes taken into maps this session (the session cap counts them). */
uint64_t fetch_pmaps_bytes(const struct fetch_pmaps *pm);
/* session.json "fetch" "perfmaps": the counters and each map's. */
json_t *fetch_pmaps_json(const struct fetch_pmaps *pm);

#endif /* OPVM_FETCH_PRIV_H */
