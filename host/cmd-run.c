// SPDX-License-Identifier: MIT
/*
 * opvm run: boot a guest and profile it.  --vmm=qemu (default) boots it under
 * QEMU and samples through the gdbstub; --vmm=kvm uses the built-in VMM and
 * per-vCPU perf overflow sampling.
 */
#include <string.h>

#include "host/commands.h"
#include "lib/log.h"

int cmd_run(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--vmm=kvm") ||
		    (!strcmp(argv[i], "--vmm") && i + 1 < argc && !strcmp(argv[i + 1], "kvm")))
			return cmd_run_kvm(argc, argv);
		if (!strncmp(argv[i], "--vmm", 5) && strcmp(argv[i], "--vmm=qemu") &&
		    !(!strcmp(argv[i], "--vmm") && i + 1 < argc && !strcmp(argv[i + 1], "qemu"))) {
			pr_err("unknown VMM in '%s': use --vmm=qemu or --vmm=kvm", argv[i]);
			return 2;
		}
	}
	return cmd_run_qemu(argc, argv);
}
