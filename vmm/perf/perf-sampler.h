/* SPDX-License-Identifier: MIT */
/*
 * The "perf" sampler backend: samples a KVM guest that runs in another
 * process (QEMU/KVM, a libvirt domain of type kvm, or `opvm run --vmm=kvm`
 * seen from outside) through host perf, without ever stopping it.
 *
 * One perf_event_open() per vCPU thread (exclude_host=1, exclude_guest=0:
 * from Linux 6.13 a guest IP is only reported then), PERF_SAMPLE_IP | TID |
 * TIME | CPU, one mmap ring per vCPU.  The kernel reports the guest's RIP
 * for samples taken in guest mode (PERF_RECORD_MISC_GUEST_KERNEL = CPL 0,
 * GUEST_USER = CPL 3); anything else is host code and is counted, never
 * filed.  One drain thread reads the rings ten times a second (and, while
 * Python frames are read, soon after each sample: its overflow signals
 * the drain thread, never a vCPU); the vCPUs are never signalled, stopped,
 * paused or resumed.
 *
 * A perf sample has no CR3 and no guest task.  When the guest module
 * announces its per-vCPU task-switch rings (HELLO's switch tail, passed in
 * by the collector through the guest_hello op), the drain thread mirrors them
 * through a struct timeline (guest memory read through struct guestmem),
 * converts each sample's perf time to guest TSC and files the sample under
 * the task that ran on that vCPU at that moment:
 *   perf time -> host TSC: the perf mmap page's time_zero/time_mult/
 *     time_shift when the kernel offers them (cap_user_time_zero), else the
 *     events are opened on CLOCK_MONOTONIC_RAW and the drain thread keeps
 *     a (TSC, clock) calibration of its own;
 *   host TSC -> guest TSC: KVM's per-vCPU tsc-offset and tsc-scaling-ratio
 *     from debugfs (kvm/PID-FD/vcpuN/; debugfs is mounted if it is not).
 * A sample newer than the last refresh of the rings waits (bounded) for the
 * next one; a sample in no known interval is counted and filed without a
 * task (CR3 0), never guessed.  Without switch rings (no opvm.ko) samples
 * are filed with their CPL only: kernel symbols and a per-vCPU user share
 * (the collector files user samples by executable mapping).  Python frames
 * are then read for the task the kernel's current-task pointer names
 * (guest_current, vmm/perf/perf-python.h) and carry its tgid for the
 * filing to confirm.
 */
#ifndef OPVM_PERF_SAMPLER_H
#define OPVM_PERF_SAMPLER_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmm/guest/guestmem.h"
#include "vmm/sampler.h"

struct guestmem;
struct qmp;

#define PERF_SAMPLER_MAX_VCPUS	1024

struct perf_sampler_config {
	pid_t pid;			/* the process whose threads run the vCPUs */
	unsigned nr_vcpus;		/* 1..PERF_SAMPLER_MAX_VCPUS */
	const pid_t *vcpu_tids;		/* [nr_vcpus]: host thread of vCPU i */
	/* type, config and sample_period (checked against the event's
	 * minimum by the caller); the sampler sets the rest. */
	struct perf_event_attr attr;
	const char *event_name;		/* for messages */
	int kernel, user;		/* 1: keep guest CPL 0 / CPL 3 samples */
	struct guestmem *mem;		/* guest RAM of pid, for the switch rings;
					 * may be NULL (no timeline).  The
					 * sampler takes it, even on failure. */
	const char *desc_path;		/* a built-in VMM's runtime descriptor
					 * (vmm/kvm/kvm-desc.h), re-read when it
					 * changes for the switch rings; or NULL */
	const char *kvm_debugfs;	/* NULL: find kvm/PID-* under debugfs,
					 * mounting it if needed; "" : assume
					 * guest TSC = host TSC */
};

/*
 * Opens and maps the events (disabled until start()).  Returns NULL and sets
 * errno; err gets one line that says what to do (no PMU, mediated vPMU,
 * perf_event_paranoid, a vCPU thread gone).
 */
struct sampler *perf_sampler_new(const struct perf_sampler_config *cfg,
				 char *err, size_t errlen);

/*
 * Where the guest module's task-switch rings are (HELLO's switch tail;
 * switch_pa 0: none, stop joining).  nr: rings to mirror (at most the
 * sampler's vCPU count).  Thread-safe, never blocks the drain thread: it
 * picks the change up at its next pass.  Returns 0 or -EINVAL (a geometry
 * timeline_check_geometry() refuses).
 */
