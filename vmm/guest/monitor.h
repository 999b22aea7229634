/* SPDX-License-Identifier: MIT */
/*
 * The monitor of a guest that runs already, however opvm reached it: a
 * libvirt domain (monitor passthrough), a QMP socket of a QEMU started by
 * hand, or an `opvm run --vmm=kvm` process (no monitor at all: only its
 * process id; the backends that can use it find the rest themselves).
 * Attach backends (vmm/backend.h) reach the guest only through this.
 *
 * A QMP socket connection is opened on demand and dropped by
 * vm_monitor_idle(): while a guest is sampled QEMU sends events that
 * nobody would read.
 */
#ifndef OPVM_MONITOR_H
#define OPVM_MONITOR_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

struct qmp;
struct virt;
struct vm_monitor;

/* The running libvirt domain name (v must outlive the monitor).  NULL and
 * errno set (ESRCH: the domain exists but does not run); err says why and
 * what to do. */
struct vm_monitor *vm_monitor_open_domain(struct virt *v, const char *name,
					  char *err, size_t errlen);
/* A QMP socket; name is the guest's name in the session, chan_path its
 * org.opvm.0 socket or NULL.  NULL and errno set; err says why. */
struct vm_monitor *vm_monitor_open_qmp(const char *path, const char *name,
				       const char *chan_path, char *err, size_t errlen);
/* A built-in VMM process (`opvm run --vmm=kvm`); name as for QMP. */
struct vm_monitor *vm_monitor_open_pid(pid_t pid, const char *name);
void vm_monitor_close(struct vm_monitor *m);		/* NULL-safe */

/* The built-in VMM's process id, or 0 for a QEMU. */
pid_t vm_monitor_pid(const struct vm_monitor *m);
/* The QMP connection of a QMP-socket monitor (opened if idle), or NULL
 * (libvirt, a VMM process, or QMP failed: errno). */
struct qmp *vm_monitor_qmp_conn(struct vm_monitor *m);
/* 1 if the guest runs under KVM (query-kvm), 0 under TCG, or -errno. */
int vm_monitor_is_kvm(struct vm_monitor *m);

const char *vm_monitor_name(const struct vm_monitor *m);
const char *vm_monitor_how(const struct vm_monitor *m);	/* "libvirt domain", "QMP socket" */
/* The org.opvm.0 channel's unix socket path, or "" if the guest has none. */
const char *vm_monitor_channel(const struct vm_monitor *m);
/* The guest's opvm port is this unix socket instead (a domain whose port is
 * not a virtio channel named org.opvm.0, e.g. a serial port).  0 or
 * -ENAMETOOLONG. */
int vm_monitor_set_channel(struct vm_monitor *m, const char *path);
/*
 * The QEMU process the monitor must belong to (pid > 0): opvm exporter
 * passes the one it found in /proc (`opvm attach --qemu-pid`).  A QMP socket
 * must be served by that process (SO_PEERCRED, at every connection: else
 * -EPERM there); the vCPU threads the monitor names must be its threads
 * (vm_monitor_vcpu_threads()).  0, or -EPERM with err saying who serves the
 * socket instead.
 */
int vm_monitor_set_qemu_pid(struct vm_monitor *m, pid_t pid, char *err, size_t errlen);

/*
 * The guest's vCPU host threads in cpu-index order (query-cpus-fast), tids[0
 * .. max) zeroed first, each checked to be a thread of the guest's QEMU
 * (/proc/QEMU/task/TID): the process set by vm_monitor_set_qemu_pid(), else
 * the one serving the QMP socket, else (a libvirt domain) the process of the
 * first vCPU thread; *pid gets it.  What a monitor says is its owner's to
 * choose: a thread of any other process is refused, so that opvm never
 * samples or reads a process the guest's owner could not.  The count, or
 * -errno with err set: -EPERM (a thread not the QEMU's), -EPROTO (an answer
 * no QEMU gives), -E2BIG (more than max vCPUs).
 */
#define VM_MONITOR_MAX_VCPUS	4096	/* vCPUs a check looks at */
int vm_monitor_vcpu_threads(struct vm_monitor *m, pid_t *tids, unsigned max, pid_t *pid,
			    char *err, size_t errlen);

/* 1 if the guest runs, 0 if paused, or -errno. */
int vm_monitor_running(struct vm_monitor *m);

/* An HMP command line; *out (may be NULL) gets its malloc'd output. */
int vm_monitor_hmp(struct vm_monitor *m, const char *cmd, char **out,
		   char *err, size_t errlen);
/* A QMP command with args (may be NULL; borrowed); fd (>= 0, the caller
 * keeps its copy) goes along with it (getfd).  *ret (may be NULL) gets a
 * new reference to the "return" member.  A QMP error is -EREMOTEIO with
 * its description in err. */
int vm_monitor_qmp(struct vm_monitor *m, const char *cmd, json_t *args, int fd,
		   json_t **ret, char *err, size_t errlen);
/* Drops an open QMP socket connection (reopened by the next command). */
void vm_monitor_idle(struct vm_monitor *m);

/* A reader of the guest's RAM (vmm/guest/guestmem.h): QEMU's process (as
 * vm_monitor_vcpu_threads() checks it) and its RAM ranges through the
 * monitor (gpa2hva), each inside that process's mappings.  NULL
 * and errno; err says why and what to do.  Not for a built-in VMM yet. */
struct guestmem;
struct guestmem *vm_monitor_guestmem(struct vm_monitor *m, char *err, size_t errlen);

#endif /* OPVM_MONITOR_H */
