// SPDX-License-Identifier: MIT
/*
 * DWARF CFI unwinding of a guest user stack with libdwfl (unwind/dwarf-cfi.h).
 *
 * libdwfl unwinds a "process" it is attached to through
 * Dwfl_Thread_Callbacks: set_initial_registers hands it the sample's
 * registers, memory_read reads the stack (here: only the copied window),
 * and for each pc it looks up a Dwfl_Module whose CFI says how to find the
 * caller.  Modules are reported lazily, one per image a frame lands in, from
 * the caller's find_image and the ELF file's PT_LOADs.
 *
 * One Dwfl lives across unwinds so a module's parsed CFI (its Dwarf_CFI,
 * the .eh_frame_hdr table, FDE caches) is reused; the Dwfl knows no address
 * space, so each frame's module is checked against find_image: a module
 * left by another guest process at that pc (another image, another load
 * address, or none now) drops the whole Dwfl and the walk is redone once.
 * The ELF files themselves are opened once into a bounded cache and lent to
 * every module by reference (elf_begin's ELF_C_READ_MMAP duplicate).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <elfutils/libdwfl.h>
#include <gelf.h>

#include "lib/fs.h"
#include "lib/hash.h"
#include "lib/x86.h"
#include "unwind/dwarf-cfi.h"

#define MAX_MODULES	32	/* per Dwfl; < UNWIND_DWARF_CACHE, see image_evict() */
#define MAX_LOADS	16	/* PT_LOADs kept per file; more and it is refused */
#define MAX_PHDRS	256
#define DWARF_SP	7	/* x86-64 DWARF register numbers */
#define DWARF_BP	6
#define DWARF_NREGS	17	/* rax..r15, then the return address (rip) */
#define TID		1	/* the one "thread" libdwfl is told about */

/* One ELF file, opened and checked once. */
struct image {
	char *path;		/* NULL: a free slot */
	uint64_t hash;		/* of path, to skip most strcmp()s */
	int fd;
	Elf *elf;		/* NULL: the file did not open or check */
	uint64_t lo, hi;	/* link-time span: libdwfl's own rule for lo */
	struct load { uint64_t vaddr, off, filesz; } load[MAX_LOADS];
	unsigned nload;
	uint64_t used;		/* LRU clock */
};

/* A module reported to the current Dwfl. */
struct module {
	struct image *img;
	uint64_t low, high;	/* run-time span */
};

struct unwind_dwarf {
	Dwfl *dwfl;		/* NULL until the first unwind, or after a reset */
	Elf *arch;		/* an x86-64 header alone: tells libdwfl the arch */
	Elf64_Ehdr arch_hdr;
	struct image img[UNWIND_DWARF_CACHE];
	uint64_t clock;
	struct module mod[MAX_MODULES];
	unsigned nmod;

	/* the walk under way */
	const struct unwind_regs *r;
	const uint8_t *stack;
	size_t len;
	int (*find_image)(void *arg, uint64_t pc, struct unwind_dwarf_image *out);
	void *arg;
	uint64_t *pcs;
	unsigned n, max;
	uint64_t last_sp;
	int fresh;		/* the Dwfl holds only this walk's modules */
	int restart;		/* a stale module was found: reset, walk again */
	int stopped;		/* the frame callback ended the walk: stop holds why */
	int window_miss;	/* the last frame's unwinding read outside the window */
	enum unwind_stop stop;

	struct unwind_dwarf_stats st;
};

/* ---- the ELF file cache ---------------------------------------------------- */

/* The file's PT_LOADs into im; 0, or -1 if it is not an x86-64 executable
 * or shared object libdwfl could place. */
