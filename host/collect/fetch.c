// SPDX-License-Identifier: MIT
/*
 * Files the guest sends for the reports (host/collect/fetch.h).
 *
 * Kernel symbols: a transfer is KSYMS records then KSYMS_END; it is written to
 * <guest>/kallsyms.part and renamed to <guest>/kallsyms at the end (or
 * when the session ends first: a partial table still names most samples).
 * One that repeats the kallsyms the session has writes nothing
 * (fetch-ksame.c), and at most cfg.max_ksyms bytes are written of one
 * (the exporter's store keeps room for that much: attach
 * --fetch-max-ksyms).  A HELLO whose kernel is the stored file's
 * (ksyms_stored()) takes its ORC tables and int3 path from it.
 * A HELLO (reboot, new host session) abandons an open transfer: the relay
 * starts a new one after it, if the host asks (fetch_ksyms_tell()).  A
 * transfer of vmlinux's symbols only (introspection's) or of the modules'
 * only (opvm.ko's "kmod" walk) replaces that part of the file and keeps
 * the other (ksyms_merge()).  The modules' bases (MODULE records) go to
 * <guest>/kallsyms.modules.
 *
 * Binaries: a table of the images with samples (fetch_want()), one request
 * open at a time (f->cur), its bytes in a part file named by the host,
 * checked in order and against the caps as they come, verified as a whole
 * at FILE_END and renamed into the cache under its build-id.
 *
 * Perf maps: their table and files are fetch-perfmap.c's; the one request
 * open at a time may be one of them (f->pm_cur), asked after the binaries
 * and before the debug files.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/collect/fetch-priv.h"
#include "host/collect/fetch.h"
#include "host/collect/stats.h"
#include "lib/channel.h"
#include "lib/fs.h"
#include "lib/hex.h"
#include "lib/safepath.h"
#include "vmm/guest/int3loop.h"
#include "lib/text.h"
#include "vmm/introspect/introspect.h"

enum img_state { IMG_WANT, IMG_ACTIVE, IMG_DONE, IMG_FAILED, IMG_CACHED };

struct img {
	uint8_t bid[OPVM_BUILD_ID_MAX];
	uint8_t bid_len;
	uint8_t state;			/* enum img_state */
	uint8_t attempts;
	uint8_t debug;			/* its debug file, not the binary */
	char *path;			/* the guest's, for the request only */
	uint64_t received;		/* bytes in the part file */
};

/* Where each module is, from MODULE records: kallsyms gives run-time
 * addresses, a module's samples are offsets from its base. */
struct fmod {
	char name[OPVM_MODNAME_LEN + 1];	/* name_byte()-sanitised */
	uint64_t base, size;
};

struct fetch {
	struct fetch_config cfg;
	struct fmod *mods;		/* FETCH_MAX_MODULES */
	size_t nr_mods;
	int gfd;			/* <session>/guests/<guest>, opened */
	char *cache;			/* <cache>/<guest>, or NULL */
	int cfd;			/* it, opened by cache_open(), or -1 */
	char cache_err[1024];		/* why it was refused, escaped ("" if it
					 * was not): cache_refuse() */
	bool xfer;			/* a kernel-symbol transfer is open */
	struct ksame *same;		/* it repeats the stored kallsyms so far
					 * (nothing written), or NULL */
	int fd;				/* kallsyms.part being written, or -1 */
	size_t bytes;			/* in the transfer */
	bool stored_ok;			/* the stored kallsyms is the latest
					 * HELLO's kernel (ksyms_stored()) */
	struct fetch_stats st;
	struct img *imgs;		/* FETCH_MAX_IMAGES */
	size_t nr_imgs;
	struct img *cur;		/* the open request, or NULL */
	struct fetch_pmaps *pm;		/* perf maps, NULL: none fetched */
	bool pm_cur;			/* the open request is a perf map's */
	uint32_t req_id;		/* cur's latest request */
	bool resend;			/* cur must be asked again (HELLO) */
	int part;			/* cur's part file, or -1 */
	uint64_t last_ms;		/* cur's last progress */
	uint64_t start_ms;		/* cur's request */
	bool progress;			/* cur got data since the last poll */
	bool ended;			/* a request ended since the last poll:
					 * its time counts from start_ms */
	bool answered;			/* the relay answered some request */
	bool hello;			/* a HELLO came through the relay: it runs
					 * and reads requests (none before: under
					 * introspection images have samples long
					 * before a booting guest starts its relay,
					 * and a request it never saw made the host
					 * think it predates FETCH) */
	bool mute;			/* it never did and one timed out */
	uint64_t settled;		/* transfers ended (fetch_settled()) */
	bool word_due;			/* a HELLO came: the relay waits for the
					 * host's word on the symbols */
	unsigned kinds;			/* the open transfer's: FETCH_KIND_* */
	uint64_t tables[OPVM_KSYMS_TABLES];	/* this transfer's, 0: none yet */
	uint64_t tables_text;		/* _text in the table they came with */
	/* the int3 entry path's symbols in this vmlinux table
	 * (int3loop.h), and 1 + the one whose end is not seen yet */
	struct sampler_int3 int3;
	unsigned int3_open;
	/* the latest HELLO's kernel, against which kallsyms is checked */
	uint64_t hello_text, hello_anchor_addr;
	char hello_anchor[OPVM_SYMNAME_LEN + 1];	/* name_byte()-sanitised */
	char ksyms_conflict[160];	/* the first disagreement, or "" */
	char text[OPVM_REC_MAX / 10 * FETCH_KLINE_MAX];	/* one record's lines */
};

/* The session's own files follow the sample tree's modes (--umask); the
 * build-id cache, outside the session, stays private. */
static mode_t session_mode(const struct fetch *f)
{
	return f->cfg.public_files ? 0666 : 0600;
}

/* A refusal of the guest's directory or of one below it (an xx): the
 * whole cache is given up for the session.  The first reason is kept,
 * escaped once here (text_escape(): it holds the user's path and names
 * from the guest's directory), for session.json and the summary that
 * prints it. */
static void cache_refuse(struct fetch *f, int err, const char *why)
{
	if (!f->cache_err[0])
		text_escape(f->cache_err, sizeof(f->cache_err), why[0] ? why : strerror(-err));
	f->st.cache_refused++;
}

/*
 * The guest's cache directory into f->cfd, through lib/safepath.h: its
 * parent (the root the session chose and checked) walked again from "/",
 * the guest's own directory made 0700 and never a link, another user's or
 * one others may write.  0, -ENOENT (not there, !create), or another
 * -errno: refused for the rest of the session, counted, and said
 * (session.json fetch.binaries.cache_error).
 */
static int cache_open(struct fetch *f, bool create)
{
	char root[4096], why[256] = "", *name;
	int fd;

	if (f->cache_err[0])
		return -EPERM;
	if (f->cfd >= 0)
		return 0;
	snprintf(root, sizeof(root), "%s", f->cache);
	name = strrchr(root, '/');
	if (!name || !name[1])
		return -EINVAL;	/* collector.c makes <root>/<guest> */
	*name++ = '\0';
	fd = safepath_open_base(*root ? root : "/", 0700, create ? SAFEPATH_CREATE : 0, NULL, 0,
				why, sizeof(why));
	if (fd >= 0) {
		int rfd = fd;

		fd = safepath_open_sub(rfd, *root ? root : "", name, 0700,
				       SAFEPATH_PRIVATE | (create ? SAFEPATH_CREATE : 0),
				       why, sizeof(why));
		close(rfd);
	}
	if (fd == -ENOENT && !create)
		return fd;
	if (fd < 0) {
		if (!why[0])
			snprintf(why, sizeof(why), "cannot open %s: %s", f->cache, strerror(-fd));
		cache_refuse(f, fd, why);
		return fd;
	}
	f->cfd = fd;
	return 0;
}

