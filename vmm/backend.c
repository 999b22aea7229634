// SPDX-License-Identifier: MIT
/*
 * The backend registry (vmm/backend.h): one explicit array, no
 * constructor tricks.  A new backend is one file and one line here.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/array.h"
#include "lib/unixsock.h"
#include "vmm/backend.h"

extern const struct backend_ops qemu_backend;		/* vmm/qemu/qemu-launch.c */
extern const struct backend_ops kvm_backend;		/* vmm/kvm/kvm-launch.c */
extern const struct backend_ops gdbstub_backend;	/* vmm/qemu/gdbstub-attach.c */
extern const struct backend_ops perf_backend;		/* vmm/perf/perf-attach.c */

const struct backend_ops *const backends[] = {
	&qemu_backend,
	&kvm_backend,
	&gdbstub_backend,
	&perf_backend,
};
const size_t nr_backends = ARRAY_SIZE(backends);

const struct backend_ops *backend_find(enum backend_kind kind, const char *name)
{
	for (size_t i = 0; i < nr_backends; i++)
		if (backends[i]->kind == kind && (!name || !strcmp(name, backends[i]->name)))
			return backends[i];
	return NULL;
}

const struct backend_ops *backend_pick(enum backend_kind kind, const struct backend_guest *g,
				       char *err, size_t errlen)
{
	const struct backend_ops *stops = NULL;
	char why[256];
	size_t used = 0;

	if (errlen)
		err[0] = '\0';
	for (size_t i = 0; i < nr_backends; i++) {
		const struct backend_ops *b = backends[i];

		if (b->kind != kind)
			continue;
		why[0] = '\0';
		if (b->probe && b->probe(g, why, sizeof(why))) {
			/* kept for the message should no backend take g */
			if (used + 1 < errlen)
				used += (size_t)snprintf(err + used, errlen - used, "%s%s: %s",
							 used ? "; " : "", b->name, why);
			used = used < errlen ? used : errlen;
			continue;
		}
		if (!(b->flags & BACKEND_STOPS_GUEST))
			return b;
		if (!stops)
			stops = b;
	}
	return stops;
}

void backend_note(char *notes, size_t size, const char *fmt, ...)
{
	size_t used = strlen(notes);
	va_list ap;

	if (used + 2 >= size)
		return;
	va_start(ap, fmt);
	vsnprintf(notes + used, size - used - 1, fmt, ap);
	va_end(ap);
	used = strlen(notes);
	notes[used] = '\n';
	notes[used + 1] = '\0';
}

void backend_connect_channel(struct backend_target *t, const char *path)
{
	int fd = unixsock_connect(path, UNIXSOCK_CONNECT_MS);

	if (fd < 0) {
		backend_note(t->notes, sizeof(t->notes), "guest '%s': cannot connect to its opvm "
			     "channel %s (%s); profiling without process names (is another opvm "
			     "attached?)", t->name, path, strerror(-fd));
		return;
	}
	t->chan_fd = fd;
	t->reconnect = backend_reconnect_unix;
	t->reconnect_arg = (void *)path;
}

int backend_reconnect_unix(void *arg)
{
	/* From the collector's loop, which drains the sample rings meanwhile:
	 * a channel that cannot take the connection now is tried again later. */
	int fd = unixsock_connect(arg, 100);

	return fd < 0 ? -1 : fd;
}