static int image_check(struct image *im)
{
	GElf_Ehdr eh;
	size_t phnum, i;
	int first = 1;

	if (elf_kind(im->elf) != ELF_K_ELF || gelf_getclass(im->elf) != ELFCLASS64 ||
	    !gelf_getehdr(im->elf, &eh) || eh.e_machine != EM_X86_64 ||
	    (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) ||
	    elf_getphdrnum(im->elf, &phnum) || phnum > MAX_PHDRS)
		return -1;
	for (i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		uint64_t end;

		if (!gelf_getphdr(im->elf, (int)i, &ph))
			return -1;
		if (ph.p_type != PT_LOAD)
			continue;
		if (im->nload == MAX_LOADS ||
		    __builtin_add_overflow(ph.p_vaddr, ph.p_memsz, &end) ||
		    __builtin_add_overflow(ph.p_offset, ph.p_filesz, &(uint64_t){ 0 }))
			return -1;
		if (first) {
			/* as libdwfl's open_elf() computes the module's vaddr */
			im->lo = ph.p_vaddr & -ph.p_align;
			first = 0;
		}
		if (end > im->hi)
			im->hi = end;
		im->load[im->nload++] = (struct load){ ph.p_vaddr, ph.p_offset, ph.p_filesz };
	}
	return !im->nload || im->lo >= im->hi ? -1 : 0;
}

/* Opens path into the free slot im.  A file that does not open or check
 * stays cached with elf NULL, so it costs one open(), not one per frame. */
static void image_open(struct unwind_dwarf *u, struct image *im, const char *path,
		       uint64_t hash)
{
	struct stat sb;

	memset(im, 0, sizeof(*im));
	im->fd = -1;
	im->path = strdup(path);
	if (!im->path)
		return;
	im->hash = hash;
	im->fd = fs_open_regular(path, 0);	/* a FIFO must not hang the collector */
	if (im->fd < 0 || fstat(im->fd, &sb) || !S_ISREG(sb.st_mode) ||
	    (size_t)sb.st_size < sizeof(Elf64_Ehdr))
		goto bad;
	im->elf = elf_begin(im->fd, ELF_C_READ_MMAP, NULL);
	if (!im->elf || image_check(im))
		goto bad;
	return;
bad:
	u->st.bad_image++;
	if (im->elf)
		elf_end(im->elf);
	im->elf = NULL;
	if (im->fd >= 0)
		close(im->fd);
	im->fd = -1;
}

static void image_close(struct image *im)
{
	if (im->elf)
		elf_end(im->elf);	/* modules still holding it keep it alive */
	if (im->fd >= 0)
		close(im->fd);
	free(im->path);
	memset(im, 0, sizeof(*im));
	im->fd = -1;
}

static int image_in_use(const struct unwind_dwarf *u, const struct image *im)
{
	for (unsigned i = 0; i < u->nmod; i++)
		if (u->mod[i].img == im)
			return 1;
	return 0;
}

/* A slot for a new file: a free one, else the least recently used file no
 * module of the current Dwfl refers to (there always is one: MAX_MODULES <
 * UNWIND_DWARF_CACHE), so no module's fd is closed under it. */
static struct image *image_evict(struct unwind_dwarf *u)
{
	struct image *victim = NULL;

	for (unsigned i = 0; i < UNWIND_DWARF_CACHE; i++) {
		struct image *im = &u->img[i];

		if (!im->path)
			return im;
		if (image_in_use(u, im))
			continue;
		if (!victim || im->used < victim->used)
			victim = im;
	}
	if (victim) {
		u->st.evictions++;
		image_close(victim);
	}
	return victim;
}

/* The cached file at path, opened if need be; NULL if it is unusable. */
static struct image *image_get(struct unwind_dwarf *u, const char *path)
{
	uint64_t hash;
	struct image *im;

	if (strnlen(path, PATH_MAX) >= PATH_MAX)
		return NULL;
	hash = hash_str(path);
	for (unsigned i = 0; i < UNWIND_DWARF_CACHE; i++) {
		im = &u->img[i];
		if (im->path && im->hash == hash && !strcmp(im->path, path))
			goto found;
	}
	im = image_evict(u);
	if (!im)
		return NULL;
	image_open(u, im, path, hash);
	if (!im->path)
		return NULL;
found:
	im->used = ++u->clock;
	return im->elf ? im : NULL;
}

