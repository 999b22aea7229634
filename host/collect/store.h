/* SPDX-License-Identifier: MIT */
/*
 * Sample-file store: per-guest trees of OProfile-style sample files.
 *
 *   <session>/guests/<guest>/samples/current/{root}/<app>/{dep}/{root|kern}/<image>/
 *       EVENT.count.um.tgid.tid.cpu
 *   <session>/guests/<guest>/samples/current/session.json   (how, and stats)
 *
 * with "all" in place of tgid/tid/cpu when those fields are merged
 * (--separate decides).  <app> and <image> are guest paths mangled into
 * path components (store_mangle()): names come from the guest and are
 * hostile, and nothing here may create or touch a file outside the session
 * directory — every component is created and opened relative to a directory
 * fd with O_NOFOLLOW, never through a path string built from guest bytes.
 *
 * A sample file is a versioned header and an mmap'd open-addressing hash of
 * offset -> count that grows in place.  A writer killed at any instant leaves
 * files that read back with every count added before its last store_sync().
 * Readers never trust a file: truncation or corruption is an error with a
 * message, never a crash.
 *
 * Bounds (struct store_limits): a guest decides which files exist (every
 * new path it names can make a new file), so a store caps the files and
 * directories it creates, the bytes they take and the files it keeps mapped
 * at once.  A key past a cap, and a sample a file cannot grow for, go to the
 * guest's overflow bucket: one sample file per event at
 * {root}/{overflow}/{dep}/{root}/{overflow}/ (no mangled guest name can be
 * "{overflow}": braces are escaped), all its samples at offset 0.  So the
 * totals still add up and the store_stats say how many went there.  Files
 * stay on disk when they are unmapped (least recently used first); the next
 * sample to one maps it again.
 *
 * The tree is private: directories 0700, files 0600, unless STORE_PUBLIC
 * (then 0777/0666 less the process umask, for `--umask`).
 */
#ifndef OPVM_STORE_H
#define OPVM_STORE_H

#include <stddef.h>
#include <stdint.h>

#define OPVM_SFILE_MAGIC	"OPVMSMP1"
#define OPVM_SFILE_VERSION	1
/* Largest sample file (logical size) a store writes or a reader accepts;
 * sfile_add() returns -ENOSPC rather than grow past it. */
#define OPVM_SFILE_MAX_SIZE	(1ULL << 30)

/* Which fields are kept apart, as OProfile's --separate. */
enum opvm_separate {
	OPVM_SEP_NONE	= 0,
	OPVM_SEP_LIB	= 1u << 0,	/* images under their app's {dep} */
	OPVM_SEP_KERNEL	= 1u << 1,	/* kernel images under each app */
	OPVM_SEP_THREAD	= 1u << 2,	/* tgid and tid kept */
	OPVM_SEP_CPU	= 1u << 3,	/* vCPU kept */
	OPVM_SEP_ALL	= 0xf,
};
/* Parse "none", "lib,thread", "all"...  Returns 0 or -EINVAL. */
int store_parse_separate(const char *spec, unsigned *out);

/* Identity of one sample file.  Strings are guest-derived and raw: the store
 * mangles them.  tgid/tid/cpu < 0 mean "all" (merged). */
struct store_key {
	const char *app;	/* application image path; NULL: same as image */
	const char *image;	/* image path, "vmlinux", or a module name */
	int kernel;		/* 1: image is the kernel or a module ({kern}) */
	int python;		/* 1: Python frames of the interpreter image ({py}):
				 * offsets are ids of the Python frame table */
	int own_app;		/* app kept whatever the separation (idle, boot) */
	int own_tgid;		/* tgid kept whatever the separation: anonymous
				 * memory means something only in its process
				 * (JIT code, named by its perf map) */
	uint8_t event;		/* index into the store's event table */
	int64_t tgid, tid, cpu;
	/* The process's cgroup path ("/a/b"), kept whatever the separation:
	 * the file goes under {cg}<mangled path> in place of the top {root}.
	 * NULL: not known (the kernel, idle, an old guest module). */
	const char *cgroup;
	const uint8_t *build_id; /* may be NULL */
	size_t build_id_len;
};

struct store_event {
	char name[32];
	uint64_t count;		/* sample period */
	uint32_t unit_mask;
};

struct store;
struct sfile;

