#!/bin/bash
# Samples by cgroup without opvm.ko (introspection reads each task's cgroup
# from guest memory): see cgroup-split.bash.
. "$(dirname "$0")/cgroup-split.bash"
cgroup_split "opvm.kmod=0" introspect
echo "PASS"
