#!/bin/bash
# Samples by cgroup with opvm.ko (its CGROUP records): see cgroup-split.bash.
. "$(dirname "$0")/cgroup-split.bash"
cgroup_split "" kmod
echo "PASS"
