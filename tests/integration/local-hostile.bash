# Shared by tests/integration/top-*.sh and exporter-*.sh that play a hostile
# local user against `opvm top` and `opvm exporter` (sourced, not run).
# Needs qemu-common.bash sourced first (skip, fail, mk_tmp, CLEAN_PIDS).

# need_local_hostile: QEMU and a python3 that keeps the argv[0] it is given
# (a pyenv shim re-executes the real one and loses it: use /usr/bin's).
need_local_hostile() {
	command -v qemu-system-x86_64 >/dev/null 2>&1 ||
		skip "qemu-system-x86_64 is not installed (scripts/install-deps.sh)"
	[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 is not installed (scripts/install-deps.sh)"
	[ -x "$OPVM" ] || fail "$OPVM is not built (make)"
	FAKE_QEMU=$(realpath "$(dirname "${BASH_SOURCE[0]}")/fake-qemu.py")
}

# start_fake MODE NAME SOCK [ARG...]: tests/integration/fake-qemu.py (a
# process opvm takes for a QEMU) with -name NAME and -qmp unix:SOCK (after
# the ARGs); waits until its socket listens.  Its pid goes to CLEAN_PIDS
# and FAKE_PID.
start_fake() {
	(exec -a qemu-system-x86_64 /usr/bin/python3 "$FAKE_QEMU" "$1" "$3" "${@:4}" \
		-name "$2" -qmp "unix:$3,server=on,wait=off" > "$3.out" 2>&1) &
	FAKE_PID=$!
	CLEAN_PIDS="$CLEAN_PIDS $FAKE_PID"
	for _ in $(seq 100); do
		grep -q ready "$3.out" 2>/dev/null && return 0
		sleep 0.1
	done
	cat "$3.out"
	fail "the fake QEMU '$1' did not start"
}

# start_real NAME SOCK: a real QEMU under TCG with no disk (SeaBIOS finds
# nothing to boot and idles), -name NAME, QMP on SOCK; waits for QMP.
start_real() {
	qemu-system-x86_64 -accel tcg -m 32 -nodefaults -display none \
		-name "$1" -qmp "unix:$2,server=on,wait=off" > "$2.log" 2>&1 &
	CLEAN_PIDS="$CLEAN_PIDS $!"
	for _ in $(seq 100); do
		[ -S "$2" ] && return 0
		sleep 0.1
	done
	cat "$2.log"
	fail "QEMU did not start"
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_exporter LOG ARGS...: opvm exporter in the background; waits until
# it serves (it takes its first reading before it does).  EXP_PID.
start_exporter() {
	local log=$1
	shift
	"$OPVM" exporter "$@" > "$log" 2>&1 &
	EXP_PID=$!
	CLEAN_PIDS="$CLEAN_PIDS $EXP_PID"
	for _ in $(seq 300); do
		grep -q "serving" "$log" 2>/dev/null && return 0
		kill -0 "$EXP_PID" 2>/dev/null || break
		sleep 0.1
	done
	cat "$log"
	return 1
}

# once_beside WHAT DEADLINE_S READ UNREAD: `opvm top --once --format json`
# over the guests named $P-*, into $T/once.json, within DEADLINE_S; the
# guests $P-NAME for each NAME in READ must be read in full, those in
# UNREAD marked read_ok: false with "did not answer".  Failures go to bad()
# (the caller's).
once_beside() {
	local what=$1 deadline=$2 read=$3 unread=$4 start rc took
	start=$(date +%s%N)
	timeout -k 1 "$deadline" "$OPVM" top --once --format json --no-libvirt -f "$P-" -d 1 \
		> "$T/once.json" 2> "$T/once.err"
	rc=$?
	took=$(( ($(date +%s%N) - start) / 1000000 ))
	echo "RESULT top --once beside $what: exit $rc after $took ms (deadline $deadline s)"
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		bad "top --once was still running after $deadline s"
		return
	elif [ "$rc" != 0 ]; then
		cat "$T/once.err"
		bad "top --once failed ($rc)"
		return
	fi
	python3 - "$T/once.json" "$P" "$read" "$unread" <<'PY' || bad "top --once does not list the guests right"
import json, sys
d = json.load(open(sys.argv[1]))
p = sys.argv[2]
g = {x["name"]: x for x in d["guests"]}
print("RESULT top --once rows:", {n: (x["read_ok"], x.get("read_why", "")[:40]) for n, x in g.items()})
ok = True
for n in sys.argv[3].split():
    if p + "-" + n not in g or not g[p + "-" + n]["read_ok"]:
        print("FAIL: the %s guest is missing or not read" % n); ok = False
for n in sys.argv[4].split():
    x = g.get(p + "-" + n)
    if not x or x["read_ok"] or "did not answer" not in x.get("read_why", ""):
        print("FAIL: the guest %s is not listed as not read" % n); ok = False
sys.exit(0 if ok else 1)
PY
}

# scrapes_within WHAT PORT N: N scrapes of the exporter on PORT, each to be
# answered within 2 s (the last kept in $T/mN.txt); failures go to bad().
scrapes_within() {
	local what=$1 port=$2 n=$3 slow=0 i out
	for i in $(seq "$n"); do
		out=$(curl -s -o "$T/m$i.txt" -m 2 -w '%{http_code} %{time_total}' \
			"http://127.0.0.1:$port/metrics")
		echo "scrape $i: $out"
		[ "${out%% *}" = 200 ] || slow=$((slow + 1))
	done
	echo "RESULT exporter beside $what: $((n - slow)) of $n scrapes answered within 2 s"
	[ "$slow" = 0 ] || bad "$slow of $n scrapes were not answered within 2 s"
}