/* The guest's cache within its cap: at the start and after each file. */
static void cache_prune(struct fetch *f)
{
	struct fetch_prune p;

	if (!f->cache || cache_open(f, false))
		return;
	if (fetch_cache_prune_at(f->cfd, f->cfg.max_cache, &p))
		f->st.io_errors++;
	f->st.pruned += p.files;
	f->st.pruned_bytes += p.bytes;
	f->st.stale_parts += p.stale_parts;
	f->st.cache_bytes = p.cache_bytes;
}

struct fetch *fetch_new(const struct fetch_config *cfg)
{
	struct fetch *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->cfg = *cfg;
	f->fd = f->part = f->cfd = -1;
	if (!f->cfg.max_file)
		f->cfg.max_file = FETCH_FILE_MAX;
	if (!f->cfg.max_session)
		f->cfg.max_session = FETCH_SESSION_MAX;
	if (!f->cfg.max_cache)
		f->cfg.max_cache = FETCH_CACHE_MAX;
	if (!f->cfg.max_ksyms || f->cfg.max_ksyms > FETCH_KSYMS_MAX_BYTES)
		f->cfg.max_ksyms = FETCH_KSYMS_MAX_BYTES;
	/* the store has just walked it without links; its files are made
	 * from this fd, never by a path again */
	f->gfd = open(cfg->guest_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	f->mods = calloc(FETCH_MAX_MODULES, sizeof(*f->mods));
	if (cfg->cache_dir && cfg->verify) {
		f->cache = strdup(cfg->cache_dir);
		f->imgs = calloc(FETCH_MAX_IMAGES, sizeof(*f->imgs));
	}
	if (!f->mods || (cfg->cache_dir && cfg->verify && (!f->cache || !f->imgs))) {
		fetch_free(f);
		errno = ENOMEM;
		return NULL;
	}
	if (!cfg->no_perfmaps && f->gfd >= 0 && !(f->pm = fetch_pmaps_new(f->gfd, session_mode(f)))) {
		fetch_free(f);
		errno = ENOMEM;
		return NULL;
	}
	f->cfg.guest_dir = f->cfg.cache_dir = NULL;	/* not kept */
	cache_prune(f);
	return f;
}

/* A guest name byte as it may appear in a kallsyms line (one token). */
static char name_byte(unsigned char c)
{
	return c > ' ' && c < 0x7f && c != '[' && c != ']' ? (char)c : '?';
}

static void mod_name(char *dst, const char *src)
{
	size_t n = chan_strnlen(src, OPVM_MODNAME_LEN);

	for (size_t i = 0; i < n; i++)
		dst[i] = name_byte((unsigned char)src[i]);
	dst[n] = '\0';
}

static void mod_record(struct fetch *f, const struct opvm_rec_hdr *rec, bool load)
{
	struct opvm_rec_module m;
	char name[OPVM_MODNAME_LEN + 1];
	size_t i;

	memcpy(&m, rec, sizeof(m));
	mod_name(name, m.name);
	for (i = 0; i < f->nr_mods && strcmp(f->mods[i].name, name); i++)
		;
	if (!load) {
		if (i < f->nr_mods)
			f->mods[i] = f->mods[--f->nr_mods];
		return;
	}
	if (i == f->nr_mods) {
		if (f->nr_mods == FETCH_MAX_MODULES || !*name)
			return;
		f->nr_mods++;
	}
	memcpy(f->mods[i].name, name, sizeof(name));
	f->mods[i].base = le64toh(m.base);
	f->mods[i].size = le64toh(m.size);
}

/* A part file in the guest's directory of the session's tree: never
 * through a link, and only a regular file of one link (a FIFO planted at
 * the name must not block the collector).  The fd or -1. */
static int part_create(const struct fetch *f, const char *name, mode_t mode)
{
	int fd = f->gfd < 0 ? -EBADF : safepath_create_file(f->gfd, name, mode, 0);

	return fd < 0 ? -1 : fd;
}

/* <guest>/kallsyms.modules: "BASE SIZE NAME" per module, for reports to
 * rebase the modules' kallsyms lines (symbols/ksyms.h). */
static void mods_write(struct fetch *f)
{
	static const char tmp[] = "kallsyms.modules.part";
	FILE *o;
	int fd;

	if (!f->nr_mods || f->cfg.no_ksyms)
		return;
	fd = part_create(f, tmp, session_mode(f));
	o = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!o) {
		if (fd >= 0)
			close(fd);
		f->st.io_errors++;
		return;
	}
	for (size_t i = 0; i < f->nr_mods; i++)
		fprintf(o, "%llx %llx %s\n", (unsigned long long)f->mods[i].base,
			(unsigned long long)f->mods[i].size, f->mods[i].name);
	if (fclose(o) || renameat(f->gfd, tmp, f->gfd, "kallsyms.modules")) {
		f->st.io_errors++;
		unlinkat(f->gfd, tmp, 0);
	}
}

/*
 * A transfer of one kind of symbols (vmlinux's or the modules') keeps the
 * other kind's lines of the kallsyms it replaces: introspection reads
 * vmlinux's from guest memory, the relay then sends the modules' only.
 * Module lines are the ones with "\t[".  Bounded like the transfer.
 */
static void ksyms_merge(struct fetch *f, const char *old)
{
	bool want_mod = !(f->kinds & FETCH_KIND_MODULES);
	int fd = fs_openat_regular(f->gfd, old, O_NOFOLLOW);
	FILE *in = fd >= 0 ? fdopen(fd, "r") : NULL;
	char line[FETCH_KLINE_MAX + 2];

	if (!in) {
		if (fd >= 0)
			close(fd);
		return;		/* none yet: nothing to keep */
	}
	while (fgets(line, sizeof(line), in)) {
		size_t n = strlen(line);

		if (!n || line[n - 1] != '\n' || (strstr(line, "\t[") != NULL) != want_mod)
			continue;	/* not a line this file's writer made */
		if (n > f->cfg.max_ksyms - f->bytes) {
			f->st.ksyms_capped++;
			continue;
		}
		if (write(f->fd, line, n) != (ssize_t)n) {
			f->st.io_errors++;
			break;
		}
		f->bytes += n;
		f->st.ksyms_syms++;
		f->st.ksyms_merged++;
	}
	fclose(in);
	f->st.ksyms_bytes = f->bytes;
}

/* Closes the transfer; keep: rename the part to kallsyms (with the other
 * kind's lines of the old one when it held one kind only).  One that
 * repeated the stored file leaves it as it is (at the end of a session,
 * a partial transfer of it too: the stored file has more). */
