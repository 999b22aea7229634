// SPDX-License-Identifier: MIT
/* Placeholder until this command lands. */
#include "host/commands.h"
#include "host/log.h"

int cmd_channel_dump(int argc, char **argv)
{
	pr_err("'opvm %s' is not built yet in this version", argv[0]);
	return 2;
}