enum store_open_flags {
	STORE_APPEND	= 1u << 0,	/* keep current/, add to it */
	STORE_PUBLIC	= 1u << 1,	/* modes from the umask, not 0700/0600 */
};

/* Per-store caps; 0 in a field means its default.  docs/usage.md states
 * the defaults. */
struct store_limits {
	uint64_t max_files;	/* sample files, default 16384 */
	uint64_t max_dirs;	/* directories created, default 65536 */
	uint64_t max_mapped;	/* files mapped at once, default 256 */
	uint64_t max_disk;	/* bytes of files and directories, default 1 GiB */
};
#define OPVM_STORE_MAX_FILES	16384
#define OPVM_STORE_MAX_DIRS	65536
#define OPVM_STORE_MAX_MAPPED	256
#define OPVM_STORE_MAX_DISK	(1ULL << 30)

/* What a store holds and did; every field is a count since store_open(). */
struct store_stats {
	uint64_t files;		/* sample files open (created or reopened) */
	uint64_t dirs;		/* directories created */
	uint64_t mapped;	/* files mapped now */
	uint64_t mapped_peak;	/* most files mapped at once */
	uint64_t disk_bytes;	/* blocks of its files and directories, about */
	uint64_t overflow_samples; /* samples in the overflow bucket */
	uint64_t overflow_keys;	/* store_get()s answered with the bucket */
	uint64_t unmaps;	/* cold files unmapped */
	uint64_t remaps;	/* unmapped files mapped again */
	uint64_t build_ids_late; /* build-ids written into a file made
				  * without one */
	uint64_t stacks;	/* call chains counted in the stack table */
	uint64_t stacks_dropped; /* call chains past its bounds, not kept */
	uint64_t py_frames;	/* Python frames defined in python.def */
	uint64_t py_refused;	/* ... refused: its bounds, the disk cap */
};

/* Opens (creating as needed) <session_dir>/guests/<guest>/samples/current.
 * Without STORE_APPEND an existing current/ becomes previous/ (the old
 * previous/ is removed).  guest is mangled.  events[0..nr_events) name the
 * events (names [A-Za-z0-9_:-], no two alike); separate is a mask of enum
 * opvm_separate.  One store per guest tree at a time: samples/ is flock()ed
 * until store_close() (EBUSY if another store holds it).  A store is used
 * by one thread at a time.  Returns NULL and sets errno (ELOOP: a symlink
 * in the tree). */
struct store *store_open(const char *session_dir, const char *guest,
			 const struct store_event *events, size_t nr_events,
			 unsigned separate, unsigned flags);
/* Syncs and closes every file; NULL-safe. */
void store_close(struct store *st);
/* Removes the directory tree at path (a session directory, say) without
 * following a link: a symlink at path is refused (-ELOOP).  Absent is fine.
 * 0 or -errno. */
int store_remove_tree(const char *path);
/*
 * Windows (`opvm attach --window`, `opvm exporter --continuous`): a
 * guest's samples/current closed at a window's end is renamed, as a whole,
 * to samples/w-<start>-<end> (wall-clock Unix milliseconds, 13 digits
 * each, so that names sort by time), and a new current/ begins where it
 * ended: consecutive windows tile time with no gap and no overlap, and the
 * windows' sample files together are what one long session would hold.
 * Any reader of samples/<which> reads a window as it reads current/.
 */
#define STORE_WINDOW_NAME_MAX	32
/* "w-<start>-<end>" into buf (STORE_WINDOW_NAME_MAX bytes). */
void store_window_name(char *buf, int64_t start_ms, int64_t end_ms);
/* A window's name back into its times; 0, or -EINVAL if name is none. */
int store_window_parse(const char *name, int64_t *start_ms, int64_t *end_ms);
/* The windows of every guest of the session that overlap [since_ms,
 * until_ms) (a window [s, e) does when e > since_ms and s < until_ms),
 * each name once, oldest first, at most max into names.  Returns how many
 * there are (more than max: only max were written) or -errno (-ENOENT: no
 * guests/).  Nothing is followed through a link. */
int store_windows(const char *session_dir, int64_t since_ms, int64_t until_ms,
		  char (*names)[STORE_WINDOW_NAME_MAX], size_t max);