static void ksyms_close(struct fetch *f, bool keep)
{
	if (!f->xfer)
		return;
	f->xfer = false;
	ksame_close(f->same);
	f->same = NULL;
	if (f->fd < 0)
		return;
	if (keep && f->kinds && f->kinds != (FETCH_KIND_VMLINUX | FETCH_KIND_MODULES))
		ksyms_merge(f, "kallsyms");
	if (close(f->fd))
		f->st.io_errors++;
	f->fd = -1;
	if (keep ? renameat(f->gfd, "kallsyms.part", f->gfd, "kallsyms") :
		   unlinkat(f->gfd, "kallsyms.part", 0))
		f->st.io_errors++;
}

/* The open request's part file: a name only the host makes, in the
 * guest's cache directory (f->cfd). */
static void part_name(const struct fetch *f, char *out, size_t len)
{
	snprintf(out, len, ".part-%d-%zu", (int)getpid(), (size_t)(f->cur - f->imgs));
}

/* Ends the open request; its part file goes. */
static void img_close(struct fetch *f, enum img_state state)
{
	char name[64];

	if (!f->cur)
		return;
	if (f->part >= 0) {
		close(f->part);
		f->part = -1;
		part_name(f, name, sizeof(name));
		unlinkat(f->cfd, name, 0);
	}
	f->cur->received = 0;
	f->cur->state = (uint8_t)state;
	f->cur = NULL;
	f->settled++;
	f->resend = false;
}

void fetch_free(struct fetch *f)
{
	if (!f)
		return;
	ksyms_close(f, f->st.ksyms_syms > 0);
	mods_write(f);
	if (f->cur)
		img_close(f, IMG_FAILED);
	for (size_t i = 0; i < f->nr_imgs; i++)
		free(f->imgs[i].path);
	free(f->imgs);
	fetch_pmaps_free(f->pm);
	free(f->mods);
	if (f->cfd >= 0)
		close(f->cfd);
	free(f->cache);
	if (f->gfd >= 0)
		close(f->gfd);
	free(f);
}

const struct fetch_stats *fetch_get_stats(const struct fetch *f)
{
	return &f->st;
}


static size_t put_name(char *o, const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		o[i] = name_byte(s[i]);
	return n;
}

size_t fetch_ksyms_text(const void *rec, size_t len, char *out, size_t outlen,
			uint64_t *ok, uint64_t *bad, uint64_t *capped, uint64_t *tables)
{
	struct opvm_rec_ksyms k;
	const uint8_t *p = (const uint8_t *)rec + sizeof(k), *end;
	size_t used = 0, mlen;

	*ok = *bad = *capped = 0;
	if (len < sizeof(k))
		return 0;
	memcpy(&k, rec, sizeof(k));
	/* chan_rec_check() bounded bytes by len; checked again, cheaply */
	if (sizeof(k) + le16toh(k.bytes) > len)
		return 0;
	end = p + le16toh(k.bytes);
	mlen = chan_strnlen(k.module, sizeof(k.module));
	while (end - p >= 10) {
		uint64_t addr;
		unsigned type = p[8], nlen = p[9];
		char line[FETCH_KLINE_MAX];
		int table = -1;
		size_t l;

		memcpy(&addr, p, 8);
		addr = le64toh(addr);
		if (!nlen || nlen > OPVM_KSYM_NAME_MAX || (size_t)(end - p) < 10u + nlen) {
			(*bad)++;	/* a length that lies ends the record */
			break;
		}
		if (!addr || !type || (!strchr("tTwW", (int)type) &&
		    (mlen || !strchr("rRdDbB", (int)type) ||
		     (table = opvm_ksyms_table((const char *)p + 10, nlen)) < 0))) {
			(*bad)++;
			p += 10 + nlen;
			continue;
		}
		if (table >= 0 && tables)
			tables[table] = addr;
		l = (size_t)snprintf(line, sizeof(line), "%016llx %c ",
				     (unsigned long long)addr, (char)type);
		l += put_name(line + l, p + 10, nlen);
		if (mlen) {
			memcpy(line + l, "\t[", 2);
			l += 2;
			l += put_name(line + l, (const uint8_t *)k.module, mlen);
			line[l++] = ']';
		}
		line[l++] = '\n';
		p += 10 + nlen;
		if (used + l > outlen) {
			(*capped)++;
			continue;
		}
		memcpy(out + used, line, l);
		used += l;
		(*ok)++;
	}
	return used;
}

/*
 * The kernel's own _text and HELLO's anchor in the lines just made, against
 * the HELLO: kallsyms holds run-time addresses, so they must be equal.  A
 * kallsyms that puts them elsewhere would move every kernel sample to
 * names the guest chose; the file is kept (its other lines name modules),
 * the disagreement counted and said, and the reports keep opvm.ko's
 * addresses (symbols/symres.c).
 */
static void ksyms_check(struct fetch *f, const char *t, size_t n)
{
	const char *end = t + n;

	while (t < end) {
		const char *nl = memchr(t, '\n', (size_t)(end - t)), *name = t + 19;
		size_t len;
		uint64_t want = 0, got;

		if (!nl)
			break;
		len = nl > name ? (size_t)(nl - name) : 0;
		/* "ADDR T NAME\n" of the kernel itself (a module's has "\t[") */
		if (len && !memchr(name, '\t', len)) {
			if (len == 5 && !memcmp(name, "_text", 5)) {
				want = f->hello_text;
				f->tables_text = strtoull(t, NULL, 16);
			}
			else if (len == strlen(f->hello_anchor) && !memcmp(name, f->hello_anchor, len))
				want = f->hello_anchor_addr;
		}
		got = want ? strtoull(t, NULL, 16) : 0;
		if (want && got != want) {
			f->st.ksyms_slide_mismatch++;
			if (!f->ksyms_conflict[0])
				snprintf(f->ksyms_conflict, sizeof(f->ksyms_conflict),
					 "%.*s at %llx in the guest's kallsyms, %llx in opvm.ko's "
					 "HELLO", (int)(len > 64 ? 64 : len), name,
					 (unsigned long long)got, (unsigned long long)want);
		}
		t = nl + 1;
	}
}

/* Longest a function of the int3 path is taken to be: its end is the next
 * symbol's start, which a kallsyms out of address order could put far
 * away. */
#define INT3_SYM_MAX	4096

static void int3_reset(struct fetch *f)
{
	memset(&f->int3, 0, sizeof(f->int3));
	f->int3_open = 0;
}

/* The symbol at addr ends the open one of the int3 path if above it. */
static void int3_close(struct fetch *f, uint64_t addr)
{
	uint64_t *end, start;

	if (!f->int3_open)
		return;
	start = f->int3.r[f->int3_open - 1].start;
	end = &f->int3.r[f->int3_open - 1].end;
	if (addr <= start)
		return;
	*end = addr - start > INT3_SYM_MAX ? start + INT3_SYM_MAX : addr;
	f->int3_open = 0;
}

/*
 * The int3 entry path's symbols (vmm/guest/int3loop.h) in a vmlinux
 * record's lines just made ("ADDR T NAME\n"), each ending where the next
 * symbol above it starts: kallsyms lists vmlinux in address order.
 */
