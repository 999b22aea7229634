// SPDX-License-Identifier: MIT
/*
 * libvirt lookup.  See virt.h.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/libvirt/virt-api.h"
#include "vmm/libvirt/virt.h"

/* Set by virt_open(), the only way to a struct virt or virt_dom. */
static const struct virt_api *V;

struct virt {
	virConnectPtr conn;
	char uri[256];		/* as opened, for messages */
};

struct virt_dom {
	struct virt *v;
	virDomainPtr dom;
	char name[256];
};

static void quiet(void *arg, virErrorPtr e)
{
	(void)arg;
	(void)e;	/* libraries never print: errors are returned */
}

static void set_err(char *err, size_t errlen, const char *what)
{
	const char *m = V->GetLastErrorMessage();

	if (err && errlen)
		snprintf(err, errlen, "%s: %s", what, m ? m : "unknown libvirt error");
}

/* The URI to open, as virsh picks it: -c, else $LIBVIRT_DEFAULT_URI, else
 * qemu:///system (virsh would probe further; a profiler wants the system
 * guests, not the caller's qemu:///session). */
const char *virt_default_uri(const char *uri)
{
	const char *env = getenv("LIBVIRT_DEFAULT_URI");

	if (uri && *uri)
		return uri;
	return env && *env ? env : "qemu:///system";
}

struct virt *virt_open(const char *uri, char *err, size_t errlen)
{
	struct virt *v;

	V = virt_api(err, errlen);
	if (!V)
		return NULL;
	V->SetErrorFunc(NULL, quiet);
	uri = virt_default_uri(uri);
	v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	snprintf(v->uri, sizeof(v->uri), "%s", uri);
	v->conn = V->ConnectOpen(uri);
	if (!v->conn) {
		set_err(err, errlen, uri);
		free(v);
		errno = ECONNREFUSED;
		return NULL;
	}
	return v;
}

void virt_close(struct virt *v)
{
	if (!v)
		return;
	V->ConnectClose(v->conn);
	free(v);
}

void *virt_conn(struct virt *v)
{
	return v->conn;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void virt_free_names(char **names)
{
	if (!names)
		return;
	for (char **p = names; *p; p++)
		free(*p);
	free(names);
}

int virt_list_running(struct virt *v, char ***names, char *err, size_t errlen)
{
	virDomainPtr *doms = NULL;
	char **out;
	int n = V->ConnectListAllDomains(v->conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);

	*names = NULL;
	if (n < 0) {
		set_err(err, errlen, "listing domains");
		return -EIO;
	}
	out = calloc((size_t)n + 1, sizeof(*out));
	for (int i = 0; i < n; i++) {
		const char *nm = V->DomainGetName(doms[i]);

		if (out)
			out[i] = strdup(nm ? nm : "?");
		V->DomainFree(doms[i]);
	}
	free(doms);
	if (!out)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		if (!out[i]) {
			virt_free_names(out);
			return -ENOMEM;
		}
	}
	qsort(out, (size_t)n, sizeof(*out), cmp_str);
	*names = out;
	return n;
}

/* A domain as virsh finds it: by ID (digits), by UUID, else by name. */
static virDomainPtr lookup(virConnectPtr conn, const char *s)
{
	virDomainPtr dom = NULL;
	char *end;
	long id;

	errno = 0;
	id = strtol(s, &end, 10);
	if (*s >= '0' && *s <= '9' && !*end && !errno && id >= 0 && id <= INT_MAX)
		dom = V->DomainLookupByID(conn, (int)id);
	if (!dom && strlen(s) == VIR_UUID_STRING_BUFLEN - 1)
		dom = V->DomainLookupByUUIDString(conn, s);
	if (!dom)
		dom = V->DomainLookupByName(conn, s);
	return dom;
}

struct virt_dom *virt_dom_open(struct virt *v, const char *name, char *err, size_t errlen)
{
	struct virt_dom *d = calloc(1, sizeof(*d));
	const char *gname;

	if (!d)
		return NULL;
	d->v = v;
	d->dom = lookup(v->conn, name);
	if (!d->dom) {
		if (err && errlen)
			snprintf(err, errlen, "not found as an ID, UUID or name at %s; "
				 "'virsh -c %s list' shows the running ones", v->uri, v->uri);
		free(d);
		errno = ENOENT;
		return NULL;
	}
	/* The guest is filed under its name, whichever way it was given. */
	gname = V->DomainGetName(d->dom);
	snprintf(d->name, sizeof(d->name), "%s", gname ? gname : name);
	return d;
}

void virt_dom_close(struct virt_dom *d)
{
	if (!d)
		return;
	V->DomainFree(d->dom);
	free(d);
}

const char *virt_dom_name(const struct virt_dom *d)
{
	return d->name;
}

