// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for what opvm top reads about other users' processes:
 * QEMU command lines (any local user starts a QEMU with any arguments),
 * /proc stat and schedstat lines, and query-stats replies (JSON from a
 * QEMU).  Every parser must stay in bounds and leave NUL-terminated fields.
 *
 * Seeds: tests/fuzz/corpus/procstat/.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "host/hoststats/kvmstat.h"
#include "host/hoststats/procstat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct ps_qemu q;
	struct ps_task t;
	struct kvmstat v[4];
	json_t *j;

	memset(&q, 0x55, sizeof(q));	/* fields must be set, not left over */
	if (!procstat_parse_cmdline(s, size, &q)) {
		if (strnlen(q.name, sizeof(q.name)) == sizeof(q.name) ||
		    strnlen(q.qmp, sizeof(q.qmp)) == sizeof(q.qmp) ||
		    strnlen(q.channel, sizeof(q.channel)) == sizeof(q.channel))
			__builtin_trap();
	}
	memset(&t, 0, sizeof(t));
	if (!procstat_parse_stat(s, size, &t) && strnlen(t.comm, sizeof(t.comm)) == sizeof(t.comm))
		__builtin_trap();
	procstat_parse_schedstat(s, size, &t);
	procstat_vcpu_of_comm(t.comm);
	j = json_loadb(s, size, 0, NULL);
	if (j) {
		memset(v, 0, sizeof(v));
		kvmstat_parse(j, json_object_get(j, "cpus"), v, 4);
		kvmstat_parse(json_object_get(j, "stats"), json_object_get(j, "cpus"), v, 4);
		json_decref(j);
	}
	return 0;
}
