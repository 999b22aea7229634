#!/bin/bash
# Kernel stacks of a guest without opvm.ko (docs/introspection.md): opvm
# run boots the test image (QEMU TCG) with opvm.kmod=0 and
# --no-image-symbols, so no module, no relay, no System.map and no vmlinux:
# the ORC tables' addresses come only from the kallsyms introspection
# decoded in guest memory, and the ORC format from the release in its
# VMCOREINFO.  Runs the syscalls workload for 10 s (the kernel is found
# some seconds into boot on a loaded host) with -g and asserts:
#  - the summary says kernel stacks were walked by the ORC tables located
#    by kallsyms;
#  - of the syscalls process's kernel samples inside a system call (at
#    least 10), >= 95 % have a stack that goes on into the user task.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp introspect-orc
S=$T/session
export DEBUGINFOD_URLS=

"$OPVM" run --workload syscalls --append "quiet opvm.kmod=0 opvm.args=10" --no-image-symbols -F 200 -g \
	-d "$S" > "$T/run.out" 2> "$T/run.err" ||
	{ cat "$T/run.out" "$T/run.err"; fail "opvm run exited with $?"; }
G=$S/guests/guest
grep -aq "OPVM-READY kmod=0" "$G/console.log" || fail "opvm.ko was loaded: the test needs opvm.kmod=0"
grep -A1 "kernel stacks:" "$T/run.out"
tr '\n' ' ' < "$T/run.out" | grep -q "by the kernel's ORC *tables, located by its *kallsyms" ||
	{ cat "$T/run.out"; fail "kernel stacks were not walked by the ORC tables kallsyms located"; }
"$OPVM" report -d "$S" --no-host-kernel --format json > "$T/report.json" ||
	fail "report --format json"
python3 - "$T/report.json" <<'PY' || fail "kernel stacks from in-memory ORC"
import json, sys
j = json.load(open(sys.argv[1]))
sysc = reach = 0
for st in j["stacks"]:
    app = st["app"] or ""
    if not (app == "syscalls" or app.endswith("/syscalls")) or not st["frames"][0]["kernel"]:
        continue
    names = [f["symbol"] or "" for f in st["frames"]]
    if not any(x.startswith("entry_SYSCALL_64") or x == "do_syscall_64" for x in names):
        continue
    sysc += st["samples"]
    if any(not f["kernel"] for f in st["frames"]):
        reach += st["samples"]
print("RESULT no opvm.ko, no System.map: %d system-call samples of syscalls, "
      "%.1f%% of their stacks reach the user task" % (sysc, 100.0 * reach / max(sysc, 1)))
# the floor only says system calls were sampled (a busy host's gdbstub round trip is ~100 times an idle one's: a third of the
# samples or less); the share reaching the user task is the verdict
if sysc < 10:
    sys.exit("only %d system-call samples of syscalls (throttled?)" % sysc)
if reach * 100 < 95 * sysc:
    sys.exit("system-call stacks reaching the user task: %d of %d" % (reach, sysc))
PY
