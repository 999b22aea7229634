// SPDX-License-Identifier: MIT
/*
 * symbols/: ELF images (compiled fixtures), module layout, System.map and
 * the KASLR slide, capstone, the resolver's guest-root confinement, and
 * corrupt ELF input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <unistd.h>
#include <gelf.h>

#include "symbols/disasm.h"
#include "symbols/elfimage.h"
#include "symbols/ksyms.h"
#include "symbols/symres.h"
#include "tests/golden/fixture.h"

static struct fixture fx;
static char prog[PATH_MAX * 2], mod[PATH_MAX * 2];

static int setup(void **state)
{
	const char *build = getenv("BUILD");
	char base[PATH_MAX];

	snprintf(base, sizeof(base), "%s/tmp", build && *build ? build : "build");
	fx_sh("mkdir -p '%s'", base);
	if (fixture_build(&fx, base))
		return -1;
	snprintf(prog, sizeof(prog), "%s/usr/bin/prog", fx.root);
	snprintf(mod, sizeof(mod), "%s/lib/modules/%s/kernel/drivers/fake_mod.ko", fx.root,
		 FX_RELEASE);
	return 0;
}

static int teardown(void **state)
{
	fixture_cleanup(&fx);
	return 0;
}

static void test_elf_symbols(void **state)
{
	char err[256];
	struct elfimage *img = elfimage_open(prog, err, sizeof(err));
	const struct elfsym *s;
	uint64_t addr, off;
	size_t len;
	long i;

	assert_non_null(img);
	assert_false(elfimage_is_module(img));
	for (int k = FX_A; k <= FX_C; k++) {
		i = elfimage_find(img, fx_funcs[k]);
		assert_true(i >= 0);
		s = elfimage_sym(img, (size_t)i);
		assert_true(s->size > 0);
		/* Every address inside the function resolves to it. */
		assert_int_equal(elfimage_lookup(img, s->addr), i);
		assert_int_equal(elfimage_lookup(img, s->addr + s->size - 1), i);
		assert_int_equal(elfimage_lookup(img, fx.hot_addr[k]), i);
		/* File offset <-> address. */
		assert_int_equal(elfimage_addr_to_offset(img, s->addr, &off), 0);
		assert_int_equal(elfimage_offset_to_addr(img, off, &addr), 0);
		assert_int_equal(addr, s->addr);
	}
	/* Sorted, non-overlapping lookups. */
	for (size_t k = 1; k < elfimage_nr_syms(img); k++)
		assert_true(elfimage_sym(img, k - 1)->addr < elfimage_sym(img, k)->addr);
	assert_int_equal(elfimage_lookup(img, 0), -1);
	assert_non_null(elfimage_build_id(img, &len));
	assert_int_equal(len, 20);
	elfimage_close(img);
}

/* The batch lookup of a report gives elfimage_lookup_offset()'s answers
 * for every file offset of path, in and out of the hot segment, and past
 * the end. */
static void lookup_batch_matches(const char *path)
{
	struct elfimage *img = elfimage_open(path, NULL, 0);
	uint64_t offs[256], addr;
	long idx[256], one;
	size_t hits = 0;
	struct stat sb;

	assert_non_null(img);
	assert_int_equal(stat(path, &sb), 0);
	for (uint64_t base = 0; base < (uint64_t)sb.st_size + 4096; base += 256) {
		for (size_t k = 0; k < 256; k++)	/* descending: no order assumed */
			offs[k] = base + 255 - k;
		offs[0] = base ? UINT64_MAX - base : 0;
		elfimage_lookup_offsets(img, offs, idx, 256);
		for (size_t k = 0; k < 256; k++) {
			one = elfimage_lookup_offset(img, offs[k], &addr);
			assert_int_equal(idx[k], one < -1 ? -1 : one);
			hits += idx[k] >= 0;
		}
	}
	assert_true(hits > 0);
	elfimage_close(img);
}

static void test_elf_lookup_batch(void **state)
{
	(void)state;
	lookup_batch_matches(prog);
}

/* The same over 300 functions of sizes from a few bytes to a few hundred,
 * aligned and not, some of them aliases: the bucket index (at least 16
 * symbols) with buckets inside one function, across boundaries and over
 * padding. */
static void test_elf_lookup_batch_many(void **state)
{
	char src[PATH_MAX * 2 + 16], bin[PATH_MAX * 2 + 16];
	FILE *f;

	(void)state;
	snprintf(src, sizeof(src), "%s/many.c", fx.dir);
	snprintf(bin, sizeof(bin), "%s/many", fx.dir);
	f = fopen(src, "w");
	assert_non_null(f);
	for (int i = 0; i < 300; i++) {
		fprintf(f, "%sint f%d(int x) { int s = x;", i % 7 ? "" : "__attribute__((aligned(64))) ", i);
		for (int j = 0; j < i % 23; j++)
			fprintf(f, " s = s * %d + (s >> %d);", j + 3, j % 5 + 1);
		fprintf(f, " return s; }\n");
		if (i % 50 == 0)
			fprintf(f, "int g%d(int) __attribute__((alias(\"f%d\")));\n", i, i);
	}
	fprintf(f, "int main(int c, char **v) { return f1(c) + f299(c); }\n");
	fclose(f);
	assert_int_equal(fx_sh("cc -O1 -fno-inline -Wl,--build-id -o '%s' '%s'", bin, src), 0);
	lookup_batch_matches(bin);
}