static void int3_scan(struct fetch *f, const char *t, size_t n)
{
	const char *end = t + n;

	while (t < end) {
		const char *nl = memchr(t, '\n', (size_t)(end - t)), *name = t + 19;
		uint64_t addr;
		size_t len;

		if (!nl)
			break;
		addr = strtoull(t, NULL, 16);
		len = nl > name ? (size_t)(nl - name) : 0;
		int3_close(f, addr);
		if (len && int3loop_path_symbol(name, len) && f->int3.nr < SAMPLER_INT3_MAX) {
			f->int3.r[f->int3.nr++].start = addr;
			f->int3_open = f->int3.nr;
		}
		t = nl + 1;
	}
}

/* The transfer's part file, which starts with the stored lines it
 * repeated so far (f->same, then over).  0, or -1 (counted): the rest of
 * the transfer is not kept. */
static int ksyms_part(struct fetch *f)
{
	f->fd = part_create(f, "kallsyms.part", session_mode(f));
	if (f->fd >= 0 && f->same && ksame_copy(f->same, f->fd)) {
		close(f->fd);
		f->fd = -1;
		unlinkat(f->gfd, "kallsyms.part", 0);
	}
	ksame_close(f->same);
	f->same = NULL;
	if (f->fd < 0)
		f->st.io_errors++;
	return f->fd < 0 ? -1 : 0;
}

/* A transfer's first record: held against the stored kallsyms while it
 * repeats it, else written to the part file from the start. */
static void ksyms_begin(struct fetch *f)
{
	f->xfer = true;
	f->bytes = 0;
	f->st.ksyms_syms = f->st.ksyms_bad = f->st.ksyms_capped = 0;
	f->st.ksyms_merged = 0;
	f->kinds = 0;
	f->same = ksame_open(f->gfd);
	if (!f->same)
		ksyms_part(f);
}

/* One record's lines (of kind) into the transfer: nothing while they
 * repeat the stored file, the part file from the first that does not. */
static void ksyms_put(struct fetch *f, unsigned kind, const char *text, size_t n)
{
	if (f->same) {
		size_t same = ksame_match(f->same, kind, text, n);

		if (same == n || ksyms_part(f))
			return;
		text += same;
		n -= same;
	}
	if (f->fd >= 0 && n && write(f->fd, text, n) != (ssize_t)n)
		f->st.io_errors++;
}

static void ksyms_write(struct fetch *f, const void *rec, size_t len)
{
	unsigned kind;
	uint64_t ok, bad, capped;
	size_t room, n;

	if (!f->xfer)
		ksyms_begin(f);
	if (!f->same && f->fd < 0)
		return;		/* no part file: counted */
	room = f->cfg.max_ksyms - f->bytes;
	kind = ((const struct opvm_rec_ksyms *)rec)->module[0] ? FETCH_KIND_MODULES :
								 FETCH_KIND_VMLINUX;
	if (kind == FETCH_KIND_VMLINUX && !(f->kinds & FETCH_KIND_VMLINUX)) {
		memset(f->tables, 0, sizeof(f->tables));	/* a new vmlinux table */
		f->tables_text = 0;
		int3_reset(f);
	}
	f->kinds |= kind;
	n = fetch_ksyms_text(rec, len, f->text, room < sizeof(f->text) ? room : sizeof(f->text),
			     &ok, &bad, &capped, f->tables);
	f->st.ksyms_records++;
	f->st.ksyms_bad += bad;
	f->st.ksyms_capped += capped;
	ksyms_put(f, kind, f->text, n);
	ksyms_check(f, f->text, n);
	if (kind == FETCH_KIND_VMLINUX)
		int3_scan(f, f->text, n);
	f->bytes += n;
	f->st.ksyms_bytes = f->bytes;
	f->st.ksyms_syms += ok;
}

static void ksyms_end(struct fetch *f, const void *rec)
{
	struct opvm_rec_ksyms_end e;

	memcpy(&e, rec, sizeof(e));
	f->st.ksyms_done++;
	if (le32toh(e.flags) & OPVM_KSYMS_RESTRICTED)
		f->st.ksyms_restricted++;
	if (le32toh(e.flags) & OPVM_KSYMS_MODULE_WALK)
		f->st.ksyms_module_walk++;
	if (le32toh(e.flags) & OPVM_KSYMS_TRUNCATED)
		f->st.ksyms_truncated++;
	if (le64toh(e.nr_syms) != f->st.ksyms_syms + f->st.ksyms_bad + f->st.ksyms_capped)
		f->st.ksyms_end_mismatch++;
	/* fewer lines of its kinds than the stored file has: written */
	if (f->same && ksame_more(f->same, f->kinds))
		ksyms_part(f);
	if (f->same)
		f->st.ksyms_unchanged++;
	ksyms_close(f, true);
	mods_write(f);
}

/* ---- binaries -------------------------------------------------------------- */

/*
 * <cache>/<xx>/<rest>: the build-id's hex, made here from its bytes.  The
 * xx directory opened (opvm's own, never a link; made if create) into
 * *xfd, and rest into out.  0 or -errno (a refusal is in why).
 */
static int cache_xx(const struct fetch *f, const uint8_t *bid, size_t len, bool debug,
		    bool create, int *xfd, char *out, char *why, size_t whylen)
{
	char hex[2 * OPVM_BUILD_ID_MAX + 1], xx[3];

	hex_encode(bid, len, hex);
	memcpy(xx, hex, 2);
	xx[2] = '\0';
	strcpy(out, hex + 2);
	if (debug)
		strcat(out, ".debug");
	*xfd = safepath_open_sub(f->cfd, f->cache, xx, 0700, create ? SAFEPATH_CREATE : 0,
				 why, whylen);
	return *xfd < 0 ? *xfd : 0;
}

/* Whether the cache holds bid (its debug file: debug): a regular file at
 * its name, never a link (lstat), whose mtime is then set (used: last to
 * go, fetch-cache.c) without following one. */
static bool img_cached(struct fetch *f, const uint8_t *bid, size_t len, bool debug)
{
	char rest[2 * OPVM_BUILD_ID_MAX + 8];
	struct stat sb;
	bool ok;
	int xfd;

	if (cache_open(f, false) || cache_xx(f, bid, len, debug, false, &xfd, rest, NULL, 0))
		return false;
	ok = !fstatat(xfd, rest, &sb, AT_SYMLINK_NOFOLLOW);
	if (ok && !S_ISREG(sb.st_mode)) {
		f->st.cache_links++;
		ok = false;
	}
	if (ok)
		utimensat(xfd, rest, NULL, AT_SYMLINK_NOFOLLOW);
	close(xfd);
	return ok;
}

/* A request for bid's binary at path (or, debug, its debug file): added
 * unless there is one; 1 when added. */
static int img_add(struct fetch *f, const char *path, const uint8_t *bid, size_t len,
		   bool debug)
{
	struct img *m;

	for (size_t i = 0; i < f->nr_imgs; i++)
		if (f->imgs[i].bid_len == len && !memcmp(f->imgs[i].bid, bid, len) &&
		    f->imgs[i].debug == debug)
			return 0;
	if (f->nr_imgs == FETCH_MAX_IMAGES) {
		f->st.table_full++;
		return 0;
	}
	m = &f->imgs[f->nr_imgs];
	m->path = strdup(path);
	if (!m->path)
		return 0;
	memcpy(m->bid, bid, len);
	m->bid_len = (uint8_t)len;
	m->debug = debug;
	f->nr_imgs++;
	if (img_cached(f, bid, len, debug)) {
		m->state = IMG_CACHED;
		if (debug)
			f->st.debug_cached++;
		else
			f->st.cached++;
	}
	return 1;
}