/* Renames SESSION/guests/<guest>/samples/current to window name, unless
 * a store holds the tree (-EBUSY) or name exists (-EEXIST); -ENOENT
 * without a current/.  guest is mangled; nothing is followed through a
 * link.  0 or -errno. */
int store_seal_window(const char *session_dir, const char *guest, const char *name);
/* The rotation of a window (host/collect/collector-window.c): st's files
 * synced and closed, samples/current renamed window name and a new,
 * empty current/ made, all under the lock st holds since store_open(): no
 * other writer comes between, and the session's path is not walked again.
 * *sealed: 0, or why current/ was not renamed (-EEXIST...: then the new
 * current/ keeps it as previous/, as store_open() would).  Returns 0, or
 * -errno when no current/ could be made: st then takes no sample and is
 * only to be closed. */
int store_rotate(struct store *st, const char *name, int *sealed);
/* Removes window name of the guest tree whose directory under guests/ is
 * gdir (already mangled), without following a link.  0 or -errno. */
int store_remove_window(const char *session_dir, const char *gdir, const char *name);
/* Sets the caps (NULL or 0 fields: defaults).  Lowering a cap below what
 * the store already holds keeps what it has and sends new keys to the
 * overflow bucket; mappings above max_mapped are dropped at once. */
void store_set_limits(struct store *st, const struct store_limits *lim);
void store_get_stats(const struct store *st, struct store_stats *out);
void store_get_limits(const struct store *st, struct store_limits *out);
/* Files mapped by every store of this process together are kept under
 * half of vm.max_map_count (read once); each store still keeps one. */
uint64_t store_mapped_total(void);
unsigned store_separate(const struct store *st);

/* The sample file for key, opened or created on first use and cached by the
 * store (callers may keep the pointer until store_close(); it may be
 * unmapped meanwhile, which sfile_add() undoes).  Past a cap (files,
 * directories, disk) the answer is the overflow bucket of key's event.  The key's
 * merged fields should already reflect store_separate() (the store applies
 * the mask again, so a full key files the same).  In append mode an existing
 * file is validated first (EBADMSG: corrupt, or another event's).  Returns
 * NULL and sets errno (ELOOP: a symlink in the way). */
struct sfile *store_get(struct store *st, const struct store_key *key);

/* Adds count samples at offset.  A file that cannot grow for a new offset
 * (its size limit, the disk cap, a full disk) files the sample in the
 * overflow bucket instead.  Returns 0 or -errno (-ENOSPC: the bucket could
 * not take it either; the file keeps what it had). */
int sfile_add(struct sfile *sf, uint64_t offset, uint64_t count);
/* Adds one sample at each of offsets[0..n), as that many sfile_add() calls
 * would (the same table, byte for byte), for a fraction of their cost.
 * Returns how many of them could not be filed (0: all were), the first
 * one's error in *err; samples after an error are still tried. */
size_t sfile_add_many(struct sfile *sf, const uint64_t *offsets, size_t n, int *err);

/* Makes everything added so far durable against a writer crash
 * (msync of dirty pages is not needed for SIGKILL; the header's totals are
 * published here).  Returns 0 or -errno. */
int store_sync(struct store *st);

/* Path of the current/ directory (owned by the store). */
const char *store_dir(const struct store *st);

/* Writes session.json atomically (tmp + rename) in current/.  json is the
 * serialised object; the store adds nothing.  Returns 0 or -errno. */
int store_write_meta(struct store *st, const char *json);

/* Mangle one guest path into a single safe path component: no '/', no NUL,
 * no control bytes, not "." or "..", at most 200 bytes (longer names keep a
 * prefix and a hash), reversible enough to read ('/' -> '^', as OProfile's
 * mangling).  out must hold OPVM_MANGLE_MAX bytes.  Returns out. */
#define OPVM_MANGLE_MAX	256
char *store_mangle(const char *in, size_t in_len, char *out);
/* Inverse of store_mangle(): writes the guest path (NUL-terminated; it may
 * hold earlier NUL bytes if the guest's did) to out.  A name that was
 * truncated comes back as "<prefix>...~<hash>".  Returns the length or
 * -EINVAL (not a mangled name) / -ENAMETOOLONG. */
int store_unmangle(const char *in, char *out, size_t outlen);

/* Lowers the per-file size limit below OPVM_SFILE_MAX_SIZE (tests, small
 * disks).  Files already larger keep what they have but do not grow. */
