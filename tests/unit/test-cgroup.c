// SPDX-License-Identifier: MIT
/* Unit tests for pod and container ids in cgroup paths (lib/cgroup.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/array.h"
#include "lib/cgroup.h"

#define UID	"2c0a4b1e-93f5-4b57-8e0e-1d2c3b4a5f60"
#define UID_	"2c0a4b1e_93f5_4b57_8e0e_1d2c3b4a5f60"
#define ID	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void parse(const char *path, struct cgroup_ids *ids, int want)
{
	assert_int_equal(cgroup_ids_parse(path, strlen(path), ids), want);
}

static void test_systemd_driver(void **state)
{
	static const struct { const char *path, *pod, *runtime; } c[] = {
		{ "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
		  ".slice/cri-containerd-" ID ".scope", UID, "containerd" },
		{ "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
		  ".slice/crio-" ID ".scope", UID, "crio" },
		{ "/kubepods.slice/kubepods-pod" UID_ ".slice/docker-" ID ".scope", UID, "docker" },
		/* kind and nested kubelets put it deeper */
		{ "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/"
		  "kubepods-burstable-pod" UID_ ".slice/cri-containerd-" ID ".scope", "", "" },
	};
	struct cgroup_ids ids;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		parse(c[i].path, &ids, 0);
		assert_string_equal(ids.container, ID);
		if (c[i].pod[0]) {
			assert_string_equal(ids.pod, c[i].pod);
			assert_string_equal(ids.runtime, c[i].runtime);
		}
	}
	/* the last case's pod slice is "kubepods-burstable-pod..." too */
	assert_string_equal(ids.pod, UID);
	/* a pod's own slice, no container yet */
	parse("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice",
	      &ids, 0);
	assert_string_equal(ids.pod, UID);
	assert_string_equal(ids.container, "");
}

static void test_cgroupfs_driver(void **state)
{
	struct cgroup_ids ids;

	(void)state;
	parse("/kubepods/burstable/pod" UID "/" ID, &ids, 0);
	assert_string_equal(ids.pod, UID);
	assert_string_equal(ids.container, ID);
	assert_string_equal(ids.runtime, "");
	parse("/kubepods/pod" UID "/" ID, &ids, 0);
	assert_string_equal(ids.pod, UID);
	/* docker without Kubernetes: a container, no pod */
	parse("/docker/" ID, &ids, 0);
	assert_string_equal(ids.pod, "");
	assert_string_equal(ids.container, ID);
	parse("/system.slice/docker-" ID ".scope", &ids, 0);
	assert_string_equal(ids.container, ID);
	assert_string_equal(ids.runtime, "docker");
	parse("/machine.slice/libpod-" ID ".scope/container", &ids, 0);
	assert_string_equal(ids.runtime, "podman");
}

static void test_not_ids(void **state)
{
	static const char *const paths[] = {
		"/", "", "/init.scope", "/system.slice/sshd.service", "/a", "/b/c",
		"/kubepods.slice/kubepods-burstable.slice",
		/* one digit short, one too many, upper case, a bad separator */
		"/kubepods/pod2c0a4b1e-93f5-4b57-8e0e-1d2c3b4a5f6",
		"/kubepods/pod" UID "0",
		"/kubepods/pod2C0A4B1E-93f5-4b57-8e0e-1d2c3b4a5f60",
		"/kubepods.slice/kubepods-pod" UID ".slice",	/* '-' where '_' is */
		"/docker/" ID "0", "/cri-containerd-" ID ".scopex", "/crio-" ID,
		"/docker-0123.scope", "//////", "/pod", "/kubepods-pod.slice",
	};
	struct cgroup_ids ids;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
		parse(paths[i], &ids, -ENOENT);
		assert_string_equal(ids.pod, "");
		assert_string_equal(ids.container, "");
	}
}

/* Lengths are the caller's: no terminator is read, a NUL is a byte. */
static void test_bounds(void **state)
{
	static const char p[] = "/kubepods/pod" UID "/" ID;
	struct cgroup_ids ids;
	char *heap, nul[] = "/docker/" ID "\0/x";

	(void)state;
	/* cut inside the id: no container */
	assert_int_equal(cgroup_ids_parse(p, sizeof(p) - 2, &ids), 0);
	assert_string_equal(ids.container, "");
	assert_string_equal(ids.pod, UID);
	heap = malloc(sizeof(p) - 1);
	assert_non_null(heap);
	memcpy(heap, p, sizeof(p) - 1);		/* no terminator (ASan) */
	assert_int_equal(cgroup_ids_parse(heap, sizeof(p) - 1, &ids), 0);
	assert_string_equal(ids.container, ID);
	free(heap);
	assert_int_equal(cgroup_ids_parse(nul, sizeof(nul) - 1, &ids), -ENOENT);
	/* a bad later pod keeps the good earlier one */
	parse("/kubepods/pod" UID "/podzzzzzzzz-93f5-4b57-8e0e-1d2c3b4a5f60", &ids, 0);
	assert_string_equal(ids.pod, UID);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_systemd_driver),
		cmocka_unit_test(test_cgroupfs_driver),
		cmocka_unit_test(test_not_ids),
		cmocka_unit_test(test_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
