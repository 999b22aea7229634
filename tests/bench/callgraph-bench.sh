#!/bin/bash
# Call graphs (-g) through the gdbstub, measured as qemu-bench.sh measures
# plain sampling (a boot of cpuloop, the same method), with attach -g:
#   guest-overhead-callgraph: the guest's slowdown while sampled with -g at
#                             the default rate, %
#   callgraph-cost-fp:        host time the stack walk adds per sample, us,
#                             guest RAM in a shared memfd (as opvm run -g)
#   callgraph-cost-fp-pread:  the same with QEMU's default anonymous RAM,
#                             read through /proc/PID/mem
#   callgraph-cost-dwarf:     --call-graph dwarf: the sampler's walk and
#                             8 KiB stack copy plus the collector's unwind
# The costs at 200 samples/s: enough samples that the first touch of each
# guest page (a page fault) is spread as in a longer session.
B=$(dirname "$0")/qemu-bench.sh
QEMU_BENCH_CALLGRAPH=1 bash "$B" || exit $?
for mode in fp pread dwarf; do
	QEMU_BENCH_CALLGRAPH=$mode QEMU_BENCH_RATE=${QEMU_BENCH_RATE:-200} \
		bash "$B" || exit $?
done
