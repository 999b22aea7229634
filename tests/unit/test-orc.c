// SPDX-License-Identifier: MIT
/*
 * unwind/orc.c on a live guest: the test image's Debian kernel (built with
 * ORC, without frame pointers) under QEMU TCG with nokaslr, running the
 * syscalls workload.  The guest is stopped 60 times through its gdbstub;
 * for each vCPU in kernel mode its stack is walked with the ORC tables read
 * from guest memory (vmm/guest/guestmem.c through the vCPU's page tables, as a
 * sampler would).  Asserted:
 *   - the tables load (System.map's bounds, sorted);
 *   - >= 90 % of kernel samples inside a system call (a frame in
 *     do_syscall_64) reach the entry code and come out with the user task's
 *     registers (a user ip, cpl 3), and >= 90 % of those go on with
 *     unwind_fp() for at least two user frames;
 *   - >= 90 % of all kernel samples end cleanly (user registers or the end
 *     of a kernel thread's stack), not at a bad frame.
 * SKIP without QEMU or the test image (make images).
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/unit/qemu-harness.h"
#include "unwind/orc.h"
#include "vmm/qemu/gdbstub.h"
#include "vmm/guest/guestmem.h"
#include "vmm/guest/qmp.h"

#define ROUNDS	60

struct sym {
	uint64_t addr;
	char name[64];
};

static struct sym *syms;
static size_t nsyms;

/* System.map's text symbols, sorted as the file is. */
static int load_map(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[256], type;
	size_t cap = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		struct sym s;

		if (sscanf(line, "%" SCNx64 " %c %63s", &s.addr, &type, s.name) != 3)
			continue;
		if (nsyms == cap) {
			cap = cap ? cap * 2 : 65536;
			syms = realloc(syms, cap * sizeof(*syms));
			assert_non_null(syms);
		}
		syms[nsyms++] = s;
	}
	fclose(f);
	return nsyms ? 0 : -1;
}

static uint64_t sym_addr(const char *name)
{
	for (size_t i = 0; i < nsyms; i++)
		if (!strcmp(syms[i].name, name))
			return syms[i].addr;
	return 0;
}

static const char *sym_at(uint64_t a)
{
	const char *best = "?";

	for (size_t i = 0; i < nsyms && syms[i].addr <= a; i++)
		best = syms[i].name;
	return best;
}

struct vread {
	struct guestmem *m;
	uint64_t cr3;
};

static int vread(void *arg, uint64_t gva, void *buf, size_t len)
{
	struct vread *v = arg;

	return guestmem_read_virt(v->m, v->cr3, gva, buf, len) ? -EFAULT : 0;
}

static int console_has(const char *dir, const char *what)
{
	char path[300], buf[65536];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/console", dir);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, what) != NULL;
}

