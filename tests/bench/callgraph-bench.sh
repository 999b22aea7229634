#!/bin/bash
# Call graphs (-g) through the gdbstub, measured as qemu-bench.sh measures
# plain sampling (same boot of cpuloop, same method), with attach -g:
#   guest-overhead-callgraph: the guest's slowdown while sampled with -g, %
#   callgraph-cost-fp:        host time the stack walk adds per sample, us,
#                             guest RAM in a shared memfd (as opvm run -g)
#   callgraph-cost-fp-pread:  the same with QEMU's default anonymous RAM,
#                             read through /proc/PID/mem
#   callgraph-cost-dwarf:     --call-graph dwarf: the sampler's walk and
#                             8 KiB stack copy plus the collector's unwind
QEMU_BENCH_CALLGRAPH=1 bash "$(dirname "$0")/qemu-bench.sh" || exit $?
QEMU_BENCH_CALLGRAPH=pread QEMU_BENCH_REPS=${QEMU_BENCH_REPS:-8} \
	bash "$(dirname "$0")/qemu-bench.sh" || exit $?
QEMU_BENCH_CALLGRAPH=dwarf QEMU_BENCH_RATE=${QEMU_BENCH_RATE:-200} \
	bash "$(dirname "$0")/qemu-bench.sh"
