/* SPDX-License-Identifier: MIT */
/*
 * libvirt and libvirt-qemu, loaded when a command first needs them
 * (dlopen), not linked: every other command (report, annotate, export...)
 * starts without them and the 50-odd libraries they pull in (glib, gnutls,
 * icu, krb5...), about 10 ms of dynamic loading per start.
 *
 * virt_api() returns the entry points, or NULL with what to install in
 * err.  Thread-safe; the libraries stay loaded until exit.
 */
#ifndef OPVM_VIRT_API_H
#define OPVM_VIRT_API_H

#include <stddef.h>

#include <libvirt/libvirt.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

struct virt_api {
	__typeof__(virInitialize) *Initialize;
	__typeof__(virSetErrorFunc) *SetErrorFunc;
	__typeof__(virGetLastErrorMessage) *GetLastErrorMessage;
	__typeof__(virConnectOpen) *ConnectOpen;
	__typeof__(virConnectClose) *ConnectClose;
	__typeof__(virConnectListAllDomains) *ConnectListAllDomains;
	__typeof__(virConnectGetAllDomainStats) *ConnectGetAllDomainStats;
	__typeof__(virDomainStatsRecordListFree) *DomainStatsRecordListFree;
	__typeof__(virDomainLookupByID) *DomainLookupByID;
	__typeof__(virDomainLookupByUUIDString) *DomainLookupByUUIDString;
	__typeof__(virDomainLookupByName) *DomainLookupByName;
	__typeof__(virDomainGetName) *DomainGetName;
	__typeof__(virDomainFree) *DomainFree;
	__typeof__(virDomainIsActive) *DomainIsActive;
	__typeof__(virDomainGetState) *DomainGetState;
	__typeof__(virDomainGetVcpusFlags) *DomainGetVcpusFlags;
	__typeof__(virDomainGetXMLDesc) *DomainGetXMLDesc;
	/* libvirt-qemu */
	__typeof__(virDomainQemuMonitorCommand) *DomainQemuMonitorCommand;
	__typeof__(virDomainQemuMonitorCommandWithFiles) *DomainQemuMonitorCommandWithFiles;
};

/* The loaded entry points, or NULL with the reason and what to install in
 * err (errno ENOENT). */
const struct virt_api *virt_api(char *err, size_t errlen);

#endif /* OPVM_VIRT_API_H */
