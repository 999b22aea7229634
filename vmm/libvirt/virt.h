/* SPDX-License-Identifier: MIT */
/*
 * libvirt lookup for `opvm attach`: find running QEMU domains by name, read
 * their live XML for the opvm channel's unix socket, count their vCPUs, and
 * pass monitor commands through (libvirt-qemu's virDomainQemuMonitorCommand)
 * to start and stop a gdbstub.
 *
 * libvirt's own error printing is silenced: failures come back as -errno
 * with libvirt's message copied into the caller's err buffer.
 */
#ifndef OPVM_VIRT_H
#define OPVM_VIRT_H

#include <stddef.h>

struct virt;
struct virt_dom;

/* uri if given, else $LIBVIRT_DEFAULT_URI, else qemu:///system. */
const char *virt_default_uri(const char *uri);
/* Opens virt_default_uri(uri).  Returns NULL and sets errno. */
struct virt *virt_open(const char *uri, char *err, size_t errlen);
void virt_close(struct virt *v);			/* NULL-safe */

/* The virConnectPtr, for the other libvirt readers in vmm/ (virt-stats.c). */
void *virt_conn(struct virt *v);

/* Names of running domains, sorted; *names is a NULL-terminated malloc'd
 * array (virt_free_names()).  Returns the count or -errno. */
int virt_list_running(struct virt *v, char ***names, char *err, size_t errlen);
void virt_free_names(char **names);

/* name: an ID, a UUID or a name, tried in that order as virsh does.
 * Returns NULL and sets errno (ENOENT: no such domain). */
struct virt_dom *virt_dom_open(struct virt *v, const char *name, char *err, size_t errlen);
void virt_dom_close(struct virt_dom *d);		/* NULL-safe */
const char *virt_dom_name(const struct virt_dom *d);

/* 1 running, 0 active but not running (paused), -ESRCH not active. */
int virt_dom_running(struct virt_dom *d);
/* Current vCPU count, or -errno. */
int virt_dom_nr_vcpus(struct virt_dom *d);

/* Monitor passthrough.  hmp: 1 for an HMP command line, 0 for QMP JSON.
 * *out (may be NULL) gets the malloc'd reply. */
int virt_dom_monitor(struct virt_dom *d, const char *cmd, int hmp, char **out,
		     char *err, size_t errlen);

/* Same for a QMP command (JSON) that takes a descriptor, e.g. getfd: fd is
 * passed along (the caller keeps its copy). */
int virt_dom_monitor_fd(struct virt_dom *d, const char *cmd, int fd, char **out,
			char *err, size_t errlen);

/* The unix socket path of the domain's virtio channel named port_name
 * (e.g. "org.opvm.0"), from the live XML.  -ENOENT if there is none. */
int virt_dom_channel_path(struct virt_dom *d, const char *port_name, char *out, size_t cap);

/* Same, on an XML document (tests).  Bounded search, no XML library: the
 * live XML libvirt writes is regular.  Returns 0, -ENOENT, -ENAMETOOLONG. */
int virt_xml_channel_path(const char *xml, const char *port_name, char *out, size_t cap);

#endif /* OPVM_VIRT_H */
