// SPDX-License-Identifier: MIT
/*
 * opvm run: boot a guest and profile it until it powers off.  --vmm picks
 * the launch backend from the registry (vmm/backend.h): qemu (default)
 * boots it under QEMU and samples through the gdbstub, kvm uses the
 * built-in VMM and per-vCPU perf overflow sampling.  The profiling itself
 * is the session every command shares (host/cli/session.h).
 */
#include <stdio.h>

#include "host/cli/commands.h"
#include "host/cli/session.h"
#include "lib/log.h"
#include "vmm/backend.h"

/* run's own options; the session's first pass reads --vmm too, to choose
 * the backend before the rest is parsed (host/cli/session.h). */
struct run_args {
	const char *vmm;
};

static const struct opt_def run_options[] = {
	{ .name = "vmm", .metavar = "NAME", .help = "how to boot and sample the guest "
	  "(above)", OPT_STRING(struct run_args, vmm) },
	{ 0 },
};

static int run_argument(void *arg, const char *value)
{
	(void)arg;
	log_err("unknown option '%s'; 'opvm run --help' lists them", value);
	return -1;
}

static const struct session_cli run_cli = {
	.command = "run",
	.kind = BACKEND_LAUNCH,
	.select = "vmm",
	.header = "usage: opvm run [--vmm=NAME] [options] [-- QEMU-ARGS...]\n"
		  "\n"
		  "Boots a guest and profiles every vCPU until it powers off (or Ctrl-C, or\n"
		  "--duration), then prints a summary.  With --vmm=qemu and no --kernel, the\n"
		  "test image that `make images` builds (build/images) is used.\n",
	.options = run_options,
	.argument = run_argument,
};

int cmd_run(int argc, char **argv)
{
	const struct backend_ops *b = NULL;
	struct run_args ra = { NULL };
	struct session_cli cli = run_cli;
	struct session_opts o;
	void *bst = NULL;
	int ret;

	cli.arg = &ra;
	session_opts_init(&o);
	ret = session_parse_argv(&cli, argc, argv, &o, &b, &bst);
	if (ret == 1) {
		ret = 0;
	} else if (ret == 0) {
		ret = session_run(b, bst, &o, NULL, 1);
	}
	if (b && bst)
		b->free(bst);
	return ret;
}
