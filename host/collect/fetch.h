/* SPDX-License-Identifier: MIT */
/*
 * What the guest sends so that reports need no files from the operator:
 *  - its kernel's symbols (KSYMS records, docs/protocol.md section 4), kept
 *    per guest as <session>/guests/<guest>/kallsyms in /proc/kallsyms text
 *    form, which symbols/ reads like a System.map, and beside it
 *    kallsyms.modules ("BASE SIZE NAME" from the MODULE records) so that a
 *    module's symbols can be made base-relative like its samples; a
 *    transfer that repeats the kallsyms the session has writes nothing (a
 *    sampler started again sends the same table), and one that differs
 *    goes to kallsyms.part until its end, at most max_ksyms bytes;
 *  - its binaries by build-id: for each image that has samples and is not
 *    in the guest's build-id cache, the host writes a FETCH request to the
 *    channel, one file at a time; FILE_DATA/FILE_END come back, into a
 *    private temporary file, checked (offsets in order, caps, the guest's
 *    status, size, then ELF and build-id by the caller's verify function)
 *    before the file is renamed to <cache>/<xx>/<rest of the build-id>.
 *    The cache is per guest and shared by its sessions (a second session
 *    fetches nothing the first one got);
 *  - the perf map of each process with samples in anonymous memory (JIT
 *    code): the guest's /tmp/perf-<tgid>.map, flagged OPVM_FETCH_F_PERFMAP,
 *    asked again from where it stopped every FETCH_PERFMAP_EVERY_MS (it
 *    grows), appended to <session>/guests/<guest>/perfmaps/<tgid>.map, at
 *    most FETCH_PERFMAP_MAX; its jitdump the same way (/tmp/jit-<tgid>.dump,
 *    the same flag: the relay finds it by the process's mapping of it, or
 *    at that path in the process's root; <tgid>.dump in the session);
 *    after the binaries, before the debug files (fetch-perfmap.c; the
 *    reports read them: symbols/perfmap.h);
 *  - the debug file of each such image, after the binaries: the guest's
 *    /usr/lib/debug/.build-id/xx/yyyy.debug (a path made from the build-id
 *    alone), flagged OPVM_FETCH_F_DEBUG for the relay's CPU pace, checked
 *    the same way, into <cache>/<xx>/<rest>.debug.
 *
 * Everything arrives from the guest: every entry is bounds-checked, names
 * are made printable single tokens, the file is capped
 * (FETCH_KSYMS_MAX_BYTES) and private (0600), its name and directory come
 * from the host alone, and what is refused is counted.
 */
#ifndef OPVM_FETCH_H
#define OPVM_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "guest-kmod/opvm_proto.h"

/* Largest kallsyms file kept per guest (Debian 12's: ~3 MiB of text
 * symbols); symbols beyond it are dropped and counted.  The most
 * fetch_config.max_ksyms may be. */
#define FETCH_KSYMS_MAX_BYTES	((size_t)32 << 20)
/* Defaults of the per-file and per-session caps of fetched binaries. */
#define FETCH_FILE_MAX		((uint64_t)256 << 20)
#define FETCH_SESSION_MAX	((uint64_t)1 << 30)
/* Default cap of one guest's build-id cache, all its sessions together:
 * past it the least recently used files are removed (fetch-cache.c). */
#define FETCH_CACHE_MAX		((uint64_t)2 << 30)
/* Files a session considers: each image's binary (a build-id and a path)
 * and its debug file take one entry each. */
#define FETCH_MAX_IMAGES	4096
/* Modules whose base is remembered for <guest>/kallsyms.modules. */
#define FETCH_MAX_MODULES	4096
/* Perf maps and jitdumps: the most kept of one (more is refused and
 * counted), how often one is asked again, how many processes' maps and
 * dumps, and how many times a file that is not there is asked for before
 * it is given up. */
