/* SPDX-License-Identifier: MIT */
/*
 * What /proc tells about QEMU guests on this host, without asking them
 * anything: which processes are QEMU (and their -name, QMP socket, opvm
 * channel and accelerator, from the command line), which of their threads
 * are vCPUs, and each thread's cumulative CPU time, guest-mode time
 * (/proc/PID/task/TID/stat) and run-queue delay (schedstat: the time the
 * thread was runnable but waited for a CPU, which the guest feels as steal).
 *
 * Readers only: nothing here signals, stops or writes to a guest.  The
 * command line of a QEMU is another user's input: every value is bounded and
 * only copied (a QMP path is later connected to, never created or opened for
 * writing).  Errors are -errno; -ENOENT when the process or thread is gone.
 */
#ifndef OPVM_PROCSTAT_H
#define OPVM_PROCSTAT_H

#include <stddef.h>
#include <stdint.h>

/* One thread's (or, for procstat_read_proc(), a whole process's)
 * cumulative counters. */
struct ps_task {
	int tid;
	int vcpu;		/* N of a "CPU N/KVM" or "CPU N/TCG" thread, else -1 */
	char comm[16];
	uint64_t start_ticks;	/* start time: tells a reused pid from the old one */
	uint64_t utime_ns, stime_ns;
	uint64_t guest_ns;	/* time in guest mode (KVM only; 0 under TCG) */
	uint64_t run_ns;	/* schedstat: on a CPU */
	uint64_t wait_ns;	/* schedstat: runnable, waiting for a CPU */
	uint64_t slices;	/* schedstat: times scheduled in */
};

#define PS_NAME_MAX	128
#define PS_PATH_MAX	108	/* sun_path */
/* Bytes of a QEMU command line read: any local user's process may claim to
 * be a QEMU with a command line as long as the kernel allows (2 MiB and
 * more); options past this are not seen (ps_qemu.cmdline_cut). */
#define PS_CMDLINE_MAX	(64 * 1024)

enum ps_accel {
	PS_ACCEL_TCG = 0,	/* QEMU's default without -accel / -enable-kvm */
	PS_ACCEL_KVM = 1,
};

/* A QEMU process and what its command line says. */
struct ps_qemu {
	int pid;
	uint64_t start_ticks;
	enum ps_accel accel;
	int libvirt;			/* started by libvirt (-name guest=..) */
	char name[PS_NAME_MAX];		/* -name; "qemu-PID" without one */
	char qmp[PS_PATH_MAX];		/* first QMP unix socket, or "" */
	char channel[PS_PATH_MAX];	/* org.opvm.0 port's unix socket, or "" */
	int cmdline_cut;		/* longer than PS_CMDLINE_MAX: the rest unread */
};

/* Parses the text of /proc/.../stat (buf, len bytes, need not end in NUL)
 * into t: comm, start time, utime, stime, guest_time.  0 or -EINVAL. */
int procstat_parse_stat(const char *buf, size_t len, struct ps_task *t);

/* Parses "run_ns wait_ns slices" (/proc/.../schedstat).  0 or -EINVAL. */
int procstat_parse_schedstat(const char *buf, size_t len, struct ps_task *t);

/* vCPU index from a QEMU thread name ("CPU 3/KVM" -> 3), or -1.  QEMU names
 * its threads so with -name ...,debug-threads=on (libvirt always does). */
int procstat_vcpu_of_comm(const char *comm);

/* Thread tid of process pid: stat and schedstat.  0 or -errno. */
int procstat_read_task(int pid, int tid, struct ps_task *t);

/* The whole process (all threads' utime/stime summed by the kernel). */
int procstat_read_proc(int pid, struct ps_task *t);

/* Thread ids of pid, up to max stored (nothing is allocated for the rest:
 * a process may have tens of thousands); returns how many there are or
 * -errno. */
int procstat_list_tasks(int pid, int *tids, unsigned max);

/* Parses a QEMU command line (NUL-separated arguments, len bytes) into q
 * (pid and start time untouched).  0, or -EINVAL when it is not QEMU's. */
int procstat_parse_cmdline(const char *buf, size_t len, struct ps_qemu *q);

/* 1 if pid is a QEMU system emulator (by its command name), 0 if not,
 * -errno if it is gone.  Fills q when it is; relative socket paths are made
 * absolute from the QEMU's working directory.  q->start_ticks is set for
 * any process read (0 and 1). */
int procstat_probe(int pid, struct ps_qemu *q);

/* Process ids under /proc, sorted ascending; *pids is malloc'd.  Returns
 * the count or -errno. */
int procstat_list_pids(int **pids);

#endif /* OPVM_PROCSTAT_H */
