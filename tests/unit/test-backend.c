// SPDX-License-Identifier: MIT
/*
 * The backend registry (vmm/backend.h): an attach backend is chosen by
 * what its probe() says of the guest and by how it samples (one that never
 * stops the guest first), never by its name.  The cases are the guests
 * opvm attach and the exporter meet: a QEMU under KVM or TCG, a built-in
 * VMM found by its pid, and a guest not asked about (--sampler given).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "vmm/backend.h"

static const struct backend_ops *pick(int kvm, int qemu, char *why, size_t len)
{
	const struct backend_guest g = { .kvm = kvm, .qemu = qemu };

	return backend_pick(BACKEND_ATTACH, &g, why, len);
}

/* A KVM guest, of QEMU or of the built-in VMM: a backend that never stops
 * it.  A TCG one: the only backend that can, which stops it. */
static void test_pick_by_guest(void **state)
{
	const struct backend_ops *b;
	char why[512];

	(void)state;
	b = pick(1, 1, why, sizeof(why));
	assert_non_null(b);
	assert_false(b->flags & BACKEND_STOPS_GUEST);
	assert_int_equal(b->kind, BACKEND_ATTACH);
	assert_ptr_equal(pick(1, 0, why, sizeof(why)), b);
	/* not asked: no reason to refuse, the same choice */
	assert_ptr_equal(pick(-1, 1, why, sizeof(why)), b);

	b = pick(0, 1, why, sizeof(why));
	assert_non_null(b);
	assert_true(b->flags & BACKEND_STOPS_GUEST);
	assert_true(b->callgraph);
}

/* What every attach backend's probe says, the same as the pick: each one
 * refuses with a reason, and takes the guests it was chosen for. */
static void test_probe_reasons(void **state)
{
	static const struct backend_guest tcg = { .kvm = 0, .qemu = 1 },
					  vmm = { .kvm = 1, .qemu = 0 };
	size_t attach = 0, refusals = 0;

	(void)state;
	for (size_t i = 0; i < nr_backends; i++) {
		const struct backend_ops *b = backends[i];
		char why[256] = "";

		if (b->kind != BACKEND_ATTACH)
			continue;
		attach++;
		assert_non_null(b->probe);
		for (int k = 0; k < 2; k++) {
			int r = b->probe(k ? &vmm : &tcg, why, sizeof(why));

			if (r) {
				assert_int_equal(r, -ENOTSUP);
				assert_true(why[0]);
				refusals++;
			}
		}
	}
	assert_true(attach >= 2);
	/* host perf refuses TCG, the gdbstub refuses a VMM without a monitor */
	assert_int_equal(refusals, 2);
}

/* A guest no backend can sample: NULL, and every backend's reason. */
static void test_none_fits(void **state)
{
	char why[512], small[8];
	size_t named = 0;

	(void)state;
	assert_null(pick(0, 0, why, sizeof(why)));
	for (size_t i = 0; i < nr_backends; i++)
		if (backends[i]->kind == BACKEND_ATTACH && strstr(why, backends[i]->name))
			named++;
	assert_true(named >= 2);
	assert_non_null(strstr(why, "; "));
	/* a short buffer is cut, still a string */
	assert_null(pick(0, 0, small, sizeof(small)));
	assert_true(strlen(small) < sizeof(small));
	assert_null(pick(0, 0, NULL, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pick_by_guest),
		cmocka_unit_test(test_probe_reasons),
		cmocka_unit_test(test_none_fits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
