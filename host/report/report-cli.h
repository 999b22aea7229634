/* SPDX-License-Identifier: MIT */
/*
 * Command-line options shared by `opvm report`, `annotate` and `export`:
 * where the session is, where guest binaries are, what to merge and which
 * samples to keep.  Parsing only; the commands print the messages.
 */
#ifndef OPVM_REPORT_CLI_H
#define OPVM_REPORT_CLI_H

#include <getopt.h>

#include "host/report/report.h"

#define REPORT_CLI_MAX_ROOTS	16

enum report_cli_opt {
	RCLI_SESSION = 0x100,
	RCLI_GUEST_ROOT,
	RCLI_VMLINUX,
	RCLI_SYSTEM_MAP,
	RCLI_KALLSYMS,
	RCLI_SEPARATE,
	RCLI_MERGE,
	RCLI_THRESHOLD,
	RCLI_SOURCE_DIR,
	RCLI_NO_HOST_KERNEL,
	RCLI_PREVIOUS,
	RCLI_EXCLUDE,
};

/* getopt_long entries for the shared options (end of the caller's table). */
#define REPORT_CLI_LONGOPTS						\
	{ "session-dir", required_argument, NULL, RCLI_SESSION },	\
	{ "guest-root", required_argument, NULL, RCLI_GUEST_ROOT },	\
	{ "vmlinux", required_argument, NULL, RCLI_VMLINUX },		\
	{ "system-map", required_argument, NULL, RCLI_SYSTEM_MAP },	\
	{ "kallsyms", required_argument, NULL, RCLI_KALLSYMS },		\
	{ "separate", required_argument, NULL, RCLI_SEPARATE },		\
	{ "merge", required_argument, NULL, RCLI_MERGE },		\
	{ "threshold", required_argument, NULL, RCLI_THRESHOLD },	\
	{ "source-dir", required_argument, NULL, RCLI_SOURCE_DIR },	\
	{ "no-host-kernel", no_argument, NULL, RCLI_NO_HOST_KERNEL },	\
	{ "previous", no_argument, NULL, RCLI_PREVIOUS },		\
	{ "exclude", required_argument, NULL, RCLI_EXCLUDE }

#define REPORT_CLI_HELP							\
	"  -d, --session-dir DIR  session to read (default ./opvm_data)\n"	\
	"  --guest-root [GUEST=]DIR  the guest's root file system (binaries,\n" \
	"                         boot/System.map-*, lib/modules); repeatable\n" \
	"  --vmlinux FILE         guest kernel: a vmlinux with symbols, or a\n"	\
	"                         stripped vmlinux/vmlinuz for annotate's code\n" \
	"  --system-map FILE      guest System.map (or --kallsyms FILE)\n"	\
	"  --separate LIST        keep apart: guest,lib,kernel,thread,cpu\n"	\
	"  --merge LIST           merge: guest,lib,kernel,thread,cpu,all\n"	\
	"  --threshold PCT        hide entries below PCT percent\n"		\
	"  --source-dir DIR       where source files are (annotate --source)\n" \
	"  --no-host-kernel       never use the host's /boot or /lib/modules\n" \
	"  --previous             read samples/previous instead of current\n" \
	"  --exclude idle,boot    leave out (idle) and (firmware/boot) samples\n" \
	"  PROFILE SPEC           guest:NAME image:PATH tgid:N tid:N cpu:N event:NAME\n" \
	"                         (globs for guest and image; comma lists)\n"

struct report_cli {
	struct report_opts ro;
	struct symres_root roots[REPORT_CLI_MAX_ROOTS];
	size_t nr_roots;
	struct symres_config sc;
	double threshold;
	char *owned[REPORT_CLI_MAX_ROOTS + 2];	/* paths from session.json */
	size_t nr_owned;
};

void report_cli_init(struct report_cli *c);
/* Handles one shared option (getopt_long's result; 't' and 'd', for -t and
 * -d, are RCLI_THRESHOLD and RCLI_SESSION).  Returns 1 when handled, 0 when the option is not a
 * shared one, -EINVAL with a message in err when its value is bad. */
int report_cli_opt(struct report_cli *c, int opt, char *arg, char *err, size_t errlen);
/* A positional argument: a profile-spec term.  0 or -EINVAL (+ err). */
int report_cli_spec(struct report_cli *c, char *arg, char *err, size_t errlen);
/* report_cli_spec() for each of argv[first..argc): 0, or -EINVAL (+ err)
 * at the first that is not a profile-spec term. */
int report_cli_specs(struct report_cli *c, int argc, char **argv, int first,
		     char *err, size_t errlen);
/* Fills c->sc from the options (call before symres_new()), and what they
 * leave out (guest roots, System.map, vmlinux) from the "symbols" run or
 * attach kept in the session's session.json files: after `opvm run` no
 * symbol flags are needed, and flags still override. */
void report_cli_finish(struct report_cli *c);
/* Frees what report_cli_finish() read (after the last use of c->sc). */
void report_cli_release(struct report_cli *c);

/* A stream over f that writes every control byte but '\n' and '\t' as '?':
 * symbol names, paths and source lines come from guests and must not
 * drive the user's terminal.  fclose() it (f stays open).  NULL + errno. */
FILE *report_cli_safe_stream(FILE *f);

#endif /* OPVM_REPORT_CLI_H */
