#!/bin/bash
# opvm-test: alone (opvm top lists every guest on the host)
# What /proc says about other users' processes is bounded and the bounds
# are counted (issue 25): any local user's process may call itself
# qemu-system-x86_64, have thousands of threads and a command line of
# megabytes.  Beside a real QEMU, a fake one (tests/integration/fake-qemu.py)
# with 1100 threads more and a 200 KB command line whose -name and -qmp
# come after the first 64 KiB (PS_CMDLINE_MAX):
#  1. `opvm top --once --format json` lists both, the fake under its pid
#     (its -name is past the cut), and counts what it left unread:
#     capped.threads_unread >= 1100 - 1024, capped.cmdlines_cut 1;
#  2. the exporter says the same (opvm_proc_capped), and promtool (when
#     installed) accepts the exposition;
#  3. text `top --once` says so in a "capped:" line, and the live view (in
#     tmux, a real terminal) on its first line.
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/local-hostile.bash"
need_local_hostile
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
mk_tmp top-proc-caps
T=$(realpath "$T")
P=c$$
FAILED=0
bad() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }

start_real "$P-real" "$T/real.qmp"
pad=$(head -c 100000 /dev/zero | tr '\0' x)	# one argument: at most 128 KiB
FAKE_QEMU_THREADS=1100 start_fake answer "$P-big" "$T/big.qmp" "$pad" "$pad"
fpid=$FAKE_PID
echo "fake QEMU $fpid: $(find /proc/$fpid/task -mindepth 1 -maxdepth 1 | wc -l) threads," \
	"command line $(wc -c < /proc/$fpid/cmdline) bytes"

# ---- 1: top --once -----------------------------------------------------------
timeout -k 1 30 "$OPVM" top --once --format json --no-libvirt -d 1 > "$T/once.json" \
	2> "$T/once.err" || { cat "$T/once.err"; bad "top --once failed"; }
python3 - "$T/once.json" "$P" "$fpid" <<'PY' || bad "top --once does not count what it capped"
import json, sys
d = json.load(open(sys.argv[1]))
p, fpid = sys.argv[2], int(sys.argv[3])
g = {x["name"]: x for x in d["guests"]}
print("RESULT top --once capped:", d.get("capped"))
ok = True
if p + "-real" not in g:
    print("FAIL: the real guest is missing"); ok = False
if "qemu-%d" % fpid not in g:
    print("FAIL: the fake QEMU is not listed under its pid"); ok = False
c = d.get("capped", {})
if c.get("threads_unread", 0) < 1100 - 1024 or c.get("cmdlines_cut", 0) < 1:
    print("FAIL: the cut threads and command line are not counted"); ok = False
sys.exit(0 if ok else 1)
PY

# ---- 2: the exporter ---------------------------------------------------------
PORT=$(free_port)
if start_exporter "$T/exporter.log" --listen "127.0.0.1:$PORT" --no-libvirt --min-interval 0; then
	curl -s -m 5 -o "$T/m.txt" "http://127.0.0.1:$PORT/metrics" || bad "no scrape"
	grep "^opvm_proc_capped" "$T/m.txt"
	awk '/^opvm_proc_capped\{what="threads"\}/ { t = $2 } /^opvm_proc_capped\{what="cmdlines"\}/ { c = $2 }
		END { exit !(t >= 76 && c >= 1) }' "$T/m.txt" ||
		bad "the exporter does not count what it capped (opvm_proc_capped)"
	if command -v promtool >/dev/null 2>&1; then
		promtool check metrics < "$T/m.txt" || bad "promtool rejects the exposition"
	fi
	kill "$EXP_PID"
else
	bad "the exporter did not start"
fi
# ---- 3: the text outputs -----------------------------------------------------
timeout -k 1 30 "$OPVM" top --once --no-libvirt -d 1 > "$T/once.txt" 2> "$T/once.err" ||
	{ cat "$T/once.err"; bad "top --once (text) failed"; }
grep "^capped:" "$T/once.txt"
grep -Eq "^capped: [0-9]+ threads, [0-9]+ cmdline" "$T/once.txt" ||
	bad "text top --once does not say what it capped"
if command -v tmux >/dev/null 2>&1; then
	TMUX_SOCK=opvm-caps-$$
	stop_tmux() { tmux -L "$TMUX_SOCK" kill-server 2>/dev/null; }
	CLEANUP_HOOK=stop_tmux
	tmux -L "$TMUX_SOCK" new-session -d -s caps -x 120 -y 30 \
		"TERM=xterm exec $(realpath "$OPVM") top --no-libvirt -d 1" || fail "cannot start tmux"
	head=""
	for _ in $(seq 100); do	# the first screen has no rates, the caps are there
		head=$(tmux -L "$TMUX_SOCK" capture-pane -p -t caps 2>/dev/null | head -1)
		case "$head" in *capped:*) break ;; esac
		sleep 0.1
	done
	echo "live view: $head"
	case "$head" in
	*"capped: "*" threads, "*" cmdline"*) ;;
	*) bad "the live view's first line does not say what it capped" ;;
	esac
	stop_tmux
else
	echo "SKIP part: tmux is not installed (scripts/install-deps.sh)"
fi
[ "$FAILED" = 0 ] || fail "$FAILED checks failed"
echo PASS
