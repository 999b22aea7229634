/* SPDX-License-Identifier: MIT */
/*
 * What the two gdbstub backends share (vmm/backend.h): "qemu" (opvm run,
 * vmm/qemu/qemu-launch.c) and "gdbstub" (opvm attach, vmm/qemu/gdbstub-attach.c).  Both
 * sample through vmm/qemu/gdbstub-sampler.h on a timer.
 */
#ifndef OPVM_QEMU_BACKEND_H
#define OPVM_QEMU_BACKEND_H

#include <stdio.h>

#include "vmm/backend.h"

/* Turns -F / -e into the tick rate and fills setup (mode gdbstub-timer,
 * one TIMER event).  0, or -EINVAL with err set for a rate or an event the
 * gdbstub cannot take. */
int qemu_backend_setup(const struct backend_common *c, struct backend_setup *setup,
		       char *err, size_t errlen);

/* The summary lines of a gdbstub-sampled guest. */
void qemu_backend_summary(const struct backend_target *t, unsigned rate_hz,
			  const struct backend_totals *tot, FILE *out);

#endif /* OPVM_QEMU_BACKEND_H */