/* The run-time span of im mapped as m: the PT_LOAD holding m's file offset
 * gives the load bias.  0, or -1 if no PT_LOAD holds it or pc is outside. */
static int image_place(const struct image *im, const struct unwind_dwarf_image *m,
		       uint64_t pc, uint64_t *low, uint64_t *high)
{
	for (unsigned i = 0; i < im->nload; i++) {
		const struct load *l = &im->load[i];
		uint64_t bias;

		/* off + filesz was checked for overflow in image_check() */
		if (m->pgoff < (l->off & ~0xfffull) || m->pgoff >= l->off + l->filesz)
			continue;
		/* offset off is at start + (off - pgoff); wraps cancel out */
		bias = m->start + (l->off - m->pgoff) - l->vaddr;
		if (__builtin_add_overflow(bias, im->lo, low) ||
		    __builtin_add_overflow(bias, im->hi, high))
			return -1;
		return pc >= *low && pc < *high ? 0 : -1;
	}
	return -1;
}

/* ---- libdwfl callbacks ---------------------------------------------------- */

/* Lends the cached Elf: elf_begin() of a reference only counts it up. */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
		    char **file_name, Elf **elfp)
{
	const struct module *m = *userdata;

	*elfp = m && m->img && m->img->elf ?
		elf_begin(-1, ELF_C_READ_MMAP, m->img->elf) : NULL;
	return -1;
}

/* No separate debuginfo: the host copy of a guest file is all there is
 * (its .debug_frame is used if it has one). */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *name,
			  Dwarf_Addr base, const char *file_name, const char *link,
			  GElf_Word crc, char **debuginfo_file_name)
{
	return -1;
}

static const Dwfl_Callbacks dwfl_cbs = {
	.find_elf = find_elf,
	.find_debuginfo = find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

static pid_t next_thread(Dwfl *dwfl, void *dwfl_arg, void **thread_argp)
{
	if (*thread_argp)
		return 0;
	*thread_argp = dwfl_arg;
	return TID;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *dwfl_arg, void **thread_argp)
{
	*thread_argp = dwfl_arg;
	return tid == TID;
}

/* A word of the window, never anything outside it. */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *dwfl_arg)
{
	struct unwind_dwarf *u = dwfl_arg;
	uint64_t off = addr - u->r->sp;

	if (addr < u->r->sp || u->len < sizeof(*result) ||
	    off > u->len - sizeof(*result)) {
		u->window_miss = 1;
		u->st.window_misses++;
		return false;
	}
	memcpy(result, u->stack + off, sizeof(*result));
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
	const struct unwind_dwarf *u = thread_arg;
	Dwarf_Word regs[DWARF_NREGS];

	for (unsigned i = 0; i < 16; i++)
		regs[i] = u->r->gpr[i];
	regs[DWARF_BP] = u->r->bp;
	regs[DWARF_SP] = u->r->sp;
	regs[16] = u->r->ip;
	return dwfl_thread_state_registers(thread, 0, DWARF_NREGS, regs);
}

static const Dwfl_Thread_Callbacks thread_cbs = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

/* ---- the Dwfl and its modules ---------------------------------------------- */

static void dwfl_drop(struct unwind_dwarf *u)
{
	if (u->dwfl)
		dwfl_end(u->dwfl);
	u->dwfl = NULL;
	u->nmod = 0;
}

/* A new, empty Dwfl attached to our callbacks: 0 or -1. */
static int dwfl_reset(struct unwind_dwarf *u)
{
	dwfl_drop(u);
	u->dwfl = dwfl_begin(&dwfl_cbs);
	if (!u->dwfl)
		return -1;
	if (!dwfl_attach_state(u->dwfl, u->arch, TID, &thread_cbs, u)) {
		dwfl_drop(u);
		return -1;
	}
	u->fresh = 1;
	return 0;
}

static struct module *module_of(struct unwind_dwarf *u, Dwfl_Module *dm)
{
	void **ud;

	if (!dwfl_module_info(dm, &ud, NULL, NULL, NULL, NULL, NULL, NULL))
		return NULL;
	return *ud;
}