void fetch_want(struct fetch *f, const char *path, const uint8_t *bid, size_t len)
{
	char hex[2 * OPVM_BUILD_ID_MAX + 1], dpath[2 * OPVM_BUILD_ID_MAX + 64];

	/* ids shorter than 2 bytes would make a one-level name */
	if (!f->imgs || len < 2 || len > OPVM_BUILD_ID_MAX || !path || !*path ||
	    strlen(path) > OPVM_PATH_MAX)
		return;
	if (img_add(f, path, bid, len, false))
		f->st.images++;
	/* Its debug file where Debian, Fedora and GDB put it, a path made
	 * here from the build-id's hex alone (never a name from the guest:
	 * a .gnu_debuglink is one).  Asked after every binary. */
	if (f->cfg.no_debug_files)
		return;
	hex_encode(bid, len, hex);
	snprintf(dpath, sizeof(dpath), "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
	img_add(f, dpath, bid, len, true);
}

/* ---- symbols read from guest memory ------------------------------------------ */

static const struct img *img_find(const struct fetch *f, const uint8_t *bid, size_t len)
{
	for (size_t i = 0; f->imgs && i < f->nr_imgs; i++)
		if (f->imgs[i].bid_len == len && !memcmp(f->imgs[i].bid, bid, len))
			return &f->imgs[i];
	return NULL;
}

/* Whether the cached memory symbols name in dfd are this opvm's
 * (introspect_image_syms_current()): an older one lacks the PLT's names. */
static bool memsyms_file_current(int dfd, const char *name)
{
	uint8_t head[64];
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	ssize_t n = fd >= 0 ? pread(fd, head, sizeof(head), 0) : -1;

	if (fd >= 0)
		close(fd);
	return n > 0 && introspect_image_syms_current(head, (size_t)n);
}

int fetch_memsyms_due(struct fetch *f, const uint8_t *bid, size_t len)
{
	const struct img *m = img_find(f, bid, len);
	char rest[2 * OPVM_BUILD_ID_MAX + 1 + sizeof(FETCH_MEMSYMS_SUFFIX)];
	struct stat sb;
	int xfd, have;

	if (!m || m->state == IMG_CACHED || m->state == IMG_DONE || cache_open(f, true))
		return 0;
	if (cache_xx(f, bid, len, false, false, &xfd, rest, NULL, 0))
		return 1;	/* no xx directory yet: nothing of bid */
	strcat(rest, FETCH_MEMSYMS_SUFFIX);
	have = !fstatat(xfd, rest, &sb, AT_SYMLINK_NOFOLLOW) && S_ISREG(sb.st_mode);
	if (have)
		utimensat(xfd, rest, NULL, AT_SYMLINK_NOFOLLOW);	/* used: kept */
	if (have && !memsyms_file_current(xfd, rest))
		have = 0;	/* an older opvm's: made again, read until then */
	close(xfd);
	if (have)
		f->st.memsyms_cached++;
	return !have;
}

/* Writes buf to the part file name in the cache directory: 0 or -errno. */
static int part_write(struct fetch *f, const char *name, const void *buf, size_t n)
{
	int fd = openat(f->cfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK |
			O_CLOEXEC, 0600);
	struct stat sb;
	int err = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode))
		err = -EINVAL;
	else if (write(fd, buf, n) != (ssize_t)n)
		err = -EIO;
	if (close(fd) && !err)
		err = -EIO;
	return err;
}

int fetch_memsyms_put(struct fetch *f, const uint8_t *bid, size_t len, const void *buf, size_t n)
{
	char name[64], part[4096 + 64], rest[2 * OPVM_BUILD_ID_MAX + 1 + sizeof(FETCH_MEMSYMS_SUFFIX)];
	char why[256] = "";
	int err, xfd = -1;

	if (!f->imgs || len < 2 || len > OPVM_BUILD_ID_MAX || cache_open(f, true))
		return -ENOENT;
	snprintf(name, sizeof(name), ".part-%d-m%llu", (int)getpid(),
		 (unsigned long long)f->st.memsyms_files);
	snprintf(part, sizeof(part), "%s/%s", f->cache, name);
	err = part_write(f, name, buf, n);
	/* made here from guest bytes: read back as the reports will */
	if (!err && f->cfg.verify(part, bid, len))
		err = -ENOEXEC;
	if (!err && (err = cache_xx(f, bid, len, false, true, &xfd, rest, why, sizeof(why))))
		cache_refuse(f, err, why);
	if (!err) {
		strcat(rest, FETCH_MEMSYMS_SUFFIX);
		if (renameat(f->cfd, name, xfd, rest))
			err = -errno;
	}
	if (xfd >= 0)
		close(xfd);
	if (err) {
		unlinkat(f->cfd, name, 0);
		f->st.memsyms_failed++;
		if (err == -EIO)
			f->st.io_errors++;
		return err;
	}
	f->st.memsyms_files++;
	f->st.memsyms_bytes += n;
	cache_prune(f);
	return 0;
}

int fetch_coming(const struct fetch *f, const uint8_t *bid, size_t len)
{
	if (!f->imgs || f->mute)
		return 0;
	for (size_t i = 0; i < f->nr_imgs; i++)
		if (f->imgs[i].bid_len == len && !memcmp(f->imgs[i].bid, bid, len))
			if (!f->imgs[i].debug)
				return f->imgs[i].state == IMG_WANT ||
				       f->imgs[i].state == IMG_ACTIVE;
	return 0;
}

int fetch_kernel_orc(const struct fetch *f, uint64_t *ip_start, uint64_t *ip_stop,
		     uint64_t *orc_start)
{
	const uint64_t *t = f->tables;

	/* a kernel's layout: the offsets, right after them the entries */
	if (!t[OPVM_KSYMS_ORC_IP_START] || t[OPVM_KSYMS_ORC_IP_STOP] <= t[OPVM_KSYMS_ORC_IP_START] ||
	    !t[OPVM_KSYMS_ORC_START])
		return -ENOENT;
	*ip_start = t[OPVM_KSYMS_ORC_IP_START];
	*ip_stop = t[OPVM_KSYMS_ORC_IP_STOP];
	*orc_start = t[OPVM_KSYMS_ORC_START];
	return 0;
}

int fetch_kernel_int3(const struct fetch *f, struct sampler_int3 *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < f->int3.nr; i++)
		if (f->int3.r[i].end)
			out->r[out->nr++] = f->int3.r[i];
	return out->nr ? 0 : -ENOENT;
}

uint64_t fetch_settled(const struct fetch *f)
{
	return f->settled;
}

int fetch_busy(const struct fetch *f)
{
	if (!f->imgs || f->mute)
		return 0;
	/* binaries only: samples wait for those, never for a debug file */
	if (f->cur && !f->cur->debug)
		return 1;
	for (size_t i = 0; i < f->nr_imgs; i++)
		if (f->imgs[i].state == IMG_WANT && !f->imgs[i].debug)
			return 1;
	return 0;
}

bool fetch_ksyms_word_due(const struct fetch *f)
{
	return f->word_due;
}