static void test_live(void **state)
{
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	char img[256], map[300], dir[] = "/tmp/opvm-test-orc.XXXXXX", path[300];
	unsigned kernel = 0, clean = 0, in_sys = 0, sys_user = 0, user_frames = 0;
	struct unwind_orc *o = NULL;
	struct gdbstub *gs = NULL;
	struct qmp *q = NULL;
	struct vread v = { 0 };
	char err[256] = "";
	pid_t pid;

	(void)state;
	snprintf(img, sizeof(img), "%s/images", build);
	snprintf(map, sizeof(map), "%s/System.map", img);
	if (system("command -v qemu-system-x86_64 >/dev/null 2>&1") || load_map(map)) {
		print_message("SKIP: no QEMU or no test image in %s (make images)\n", img);
		skip();
	}
	assert_non_null(mkdtemp(dir));
	pid = qemu_boot_image(dir, img, "nokaslr opvm.workload=syscalls opvm.args=60");
	assert_true(pid > 0);
	/* The boot's pace is the host's: wait while QEMU lives (10 min at
	 * most, for a hung one), never for a fixed share of a minute. */
	for (int i = 0; i < 6000 && !console_has(dir, "OPVM-TRUTH syscalls pid=") &&
			!kill(pid, 0); i++)
		usleep(100000);
	assert_true(console_has(dir, "OPVM-TRUTH syscalls pid="));
	snprintf(path, sizeof(path), "%s/qmp", dir);
	q = qmp_open(path, 5000);
	assert_non_null(q);
	v.m = guestmem_open(pid);
	assert_non_null(v.m);
	assert_int_equal(guestmem_add_qemu_ranges(v.m, q), 0);
	snprintf(path, sizeof(path), "unix:%s/gdb", dir);
	gs = gdbstub_open(path, 5000, NULL);
	assert_non_null(gs);
	for (int round = 0; round < ROUNDS; round++) {
		for (unsigned c = 0; c < 2; c++) {
			struct gdbstub_regs g;
			struct unwind_mem um = { vread, &v };
			struct unwind_regs r = { 0 }, user = { 0 };
			uint64_t pcs[UNWIND_MAX_DEPTH];
			enum unwind_stop why;
			unsigned n, sys = 0;

			assert_int_equal(gdbstub_read_regs(gs, c, &g), 0);
			if (gdbstub_regs_cpl(&g) != 0 || g.rip < 0xffff800000000000ull)
				continue;
			v.cr3 = g.cr3 & ~0xfffull;
			if (!o) {
				struct unwind_mem tm = { vread, &v };

				o = unwind_orc_load(&tm, sym_addr("__start_orc_unwind_ip"),
						    sym_addr("__stop_orc_unwind_ip"),
						    sym_addr("__start_orc_unwind"), 1, err,
						    sizeof(err));
				if (!o)
					fail_msg("ORC tables: %s", err);
			}
			r = (struct unwind_regs){ .ip = g.rip, .sp = g.rsp, .bp = g.rbp };
			n = unwind_orc(o, &um, &r, pcs, UNWIND_MAX_DEPTH, &user, &why);
			kernel++;
			for (unsigned i = 0; i < n; i++)
				sys |= !strcmp(sym_at(pcs[i]), "do_syscall_64");
			clean += why == UNWIND_END;
			in_sys += sys;
			if (sys && why == UNWIND_END && user.cpl == 3 && user.ip &&
			    user.ip < 0x800000000000ull) {
				uint64_t ups[16];

				sys_user++;
				/* and on into the user stack (the workload keeps
				 * frame pointers; the libc wrapper it called
				 * does not push one, so its caller's caller
				 * comes next) */
				user_frames += unwind_fp(&um, &user, ups, 16, NULL) >= 2;
			}
			if (round < 3)
				print_message("vCPU %u: %u frames, stop %d, top %s, last %s, "
					      "user ip 0x%" PRIx64 "\n", c, n, (int)why,
					      sym_at(pcs[0]), sym_at(pcs[n - 1]), user.ip);
		}
		assert_int_equal(gdbstub_continue(gs), 0);
		usleep(30000);
		assert_int_equal(gdbstub_interrupt(gs, 5000), 0);
	}
	print_message("RESULT orc: %zu entries; %u kernel samples, %u ended cleanly; %u in a "
		      "system call, %u of them reached the user task's registers, %u went on "
		      "for 2+ user frames\n", o ? unwind_orc_nr(o) : 0, kernel, clean, in_sys,
		      sys_user, user_frames);
	gdbstub_continue(gs);
	gdbstub_close(gs);
	qmp_close(q);
	guestmem_close(v.m);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	assert_int_equal(system(path), 0);
	assert_true(kernel >= 20);
	assert_true(in_sys >= 10);
	assert_true(sys_user * 10 >= in_sys * 9);
	assert_true(clean * 10 >= kernel * 9);
	assert_true(user_frames * 10 >= sys_user * 9);
	unwind_orc_free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_live),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