/* A conflict with what the Dwfl holds: a stale module from an earlier walk
 * drops it all (the walk is redone); within one walk, find_image
 * contradicted itself: the walk is cut.  Returns DWARF_CB_ABORT. */
static int conflict(struct unwind_dwarf *u)
{
	if (u->fresh) {
		u->st.cut++;
		u->stop = UNWIND_BAD_FRAME;
		u->stopped = 1;
	} else {
		u->restart = 1;
	}
	return DWARF_CB_ABORT;
}

/* Reports im at [low, high) as a new module: DWARF_CB_OK or _ABORT. */
static int module_add(struct unwind_dwarf *u, struct image *im, uint64_t low, uint64_t high)
{
	struct module *m;
	Dwfl_Module *dm;
	void **ud;

	for (unsigned i = 0; i < u->nmod; i++)
		if (low < u->mod[i].high && u->mod[i].low < high)
			return conflict(u);
	if (u->nmod == MAX_MODULES)
		return conflict(u);
	m = &u->mod[u->nmod];
	dwfl_report_begin_add(u->dwfl);
	dm = dwfl_report_module(u->dwfl, im->path, low, high);
	dwfl_report_end(u->dwfl, NULL, NULL);
	if (!dm || !dwfl_module_info(dm, &ud, NULL, NULL, NULL, NULL, NULL, NULL))
		return conflict(u);
	*m = (struct module){ im, low, high };
	*ud = m;
	u->nmod++;
	return DWARF_CB_OK;
}

/* Makes the Dwfl's module at pc the image find_image names, before libdwfl
 * unwinds the frame at pc: DWARF_CB_OK, or _ABORT (u says why). */
static int module_prepare(struct unwind_dwarf *u, uint64_t pc)
{
	Dwfl_Module *dm = dwfl_addrmodule(u->dwfl, pc);
	struct module *have = dm ? module_of(u, dm) : NULL;
	struct unwind_dwarf_image m = { 0 };
	struct image *im = NULL;
	uint64_t low, high;

	if (u->find_image(u->arg, pc, &m) || !m.path || pc < m.start || pc >= m.end ||
	    !(im = image_get(u, m.path)) || image_place(im, &m, pc, &low, &high)) {
		if (!im)
			u->st.no_image++;
		/* libdwfl falls back to rbp; a stale module must not mislead it */
		return dm && !u->fresh ? conflict(u) : DWARF_CB_OK;
	}
	if (have && have->img == im && have->low == low && have->high == high)
		return DWARF_CB_OK;
	if (dm)
		return conflict(u);
	return module_add(u, im, low, high);
}

/* ---- the walk ---------------------------------------------------------------- */

static int frame_stop(struct unwind_dwarf *u, enum unwind_stop why)
{
	u->stop = why;
	u->stopped = 1;
	return DWARF_CB_ABORT;
}

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct unwind_dwarf *u = arg;
	Dwarf_Addr pc;
	Dwarf_Word sp;

	/* Not asking for "activation": libdwfl would unwind this frame to
	 * answer, before module_prepare() below gave it this frame's module.
	 * Only the first frame's pc is where execution stood; the others are
	 * return addresses (a signal frame's caller is looked up at pc - 1 too:
	 * at worst in the function before it) */
	if (!dwfl_frame_pc(state, &pc, NULL))
		return frame_stop(u, UNWIND_BAD_FRAME);
	if (u->n) {
		if (!pc)
			return frame_stop(u, UNWIND_END);
		/* each caller above its callee, in user space: no loops */
		if (dwfl_frame_reg(state, DWARF_SP, &sp) || sp <= u->last_sp ||
		    (u->r->cpl == 3 && pc >= OPVM_USER_TOP)) {
			u->st.cut++;
			return frame_stop(u, UNWIND_BAD_FRAME);
		}
		u->last_sp = sp;
	}
	u->pcs[u->n++] = pc;
	if (u->n >= u->max)
		return frame_stop(u, UNWIND_DEPTH);
	u->window_miss = 0;
	/* a return address may sit just past its call's function */
	return module_prepare(u, u->n == 1 ? pc : pc - 1);
}