static void test_elf_lines(void **state)
{
	struct elfimage *img = elfimage_open(prog, NULL, 0);
	struct elfline l;

	assert_non_null(img);
	assert_true(elfimage_has_lines(img));
	assert_int_equal(elfimage_line(img, fx.hot_addr[FX_B], &l), 0);
	assert_int_equal(l.line, fx.hot_line[FX_B]);
	assert_non_null(strstr(l.file, "prog.c"));
	elfimage_close(img);
}

static void test_elf_read(void **state)
{
	struct elfimage *img = elfimage_open(prog, NULL, 0);
	long i = elfimage_find(img, "func_b");
	const struct elfsym *s = elfimage_sym(img, (size_t)i);
	uint8_t buf[16], raw[16];
	uint64_t off;
	int fd;

	assert_true(elfimage_read(img, s->addr, buf, sizeof(buf)) > 0);
	/* Same bytes as the file at the symbol's offset. */
	assert_int_equal(elfimage_addr_to_offset(img, s->addr, &off), 0);
	fd = open(prog, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, raw, sizeof(raw), (off_t)off), sizeof(raw));
	close(fd);
	assert_memory_equal(buf, raw, sizeof(raw));
	elfimage_close(img);
}

/* A .ko: symbols at their offsets in the kernel's core text layout. */
static void test_module_layout(void **state)
{
	struct elfimage *img = elfimage_open(mod, NULL, 0);
	uint64_t text_size = 0, unlikely_align = 1, expect;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	Elf *elf;
	int fd;
	long i;

	assert_non_null(img);
	assert_true(elfimage_is_module(img));
	i = elfimage_find(img, "fakemod_init_thing");
	assert_true(i >= 0);
	assert_int_equal(elfimage_sym(img, (size_t)i)->addr, 0);
	assert_true(elfimage_find(img, "fakemod_hot_path") >= 0);

	/* .text.unlikely follows .text, aligned. */
	elf_version(EV_CURRENT);
	fd = open(mod, O_RDONLY | O_CLOEXEC);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	elf_getshdrstrndx(elf, &shstrndx);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		gelf_getshdr(scn, &sh);
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!strcmp(name, ".text"))
			text_size = sh.sh_size;
		if (!strcmp(name, ".text.unlikely"))
			unlikely_align = sh.sh_addralign ? sh.sh_addralign : 1;
	}
	elf_end(elf);
	close(fd);
	expect = (text_size + unlikely_align - 1) & ~(unlikely_align - 1);
	i = elfimage_find(img, "fakemod_cold");
	assert_true(i >= 0);
	assert_int_equal(elfimage_sym(img, (size_t)i)->addr, expect);
	elfimage_close(img);
}

static const char sysmap[] =
	"0000000000000000 A VDSO32_PRELINK\n"
	"ffffffff81000000 T _text\n"
	"ffffffff81000000 T startup_64\n"
	"garbage line\n"
	"ffffffff81000100 t secondary_startup_64\n"
	"ffffffff81100000 T do_syscall_64\n"
	"ffffffff81100400 W weak_text\n"
	"ffffffff81200000 D some_data\n"
	"ffffffff81300000 t mod_fn\t[virtio_console]\n"
	"zzzz T bad\n"
	"ffffffff81200000 T _etext\n";

static int lookup_map(const void *src, const char *name, uint64_t *addr)
{
	return ksyms_addr(src, name, addr);
}

static void test_ksyms(void **state)
{
	struct ksyms *ks = ksyms_parse(sysmap, sizeof(sysmap) - 1, NULL, 0);
	uint64_t slide, a;
	long i;

	assert_non_null(ks);
	assert_int_equal(ksyms_bad_lines(ks), 2);
	i = ksyms_lookup(ks, 0xffffffff81100010ull);
	assert_true(i >= 0);
	assert_string_equal(ksyms_sym(ks, (size_t)i)->name, "do_syscall_64");
	/* Aliases: the name without a leading underscore wins. */
	i = ksyms_lookup(ks, 0xffffffff81000000ull);
	assert_string_equal(ksyms_sym(ks, (size_t)i)->name, "startup_64");
	/* Module symbols come from the .ko, not from here. */
	assert_int_equal(ksyms_addr(ks, "mod_fn", &a), -ENOENT);
	assert_int_equal(ksyms_lookup(ks, 0xffffffff80000000ull), -1);

	assert_int_equal(ksyms_slide(0xffffffff8a000000ull, NULL, 0, lookup_map, ks, &slide), 0);
	assert_int_equal(slide, 0x9000000);
	/* Anchor symbol instead of _text. */
	assert_int_equal(ksyms_slide(0, "do_syscall_64", 0xffffffff8a100000ull, lookup_map, ks,
				     &slide), 0);
	assert_int_equal(slide, 0x9000000);
	assert_int_equal(ksyms_slide(0, "nope", 1, lookup_map, ks, &slide), -ENOENT);
	ksyms_free(ks);

	/* An unprivileged read of /proc/kallsyms: all zeros. */
	assert_null(ksyms_parse("0000000000000000 T a\n0000000000000000 T b\n", 42, NULL, 0));
	assert_int_equal(errno, EPERM);
	assert_null(ksyms_parse("", 0, NULL, 0));
}

