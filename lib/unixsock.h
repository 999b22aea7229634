/* SPDX-License-Identifier: MIT */
/*
 * Unix stream sockets: connecting within a deadline, and who is at the
 * other end.
 */
#ifndef OPVM_UNIXSOCK_H
#define OPVM_UNIXSOCK_H

#include <sys/types.h>

/* A connected SOCK_STREAM | SOCK_CLOEXEC socket to the unix socket at
 * path, within timeout_ms: the fd (blocking), or -errno: -ENAMETOOLONG if
 * path does not fit sun_path, -ETIMEDOUT when the listener's accept queue
 * stayed full that long (any local user can bind a socket that never
 * accepts), -EINTR when a signal came meanwhile (the stop signals). */
int unixsock_connect(const char *path, unsigned timeout_ms);

/* The deadline for connecting to a local socket a user named or /proc or
 * libvirt showed (a guest channel, a gdbstub): a listener with room in its
 * queue takes a connection at once, so this only bounds a stuck one. */
#define UNIXSOCK_CONNECT_MS	5000

/* The process at the other end of a connected unix socket (SO_PEERCRED:
 * the one that connected, or that listened for a socket we connected),
 * or -errno. */
pid_t unixsock_peer_pid(int fd);

#endif /* OPVM_UNIXSOCK_H */