static int walk(struct unwind_dwarf *u)
{
	u->n = 0;
	u->last_sp = u->r->sp;
	u->restart = u->stopped = u->window_miss = 0;
	return dwfl_getthread_frames(u->dwfl, TID, frame_cb, u);
}

unsigned unwind_dwarf(struct unwind_dwarf *u, const struct unwind_regs *r,
		      const uint8_t *stack, size_t len,
		      int (*find_image)(void *arg, uint64_t pc,
					struct unwind_dwarf_image *out),
		      void *arg, uint64_t *pcs, unsigned max, enum unwind_stop *why)
{
	enum unwind_stop stop = UNWIND_DEPTH;
	int rc = -1;

	if (max > UNWIND_MAX_DEPTH)
		max = UNWIND_MAX_DEPTH;
	if (!max)
		goto out;
	u->st.unwinds++;
	u->n = 0;
	u->r = r;
	u->stack = len <= UNWIND_DWARF_MAX_WINDOW && stack ? stack : NULL;
	u->len = u->stack ? len : 0;
	u->find_image = find_image;
	u->arg = arg;
	u->pcs = pcs;
	u->max = max;
	u->fresh = 0;
	stop = UNWIND_BAD_FRAME;		/* if libdwfl cannot start */
	if (!u->dwfl && dwfl_reset(u))
		goto fail;
	rc = walk(u);
	if (u->restart) {
		u->st.restarts++;
		if (dwfl_reset(u))
			goto fail;
		rc = walk(u);
	}
	if (u->stopped)
		stop = u->stop;
	else if (u->restart)
		stop = UNWIND_BAD_FRAME;
	else		/* libdwfl takes a return address it could not read
			 * for an undefined one, the end of the stack */
		stop = u->window_miss ? UNWIND_UNREADABLE : !rc ? UNWIND_END : UNWIND_BAD_FRAME;
fail:
	if (!u->n) {		/* libdwfl never reached the first frame */
		pcs[u->n++] = r->ip;
		stop = UNWIND_BAD_FRAME;
	}
	u->st.frames += u->n;
	max = u->n;
out:
	if (why)
		*why = stop;
	return max;
}

struct unwind_dwarf *unwind_dwarf_new(void)
{
	struct unwind_dwarf *u;

	if (elf_version(EV_CURRENT) == EV_NONE) {
		errno = ENOSYS;
		return NULL;
	}
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	for (unsigned i = 0; i < UNWIND_DWARF_CACHE; i++)
		u->img[i].fd = -1;
	/* libdwfl picks its unwinder (ebl) from an ELF header; the modules
	 * come later, so it gets one of its own */
	memcpy(u->arch_hdr.e_ident, ELFMAG, SELFMAG);
	u->arch_hdr.e_ident[EI_CLASS] = ELFCLASS64;
	u->arch_hdr.e_ident[EI_DATA] = ELFDATA2LSB;
	u->arch_hdr.e_ident[EI_VERSION] = EV_CURRENT;
	u->arch_hdr.e_type = ET_DYN;
	u->arch_hdr.e_machine = EM_X86_64;
	u->arch_hdr.e_version = EV_CURRENT;
	u->arch_hdr.e_ehsize = sizeof(Elf64_Ehdr);
	u->arch = elf_memory((char *)&u->arch_hdr, sizeof(u->arch_hdr));
	if (!u->arch) {
		free(u);
		errno = ENOMEM;
		return NULL;
	}
	return u;
}

void unwind_dwarf_free(struct unwind_dwarf *u)
{
	if (!u)
		return;
	dwfl_drop(u);		/* before the files: modules hold their Elf */
	for (unsigned i = 0; i < UNWIND_DWARF_CACHE; i++)
		if (u->img[i].path)
			image_close(&u->img[i]);
	elf_end(u->arch);
	free(u);
}

void unwind_dwarf_get_stats(const struct unwind_dwarf *u, struct unwind_dwarf_stats *out)
{
	*out = u->st;
}