struct dctx {
	char text[8][200];
	int n;
};

static int dcb(const struct disasm_insn *insn, void *arg)
{
	struct dctx *c = arg;

	if (c->n < 8)
		snprintf(c->text[c->n++], sizeof(c->text[0]), "%s", insn->text);
	return 0;
}

static void test_disasm(void **state)
{
	static const uint8_t code[] = { 0x55, 0x48, 0x89, 0xe5, 0x06, 0xc3 };
	struct disasm *d = disasm_new();
	struct dctx c = { .n = 0 };

	assert_non_null(d);
	assert_int_equal(disasm_range(d, code, sizeof(code), 0x1000, dcb, &c), 0);
	assert_int_equal(c.n, 4);
	assert_string_equal(c.text[0], "push rbp");
	assert_string_equal(c.text[1], "mov rbp, rsp");
	assert_non_null(strstr(c.text[2], "(bad)"));
	assert_string_equal(c.text[3], "ret");
	disasm_free(d);
}

/* A guest path never leaves the guest root, whatever its symlinks say. */
static void test_root_confinement(void **state)
{
	struct symres_root root = { .dir = fx.root };
	struct symres_config sc = { .roots = &root, .nr_roots = 1, .no_host_kernel = 1,
				    .no_debuginfod = 1 };
	struct symres *r;
	struct simage *si;

	assert_int_equal(fx_sh("ln -sf /usr/bin/true '%s/usr/bin/abs-link' && "
			       "ln -sf ../../../../../../../../usr/bin/true '%s/usr/bin/rel-link'",
			       fx.root, fx.root), 0);
	r = symres_new(&sc);
	assert_non_null(r);
	si = symres_image(r, "g", "/usr/bin/abs-link", 0, NULL, 0, NULL);
	assert_int_equal(simage_state(si), SIMAGE_NOT_FOUND);
	si = symres_image(r, "g", "/usr/bin/rel-link", 0, NULL, 0, NULL);
	assert_int_equal(simage_state(si), SIMAGE_NOT_FOUND);
	si = symres_image(r, "g", "/../../../../usr/bin/true", 0, NULL, 0, NULL);
	assert_int_equal(simage_state(si), SIMAGE_NOT_FOUND);
	/* Inside the root it works, and is cached. */
	si = symres_image(r, "g", "/usr/bin/prog", 0, fx.bid, fx.bid_len, NULL);
	assert_int_equal(simage_state(si), SIMAGE_OK);
	assert_ptr_equal(si, symres_image(r, "g", "/usr/bin/prog", 0, fx.bid, fx.bid_len, NULL));
	/* Same file through another name: opened once. */
	assert_int_equal(fx_sh("ln -f '%s' '%s/usr/bin/prog-hardlink'", prog, fx.root), 0);
	assert_ptr_equal(simage_elf(si),
			 simage_elf(symres_image(r, "g", "/usr/bin/prog-hardlink", 0, NULL, 0, NULL)));
	/* A wrong build-id is a mismatch, never used. */
	si = symres_image(r, "g", "/usr/bin/prog", 0, (const uint8_t *)"abcd", 4, NULL);
	assert_int_equal(simage_state(si), SIMAGE_MISMATCH);
	assert_int_equal(simage_lookup(si, fx.hot_off[FX_A], NULL), -1);
	/* Kernel from the root's System.map, with the slide. */
	{
		struct symres_kernel k = { .release = FX_RELEASE,
					   .text_addr = FX_LINK_TEXT + FX_SLIDE };
		long i;

		si = symres_image(r, "g", "vmlinux", 1, NULL, 0, &k);
		assert_int_equal(simage_state(si), SIMAGE_OK);
		i = simage_lookup(si, 0xffffffff81100010ull + FX_SLIDE, NULL);
		assert_true(i >= 0);
		assert_string_equal(simage_sym(si, (size_t)i)->name, "do_syscall_64");
		/* Another boot of the same guest (a differential report):
		 * another slide, another image. */
		{
			struct symres_kernel k2 = { .release = FX_RELEASE,
						    .text_addr = FX_LINK_TEXT + 0x20000000 };
			struct simage *si2 = symres_image(r, "g", "vmlinux", 1, NULL, 0, &k2);

			assert_ptr_not_equal(si2, si);
			i = simage_lookup(si2, 0xffffffff81100010ull + 0x20000000, NULL);
			assert_true(i >= 0);
			assert_string_equal(simage_sym(si2, (size_t)i)->name, "do_syscall_64");
		}
		/* A map of another kernel: _text and the anchor disagree. */
		k.anchor_name = "do_syscall_64";
		k.anchor_addr = 0xffffffff81100000ull + FX_SLIDE + 0x200000;
		si = symres_image(r, "g3", "vmlinux", 1, NULL, 0, &k);
		assert_int_equal(simage_state(si), SIMAGE_MISMATCH);
		k.anchor_addr = 0xffffffff81100000ull + FX_SLIDE;
		si = symres_image(r, "g4", "vmlinux", 1, NULL, 0, &k);
		assert_int_equal(simage_state(si), SIMAGE_OK);
		/* A compressed module (.ko.gz) is found and unpacked. */
		assert_int_equal(fx_sh("gzip -c '%s' > '%s/lib/modules/%s/kernel/zmod.ko.gz'",
				       mod, fx.root, FX_RELEASE), 0);
		k.anchor_name = NULL;
		si = symres_image(r, "g", "zmod", 1, NULL, 0, &k);
		assert_int_equal(simage_state(si), SIMAGE_OK);
		assert_true(simage_find(si, "fakemod_hot_path") >= 0);
		/* A hostile release never becomes a path. */
		k.release = "../../etc";
		si = symres_image(r, "g2", "vmlinux", 1, NULL, 0, &k);
		assert_int_equal(simage_state(si), SIMAGE_NOT_FOUND);
	}
	symres_free(r);
}