#define FETCH_PERFMAP_MAX	((uint64_t)64 << 20)
#define FETCH_PERFMAP_EVERY_MS	2000
#define FETCH_MAX_PERFMAPS	256
#define FETCH_PERFMAP_ABSENT_TRIES	5
/* A request that makes no progress this long is given up. */
#define FETCH_TIMEOUT_MS	30000
/* Requests of one image at most (a HELLO mid-transfer asks again from
 * where it stopped). */
#define FETCH_ATTEMPTS		3

struct fetch;

struct fetch_config {
	const char *guest_dir;		/* <session>/guests/<guest>: kallsyms */
	const char *cache_dir;		/* <cache>/<guest>; NULL: no binaries */
	uint64_t max_file;		/* 0: FETCH_FILE_MAX */
	uint64_t max_session;		/* 0: FETCH_SESSION_MAX */
	uint64_t max_cache;		/* 0: FETCH_CACHE_MAX */
	uint64_t max_ksyms;		/* bytes of one kallsyms transfer, its
					 * part file; 0 (or more):
					 * FETCH_KSYMS_MAX_BYTES */
	int no_ksyms;			/* 1: do not keep the kernel's symbols */
	int no_debug_files;		/* 1: binaries only, no debug files */
	int no_perfmaps;		/* 1: no JIT perf maps */
	int public_files;		/* 1: the session's files (kallsyms) are
					 * 0666 less the umask, as the sample tree
					 * with --umask; else 0600 */
	/* Checks the file at path: 0 if it is a usable ELF whose build-id is
	 * bid, -ESTALE for another build-id, another -errno if not an ELF or
	 * none.  NULL: no binaries are fetched (nothing could check them). */
	int (*verify)(const char *path, const uint8_t *bid, size_t len);
};

struct fetch_stats {
	uint64_t ksyms_records;		/* KSYMS records taken */
	uint64_t ksyms_syms;		/* symbols written */
	uint64_t ksyms_bad;		/* entries refused (lengths, type, address) */
	uint64_t ksyms_capped;		/* symbols dropped at the size cap */
	uint64_t ksyms_bytes;		/* bytes of the current file */
	uint64_t ksyms_done;		/* KSYMS_END records: complete transfers */
	uint64_t ksyms_restricted;	/* KSYMS_END said kptr_restrict hid them */
	uint64_t ksyms_module_walk;	/* ... and opvm.ko sent its own walk */
	uint64_t ksyms_truncated;	/* KSYMS_END said the relay stopped at its cap */
	uint64_t ksyms_end_mismatch;	/* KSYMS_END count != symbols received */
	uint64_t ksyms_merged;		/* lines of the other kind kept from the
					 * kallsyms a one-kind transfer replaced */
	uint64_t ksyms_unchanged;	/* transfers that repeated the stored
					 * kallsyms: nothing written */
	/* the host's word to the relay after each HELLO (OPVM_REQ_KSYMS) */
	uint64_t ksyms_asked_all, ksyms_asked_modules, ksyms_asked_none;
	uint64_t ksyms_slide_mismatch;	/* the kernel's _text or HELLO's anchor
					 * at another address in kallsyms than
					 * in HELLO: not believed (the reports
					 * keep opvm.ko's slide) */
	uint64_t io_errors;		/* writes or renames that failed */
	/* binaries */
	uint64_t images;		/* distinct images with samples seen */
	uint64_t cached;		/* already in the cache: nothing to fetch */
	uint64_t requests;		/* FETCH requests written */
	uint64_t files;			/* files verified and cached */
	uint64_t bytes;			/* their bytes */
	uint64_t data_bytes;		/* FILE_DATA bytes taken (all files) */
	uint64_t guest_refused;		/* FILE_END with an error from the guest */
	uint64_t mismatch;		/* build-id differs from the one asked */
	uint64_t not_elf;		/* not a usable ELF, or no build-id */
	uint64_t too_big;		/* over the per-file cap */
	uint64_t session_cap;		/* images left out: per-session cap */
	uint64_t bad_order;		/* FILE_DATA not at the expected offset,
					 * FILE_END size != bytes received */
	uint64_t stray;			/* FILE_DATA/END of no open request */
	uint64_t timeouts;		/* requests given up (FETCH_TIMEOUT_MS) */
	uint64_t table_full;		/* images past FETCH_MAX_IMAGES */
	uint64_t write_errors;		/* requests the channel did not take */
	uint64_t elapsed_ms;		/* time files were in transfer */
	uint64_t pruned;		/* cache files removed at its cap */
	uint64_t pruned_bytes;		/* their bytes */
	uint64_t stale_parts;		/* killed sessions' part files removed */
	uint64_t cache_bytes;		/* the guest's cache after the last prune */
	uint64_t cache_refused;		/* the guest's cache directory was refused
					 * (a link, another user's, shared):
					 * nothing fetched (fetch_to_json():
					 * binaries.cache_error says why) */
	uint64_t cache_links;		/* links (or other non-files) at a cached
					 * file's name: not taken as cached */
	/* symbols read from guest memory (fetch_memsyms_put()) */
	uint64_t memsyms_files;		/* written to the cache */
	uint64_t memsyms_bytes;		/* their bytes */
	uint64_t memsyms_cached;	/* already there: not read again */
	uint64_t memsyms_failed;	/* not written: unreadable ELF, I/O */
	/* debug files (/usr/lib/debug/.build-id/xx/yyyy.debug in the guest,
	 * <cache>/xx/yyyy.debug here), also counted in the figures above
	 * (requests, files, bytes, mismatch, not_elf) */
	uint64_t debug_requests;
	uint64_t debug_files, debug_bytes;
	uint64_t debug_absent;		/* the guest has none (-ENOENT) */
	uint64_t debug_refused;		/* not an ELF of the build-id asked */
	uint64_t debug_cached;		/* already in the cache */
};