void store_set_file_limit(struct store *st, uint64_t bytes);

/* ---- call chains ---------------------------------------------------------
 *
 * With call graphs (-g) a guest tree also holds a stack table (stacks.def,
 * stacks.cnt in current/; host/collect/store-stacks.c): each distinct chain
 * once, leaf first, every frame an (image, offset) as a sample file would
 * file it, and a count per event.  Made afresh by store_stacks_open().
 */
#define STORE_STACKS_MAX	65536		/* distinct stacks per guest */
#define STORE_STACKS_MAX_NAMES	16384		/* distinct apps and images */
#define STORE_STACKS_MAX_DEF	(64ull << 20)	/* bytes of definitions */
#define STORE_STACKS_MAX_FRAMES	128
#define STORE_STACKS_NAME_MAX	4096

struct store_frame {
	const char *image;	/* as store_key's (guest bytes, never a path) */
	int kernel;
	int python;		/* a Python frame: offset is its id in the
				 * Python frame table, image the interpreter */
	const uint8_t *build_id;
	size_t build_id_len;
	uint64_t offset;	/* as in the image's sample file */
	uint32_t tgid;		/* an {anon} frame's process (0: none): an
				 * anonymous address means something only
				 * in its process (JIT code, its perf map) */
};

/* The guest tree's stack table, new (an earlier one is removed).  Its
 * owner (sync) closes it before the store.  NULL and errno. */
struct stacktab;
struct stacktab *store_stacks_open(struct store *st);
void store_stacks_close(struct stacktab *t);	/* NULL-safe */

/* Counts one sample of event whose chain (leaf first) is f[0..n) in app.
 * 0, or -ENOSPC when the table is past a bound (counted in the store's
 * stacks_dropped; the sample files are not affected). */
int store_stack_add(struct stacktab *t, uint8_t event, const char *app,
		    const struct store_frame *f, unsigned n);

/* A chain that could not be kept (its sample was held for late guest
 * state): counted in stacks_dropped. */
void store_stack_lost(struct store *st);

struct store_stack {
	const char *app;
	const struct store_frame *frames;	/* leaf first */
	unsigned nr;
	const uint64_t *counts;		/* [nr_events] */
	unsigned nr_events;
	const char (*events)[32];	/* their names */
};
/* Calls fn for every stack of the table in current_dir (a guest's
 * samples/current); fn's pointers are valid during the call.  Returns 0,
 * fn's nonzero value, -ENOENT (no table: no -g) or -EBADMSG (err says). */
int store_stacks_read(const char *current_dir, int (*fn)(const struct store_stack *s, void *arg),
		      void *arg, char *err, size_t errlen);

/* ---- Python frames -------------------------------------------------------
 *
 * A Python frame (read by a sampler from the guest's interpreter, lib/pynames.h)
 * is a frame kind of its own: a sample whose leaf is Python code is filed
 * under {py} in place of {root} (store_key.python), image the interpreter's
 * path, offset the frame's id in the guest tree's Python frame table
 * (current/python.def, host/collect/store-python.c): its qualified name,
 * file, first line and sampled line.  In the stack table a Python frame is
 * a store_frame with python set, the same id as offset.  The table lives as
 * long as current/ (STORE_APPEND adds to it): each window has its own
 * (store_rotate()), and a reader names a window's frames from that
 * window's table alone.
 */
#define STORE_PY_MAX		65536	/* frames per guest tree */
#define STORE_PY_NAME_MAX	127	/* bytes of a qualified name */
#define STORE_PY_FILE_MAX	191	/* bytes of a file name */

struct store_pytab;
/* The table of st's current/, opened to append (an earlier one of an
 * appending store is kept; one that does not read is replaced).  NULL and
 * errno. */
struct store_pytab *store_python_open(struct store *st);
void store_python_close(struct store_pytab *t);		/* NULL-safe */
/* Defines a frame (name and file cut to their bounds): its id.  0, or
 * -ENOSPC / -EIO (counted in the store's py_refused). */
int store_python_add(struct store_pytab *t, const char *name, const char *file,
		     uint32_t first_line, uint32_t line, uint32_t *id);

/* A frame as a reader gets it: printable UTF-8 (control bytes '?', bytes
 * that are not UTF-8 "\xNN"), never a path. */
