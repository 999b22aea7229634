// SPDX-License-Identifier: MIT
/*
 * Built-in KVM VMM sampling cost.  Boots the synthetic guest
 * ($BUILD/tests/guests/guest.elf) with a 1 ms task-clock sampling event on
 * its vCPU thread, samples into a ring until the guest powers off, and
 * prints:
 *   kvm-sample-cost: host time per sample, measured around the sampling
 *                    handler (clock_gettime), registers from the run page
 *                    (KVM_CAP_SYNC_REGS)
 *   kvm-sample-cost-ioctl: the same with KVM_GET_REGS + KVM_GET_SREGS
 *   kvm-exit-rate:   VM exits to the VMM per second while sampling
 *   kvm-sample-rate: samples per second per vCPU
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/ring.h"
#include "vmm/kvm/kvm-sampler.h"
#include "vmm/kvm/kvm.h"

struct result {
	double cost_ns, exit_rate, sample_rate;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int run_once(const char *guest, struct result *res)
{
	struct kvm_vm_config vc = { .mem_bytes = 64 << 20, .nr_vcpus = 1,
				    .console_fd = -1, .channel_fd = -1 };
	struct kvm_sampler_config sc = { .nr_events = 1 };
	struct sampler_stats ss;
	struct opvm_sample smp;
	uint64_t chain[OPVM_MAX_CALLCHAIN];
	struct kvm_vm *vm;
	struct sampler *s = NULL;
	struct ring *r = ring_new(1 << 20);
	char why[256] = "";
	double t0, t1;
	int err = -1;

	vm = kvm_vm_new(&vc, why, sizeof(why));
	if (!vm || !r) {
		fprintf(stderr, "SKIP: kvm-sample-cost: %s\n", why[0] ? why : strerror(errno));
		ring_free(r);
		return 1;
	}
	if (kvm_vm_load_elf(vm, guest, why, sizeof(why))) {
		fprintf(stderr, "bench-kvm: %s (run 'make guests')\n", why);
		goto out;
	}
	sc.vm = vm;
	sc.events[0].attr.type = PERF_TYPE_SOFTWARE;
	sc.events[0].attr.config = PERF_COUNT_SW_TASK_CLOCK;
	sc.events[0].attr.sample_period = 1000000;	/* 1 ms */
	sc.events[0].kernel = sc.events[0].user = 1;
	s = kvm_sampler_new(&sc);
	if (!s)
		goto out;
	t0 = now_s();
	if (s->ops->start(s, &(struct sampler_sink){ &r, 1, NULL }))
		goto out;
	/* Drain as the collector would, so the ring never fills. */
	while (kvm_vm_wait(vm, 50) == KVM_VM_RUNNING)
		while (ring_pop(r, &smp, chain) == 1)
			;
	t1 = now_s();
	kvm_vm_stop(vm);
	s->ops->get_stats(s, &ss);
	if (kvm_vm_state(vm) != KVM_VM_POWEROFF || kvm_vm_exit_code(vm) != 0 || !ss.samples) {
		fprintf(stderr, "bench-kvm: the guest did not finish cleanly (%s)\n",
			kvm_vm_error(vm) ? kvm_vm_error(vm) : "exit code");
		goto out;
	}
	res->cost_ns = (double)ss.cost_ns_total / (double)ss.ticks;
	res->exit_rate = (double)ss.exits / (t1 - t0);
	res->sample_rate = (double)ss.samples / (t1 - t0);
	err = 0;
out:
	if (s)
		s->ops->free(s);
	kvm_vm_free(vm);
	ring_free(r);
	return err;
}

int main(void)
{
	const char *build = getenv("BUILD");
	char guest[4096];
	struct result fast, slow;
	int r;

	snprintf(guest, sizeof(guest), "%s/tests/guests/guest.elf", build ? build : "build");
	if (access(guest, R_OK)) {
		fprintf(stderr, "SKIP: kvm-sample-cost: %s missing (make guests)\n", guest);
		return 0;
	}
	r = run_once(guest, &fast);
	if (r)
		return r > 0 ? 0 : 1;
	setenv("OPVM_KVM_NO_SYNC_REGS", "1", 1);
	r = run_once(guest, &slow);
	unsetenv("OPVM_KVM_NO_SYNC_REGS");
	printf("kvm-sample-cost: %.0f ns\n", fast.cost_ns);
	if (!r)
		printf("kvm-sample-cost-ioctl: %.0f ns\n", slow.cost_ns);
	printf("kvm-exit-rate: %.0f /s\n", fast.exit_rate);
	printf("kvm-sample-rate: %.0f /s\n", fast.sample_rate);
	return r < 0 ? 1 : 0;
}