/*
 * Keeps the build-id cache dir (<cache>/<guest>) at most max bytes by
 * removing its least recently used files (mtime), and the part files of
 * an opvm killed mid-transfer.  Returns 0 or -errno
 * (a missing dir is empty); out says what went and what is left.
 */
struct fetch_prune {
	uint64_t files, bytes;		/* removed (bytes: stale parts' too) */
	uint64_t stale_parts;		/* part files of an opvm that is gone */
	uint64_t cache_bytes;		/* left */
};
int fetch_cache_prune(const char *dir, uint64_t max, struct fetch_prune *out);
/* The same on the open directory dfd (not closed). */
int fetch_cache_prune_at(int dfd, uint64_t max, struct fetch_prune *out);

/* Paths are the host's (guest_dir exists; cache_dir is created 0700 when
 * first needed, through lib/safepath.h: a link, another user's directory
 * or one others may write is refused, and nothing is fetched).  Returns
 * NULL and sets errno. */
struct fetch *fetch_new(const struct fetch_config *cfg);
/* Closes the file being written (kept, as far as it got); NULL-safe. */
void fetch_free(struct fetch *f);

/* A record the decoder accepted (decoder_record_fn contract: len >= the
 * type's fixed size, chan_rec_check() passed).  Other types are ignored. */
void fetch_record(struct fetch *f, const struct opvm_rec_hdr *rec, size_t len);

/* An image of the guest has samples (sync's image_used): path is the
 * cookie's sanitised path, bid its build-id.  Remembered (copied) for
 * fetch_poll() unless the cache holds it. */
void fetch_want(struct fetch *f, const char *path, const uint8_t *bid, size_t len);
/* Writes the next FETCH request to the channel fd when none is open, and
 * gives up one that made no progress for FETCH_TIMEOUT_MS.  fd < 0: not
 * connected.  Never blocks. */
void fetch_poll(struct fetch *f, int fd, uint64_t now_ms);

/*
 * The host's word on the kernel's symbols (OPVM_REQ_KSYMS): due after each
 * HELLO, once; the relay sends none until it comes (or its wait ends).
 * fetch_ksyms_tell() writes want (OPVM_KSYMS_WANT_*) if due: 0 (written,
 * or not due), -EAGAIN (the channel is full: again later) or -EIO.
 */
