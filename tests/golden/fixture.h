/* SPDX-License-Identifier: MIT */
/*
 * Report fixture shared by tests/unit/test-report.c, test-symbols.c and
 * tests/golden/mkfixture.c: compiles the C files of tests/golden/fixtures with
 * `cc -g -O1` into a guest root, and writes a synthetic session over them
 * with the real store API (host/collect/store.h).
 *
 * Guest t1 (separate lib,kernel,thread), event TIMER:
 *   /usr/bin/prog func_a            450 (400 on the HOT_A line)
 *   /usr/bin/prog func_b           1100 (1000 on the HOT_B line)
 *   /usr/bin/prog func_c_...        250
 *   /usr/lib/libfix.so lib_hot      300 (app /usr/bin/prog)
 *   vmlinux do_syscall_64           150 (run-time addresses, KASLR slide)
 *   vmlinux __x64_sys_getpid         60
 *   fake_mod fakemod_hot_path        40 (module offsets)
 *   {anon}                           10
 *   /usr/bin/prog2 (wrong build-id)   5
 * Guest t2: /usr/bin/prog func_a    100
 */
#ifndef OPVM_TEST_FIXTURE_H
#define OPVM_TEST_FIXTURE_H

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/collect/store.h"
#include "symbols/elfimage.h"

#define FX_RELEASE	"6.1.0-test"
#define FX_LINK_TEXT	0xffffffff81000000ull
#define FX_SLIDE	0x0000000009000000ull
#define FX_TOTAL	2465u

enum { FX_A, FX_B, FX_C, FX_LIB, FX_NR };

struct fixture {
	char dir[PATH_MAX];
	char root[PATH_MAX + 32];
	char session[PATH_MAX + 32];
	char src[PATH_MAX];		/* tests/golden/fixtures */
	unsigned hot_line[FX_NR];
	uint64_t hot_addr[FX_NR];	/* first address of the hot line */
	uint64_t hot_off[FX_NR];	/* its file offset */
	uint64_t func_off[FX_NR];	/* file offset of the function start */
	uint8_t bid[64];		/* /usr/bin/prog's build-id */
	size_t bid_len;
	char bid_hex[129];
	uint64_t mod_hot;		/* fakemod_hot_path's layout offset */
};

static const char *const fx_funcs[FX_NR] = {
	"func_a", "func_b", "func_c_with_a_rather_long_name_that_needs_truncating",
	"lib_hot",
};
static const char *const fx_marks[FX_NR] = { "HOT_A", "HOT_B", "HOT_C", "HOT_LIB" };

static int fx_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fx_sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	rc = system(cmd);
	if (rc != 0)
		fprintf(stderr, "fixture: '%s' failed (%d)\n", cmd, rc);
	return rc == 0 ? 0 : -1;
}

/* Line number of the line containing mark in file. */
static unsigned fx_find_line(const char *file, const char *mark)
{
	char line[512];
	unsigned n = 0;
	FILE *f = fopen(file, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		n++;
		if (strstr(line, mark)) {
			fclose(f);
			return n;
		}
	}
	fclose(f);
	return 0;
}

struct fx_line_ctx {
	unsigned line;
	uint64_t addr;
	int found;
};

static int fx_line_cb(const struct elfline *l, void *arg)
{
	struct fx_line_ctx *c = arg;

	if (l->line == c->line && !c->found) {
		c->addr = l->addr;
		c->found = 1;
	}
	return 0;
}

/* Hot address and offsets for function i of the binary at path. */
static int fx_locate(struct fixture *fx, const char *path, const char *srcfile, int i)
{
	char err[256];
	struct elfimage *img = elfimage_open(path, err, sizeof(err));
	struct fx_line_ctx c = { 0 };
	const struct elfsym *s;
	long k;
	int ret = -1;

	if (!img) {
		fprintf(stderr, "fixture: %s\n", err);
		return -1;
	}
	fx->hot_line[i] = fx_find_line(srcfile, fx_marks[i]);
	k = elfimage_find(img, fx_funcs[i]);
	if (k < 0 || !fx->hot_line[i])
		goto out;
	s = elfimage_sym(img, (size_t)k);
	c.line = fx->hot_line[i];
	if (elfimage_lines(img, s->addr, s->addr + s->size, fx_line_cb, &c) < 0 || !c.found)
		goto out;
	fx->hot_addr[i] = c.addr;
	if (elfimage_addr_to_offset(img, c.addr, &fx->hot_off[i]) ||
	    elfimage_addr_to_offset(img, s->addr, &fx->func_off[i]))
		goto out;
	if (i == FX_A) {
		const uint8_t *b = elfimage_build_id(img, &fx->bid_len);

		if (!b)
			goto out;
		memcpy(fx->bid, b, fx->bid_len);
		for (size_t j = 0; j < fx->bid_len; j++)
			sprintf(fx->bid_hex + 2 * j, "%02x", b[j]);
	}
	ret = 0;
out:
	if (ret)
		fprintf(stderr, "fixture: cannot locate %s in %s\n", fx_funcs[i], path);
	elfimage_close(img);
	return ret;
}