/* Reads the first line of f (closing it) into out. */
static void first_line(FILE *f, char *out, size_t len)
{
	assert_non_null(f);
	if (!fgets(out, (int)len, f))
		out[0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/*
 * Source lookup with paths from a crafted binary's debug info: #line names
 * a host file outright and through "../" climbs.  The file must never be
 * read from the host: only inside the guest root and --source-dir, with no
 * ".." or symlink leaving them; each miss says why.  Run with openat2 and
 * with the component-by-component fallback.
 */
static void test_source_confinement(void **state)
{
	char d[PATH_MAX + 16], rootdir[PATH_MAX + 32], srcdir[PATH_MAX + 32], secret[PATH_MAX + 32];
	char fa[PATH_MAX * 2], fb[PATH_MAX * 2], used[4096], line[256], want[PATH_MAX * 2];
	char absdir[PATH_MAX];
	struct symres_root root = { .guest = "g", .dir = rootdir };
	struct symres_config sc = { .roots = &root, .nr_roots = 1, .no_host_kernel = 1,
				    .no_debuginfod = 1, .source_dir = srcdir };
	struct elfimage *img;
	struct elfline l;
	struct symres *r;

	assert_non_null(realpath(fx.dir, absdir));
	snprintf(d, sizeof(d), "%s/srcconf", absdir);
	snprintf(rootdir, sizeof(rootdir), "%s/root", d);
	snprintf(srcdir, sizeof(srcdir), "%s/src", d);
	snprintf(secret, sizeof(secret), "%s/host/shadow", d);
	assert_int_equal(fx_sh("mkdir -p '%s/host' '%s' '%s' && echo 'root:SECRET:19000' > '%s' && "
			       "printf '#line 1 \"%s\"\\nint evil_a(int x) { return x * 3 + 1; }\\n"
			       "#line 1 \"../../../../../../../../../..%s\"\\n"
			       "int evil_b(int x) { return x * 5 + 2; }\\n' > '%s/evil.c' && "
			       "cd '%s' && cc -g -O1 -fPIC -shared -o evil.so evil.c",
			       d, rootdir, srcdir, secret, secret, secret, d, d), 0);
	snprintf(fa, sizeof(fa), "%s/evil.so", d);
	img = elfimage_open(fa, NULL, 0);
	assert_non_null(img);
	assert_int_equal(elfimage_line(img, elfimage_sym(img, (size_t)elfimage_find(img, "evil_a"))->addr, &l), 0);
	snprintf(fa, sizeof(fa), "%s", l.file);
	assert_int_equal(elfimage_line(img, elfimage_sym(img, (size_t)elfimage_find(img, "evil_b"))->addr, &l), 0);
	snprintf(fb, sizeof(fb), "%s", l.file);
	elfimage_close(img);
	assert_string_equal(fa, secret);		/* the debug info names the host file */
	assert_non_null(strstr(fb, "../../"));

	for (int pass = 0; pass < 2; pass++) {
		setenv("OPVM_NO_OPENAT2", pass ? "1" : "0", 1);
		r = symres_new(&sc);
		assert_non_null(r);
		/* Not in the root or the source dir: not opened on the host. */
		assert_null(symres_open_source(r, "g", fa, used, sizeof(used)));
		assert_non_null(strstr(used, "not in the guest root or --source-dir"));
		assert_null(symres_open_source(r, "g", fb, used, sizeof(used)));
		/* An absolute symlink in the root at that path stays in the root
		 * (a loop there: ELOOP), as does one climbing with "..". */
		assert_int_equal(fx_sh("mkdir -p '%s%s/host' && ln -sfn '%s' '%s%s/host/shadow' && "
				       "ln -sfn ../../../../../../../../../../..%s '%s/shadow2'",
				       rootdir, d, secret, rootdir, d, d, rootdir), 0);
		assert_null(symres_open_source(r, "g", fa, used, sizeof(used)));
		assert_null(symres_open_source(r, "g", "/shadow2", used, sizeof(used)));
		/* Another guest has no root and nothing is on the host. */
		sc.source_dir = NULL;
		symres_free(r);
		r = symres_new(&sc);
		assert_null(symres_open_source(r, "other", fa, used, sizeof(used)));
		assert_non_null(strstr(used, "never opened on the host"));
		symres_free(r);
		sc.source_dir = srcdir;
		/* A copy of the file in the source dir is found by its tail,
		 * climbs and all, and named. */
		assert_int_equal(fx_sh("echo 'int decoy;' > '%s/shadow'", srcdir), 0);
		r = symres_new(&sc);
		first_line(symres_open_source(r, "g", fb, used, sizeof(used)), line, sizeof(line));
		assert_string_equal(line, "int decoy;");
		snprintf(want, sizeof(want), "%s/shadow", srcdir);
		assert_string_equal(used, want);
		/* The root's own copy comes first; a FIFO is refused, at once. */
		assert_int_equal(fx_sh("rm -f '%s%s/host/shadow' && echo 'in root' > '%s%s/host/shadow' && "
				       "rm -f '%s/fifo.c' && mkfifo '%s/fifo.c'",
				       rootdir, d, rootdir, d, rootdir, rootdir), 0);
		first_line(symres_open_source(r, "g", fa, used, sizeof(used)), line, sizeof(line));
		assert_string_equal(line, "in root");
		assert_null(symres_open_source(r, "g", "/fifo.c", used, sizeof(used)));
		assert_string_equal(used, "not a regular file where found");
		symres_free(r);
		assert_int_equal(fx_sh("rm -rf '%s' '%s/shadow' && mkdir -p '%s'", rootdir, srcdir,
				       rootdir), 0);
	}
	unsetenv("OPVM_NO_OPENAT2");
}

/* A FIFO where a binary or a System.map was expected is refused at once
 * (it used to block the report forever). */
static void test_fifo_refused(void **state)
{
	char path[PATH_MAX + 16], err[256];

	snprintf(path, sizeof(path), "%s/fifo", fx.dir);
	assert_int_equal(fx_sh("rm -f '%s' && mkfifo '%s'", path, path), 0);
	alarm(30);
	assert_null(elfimage_open(path, err, sizeof(err)));
	assert_non_null(strstr(err, "not a regular file"));
	assert_null(ksyms_open(path, err, sizeof(err)));
	assert_non_null(strstr(err, "not a regular file"));
	alarm(0);
}

/* Debian's placeholder /boot/System.map-<release> (one line, no text
 * symbols): the reason names that file, not the descriptor it was read
 * through, and the flags that fix it. */
static void test_placeholder_map(void **state)
{
	char dir[PATH_MAX + 16], want[PATH_MAX + 64];
	struct symres_root root = { .dir = dir };
	struct symres_config sc = { .roots = &root, .nr_roots = 1, .no_host_kernel = 1,
				    .no_debuginfod = 1 };
	struct symres_kernel k = { .release = "6.1.0-ph" };
	struct symres *r;
	struct simage *si;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/phroot", fx.dir);
	assert_int_equal(fx_sh("mkdir -p '%s/boot' && echo 'ffffffffffffffff B The real "
			       "System.map is in the linux-image-<version>-dbg package' > "
			       "'%s/boot/System.map-6.1.0-ph'", dir, dir), 0);
	r = symres_new(&sc);
	assert_non_null(r);
	si = symres_image(r, "g", "vmlinux", 1, NULL, 0, &k);
	assert_int_equal(simage_state(si), SIMAGE_BAD);
	snprintf(want, sizeof(want), "%s/boot/System.map-6.1.0-ph: ", dir);
	assert_non_null(strstr(simage_reason(si), want));
	assert_non_null(strstr(simage_reason(si), "--system-map FILE"));
	assert_null(strstr(simage_reason(si), "/proc/self/fd"));
	symres_free(r);
}

/* A stripped library takes its symbols (and lines) from the debug file
 * under usr/lib/debug/.build-id in the guest root. */
static void test_debug_symbols(void **state)
{
	struct symres_root root = { .dir = fx.root };
	struct symres_config sc = { .roots = &root, .nr_roots = 1, .no_host_kernel = 1,
				    .no_debuginfod = 1 };
	char lib[PATH_MAX * 2];
	struct elfimage *img;
	const uint8_t *bid;
	char hexid[129];
	struct symres *r;
	struct simage *si;
	size_t len;
	long i;

	snprintf(lib, sizeof(lib), "%s/usr/lib/libfix.so", fx.root);
	img = elfimage_open(lib, NULL, 0);
	assert_non_null(img);
	bid = elfimage_build_id(img, &len);
	assert_non_null(bid);
	for (size_t k = 0; k < len; k++)
		sprintf(hexid + 2 * k, "%02x", bid[k]);
	elfimage_close(img);
	assert_int_equal(fx_sh(
		"mkdir -p '%s/usr/lib/debug/.build-id/%.2s' && "
		"objcopy --only-keep-debug '%s' '%s/usr/lib/debug/.build-id/%.2s/%s.debug' && "
		"strip --strip-all -o '%s/usr/lib/libfix-stripped.so' '%s'",
		fx.root, hexid, lib, fx.root, hexid, hexid + 2, fx.root, lib), 0);

	r = symres_new(&sc);
	assert_non_null(r);
	si = symres_image(r, "g", "/usr/lib/libfix-stripped.so", 0, NULL, 0, NULL);
	assert_int_equal(simage_state(si), SIMAGE_OK);
	assert_true(elfimage_has_symtab(simage_elf(si)));
	i = simage_lookup(si, fx.hot_off[FX_LIB], NULL);
	assert_true(i >= 0);
	assert_string_equal(simage_sym(si, (size_t)i)->name, "lib_hot");
	assert_int_equal(symres_want_lines(r, si, "g"), 0);
	symres_free(r);
}

/* A stripped executable (no symbol at all, as Debian's xz) is split by
 * its functions' .eh_frame bounds, each named by address and marked, and
 * its file is the image's (simage_file()): the unwinder needs the same
 * .eh_frame.  A file with another build-id is not used. */
static void test_stripped_file(void **state)
{
	struct symres_root root = { .dir = fx.root };
	struct symres_config sc = { .roots = &root, .nr_roots = 1, .no_host_kernel = 1,
				    .no_debuginfod = 1 };
	struct elfimage *img;
	const uint8_t *bid;
	uint8_t other[20];
	struct symres *r;
	struct simage *si;
	char want[64];
	size_t len;

	assert_int_equal(fx_sh("strip --strip-all -o '%s/usr/bin/prog-stripped' '%s'", fx.root,
			       prog), 0);
	img = elfimage_open(prog, NULL, 0);
	assert_non_null(img);
	bid = elfimage_build_id(img, &len);
	assert_non_null(bid);
	assert_true(len == sizeof(other));
	memcpy(other, bid, len);
	r = symres_new(&sc);
	assert_non_null(r);
	si = symres_image(r, "g", "/usr/bin/prog-stripped", 0, bid, len, NULL);
	assert_int_equal(simage_state(si), SIMAGE_OK);
	assert_true(simage_nr_frames(si) > 0);
	assert_int_equal(simage_nr_frames(si), simage_nr_syms(si));
	assert_non_null(simage_file(si));
	assert_non_null(strstr(simage_file(si), "/usr/bin/prog-stripped"));
	assert_non_null(strstr(simage_reason(si), "usr/lib/debug/.build-id/"));
	assert_non_null(strstr(simage_reason(si), "DEBUGINFOD_URLS"));
	/* each function: one symbol, the unstripped one's bounds */
	for (int k = FX_A; k <= FX_C; k++) {
		const struct elfsym *u = elfimage_sym(img, (size_t)elfimage_find(img, fx_funcs[k]));
		uint64_t addr;
		long i = simage_lookup(si, fx.hot_off[k], &addr);
		const struct elfsym *s;

		assert_true(i >= 0);
		s = simage_sym(si, (size_t)i);
		snprintf(want, sizeof(want), "prog-stripped+%#" PRIx64, u->addr);
		assert_string_equal(s->name, want);
		assert_int_equal(s->addr, u->addr);
		assert_int_equal(s->size, u->size);
		assert_int_equal(simage_sym_frame(si, s), 1);
		assert_int_equal(elfimage_sym_frame(img, elfimage_sym(img, 0)), 0);
		assert_int_equal(simage_find(si, want), i);
	}
	other[0] ^= 0xff;
	si = symres_image(r, "g", "/usr/bin/prog-stripped", 0, other, len, NULL);
	assert_int_equal(simage_state(si), SIMAGE_MISMATCH);
	assert_null(simage_file(si));
	elfimage_close(img);
	symres_free(r);
}

/* Every function of the unstripped program: the stripped one's .eh_frame
 * gives it the same bounds (the program's own functions all; of the C
 * runtime's, those with an FDE). */
static void test_frames_match_symtab(void **state)
{
	char path[PATH_MAX * 2 + 16];
	struct elfimage *u = elfimage_open(prog, NULL, 0), *img;
	struct elfimage_frames st;
	size_t same = 0, funcs = 0;

	snprintf(path, sizeof(path), "%s/usr/bin/prog-stripped", fx.root);
	assert_int_equal(fx_sh("strip --strip-all -o '%s' '%s'", path, prog), 0);
	img = elfimage_open(path, NULL, 0);
	assert_non_null(u);
	assert_non_null(img);
	assert_int_equal(elfimage_nr_syms(img), 0);
	assert_true(elfimage_frame_symbols(img, "prog", &st) > 0);
	assert_int_equal(st.refused, 0);
	assert_int_equal(st.cut, 0);
	assert_int_equal(elfimage_frame_symbols(img, "other", NULL), (long)st.added);
	for (size_t i = 0; i < elfimage_nr_syms(u); i++) {
		const struct elfsym *s = elfimage_sym(u, i);
		long k = elfimage_lookup(img, s->addr);

		funcs++;
		if (k >= 0 && elfimage_sym(img, (size_t)k)->addr == s->addr &&
		    elfimage_sym(img, (size_t)k)->size == s->size)
			same++;
	}
	print_message("frames: %zu FDEs, %zu symbols; %zu of %zu functions with the same bounds\n",
		      st.fdes, st.added, same, funcs);
	assert_true(same >= 4);
	elfimage_close(img);
	elfimage_close(u);
}

/* The file offset and size of path's .eh_frame. */
static void eh_frame_at(const uint8_t *buf, size_t len, size_t *off, size_t *size)
{
	Elf *e = elf_memory((char *)buf, len);
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	*off = *size = 0;
	assert_non_null(e);
	assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *n;

		if (!gelf_getshdr(scn, &sh))
			continue;
		n = elf_strptr(e, shstrndx, sh.sh_name);
		if (n && !strcmp(n, ".eh_frame")) {
			*off = sh.sh_offset;
			*size = sh.sh_size;
		}
	}
	elf_end(e);
	assert_true(*size > 0 && *off + *size <= len);
}

/* The image of buf[0..len) split by its .eh_frame: each added symbol is
 * sorted, sized, found by lookup and in the program's code. */
static long frames_of(const uint8_t *buf, size_t len, struct elfimage_frames *st)
{
	struct elfimage *img = elfimage_open_mem(buf, len, NULL, 0);
	uint64_t lo = UINT64_MAX, hi = 0, off;
	long n;

	if (!img)
		return -1;
	n = elfimage_frame_symbols(img, "x", st);
	if (elfimage_exec_span(img, &lo, &hi, &off))
		lo = hi = 0;
	for (size_t i = 0; i < elfimage_nr_syms(img); i++) {
		const struct elfsym *s = elfimage_sym(img, i);

		assert_true(s->size > 0);
		assert_true(s->addr >= lo && s->addr + s->size <= hi);
		assert_int_equal(elfimage_lookup(img, s->addr), (long)i);
		assert_int_equal(elfimage_lookup(img, s->addr + s->size - 1), (long)i);
		if (i)
			assert_true(elfimage_sym(img, i - 1)->addr + elfimage_sym(img, i - 1)->size
				    <= s->addr);
	}
	elfimage_close(img);
	return n;
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/*
 * A lying .eh_frame (the binary is guest data): an unknown augmentation,
 * entry lengths past the section, CIE pointers anywhere, functions
 * outside the code or past the address space, random bytes.  Each entry
 * is refused and counted or clamped to the code, never followed out.
 */
static void test_frames_hostile(void **state)
{
	char path[PATH_MAX * 2 + 16];
	uint8_t *buf = malloc(1 << 20), *w = malloc(1 << 20);
	struct elfimage_frames st, st0;
	uint64_t seed = 0x9e3779b9;
	size_t len, off, size, p;
	long n0, n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/usr/bin/prog-stripped", fx.root);
	assert_int_equal(fx_sh("strip --strip-all -o '%s' '%s'", path, prog), 0);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_non_null(buf);
	assert_non_null(w);
	len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	eh_frame_at(buf, len, &off, &size);
	n0 = frames_of(buf, len, &st0);
	assert_true(n0 > 0);

	/* the first CIE's augmentation "zR" made unknown: its FDEs refused */
	memcpy(w, buf, len);
	assert_int_equal(rd32(w + off + 4), 0);		/* a CIE */
	assert_int_equal(w[off + 9], 'z');
	w[off + 10] = 'Q';
	n = frames_of(w, len, &st);
	assert_true(st.refused > 0 && n < n0);
	/* the first entry's length past the section: the walk stops there */
	memcpy(w, buf, len);
	wr32(w + off, 0xfffffff0u);
	n = frames_of(w, len, &st);
	assert_int_equal(n, 0);
	assert_int_equal(st.refused, 1);
	/* every FDE: CIE pointer into itself, location far away, range huge */
	for (int how = 0; how < 3; how++) {
		memcpy(w, buf, len);
		for (p = 0; p + 8 <= size;) {
			uint32_t l = rd32(w + off + p), id = rd32(w + off + p + 4);

			if (!l || l > size - p - 4)
				break;
			if (id && l >= 16) {
				if (how == 0)
					wr32(w + off + p + 4, 2);
				else if (how == 1)
					wr32(w + off + p + 8, rd32(w + off + p + 8) + 0x40000000u);
				else
					wr32(w + off + p + 12, 0x7ffffff0u);
			}
			p += 4 + l;
		}
		n = frames_of(w, len, &st);
		if (how < 2)
			assert_int_equal(n, 0);
		else
			assert_true(n > 0);	/* clamped to the code, checked */
		print_message("lie %d: %ld symbols, %zu FDEs, %zu refused\n", how, n, st.fdes,
			      st.refused);
	}
	/* random bytes in the section */
	for (int round = 0; round < 400; round++) {
		memcpy(w, buf, len);
		for (int k = 0; k < 1 + round % 16; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			w[off + (seed >> 33) % size] = (uint8_t)(seed >> 17);
		}
		frames_of(w, len, &st);
	}
	free(buf);
	free(w);
}

/* A compressed ELF opens like the plain one. */
static void test_compressed_elf(void **state)
{
	char gz[PATH_MAX * 2 + 8];
	struct elfimage *img;

	snprintf(gz, sizeof(gz), "%s/prog.gz", fx.dir);
	assert_int_equal(fx_sh("gzip -c '%s' > '%s'", prog, gz), 0);
	img = elfimage_open(gz, NULL, 0);
	assert_non_null(img);
	assert_true(elfimage_find(img, "func_b") >= 0);
	elfimage_close(img);
}

/*
 * Kernel symbols from a System.map, code from a stripped, compressed
 * "vmlinuz" in the guest root -- used only when its linux_banner names the
 * guest's release.
 */
static void test_kernel_code(void **state)
{
	char dir[PATH_MAX + 64];
	struct symres_root root = { .dir = dir };
	struct symres_config sc = { .roots = &root, .nr_roots = 1, .no_host_kernel = 1,
				    .no_debuginfod = 1 };
	struct symres_kernel k = { .release = "6.1.0-code" };
	struct symres *r;
	struct simage *si;
	struct elfimage *code, *plain;
	uint8_t a[32], b[32];
	long i;

	snprintf(dir, sizeof(dir), "%s/kroot", fx.dir);
	assert_int_equal(fx_sh(
		"mkdir -p '%s/boot' && cd '%s' && "
		"printf 'const char linux_banner[] = \"Linux version 6.1.0-code (t) #1\\\\n\";\n"
		"int kfunc_hot(int x) { int s = 0; for (int i = 0; i < x; i++) s += i * x; return s; }\n"
		"void kmain(void) { kfunc_hot(3); for (;;) ; }\n' > kern.c && "
		"cc -O1 -fno-pie -no-pie -nostdlib -static -Wl,-e,kmain -o kern.elf kern.c && "
		"nm kern.elf > boot/System.map-6.1.0-code && strip -o kern.stripped kern.elf && "
		"gzip -c kern.stripped > boot/vmlinuz-6.1.0-code && "
		"mkdir -p other/boot && cp boot/System.map-6.1.0-code other/boot/System.map-6.1.0-other && "
		"cp boot/vmlinuz-6.1.0-code other/boot/vmlinuz-6.1.0-other", dir, dir), 0);
	r = symres_new(&sc);
	assert_non_null(r);
	si = symres_image(r, "g", "vmlinux", 1, NULL, 0, &k);
	assert_int_equal(simage_state(si), SIMAGE_OK);
	assert_null(simage_elf(si));
	assert_null(simage_code(si));
	i = simage_find(si, "kfunc_hot");
	assert_true(i >= 0);
	assert_int_equal(symres_want_code(r, si), 0);
	code = simage_code(si);
	assert_non_null(code);
	/* The same bytes as the unstripped binary at the symbol. */
	snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir), "/kern.elf");
	plain = elfimage_open(dir, NULL, 0);
	assert_non_null(plain);
	assert_int_equal(elfimage_read(code, simage_sym(si, (size_t)i)->addr, a, sizeof(a)),
			 sizeof(a));
	assert_int_equal(elfimage_read(plain, simage_sym(si, (size_t)i)->addr, b, sizeof(b)),
			 sizeof(b));
	assert_memory_equal(a, b, sizeof(a));
	elfimage_close(plain);
	symres_free(r);

	/* Another release's banner: not this guest's kernel. */
	snprintf(dir, sizeof(dir), "%s/kroot/other", fx.dir);
	k.release = "6.1.0-other";
	r = symres_new(&sc);
	si = symres_image(r, "g", "vmlinux", 1, NULL, 0, &k);
	assert_int_equal(simage_state(si), SIMAGE_OK);
	assert_int_equal(symres_want_code(r, si), -ENOENT);
	assert_null(simage_code(si));
	symres_free(r);
}