int virt_dom_running(struct virt_dom *d)
{
	int state = 0, reason = 0;

	if (V->DomainIsActive(d->dom) != 1)
		return -ESRCH;
	if (V->DomainGetState(d->dom, &state, &reason, 0) < 0)
		return -EIO;
	return state == VIR_DOMAIN_RUNNING;
}

int virt_dom_nr_vcpus(struct virt_dom *d)
{
	int n = V->DomainGetVcpusFlags(d->dom, VIR_DOMAIN_AFFECT_LIVE);

	return n > 0 ? n : -EIO;
}

int virt_dom_monitor(struct virt_dom *d, const char *cmd, int hmp, char **out,
		     char *err, size_t errlen)
{
	char *result = NULL;

	if (out)
		*out = NULL;
	if (V->DomainQemuMonitorCommand(d->dom, cmd, &result,
					hmp ? VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP : 0) < 0) {
		set_err(err, errlen, "monitor command");
		return -EIO;
	}
	if (out)
		*out = result;
	else
		free(result);
	return 0;
}

int virt_dom_monitor_fd(struct virt_dom *d, const char *cmd, int fd, char **out,
			char *err, size_t errlen)
{
	char *result = NULL;

	if (out)
		*out = NULL;
	/* libvirt sends fd with the command on its monitor connection (QEMU's
	 * getfd then files it there, where later commands find it). */
	if (V->DomainQemuMonitorCommandWithFiles(d->dom, cmd, 1, &fd, NULL, NULL,
						 &result, 0) < 0) {
		set_err(err, errlen, "monitor command with a file");
		return -EIO;
	}
	if (out)
		*out = result;
	else
		free(result);
	return 0;
}

/* Attribute attr of the element starting at e (up to its '>'), bounded. */
static int attr_of(const char *e, const char *end, const char *attr, char *out, size_t cap)
{
	const char *close = memchr(e, '>', (size_t)(end - e));
	size_t alen = strlen(attr);

	if (!close)
		return -ENOENT;
	for (const char *p = e; p + alen + 2 < close; p++) {
		const char *v, *ve;
		char q;

		if ((p[0] != ' ' && p[0] != '\t' && p[0] != '\n') ||
		    strncmp(p + 1, attr, alen) || p[1 + alen] != '=')
			continue;
		q = p[2 + alen];
		if (q != '\'' && q != '"')
			return -ENOENT;
		v = p + 3 + alen;
		ve = memchr(v, q, (size_t)(close - v));
		if (!ve)
			return -ENOENT;
		if ((size_t)(ve - v) >= cap)
			return -ENAMETOOLONG;
		memcpy(out, v, (size_t)(ve - v));
		out[ve - v] = '\0';
		return 0;
	}
	return -ENOENT;
}

/* First element named tag ("<source") inside [p, end), or NULL. */
static const char *find_elem(const char *p, const char *end, const char *tag)
{
	size_t tl = strlen(tag);

	while (p < end) {
		const char *e = memmem(p, (size_t)(end - p), tag, tl);

		if (!e)
			return NULL;
		if (e + tl < end && (e[tl] == ' ' || e[tl] == '/' || e[tl] == '>' ||
				     e[tl] == '\t' || e[tl] == '\n'))
			return e;
		p = e + tl;
	}
	return NULL;
}

int virt_xml_channel_path(const char *xml, const char *port_name, char *out, size_t cap)
{
	const char *p = xml, *end = xml + strlen(xml);

	for (;;) {
		const char *ch = find_elem(p, end, "<channel"), *ch_end, *src, *tgt;
		char type[32], val[256];
		int err;

		if (!ch)
			return -ENOENT;
		ch_end = memmem(ch, (size_t)(end - ch), "</channel>", 10);
		if (!ch_end)
			return -ENOENT;
		p = ch_end + 10;
		if (attr_of(ch, ch_end, "type", type, sizeof(type)) || strcmp(type, "unix"))
			continue;
		tgt = find_elem(ch, ch_end, "<target");
		if (!tgt || attr_of(tgt, ch_end, "name", val, sizeof(val)) ||
		    strcmp(val, port_name))
			continue;
		src = find_elem(ch, ch_end, "<source");
		if (!src)
			continue;
		err = attr_of(src, ch_end, "path", out, cap);
		if (err == -ENAMETOOLONG)
			return err;
		if (!err && out[0] == '/')
			return 0;
	}
}

int virt_dom_channel_path(struct virt_dom *d, const char *port_name, char *out, size_t cap)
{
	char *xml = V->DomainGetXMLDesc(d->dom, 0);
	int err;

	if (!xml)
		return -EIO;
	err = virt_xml_channel_path(xml, port_name, out, cap);
	free(xml);
	return err;
}
