/* SPDX-License-Identifier: MIT */
/*
 * Private to the sample-file store (host/store*.c; the public contract is
 * host/collect/store.h): the sample file's on-disk layout, the writer's in-memory
 * structures, and the few functions the store's files share.  The store is
 * split by job:
 *
 *   store.c         the writer: the per-guest tree, caps, mapped files,
 *                   store_get() and sfile_add()
 *   store-format.c  the sample file's format: header checks, file names
 *   store-read.c    the reader (sfile_reader_*), which trusts no file
 *   store-walk.c    the tree walk (store_walk())
 *   store-mangle.c  guest paths <-> single path components
 */
#ifndef OPVM_STORE_PRIV_H
#define OPVM_STORE_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "host/collect/store.h"

#define SFILE_HDR_SIZE		256u
#define SFILE_TABLE_ALIGN	64u
#define SFILE_MIN_LOG2		6u	/* 64 slots, 1 KiB */
#define SFILE_MAX_LOG2		30u
#define SLOT_SIZE		16u

#define ROOT_DIR	"{root}"
#define DEP_DIR		"{dep}"
#define KERN_DIR	"{kern}"
#define PY_DIR		"{py}"		/* Python frames (store_key.python) */
#define OVERFLOW_DIR	"{overflow}"	/* never a mangled name: braces escape */
/* In place of the top {root}: samples of processes in a cgroup, "{cg}" and
 * the mangled cgroup path (store layout 2; docs/sample-files.md). */
#define CG_PREFIX	"{cg}"
#define CG_PREFIX_LEN	(sizeof(CG_PREFIX) - 1)
#define BLOCK		4096u		/* disk accounting unit */

struct sfile_hdr {
	char magic[8];
	uint32_t version;
	uint32_t header_size;
	char event[32];
	uint64_t count;
	uint32_t unit_mask;
	uint32_t build_id_len;
	char guest[64];
	uint8_t build_id[32];
	uint64_t table;		/* offset | log2(slots): the publish word */
	uint64_t nr_entries;	/* at the last store_sync() */
	uint64_t total;		/* at the last store_sync() */
	uint8_t reserved[SFILE_HDR_SIZE - 184];
};
_Static_assert(sizeof(struct sfile_hdr) == SFILE_HDR_SIZE, "header size");
_Static_assert(offsetof(struct sfile_hdr, table) % 8 == 0, "table aligned");

struct slot {
	uint64_t offset;
	uint64_t count;
};

#define barrier()	__asm__ __volatile__("" ::: "memory")

struct sfile {
	/* hot: sfile_add() */
	struct slot *tab;
	uint64_t mask;
	unsigned shift;
	uint64_t nr;		/* occupied slots */
	uint64_t grow_at;	/* grow before nr exceeds this */
	uint64_t total;
	int dirty;
	uint8_t ref;		/* used since the clock last passed it */
	bool overflow;		/* an event's overflow bucket */
	bool has_build_id;	/* its header has one, or it was tried */
	bool full;		/* growth failed for room: no retry until
				 * the next store_sync() (a flood of new
				 * offsets must not cost a syscall each) */

	struct store *st;
	uint8_t *map;
	size_t map_len;
	dev_t dev;
	ino_t ino;
	uint64_t desc;		/* live table descriptor, as hdr.table */
	uint64_t disk;		/* bytes charged to the disk cap */
	uint64_t punched;	/* bytes of dead tables given back */
	struct sfile *mprev, *mnext;	/* mapped files, newest first */
	/* identity (normalised key) */
	uint64_t khash;
	char *app, *image;
	char *cgroup;		/* NULL: none */
	int kernel;
	uint8_t event;
	int64_t tgid, tid, cpu;
	char *relpath;		/* mangled components under current/, '/'-joined */
	struct sfile *next;	/* all files, for sync/close */
};

struct store {
	char *session;
	char *guest;
	char *dir;		/* .../samples/current */
	int curfd;
	int lockfd;		/* samples/, flock()ed */
	unsigned separate;
	unsigned flags;
	uint64_t file_limit;
	struct store_event *events;
	size_t nr_events;
	struct sfile **index;	/* open addressing by khash */
	size_t index_cap, index_nr;
	struct sfile *files;
	struct sfile *last;	/* last store_get() result */
	struct sfile *mru, *lru;	/* mapped files */
	struct sfile **ovf;	/* per event: overflow bucket, or NULL */
	uint64_t nr_ovf;	/* overflow files in stats.files */
	struct store_limits lim;
	struct store_stats stats;	/* overflow_samples filled on read */
	mode_t dmode, fmode;
};

/* ---- store.c: the disk cap, shared with the stack table ----------------- */
int store_disk_take(struct store *st, uint64_t bytes, bool exempt);
void store_disk_give(struct store *st, uint64_t bytes);

/* ---- store-stacks.c ------------------------------------------------------ */
#define STACKS_DEF_MAGIC	"OPVMSTK1"
#define STACKS_CNT_MAGIC	"OPVMSTC1"

/* ---- store-format.c ------------------------------------------------------ */
/* An event name fit for a file name (and for the header's 32 bytes). */
bool store_event_name_ok(const char *n);
/* Validates a header and table descriptor against a file size.  Shared by
 * the reader and by the writer reopening a file in append mode.  Returns 0
 * or -EBADMSG with a message in err (may be NULL). */
int store_hdr_check(const struct sfile_hdr *h, uint64_t fsize, char *err,
		    size_t errlen);
/* Parses a sample file's name, EVENT.count.um.tgid.tid.cpu, into e's
 * count, unit_mask, tgid, tid and cpu and event (32 bytes).  Returns 0 or
 * -EINVAL. */
int store_leaf_parse(const char *name, struct store_entry *e, char *event);

#endif /* OPVM_STORE_PRIV_H */
