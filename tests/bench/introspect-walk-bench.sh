#!/bin/bash
# What introspection costs a guest without opvm.ko (the hosting provider's
# case: nothing in the guest), sampled as `opvm exporter --continuous`
# samples it (`opvm attach --sampler gdbstub -F 19 --window 10`), the test
# image under TCG with opvm.kmod=0, one guest idle (sleeping), one busy
# (abratio), both sampled at once:
#   introspect-walk-reads-{idle,busy}  guest-memory reads a second of the
#                                      attach process (pread64 of QEMU's
#                                      memory: perf's syscall tracepoint)
#   introspect-walk-cpu-{idle,busy}    its CPU time (its threads'
#                                      schedstat), % of one core
#   introspect-walk-walks-{idle,busy}  walks of the process list a minute
#                                      (session.json's introspect.processes)
# each over BENCH_S seconds (default 40) from SETTLE_S (default 20) after
# the attach: past the first 10 walks, made at every poll.  With
# OPVM_OLD=another opvm binary, the same with it, in turns with this one
# (ROUNDS each, default 1, old first), its lines ending in -old: old and
# new in one sitting on the same guests (docs/introspection.md, "When the
# lists are walked").  Prints those lines on stdout, details on stderr.
. "$(dirname "$0")/../integration/qemu-common.bash"
need_qemu
mk_tmp introspect-walk-bench
T=$(realpath "$T")
BENCH_S=${BENCH_S:-40}
SETTLE_S=${SETTLE_S:-20}
ROUNDS=${ROUNDS:-1}
reads=1
perf stat -e syscalls:sys_enter_pread64 -- true > /dev/null 2>&1 || {
	echo "# perf cannot count pread64 here: no reads figure" >&2
	reads=0
}

# boot NAME APPEND: the test image without opvm.ko, QMP at $T/qmp-NAME
boot() {
	qemu-system-x86_64 -accel tcg -m 256 -smp 2 -nodefaults -display none \
		-qmp "unix:$T/qmp-$1,server=on,wait=off" -serial "file:$T/console-$1.log" \
		-kernel "$IMG/vmlinuz" -initrd "$IMG/initramfs.cpio.gz" \
		-append "console=ttyS0 quiet opvm.kmod=0 $2" > "$T/qemu-$1.log" 2>&1 &
	CLEAN_PIDS="$! $CLEAN_PIDS"
	eval "qpid_$1=$!"
}
boot idle "opvm.workload=idle:3600"
boot busy "opvm.workload=abratio opvm.args=3600"
for g in idle busy; do
	wait_for "$T/console-$g.log" "OPVM-READY kmod=0" || fail "the $g guest did not boot"
done

# cpu_ns PID: the CPU time of all its threads so far, ns (schedstat: not
# in clock ticks, which over 40 s move in steps of 0.025 %)
cpu_ns() {
	cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%d\n", s}'
}

# measure BIN TAG: both guests sampled by BIN; prints the figures, -TAG
measure() {
	local bin=$1 tag=$2 g pids=() c0 c1 i t0=$SECONDS
	for g in idle busy; do
		local qp
		eval "qp=\$qpid_$g"
		rm -rf "$T/s-$g"
		"$bin" attach --qemu-pid "$qp" --qmp "$T/qmp-$g" --name "$g" --sampler gdbstub \
			-F 19 --window 10 -d "$T/s-$g" > "$T/attach-$g.log" 2>&1 &
		pids+=($!)
	done
	CLEAN_PIDS="$CLEAN_PIDS ${pids[*]}"
	sleep "$SETTLE_S"
	for i in 0 1; do
		kill -0 "${pids[$i]}" 2>/dev/null || { cat "$T/attach-idle.log" "$T/attach-busy.log" >&2;
			fail "an attach ended early"; }
	done
	c0=$(for p in "${pids[@]}"; do cpu_ns "$p"; done)
	if [ "$reads" = 1 ]; then
		local perfs=()
		for i in 0 1; do
			perf stat -x, -e syscalls:sys_enter_pread64 -p "${pids[$i]}" -o "$T/perf-$i" \
				-- sleep "$BENCH_S" &
			perfs+=($!)
		done
		wait "${perfs[@]}"
	else
		sleep "$BENCH_S"
	fi
	c1=$(for p in "${pids[@]}"; do cpu_ns "$p"; done)
	for p in "${pids[@]}"; do kill -INT "$p"; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	python3 - "$tag" "$BENCH_S" 1000000000 "$reads" "$T" "$c0" "$c1" \
		"$((SECONDS - t0))" <<'PY'
import glob, json, sys
tag, secs, tck, reads, t = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
c0, c1 = [int(x) for x in sys.argv[6].split()], [int(x) for x in sys.argv[7].split()]
whole = float(sys.argv[8])		# the attach's seconds, about
for i, g in enumerate(["idle", "busy"]):
    if reads:
        n = [l for l in open("%s/perf-%d" % (t, i)) if "pread64" in l]
        print("introspect-walk-reads-%s%s: %.1f /s" % (g, tag, float(n[0].split(",")[0]) / secs))
    print("introspect-walk-cpu-%s%s: %.3f %%" % (g, tag, 100.0 * (c1[i] - c0[i]) / tck / secs))
    # the windows' session.json: the last one's counters are the session's
    js = sorted(glob.glob("%s/s-%s/guests/%s/samples/*/session.json" % (t, g, g)))
    best, lo, hi = None, None, None
    for f in js:
        try:
            j = json.load(open(f))
        except ValueError:
            continue
        p = j.get("introspect", {}).get("processes", {})
        if best is None or p.get("walks", 0) > best[0].get("walks", 0):
            best = (p, j)
        if "window_start_ms" in j:
            lo = min(lo, j["window_start_ms"]) if lo is not None else j["window_start_ms"]
            hi = max(hi, j["window_end_ms"]) if hi is not None else j["window_end_ms"]
    if best:
        p, j = best
        w = p.get("when", {})
        # the first 10 walks are the boot's (at every poll), old and new;
        # the session's seconds from its windows (the attach's, else)
        secs_all = (hi - lo) / 1000.0 if lo is not None and hi > lo else whole
        print("introspect-walk-walks-%s%s: %.1f a minute" % (
            g, tag, 60.0 * max(p.get("walks", 0) - 10, 0) / max(secs_all - 10, 1)))
        print("# %s%s: %d walks (%s), %d polls without; %d samples" % (
            g, tag, p.get("walks", 0), ", ".join("%s %s" % (k, w[k]) for k in
            ("boot", "changed", "wanted", "floor", "unprobed") if k in w),
            w.get("polls_quiet", 0), j.get("sampler", {}).get("samples", 0)), file=sys.stderr)
PY
}

for r in $(seq "$ROUNDS"); do
	[ -n "${OPVM_OLD:-}" ] && measure "$OPVM_OLD" -old
	measure "$OPVM" ""
done