int fetch_ksyms_tell(struct fetch *f, int fd, unsigned want)
{
	struct opvm_req_ksyms r;
	ssize_t n;

	if (!f->word_due || fd < 0)
		return 0;
	memset(&r, 0, sizeof(r));
	r.hdr.magic = htole16(OPVM_PROTO_MAGIC);
	r.hdr.type = htole16(OPVM_REQ_KSYMS);
	r.hdr.len = htole32((uint32_t)sizeof(r));
	r.want = htole32(want);
	n = write(fd, &r, sizeof(r));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return -EAGAIN;
	f->word_due = false;
	if (n != (ssize_t)sizeof(r)) {
		f->st.write_errors++;	/* the relay sends all after its wait */
		return -EIO;
	}
	if (want == OPVM_KSYMS_WANT_NONE)
		f->st.ksyms_asked_none++;
	else if (want == OPVM_KSYMS_WANT_MODULES)
		f->st.ksyms_asked_modules++;
	else
		f->st.ksyms_asked_all++;
	return 0;
}

/* What one FETCH asks for. */
struct fetch_ask {
	const char *path;
	const uint8_t *bid;
	size_t bid_len;
	uint8_t flags;
	uint64_t offset, max;
};

/* Writes one FETCH: 0, -EAGAIN (the channel is full) or -EIO. */
static int request_write(struct fetch *f, int fd, const struct fetch_ask *a)
{
	struct {
		struct opvm_req_fetch r;
		char path[OPVM_PATH_MAX + 8];
	} q;
	size_t plen = strlen(a->path), len = (sizeof(q.r) + plen + 7) & ~(size_t)7;
	ssize_t n;

	memset(&q, 0, sizeof(q));
	q.r.hdr.magic = htole16(OPVM_PROTO_MAGIC);
	q.r.hdr.type = htole16(OPVM_REQ_FETCH);
	q.r.hdr.len = htole32((uint32_t)len);
	q.r.req_id = htole32(++f->req_id ? f->req_id : ++f->req_id);
	q.r.hdr.seq = q.r.req_id;
	q.r.build_id_len = (uint8_t)a->bid_len;
	q.r.flags = a->flags;
	q.r.path_len = htole16((uint16_t)plen);
	q.r.offset = htole64(a->offset);
	q.r.max_bytes = htole64(a->max);
	memcpy(q.r.build_id, a->bid, a->bid_len);
	memcpy(q.path, a->path, plen);
	n = write(fd, &q, len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return -EAGAIN;
	if (n != (ssize_t)len) {
		f->st.write_errors++;	/* a short write: the relay resyncs */
		return -EIO;
	}
	return 0;
}

/* Writes the request for f->cur from its received bytes on. */
static int request_send(struct fetch *f, int fd)
{
	struct fetch_ask a = {
		.path = f->cur->path, .bid = f->cur->bid, .bid_len = f->cur->bid_len,
		.flags = f->cur->debug ? OPVM_FETCH_F_DEBUG : 0,
		.offset = f->cur->received, .max = f->cfg.max_file,
	};
	int err = request_write(f, fd, &a);

	if (err)
		return err;
	f->st.requests++;
	if (f->cur->debug)
		f->st.debug_requests++;
	f->cur->attempts++;
	return 0;
}

/* A perf map due (fetch-perfmap.c) asked for: 1 if one was. */
static int perfmap_next(struct fetch *f, int fd, uint64_t now_ms)
{
	static const uint8_t none[1];
	char path[64];
	struct fetch_ask a = { .path = path, .bid = none, .bid_len = 1,
			       .flags = OPVM_FETCH_F_PERFMAP };
	int err;

	if (!f->pm || f->st.data_bytes >= f->cfg.max_session ||
	    !fetch_pmaps_next(f->pm, now_ms, path, sizeof(path), &a.offset, &a.max))
		return 0;
	err = request_write(f, fd, &a);
	if (err) {
		fetch_pmaps_end(f->pm, -EAGAIN, 0, now_ms);
		return 1;	/* the channel is full: no other request now */
	}
	f->pm_cur = true;
	f->start_ms = f->last_ms = now_ms;
	return 1;
}

/* The next wanted image (binaries first, then the perf maps due, then
 * debug files: a binary names more per byte than its debug file, a map
 * names what nothing else can): its part file opened, its request
 * written. */
static void request_next(struct fetch *f, int fd, uint64_t now_ms)
{
	char name[64];
	struct stat sb;
	int err;

	for (size_t k = 0; k < 2 * f->nr_imgs && !f->cur; k++) {
		size_t i = k % f->nr_imgs;

		if (k == f->nr_imgs && perfmap_next(f, fd, now_ms))
			return;
		if (f->imgs[i].state != IMG_WANT || f->imgs[i].debug != (k >= f->nr_imgs))
			continue;
		if (f->st.data_bytes >= f->cfg.max_session) {
			f->imgs[i].state = IMG_FAILED;
			f->settled++;
			f->st.session_cap++;
			continue;
		}
		f->cur = &f->imgs[i];
	}
	if (!f->cur) {
		if (!f->nr_imgs)
			perfmap_next(f, fd, now_ms);
		return;
	}
	f->cur->state = IMG_ACTIVE;
	if (cache_open(f, true)) {
		img_close(f, IMG_FAILED);
		return;
	}
	part_name(f, name, sizeof(name));
	/* O_NONBLOCK: a FIFO planted at the name must not block */
	f->part = openat(f->cfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK |
			 O_CLOEXEC, 0600);
	if (f->part >= 0 && (fstat(f->part, &sb) || !S_ISREG(sb.st_mode))) {
		close(f->part);
		f->part = -1;
	}
	if (f->part < 0) {
		f->st.io_errors++;
		img_close(f, IMG_FAILED);
		return;
	}
	err = request_send(f, fd);
	if (err == -EAGAIN) {
		f->resend = true;
	} else if (err) {
		img_close(f, IMG_FAILED);
		return;
	}
	f->start_ms = f->last_ms = now_ms;
}

void fetch_poll(struct fetch *f, int fd, uint64_t now_ms)
{
	/* records carry no time: progress and ends are stamped here */
	if (f->progress)
		f->last_ms = now_ms;
	if (f->ended)
		f->st.elapsed_ms += now_ms - f->start_ms;
	f->progress = f->ended = false;
	if ((!f->imgs && !f->pm) || fd < 0)
		return;
	if (f->pm_cur && now_ms - f->last_ms > FETCH_TIMEOUT_MS) {
		f->st.timeouts++;
		f->st.elapsed_ms += now_ms - f->start_ms;
		f->pm_cur = false;
		fetch_pmaps_end(f->pm, -ETIMEDOUT, 0, now_ms);
		f->mute = !f->answered;
	}
	if (f->cur && now_ms - f->last_ms > FETCH_TIMEOUT_MS) {
		f->st.timeouts++;
		f->st.elapsed_ms += now_ms - f->start_ms;
		img_close(f, IMG_FAILED);
		/* a relay that never answered predates FETCH: stop asking */
		f->mute = !f->answered;
	}
	if (f->mute || !f->hello)
		return;
	if (f->cur && f->resend) {
		int err = request_send(f, fd);

		if (err != -EAGAIN)
			f->resend = false;
		if (err && err != -EAGAIN)
			img_close(f, IMG_FAILED);
		return;
	}
	if (!f->cur && !f->pm_cur)
		request_next(f, fd, now_ms);
}

void fetch_perfmap_want(struct fetch *f, int64_t tgid)
{
	if (f->pm)
		fetch_pmaps_want(f->pm, tgid);
}

/* A perf map's FILE_DATA (fetch-perfmap.c), its session cap here. */
static void perfmap_data(struct fetch *f, uint64_t off, const void *buf, uint64_t bytes)
{
	if (f->st.data_bytes + bytes > f->cfg.max_session) {
		f->st.session_cap++;
		f->pm_cur = false;
		fetch_pmaps_end(f->pm, -EFBIG, 0, 0);
		return;
	}
	if (fetch_pmaps_data(f->pm, off, buf, (size_t)bytes)) {
		f->pm_cur = false;
		fetch_pmaps_end(f->pm, -EPROTO, 0, 0);
		return;
	}
	f->st.data_bytes += bytes;
	f->progress = f->answered = true;
}

static void file_data(struct fetch *f, const void *rec)
{
	struct opvm_rec_file_data d;
	uint64_t bytes, off;

	memcpy(&d, rec, sizeof(d));
	if (f->pm_cur && le32toh(d.req_id) == f->req_id) {
		perfmap_data(f, le64toh(d.offset), (const uint8_t *)rec + sizeof(d),
			     le32toh(d.bytes));
		return;
	}
	if (!f->cur || le32toh(d.req_id) != f->req_id) {
		f->st.stray++;
		return;
	}
	bytes = le32toh(d.bytes);	/* chan_rec_check(): inside the record */
	off = le64toh(d.offset);
	if (off != f->cur->received) {
		f->st.bad_order++;
		img_close(f, IMG_FAILED);
		return;
	}
	if (bytes > f->cfg.max_file - f->cur->received) {
		f->st.too_big++;
		img_close(f, IMG_FAILED);
		return;
	}
	if (f->st.data_bytes + bytes > f->cfg.max_session) {
		f->st.session_cap++;
		img_close(f, IMG_FAILED);
		return;
	}
	if (bytes && pwrite(f->part, (const uint8_t *)rec + sizeof(d), bytes,
			    (off_t)off) != (ssize_t)bytes) {
		f->st.io_errors++;
		img_close(f, IMG_FAILED);
		return;
	}
	f->cur->received += bytes;
	f->st.data_bytes += bytes;
	f->progress = f->answered = true;
}

/* A complete part file: checked, then renamed into the cache, between
 * directory fds: an xx that is a link or another user's is refused, and a
 * link at the file's own name is replaced, never written through. */
static void file_commit(struct fetch *f)
{
	char name[64], part[4096 + 64], rest[2 * OPVM_BUILD_ID_MAX + 8], why[256] = "";
	int err, xfd;

	part_name(f, name, sizeof(name));
	/* the directory is checked: no one else can swap the path's parts */
	snprintf(part, sizeof(part), "%s/%s", f->cache, name);
	if (close(f->part)) {
		f->part = -1;
		f->st.io_errors++;
		unlinkat(f->cfd, name, 0);
		img_close(f, IMG_FAILED);
		return;
	}
	f->part = -1;
	err = f->cfg.verify(part, f->cur->bid, f->cur->bid_len);
	if (err) {
		if (err == -ESTALE)
			f->st.mismatch++;
		else
			f->st.not_elf++;
		if (f->cur->debug)
			f->st.debug_refused++;
		unlinkat(f->cfd, name, 0);
		img_close(f, IMG_FAILED);
		return;
	}
	err = cache_xx(f, f->cur->bid, f->cur->bid_len, f->cur->debug, true, &xfd, rest, why,
		       sizeof(why));
	if (err)
		cache_refuse(f, err, why);
	if (err || renameat(f->cfd, name, xfd, rest)) {
		if (!err)
			f->st.io_errors++;
		if (xfd >= 0)
			close(xfd);
		unlinkat(f->cfd, name, 0);
		img_close(f, IMG_FAILED);
		return;
	}
	close(xfd);
	f->st.files++;
	f->st.bytes += f->cur->received;
	if (f->cur->debug) {
		f->st.debug_files++;
		f->st.debug_bytes += f->cur->received;
	}
	img_close(f, IMG_DONE);
	cache_prune(f);
}

static void file_end(struct fetch *f, const void *rec)
{
	struct opvm_rec_file_end e;

	memcpy(&e, rec, sizeof(e));
	if (f->pm_cur && le32toh(e.req_id) == f->req_id) {
		f->ended = f->answered = true;
		f->pm_cur = false;
		fetch_pmaps_end(f->pm, (int32_t)le32toh((uint32_t)e.status), le64toh(e.size), 0);
		return;
	}
	if (!f->cur || le32toh(e.req_id) != f->req_id) {
		f->st.stray++;
		return;
	}
	f->ended = f->answered = true;
	if ((int32_t)le32toh((uint32_t)e.status)) {
		/* most guests have no debug file of most binaries */
		if (f->cur->debug && (int32_t)le32toh((uint32_t)e.status) == -ENOENT)
			f->st.debug_absent++;
		else
			f->st.guest_refused++;
		img_close(f, IMG_FAILED);
	} else if (le64toh(e.size) != f->cur->received) {
		f->st.bad_order++;
		img_close(f, IMG_FAILED);
	} else {
		file_commit(f);
	}
}

/* One line of the stored kallsyms ("ADDR T NAME\n", n bytes, vmlinux's)
 * for ksyms_stored(): its ORC table symbols and the int3 path. */
static void stored_tables(struct fetch *f, const char *line, size_t n, uint64_t addr)
{
	int t = line[17] && strchr("rRdDbB", line[17]) ? opvm_ksyms_table(line + 19, n - 20) : -1;

	if (t >= 0)
		f->tables[t] = addr;
	int3_scan(f, line, n);
}

/*
 * Whether the stored kallsyms is the kernel of the HELLO just taken: its
 * _text and the HELLO's anchor at the HELLO's run-time addresses, the
 * check the reports make of it (symbols/symres-kernel.c).  A sampler
 * started again for the same boot finds it so, and the relay is asked for
 * the modules' symbols only (fetch_ksyms_stored()).  tables: no table of
 * this boot came yet: the file's ORC tables and int3 path stand for it.
 */
static bool ksyms_stored(struct fetch *f, bool tables)
{
	int fd = f->gfd < 0 || f->cfg.no_ksyms || !f->hello_text || !f->hello_anchor[0] ? -1 :
		 fs_openat_regular(f->gfd, "kallsyms", O_NOFOLLOW);
	FILE *in = fd >= 0 ? fdopen(fd, "r") : NULL;
	char line[FETCH_KLINE_MAX + 2];
	uint64_t text = 0, anchor = 0;
	bool ok;

	if (!in) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	while (fgets(line, sizeof(line), in)) {
		size_t n = strlen(line), len = n > 20 ? n - 20 : 0;
		uint64_t addr = strtoull(line, NULL, 16);

		/* the writer's vmlinux lines only (modules' have "\t[") */
		if (!len || line[n - 1] != '\n' || line[16] != ' ' || strstr(line, "\t["))
			continue;
		if (!text && len == 5 && !memcmp(line + 19, "_text", 5))
			text = addr;
		else if (!anchor && len == strlen(f->hello_anchor) &&
			 !memcmp(line + 19, f->hello_anchor, len))
			anchor = addr;
		if (tables)
			stored_tables(f, line, n, addr);
	}
	fclose(in);
	ok = text == f->hello_text && anchor == f->hello_anchor_addr;
	if (tables && ok) {
		f->tables_text = text;
	} else if (tables) {
		memset(f->tables, 0, sizeof(f->tables));
		int3_reset(f);
	}
	return ok;
}

bool fetch_ksyms_stored(const struct fetch *f)
{
	return f->stored_ok;
}

/* The kernel HELLO describes (decoder contract: the whole fixed record). */
static void hello_take(struct fetch *f, const struct opvm_rec_hdr *rec)
{
	struct opvm_rec_hello h;
	size_t n;

	memcpy(&h, rec, sizeof(h));
	f->hello_text = le64toh(h.text_addr);
	f->hello_anchor_addr = le64toh(h.anchor_addr);
	n = chan_strnlen(h.anchor_name, sizeof(h.anchor_name));
	for (size_t i = 0; i < n; i++)
		f->hello_anchor[i] = name_byte((unsigned char)h.anchor_name[i]);
	f->hello_anchor[n] = '\0';
	if (!f->hello_anchor_addr)
		f->hello_anchor[0] = '\0';
}

void fetch_record(struct fetch *f, const struct opvm_rec_hdr *rec, size_t len)
{
	switch (le16toh(rec->type)) {
	case OPVM_REC_HELLO:
		/* a new stream: the relay sends the symbols again after it,
		 * and has forgotten the request, which is asked again from
		 * where it stopped */
		hello_take(f, rec);
		f->hello = true;
		ksyms_close(f, false);
		f->word_due = true;
		f->nr_mods = 0;		/* the walk names them again */
		/* another boot's, unless the table they came with has this
		 * HELLO's _text: introspection may read it before opvm.ko
		 * loads, and the relay sends only the modules' after it */
		if (!f->hello_text || f->tables_text != f->hello_text) {
			memset(f->tables, 0, sizeof(f->tables));
			int3_reset(f);
			f->stored_ok = ksyms_stored(f, true);
		} else {
			f->stored_ok = ksyms_stored(f, false);
		}
		if (f->pm_cur) {	/* asked again later, from where it is */
			f->pm_cur = false;
			fetch_pmaps_end(f->pm, -EAGAIN, 0, 0);
		}
		if (f->cur && f->cur->attempts < FETCH_ATTEMPTS)
			f->resend = true;
		else if (f->cur)
			img_close(f, IMG_FAILED);
		break;
	case OPVM_REC_MODULE:
	case OPVM_REC_MODULE_FREE:
		if (len >= sizeof(struct opvm_rec_module))
			mod_record(f, rec, le16toh(rec->type) == OPVM_REC_MODULE);
		break;
	case OPVM_REC_FILE_DATA:
		if (len >= sizeof(struct opvm_rec_file_data))
			file_data(f, rec);
		break;
	case OPVM_REC_FILE_END:
		if (len >= sizeof(struct opvm_rec_file_end))
			file_end(f, rec);
		break;
	case OPVM_REC_KSYMS:
		if (len >= sizeof(struct opvm_rec_ksyms) && !f->cfg.no_ksyms)
			ksyms_write(f, rec, len);
		break;
	case OPVM_REC_KSYMS_END:
		if (len >= sizeof(struct opvm_rec_ksyms_end) && !f->cfg.no_ksyms)
			ksyms_end(f, rec);
		break;
	default:
		break;
	}
}

json_t *fetch_to_json(const struct fetch *f)
{
	const struct fetch_stats *s = &f->st;
	json_t *bin;

#define C(v) stats_json_count(v)
	bin = json_pack("{s:b,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		"enabled", f->imgs != NULL,
		"images", C(s->images), "cached", C(s->cached), "requests", C(s->requests),
		"files", C(s->files), "bytes", C(s->bytes), "data_bytes", C(s->data_bytes),
		"guest_refused", C(s->guest_refused), "mismatch", C(s->mismatch),
		"not_elf", C(s->not_elf), "too_big", C(s->too_big),
		"session_cap", C(s->session_cap), "bad_order", C(s->bad_order),
		"stray", C(s->stray), "timeouts", C(s->timeouts),
		"table_full", C(s->table_full), "write_errors", C(s->write_errors),
		"elapsed_ms", C(s->elapsed_ms), "max_file", C(f->cfg.max_file),
		"open", C(f->cur != NULL), "relay_silent", C(f->mute),
		"pruned", C(s->pruned), "pruned_bytes", C(s->pruned_bytes),
		"stale_parts", C(s->stale_parts),
		"cache_bytes", C(s->cache_bytes), "max_cache", C(f->cfg.max_cache));
	if (bin && (json_object_set_new(bin, "cache_refused", C(s->cache_refused)) ||
		    json_object_set_new(bin, "cache_links", C(s->cache_links)) ||
		    json_object_set_new(bin, "memsyms", json_pack("{s:o,s:o,s:o,s:o}",
				"files", C(s->memsyms_files), "bytes", C(s->memsyms_bytes),
				"cached", C(s->memsyms_cached), "failed", C(s->memsyms_failed))) ||
		    json_object_set_new(bin, "cache_error", f->cache_err[0] ?
					json_string(f->cache_err) :
					json_null()))) {
		json_decref(bin);
		bin = NULL;
	}
	if (bin && json_object_set_new(bin, "debug_files", json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}",
			"requests", C(s->debug_requests), "files", C(s->debug_files),
			"bytes", C(s->debug_bytes), "absent", C(s->debug_absent),
			"refused", C(s->debug_refused), "cached", C(s->debug_cached)))) {
		json_decref(bin);
		bin = NULL;
	}
	return json_pack("{s:{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o},s:o,s:o,s:o,s:o}",
		"ksyms", "slide_mismatch", C(s->ksyms_slide_mismatch),
		"slide_conflict", f->ksyms_conflict[0] ? json_string(f->ksyms_conflict) :
		json_null(),
		"records", C(s->ksyms_records), "syms", C(s->ksyms_syms),
		"bad", C(s->ksyms_bad), "capped", C(s->ksyms_capped),
		"bytes", C(s->ksyms_bytes), "done", C(s->ksyms_done),
		"restricted", C(s->ksyms_restricted), "module_walk", C(s->ksyms_module_walk),
		"truncated", C(s->ksyms_truncated),
		"end_mismatch", C(s->ksyms_end_mismatch),
		"merged", C(s->ksyms_merged), "unchanged", C(s->ksyms_unchanged),
		"max_bytes", C(f->cfg.max_ksyms), "asked_all", C(s->ksyms_asked_all),
		"asked_modules", C(s->ksyms_asked_modules), "asked_none", C(s->ksyms_asked_none),
		"binaries", bin ? bin : json_null(), "max_session", C(f->cfg.max_session),
		"io_errors", C(s->io_errors),
		"perfmaps", f->pm ? fetch_pmaps_json(f->pm) : json_null());
#undef C
}