int perf_sampler_set_switch_rings(struct sampler *s, uint64_t switch_pa,
				  uint32_t stride, uint32_t entries,
				  uint32_t nr);

/* A built-in VMM's channel copy (vmm/kvm/kvm-desc.h): the drain thread
 * forwards what is appended to file_fd into sock_fd (non-blocking), the
 * other end of which the collector reads.  Takes both fds.  Call before
 * start().  Returns 0 or -errno. */
int perf_sampler_set_chan_copy(struct sampler *s, int file_fd, int sock_fd);

/* The sampler's guest-RAM reader (cfg->mem), or NULL: lent, valid until
 * the sampler is freed.  The collector reads the guest through it for
 * introspection (vmm/introspect/) on its own thread, which the reader
 * allows (physical reads and page walks from any thread; the drain thread
 * reads the switch rings only). */
struct guestmem *perf_sampler_guestmem(struct sampler *s);

struct perf_sampler_info {
	uint64_t guest_user, guest_kernel;	/* samples read, by mode */
	uint64_t host_mode;		/* host-mode samples: counted, not filed */
	uint64_t lost;			/* PERF_RECORD_LOST: records perf dropped */
	uint64_t throttle;		/* PERF_RECORD_THROTTLE: perf slowed us */
	uint64_t filtered;		/* dropped: CPL the event excludes */
	uint64_t attributed;		/* filed with a task from the timeline */
	uint64_t unattributed;		/* in no known interval: no task */
	uint64_t no_timeline;		/* taken while no switch rings were known */
	uint64_t late;			/* waited too long for a refresh: no task */
	uint64_t ring_full;		/* dropped by a full sample ring */
	uint64_t switches, switch_overrun, switch_torn;	/* timeline stats */
	uint64_t drain_cpu_ns;		/* CPU time of the drain thread */
	const char *time_source;	/* "perf-time-zero" or "clock-monotonic-raw" */
	int tsc_offset_known;		/* KVM's tsc-offset was read */
	int64_t tsc_offset;		/* vCPU 0's, as read */
};
void perf_sampler_get_info(struct sampler *s, struct perf_sampler_info *out);

/* perf time (ns) to TSC with a perf mmap page's time_zero/mult/shift. */
uint64_t perf_sampler_time_to_tsc(uint64_t time_ns, uint64_t time_zero,
				  uint32_t time_mult, uint16_t time_shift);

/* 1 if KVM's mediated vPMU is enabled (kvm.enable_mediated_pmu=Y): host
 * hardware events with exclude_guest=0 are refused while such VMs exist. */
int perf_sampler_mediated_pmu(void);

/* ---- finding the vCPUs (vmm/perf/perf-target.c) ------------------------------ */

/* 1 if QEMU runs its guest under KVM (query-kvm), 0 if not (TCG), -errno. */
int perf_target_qmp_kvm(struct qmp *q);

/* A sampler for the vCPU threads tids[0..n) of process pid (each checked to
 * be one of its threads, before and after the events are opened); mem (may
 * be NULL, taken) maps its guest RAM.  NULL + errno (EPERM: a thread that is
 * not pid's), with err set. */
struct sampler *perf_target_threads(struct perf_sampler_config *cfg, pid_t pid,
				    const pid_t *tids, unsigned n, struct guestmem *mem,
				    char *err, size_t errlen);

/* A sampler for the QEMU process pid whose vCPU threads are tids[0..n)
 * (vm_monitor_vcpu_threads() found and checked them) and whose monitor runs
 * HMP commands through hmp(arg, ...): guest RAM from `info mtree -f` and
 * gpa2hva, inside pid's own mappings, for the switch rings (without it,
 * samples come with no task names).  NULL + errno, with err set. */
struct sampler *perf_target_monitor(struct perf_sampler_config *cfg, pid_t pid,
				    const pid_t *tids, unsigned n, guestmem_hmp_fn hmp,
				    void *arg, char *err, size_t errlen);

/* A sampler for the built-in VMM process pid, from its runtime descriptor
 * (vmm/kvm/kvm-desc.h; its path goes to desc_path, and the sampler re-reads it
 * for the switch rings) and its vCPU threads' names.  *chan_fd gets a
 * socket that carries the guest's channel (from the VMM's copy), or -1.
 * NULL + errno, with err set. */
struct sampler *perf_target_vmm(struct perf_sampler_config *cfg, pid_t pid,
				char *desc_path, size_t desc_len, int *chan_fd,
				char *err, size_t errlen);

#endif /* OPVM_PERF_SAMPLER_H */
