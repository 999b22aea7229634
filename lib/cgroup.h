/* SPDX-License-Identifier: MIT */
/*
 * Container identities in a guest task's cgroup (v2) path: the Kubernetes
 * pod uid and the container id that kubelet's cgroup drivers and the
 * container runtimes write into the path, so that reports and the pprof
 * exporter can label samples with them (docs/usage.md, "cgroup").
 *
 * Forms recognised, any component of the path, the last one of each kind
 * winning (a container's scope sits below its pod's slice):
 *   systemd driver  kubepods-<qos>-pod<uid, '_' for '-'>.slice, kubepods-pod<uid>.slice
 *                   cri-containerd-<id>.scope, crio-<id>.scope,
 *                   docker-<id>.scope, libpod-<id>.scope
 *   cgroupfs driver pod<uid>, then <id> alone (/kubepods/burstable/pod<uid>/<id>,
 *                   /docker/<id>)
 * A uid is 8-4-4-4-12 hex digits, an id 64 hex digits; anything else is
 * not an identity (a path is guest bytes: nothing here trusts it).
 */
#ifndef OPVM_LIB_CGROUP_H
#define OPVM_LIB_CGROUP_H

#include <stddef.h>

#define CGROUP_POD_LEN		36	/* a uid: 8-4-4-4-12 */
#define CGROUP_CONTAINER_LEN	64	/* a container id: hex digits */

struct cgroup_ids {
	char pod[CGROUP_POD_LEN + 1];		/* "" if none; '-' form */
	char container[CGROUP_CONTAINER_LEN + 1]; /* "" if none */
	const char *runtime;	/* "containerd", "crio", "docker", "podman",
				 * "" (cgroupfs: not said); static */
};

/* The ids in path[0..len) (not necessarily terminated) into *out.
 * Returns 0 when a pod or a container was found, -ENOENT when neither
 * (out then holds empty strings). */
int cgroup_ids_parse(const char *path, size_t len, struct cgroup_ids *out);

#endif /* OPVM_LIB_CGROUP_H */
