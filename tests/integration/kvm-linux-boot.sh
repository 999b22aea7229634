#!/bin/bash
# Debian's x86-64 kernel under the built-in KVM VMM: `opvm run --vmm=kvm`
# loads the bzImage (64-bit boot protocol: zero page, e820, command line,
# initrd, our page tables), and the kernel must print its first console
# line on our 8250 within the budget while the sampler takes samples.
#
# On this host's software-assisted KVM, guest ring 0 runs about a thousand
# times slower than native, so the kernel does not get much further than its
# decompressor in two minutes: the first line is the decompressor's
# "KASLR disabled" (we pass nokaslr: Debian's decompressor is otherwise
# silent) or, on a faster KVM, "Linux version".  docs/kvm.md describes the
# full-boot acceptance for a host with native-speed KVM.
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
BUDGET=${KVM_BOOT_BUDGET:-100}
T=$BUILD/tmp/kvm-linux-boot.$$
pid=
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
mkdir -p "$T"

if [ ! -e /dev/kvm ]; then
	echo "SKIP: no /dev/kvm on this host"
	exit 77
fi
K=${KVM_BOOT_KERNEL:-$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)}
if [ -z "$K" ] || [ ! -r "$K" ]; then
	echo "SKIP: no readable /boot/vmlinuz-* (apt-get install linux-image-amd64)"
	exit 77
fi
I=
[ -f "$BUILD/images/initramfs.cpio.gz" ] && I=$BUILD/images/initramfs.cpio.gz

start=$(date +%s.%N)
"$OPVM" run --vmm=kvm --kernel "$K" ${I:+--initrd "$I"} --mem 512 --smp 1 \
	--append "nokaslr" -d "$T/s" --duration "$BUDGET" >"$T/run.out" 2>&1 &
pid=$!
CON=$T/s/guests/guest/console.log
first=
while kill -0 "$pid" 2>/dev/null; do
	if [ -f "$CON" ] && grep -qE "KASLR disabled|Linux version|Decompressing Linux" "$CON"; then
		first=$(date +%s.%N)
		break
	fi
	sleep 0.2
done
# Let the sampler file what it has, then stop the guest as Ctrl-C would.
sleep 1
kill -INT "$pid" 2>/dev/null
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
wait "$pid"
rc=$?
pid=
cat "$T/run.out"
if tr '\n' ' ' < "$T/run.out" | tr -s ' ' | grep -q "cannot use KVM here"; then
	echo "SKIP: $(grep -m1 'cannot use KVM' "$T/run.out")"
	exit 77
fi
echo "--- console:"
cat "$CON" 2>/dev/null
echo "---"
if [ -z "$first" ]; then
	echo "FAIL: no console line from $K within ${BUDGET}s (exit $rc)"
	exit 1
fi
line=$(grep -m1 -E "KASLR disabled|Linux version|Decompressing Linux" "$CON")
secs=$(awk -v a="$start" -v b="$first" 'BEGIN { printf "%.1f", b - a }')
echo "RESULT kvm-linux-boot: first console line after ${secs}s: $line"
samples=$(sed -n 's/.* \([0-9]*\) samples, .*/\1/p' "$T/run.out")
echo "RESULT kvm-linux-boot: $samples samples while booting"
if [ -z "$samples" ] || [ "$samples" -le 0 ]; then
	echo "FAIL: no samples taken while the kernel booted"
	exit 1
fi
exit 0
