// SPDX-License-Identifier: MIT
/*
 * libvirt loaded on first use.  See virt-api.h.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "vmm/libvirt/virt-api.h"
#include "lib/array.h"

static struct virt_api api;
static char load_err[512];
static int loaded;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static const struct {
	const char *name;
	size_t off;
	int qemu;		/* in libvirt-qemu */
} syms[] = {
#define SYM(f, q) { "vir" #f, offsetof(struct virt_api, f), q }
	SYM(Initialize, 0), SYM(SetErrorFunc, 0), SYM(GetLastErrorMessage, 0),
	SYM(ConnectOpen, 0), SYM(ConnectClose, 0), SYM(ConnectListAllDomains, 0),
	SYM(ConnectGetAllDomainStats, 0), SYM(DomainStatsRecordListFree, 0),
	SYM(DomainLookupByID, 0), SYM(DomainLookupByUUIDString, 0),
	SYM(DomainLookupByName, 0), SYM(DomainGetName, 0), SYM(DomainFree, 0),
	SYM(DomainIsActive, 0), SYM(DomainGetState, 0), SYM(DomainGetVcpusFlags, 0),
	SYM(DomainGetXMLDesc, 0), SYM(DomainQemuMonitorCommand, 1),
	SYM(DomainQemuMonitorCommandWithFiles, 1),
#undef SYM
};

static void *open_lib(const char *name)
{
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		snprintf(load_err, sizeof(load_err), "cannot load libvirt (%s): install "
			 "it (Debian: apt-get install libvirt0)", dlerror());
	return h;
}

static void load(void)
{
	void *lib = open_lib("libvirt.so.0"), *qemu = lib ? open_lib("libvirt-qemu.so.0") : NULL;

	if (!qemu)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(syms); i++) {
		void *f = dlsym(syms[i].qemu ? qemu : lib, syms[i].name);

		if (!f) {
			snprintf(load_err, sizeof(load_err), "libvirt has no %s (version %s "
				 "or later needed): upgrade libvirt", syms[i].name,
				 "8.2.0");
			return;
		}
		/* POSIX: a data pointer from dlsym() converts to a function's. */
		*(void **)((char *)&api + syms[i].off) = f;
	}
	loaded = 1;
}

const struct virt_api *virt_api(char *err, size_t errlen)
{
	pthread_once(&once, load);
	if (loaded)
		return &api;
	if (err && errlen)
		snprintf(err, errlen, "%s", load_err);
	errno = ENOENT;
	return NULL;
}