/* Truncations and byte flips of a real binary: errors, never crashes. */
static void test_corrupt_elf(void **state)
{
	uint8_t *buf, *work;
	size_t len;
	uint64_t seed = 0x12345678;
	FILE *f = fopen(prog, "rb");
	struct elfline l;

	assert_non_null(f);
	buf = malloc(1 << 20);
	work = malloc(1 << 20);
	assert_non_null(buf);
	assert_non_null(work);
	len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	for (size_t cut = 0; cut < len; cut += len / 97 + 1) {
		struct elfimage *img = elfimage_open_mem(buf, cut, NULL, 0);

		if (img) {
			elfimage_lookup(img, fx.hot_addr[FX_A]);
			elfimage_line(img, fx.hot_addr[FX_A], &l);
			elfimage_close(img);
		}
	}
	for (int round = 0; round < 300; round++) {
		struct elfimage *img;
		uint8_t rd[64];

		memcpy(work, buf, len);
		for (int k = 0; k < 8; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			/* Headers and tables live at both ends of the file. */
			size_t pos = (seed >> 33) % (k & 1 ? len : 4096 < len ? 4096 : len);

			if (k & 2)
				pos = len - 1 - pos % (len < 8192 ? len : 8192);
			work[pos] = (uint8_t)(seed >> 17);
		}
		img = elfimage_open_mem(work, len, NULL, 0);
		if (!img)
			continue;
		for (size_t i = 0; i < elfimage_nr_syms(img); i++)
			elfimage_lookup(img, elfimage_sym(img, i)->addr);
		elfimage_read(img, fx.hot_addr[FX_A], rd, sizeof(rd));
		elfimage_line(img, fx.hot_addr[FX_A], &l);
		elfimage_close(img);
	}
	free(buf);
	free(work);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_elf_symbols),
		cmocka_unit_test(test_elf_lookup_batch),
		cmocka_unit_test(test_elf_lookup_batch_many),
		cmocka_unit_test(test_elf_lines),
		cmocka_unit_test(test_elf_read),
		cmocka_unit_test(test_module_layout),
		cmocka_unit_test(test_ksyms),
		cmocka_unit_test(test_disasm),
		cmocka_unit_test(test_root_confinement),
		cmocka_unit_test(test_source_confinement),
		cmocka_unit_test(test_fifo_refused),
		cmocka_unit_test(test_debug_symbols),
		cmocka_unit_test(test_stripped_file),
		cmocka_unit_test(test_frames_match_symtab),
		cmocka_unit_test(test_frames_hostile),
		cmocka_unit_test(test_compressed_elf),
		cmocka_unit_test(test_kernel_code),
		cmocka_unit_test(test_corrupt_elf),
		cmocka_unit_test(test_placeholder_map),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