bool fetch_ksyms_word_due(const struct fetch *f);
int fetch_ksyms_tell(struct fetch *f, int fd, unsigned want);
/* Whether <guest>/kallsyms, when the latest HELLO came, was that HELLO's
 * kernel: its _text and the HELLO's anchor at the HELLO's run-time
 * addresses (a sampler started again for the same boot).  Its vmlinux
 * lines need not be sent again; the modules' may have changed. */
bool fetch_ksyms_stored(const struct fetch *f);

/*
 * Symbols read from guest memory (vmm/introspect/memsyms.h), for images the
 * cache has no binary of: a small ELF of their .dynsym, cached beside the
 * binaries as <cache>/<guest>/xx/<rest>.memsyms, so the next session and
 * the reports of any day use it (the resolver takes it when it finds no
 * binary: symbols/symres.h).
 *
 * fetch_memsyms_due(): 1 when the image bid was wanted (fetch_want()), the
 * cache has neither its binary nor its memory symbols, and the cache can
 * be written; 0 otherwise (the mtime of a file found is set: used).
 * fetch_memsyms_put(): buf[n] checked by cfg.verify and renamed into the
 * cache.  0 or -errno.
 */
#define FETCH_MEMSYMS_SUFFIX	".memsyms"
int fetch_memsyms_due(struct fetch *f, const uint8_t *bid, size_t len);
int fetch_memsyms_put(struct fetch *f, const uint8_t *bid, size_t len, const void *buf,
		      size_t n);

/* Process tgid has samples in its anonymous memory (attribution.h's
 * anon_used): its perf map and its jitdump are asked for, and again as
 * they grow. */
void fetch_perfmap_want(struct fetch *f, int64_t tgid);

/* Whether the image with build-id bid is on its way: wanted or in
 * transfer, with a relay that answers.  0 once it came, failed or was
 * given up (then the file is in the cache, or will not be). */
int fetch_coming(const struct fetch *f, const uint8_t *bid, size_t len);
/* Where the guest kernel's ORC tables are (run-time addresses), from the
 * kallsyms the guest is sending or sent since its last HELLO: 0, or
 * -ENOENT while they are not known. */
int fetch_kernel_orc(const struct fetch *f, uint64_t *ip_start, uint64_t *ip_stop,
		     uint64_t *orc_start);
/* Where the guest kernel's int3 entry path is (vmm/guest/int3loop.h),
 * from the same kallsyms: 0, or -ENOENT while none of it is known. */
struct sampler_int3;
int fetch_kernel_int3(const struct fetch *f, struct sampler_int3 *out);
/* Images whose transfer ended (cached or given up), a count that only
 * grows: a change says a waiting unwind may go on (attribution.h). */
uint64_t fetch_settled(const struct fetch *f);
/* Whether any binary (not a debug file) is wanted or in transfer with a
 * relay that answers. */
int fetch_busy(const struct fetch *f);

const struct fetch_stats *fetch_get_stats(const struct fetch *f);
/* The counters for session.json "fetch"; NULL on ENOMEM. */
json_t *fetch_to_json(const struct fetch *f);

/*
 * One KSYMS record (checked by chan_rec_check()) as kallsyms text lines
 * "ADDR TYPE NAME[\t[MODULE]]\n" into out (at most outlen bytes; entries
 * that do not fit are counted in *capped).  Entries with a bad length,
 * address 0, or a type other than t/T/w/W (but for vmlinux's ORC table
 * symbols, opvm_ksyms_table(), as r/R/d/D/b/B) are skipped and counted in
 * *bad; bytes outside printable ASCII, spaces and brackets in names
 * become '?'.  Returns the bytes written; *ok gets the symbols written;
 * tables[OPVM_KSYMS_TABLES] (may be NULL) the addresses of the ORC table
 * symbols seen.  Pure: the fuzz target calls it.
 */
size_t fetch_ksyms_text(const void *rec, size_t len, char *out, size_t outlen,
			uint64_t *ok, uint64_t *bad, uint64_t *capped, uint64_t *tables);

#endif /* OPVM_FETCH_H */