static int fx_add(struct store *st, const char *app, const char *image, int kernel,
		  int64_t tgid, int64_t tid, const uint8_t *bid, size_t bid_len,
		  uint64_t off, uint64_t count)
{
	struct store_key k = {
		.app = app, .image = image, .kernel = kernel, .event = 0,
		.tgid = tgid, .tid = tid, .cpu = -1,
		.build_id = bid, .build_id_len = bid_len,
	};
	struct sfile *sf = store_get(st, &k);

	if (!sf) {
		fprintf(stderr, "fixture: store_get %s: %s\n", image, strerror(errno));
		return -1;
	}
	return sfile_add(sf, off, count) ? -1 : 0;
}

static int fx_meta(struct store *st, const char *guest, int with_kernel)
{
	char json[2048];

	snprintf(json, sizeof(json),
		 "{\"version\": 1, \"guest\": \"%s\", \"mode\": \"gdbstub-timer\", "
		 "\"rate_hz\": 250, \"events\": [{\"name\": \"TIMER\", \"count\": 1, "
		 "\"unit_mask\": 0}], \"vcpus\": 2, \"separate\": \"lib,kernel,thread\", "
		 "\"start\": \"2026-11-21T08:00:00Z\", \"duration_s\": 10.0, "
		 "\"stats\": {\"received\": 2400, \"kernel\": 250, \"user\": 2150, "
		 "\"lost_overflow\": 0, \"lost_no_mapping\": 0, \"lost_no_process\": 0, "
		 "\"throttled\": 0, \"unresolved\": 0, \"guest_lost\": 0}, "
		 "\"kernel\": %s, \"modules\": []}",
		 guest, with_kernel ?
		 "{\"release\": \"" FX_RELEASE "\", \"anchor_name\": \"_text\", "
		 "\"anchor_addr\": 1.8446744071729840e+19, \"text_addr\": 1.8446744071729840e+19, "
		 "\"anchor_addr_hex\": \"0xffffffff8a000000\", "
		 "\"text_addr_hex\": \"0xffffffff8a000000\"}"
		 : "null");
	return store_write_meta(st, json);
}