struct store_pyframe {
	const char *name, *file;
	uint32_t first_line, line;	/* 0: not known */
};
struct store_pyread;
/* The table in current_dir; NULL and errno (ENOENT: none, EBADMSG: not a
 * table, err says). */
struct store_pyread *store_python_load(const char *current_dir, char *err, size_t errlen);
/* Frame id, or NULL (not defined). */
const struct store_pyframe *store_python_get(const struct store_pyread *t, uint64_t id);
uint32_t store_python_count(const struct store_pyread *t);
void store_python_free(struct store_pyread *t);		/* NULL-safe */

/* ---- reading ------------------------------------------------------------ */

struct sfile_info {
	char event[32];
	uint64_t count;
	uint32_t unit_mask;
	char guest[64];
	uint8_t build_id[32];
	uint8_t build_id_len;
	uint64_t nr_entries;
	uint64_t total;		/* sum of counts */
};

struct sfile_reader;

/* Opens a sample file read-only.  On failure returns NULL, sets errno and
 * writes a one-line reason to err (if non-NULL). */
struct sfile_reader *sfile_reader_open(const char *path, char *err, size_t errlen);
/* A reader with no file yet, for sfile_reader_reopen(); NULL on ENOMEM. */
struct sfile_reader *sfile_reader_new(void);
/* sfile_reader_open() into r (sfile_reader_new()'s, or from an earlier
 * open), reusing its memory: 0, or -errno with err written as above; r
 * then reads as an empty file until the next reopen, and still has to be
 * closed.  flags: SFILE_READ_LATE_CHECK: the table is checked against the
 * header by the foreach functions as they walk it, not by a pass of its
 * own here (half the reads of the table, for a caller that drops what a
 * foreach gave when it ends in -EBADMSG); info's nr_entries and total are
 * the header's then, and the table's own once a foreach walked it whole. */
#define SFILE_READ_LATE_CHECK	1u
int sfile_reader_reopen(struct sfile_reader *r, const char *path, unsigned flags, char *err,
			size_t errlen);
void sfile_reader_close(struct sfile_reader *r);
const struct sfile_info *sfile_reader_info(const struct sfile_reader *r);
/* Calls fn(offset, count) for each entry (unordered).  Stops and returns fn's
 * value when nonzero; returns -EBADMSG if the file is found corrupt midway. */
int sfile_reader_foreach(struct sfile_reader *r,
			 int (*fn)(uint64_t offset, uint64_t count, void *arg), void *arg);
/* The same by batches: fn gets at most SFILE_BATCH entries at a time, for
 * work that is cheaper a batch at once (a report's symbol lookups). */
#define SFILE_BATCH	256
int sfile_reader_foreach_batch(struct sfile_reader *r,
			       int (*fn)(const uint64_t *offs, const uint64_t *counts,
					 size_t n, void *arg), void *arg);

/* One sample file found under a samples/current (or any samples/<name>)
 * directory, with its path fields parsed and unmangled. */
struct store_entry {
	const char *path;	/* full path of the sample file */
	const char *guest;	/* unmangled guest name */
	const char *app;	/* unmangled application path */
	const char *image;	/* unmangled image path */
	int kernel;		/* image under {kern} */
	int python;		/* under {py}: offsets are Python frame ids */
	const char *event;
	uint64_t count;
	uint32_t unit_mask;
	int64_t tgid, tid, cpu;	/* -1 for "all" */
	const char *cgroup;	/* unmangled cgroup path; NULL: none (and
				 * every file of a layout-1 tree) */
};

/* The apps the collector files idle and boot samples under whatever the
 * separation ({idle}, {boot}) as users read them: "(idle)" and
 * "(firmware/boot)"; any other app as it is. */
#define STORE_APP_IDLE	"(idle)"
#define STORE_APP_BOOT	"(firmware/boot)"
const char *store_app_label(const char *app);

/* Walks <session_dir>/guests/ * /samples/<which>/ ("current" or "previous")
 * calling fn for each sample file.  Files whose names do not parse are
 * skipped and counted in *skipped (may be NULL).  Returns 0, fn's nonzero
 * value, or -errno. */
int store_walk(const char *session_dir, const char *which,
	       int (*fn)(const struct store_entry *e, void *arg), void *arg,
	       size_t *skipped);

#endif /* OPVM_STORE_H */
