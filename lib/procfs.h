/* SPDX-License-Identifier: MIT */
/*
 * Threads and processes as /proc shows them: which process a thread
 * belongs to.
 */
#ifndef OPVM_PROCFS_H
#define OPVM_PROCFS_H

#include <sys/types.h>

/* The process a thread belongs to (its Tgid in /proc), or -errno. */
pid_t procfs_thread_tgid(pid_t tid);

/* 1 if tid is a thread of process pid (/proc/PID/task/TID exists), 0 if
 * not, -errno if pid cannot be looked at.  What a monitor names as a
 * vCPU thread is checked with it before opvm samples or reads it. */
int procfs_thread_of(pid_t pid, pid_t tid);

#endif /* OPVM_PROCFS_H */