static int fixture_build(struct fixture *fx, const char *base)
{
	static const struct store_event ev[] = { { .name = "TIMER", .count = 1 } };
	char p[PATH_MAX * 2], s[PATH_MAX * 2];
	unsigned sep = OPVM_SEP_LIB | OPVM_SEP_KERNEL | OPVM_SEP_THREAD;
	struct store *st = NULL;
	const char *here = __FILE__;
	const char *slash = strrchr(here, '/');
	FILE *f;

	memset(fx, 0, sizeof(*fx));
	snprintf(fx->src, sizeof(fx->src), "%.*s/fixtures", slash ? (int)(slash - here) : 1,
		 slash ? here : ".");
	if (mkdir(base, 0755) && errno != EEXIST)
		return -1;
	if (snprintf(fx->dir, sizeof(fx->dir), "%s/fx.XXXXXX", base) >= (int)sizeof(fx->dir) ||
	    !mkdtemp(fx->dir))
		return -1;
	snprintf(fx->root, sizeof(fx->root), "%s/root", fx->dir);
	snprintf(fx->session, sizeof(fx->session), "%s/session", fx->dir);
	if (fx_sh("mkdir -p %s/usr/bin %s/usr/lib %s/boot %s/lib/modules/%s/kernel/drivers",
		  fx->root, fx->root, fx->root, fx->root, FX_RELEASE))
		return -1;
	if (fx_sh("cc -g -O1 -fPIC -shared -Wl,--build-id -o %s/usr/lib/libfix.so %s/libfix.c",
		  fx->root, fx->src) ||
	    fx_sh("cc -g -O1 -Wl,--build-id -o %s/usr/bin/prog %s/prog.c %s/usr/lib/libfix.so",
		  fx->root, fx->src, fx->root) ||
	    fx_sh("cp %s/usr/bin/prog %s/usr/bin/prog2", fx->root, fx->root) ||
	    fx_sh("cc -O1 -c -o %s/lib/modules/%s/kernel/drivers/fake_mod.ko %s/fakemod.c",
		  fx->root, FX_RELEASE, fx->src))
		return -1;
	snprintf(p, sizeof(p), "%s/boot/System.map-%s", fx->root, FX_RELEASE);
	f = fopen(p, "w");
	if (!f)
		return -1;
	fprintf(f, "0000000000000000 A VDSO32_PRELINK\n"
		   "ffffffff81000000 T _text\n"
		   "ffffffff81000000 T startup_64\n"
		   "ffffffff81100000 T do_syscall_64\n"
		   "ffffffff81100400 T syscall_exit_to_user_mode\n"
		   "ffffffff81200000 T __x64_sys_getpid\n"
		   "ffffffff81200080 t __do_sys_getpid\n"
		   "ffffffff81300000 T _etext\n"
		   "ffffffff82000000 D some_data\n");
	fclose(f);

	snprintf(p, sizeof(p), "%s/usr/bin/prog", fx->root);
	snprintf(s, sizeof(s), "%s/prog.c", fx->src);
	for (int i = FX_A; i <= FX_C; i++)
		if (fx_locate(fx, p, s, i))
			return -1;
	snprintf(p, sizeof(p), "%s/usr/lib/libfix.so", fx->root);
	snprintf(s, sizeof(s), "%s/libfix.c", fx->src);
	if (fx_locate(fx, p, s, FX_LIB))
		return -1;
	{
		char err[256];
		struct elfimage *m;
		long k;

		snprintf(p, sizeof(p), "%s/lib/modules/%s/kernel/drivers/fake_mod.ko",
			 fx->root, FX_RELEASE);
		m = elfimage_open(p, err, sizeof(err));
		if (!m)
			return -1;
		k = elfimage_find(m, "fakemod_hot_path");
		if (k < 0) {
			elfimage_close(m);
			return -1;
		}
		fx->mod_hot = elfimage_sym(m, (size_t)k)->addr + 2;
		elfimage_close(m);
	}

	st = store_open(fx->session, "t1", ev, 1, sep, 0);
	if (!st)
		return -1;
	if (fx_add(st, NULL, "/usr/bin/prog", 0, 100, 100, fx->bid, fx->bid_len,
		   fx->hot_off[FX_A], 400) ||
	    fx_add(st, NULL, "/usr/bin/prog", 0, 100, 100, fx->bid, fx->bid_len,
		   fx->func_off[FX_A], 50) ||
	    fx_add(st, NULL, "/usr/bin/prog", 0, 100, 101, fx->bid, fx->bid_len,
		   fx->hot_off[FX_B], 1000) ||
	    fx_add(st, NULL, "/usr/bin/prog", 0, 100, 100, fx->bid, fx->bid_len,
		   fx->func_off[FX_B], 100) ||
	    fx_add(st, NULL, "/usr/bin/prog", 0, 100, 100, fx->bid, fx->bid_len,
		   fx->hot_off[FX_C], 250) ||
	    fx_add(st, "/usr/bin/prog", "/usr/lib/libfix.so", 0, 100, 100, NULL, 0,
		   fx->hot_off[FX_LIB], 300) ||
	    fx_add(st, "/usr/bin/prog", "vmlinux", 1, 100, 100, NULL, 0,
		   0xffffffff81100010ull + FX_SLIDE, 150) ||
	    fx_add(st, "/usr/bin/prog", "vmlinux", 1, 100, 100, NULL, 0,
		   0xffffffff81200004ull + FX_SLIDE, 60) ||
	    fx_add(st, "/usr/bin/prog", "fake_mod", 1, 100, 100, NULL, 0, fx->mod_hot, 40) ||
	    fx_add(st, NULL, "{anon}", 0, 100, 100, NULL, 0, 0x7f0000001000ull, 10) ||
	    fx_add(st, NULL, "/usr/bin/prog2", 0, 200, 200,
		   (const uint8_t *)"\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a", 10,
		   fx->hot_off[FX_A], 5) ||
	    fx_meta(st, "t1", 1) || store_sync(st)) {
		store_close(st);
		return -1;
	}
	store_close(st);

	st = store_open(fx->session, "t2", ev, 1, OPVM_SEP_NONE, 0);
	if (!st)
		return -1;
	if (fx_add(st, NULL, "/usr/bin/prog", 0, -1, -1, fx->bid, fx->bid_len,
		   fx->hot_off[FX_A], 100) ||
	    fx_meta(st, "t2", 0) || store_sync(st)) {
		store_close(st);
		return -1;
	}
	store_close(st);
	return 0;
}

static void fixture_cleanup(struct fixture *fx)
{
	if (fx->dir[0] && !getenv("OPVM_KEEP_FIXTURE"))
		fx_sh("rm -rf '%s'", fx->dir);
}

#endif /* OPVM_TEST_FIXTURE_H */
