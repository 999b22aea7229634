// SPDX-License-Identifier: MIT
/*
 * What the host CPU is (CPUID) and whether perf can use its PMU, and which
 * events family file describes it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/perf_event.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "events/events.h"
#include "lib/array.h"

static const struct opvm_event_family families[] = {
	{ "x86-intel-arch",
	  "Intel architectural performance events (any Intel core with CPUID leaf 0xA)" },
	{ "x86-amd-fam17h",
	  "AMD family 17h (Zen, Zen+, Zen 2) and Hygon family 18h" },
	{ "x86-amd-fam19h",
	  "AMD family 19h (Zen 3, Zen 4)" },
	{ "generic",
	  "perf's generic hardware events (any CPU with a perf PMU driver)" },
	{ "software",
	  "events that need no PMU: TIMER, cpu-clock, task-clock" },
};

size_t events_families(const struct opvm_event_family **out)
{
	*out = families;
	return ARRAY_SIZE(families);
}

int events_host_cpu(struct opvm_cpu_id *out)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d, max, base;

	memset(out, 0, sizeof(*out));
	if (!__get_cpuid(0, &max, &b, &c, &d))
		return -ENOTSUP;
	memcpy(out->vendor, &b, 4);
	memcpy(out->vendor + 4, &d, 4);
	memcpy(out->vendor + 8, &c, 4);
	out->vendor[12] = '\0';
	if (max < 1 || !__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	/* Display family/model as the SDM and AMD's manuals define them. */
	base = (a >> 8) & 0xf;
	out->family = base == 0xf ? base + ((a >> 20) & 0xff) : base;
	out->model = (a >> 4) & 0xf;
	if (base == 0x6 || base == 0xf)
		out->model |= ((a >> 16) & 0xf) << 4;
	out->stepping = a & 0xf;
	if (max >= 0xa && !strcmp(out->vendor, "GenuineIntel")) {
		__cpuid(0xa, a, b, c, d);
		out->arch_perfmon_version = (int)(a & 0xff);
	}
	return 0;
#else
	memset(out, 0, sizeof(*out));
	return -ENOTSUP;
#endif
}

const char *events_family_for_cpu(const struct opvm_cpu_id *id)
{
	if (!id)
		return "generic";
	if (!strcmp(id->vendor, "GenuineIntel")) {
		/* Architectural events exist on every P6-lineage core and
		 * on newer families; NetBurst (family 15) predates them.  A
		 * guest without a virtual PMU reports version 0 yet still is
		 * that CPU: family decides, the PMU probe decides usability. */
		if (id->family == 6 || (id->family > 15) ||
		    id->arch_perfmon_version > 0)
			return "x86-intel-arch";
		return "generic";
	}
	if (!strcmp(id->vendor, "AuthenticAMD")) {
		if (id->family == 0x17)
			return "x86-amd-fam17h";
		if (id->family == 0x19)
			return "x86-amd-fam19h";
		/* Family 1Ah (Zen 5) renumbered some cache events; until it
		 * has its own file, perf's generic events are the safe set. */
		return "generic";
	}
	if (!strcmp(id->vendor, "HygonGenuine") && id->family == 0x18)
		return "x86-amd-fam17h";	/* Dhyana is a Zen 1 core */
	return "generic";
}

static int have_sysfs_pmu(void)
{
	static const char *const names[] = {
		"/sys/bus/event_source/devices/cpu",
		"/sys/bus/event_source/devices/cpu_core",
		"/sys/bus/event_source/devices/cpu_atom",
	};
	struct stat st;

	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!stat(names[i], &st))
			return 1;
	return 0;
}

int events_host_has_pmu(void)
{
	struct perf_event_attr attr;
	const char *env = getenv("OPVM_NO_PMU");
	int fd;

	if (env && *env && strcmp(env, "0"))
		return 0;
	if (!have_sysfs_pmu())
		return 0;
	/* The sysfs node can exist while the hypervisor hides the counters
	 * (kvm.enable_pmu=0 guests still get a "cpu" PMU on some kernels):
	 * only a real open proves it.  User-only, so perf_event_paranoid=2
	 * allows it. */
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_HARDWARE;
	attr.config = PERF_COUNT_HW_CPU_CYCLES;
	attr.disabled = 1;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return 1;
	}
	/* Refused by policy (paranoid, seccomp) is still a PMU: the sampler
	 * will then report the permission problem itself. */
	return errno == EACCES || errno == EPERM;
}
