#!/bin/bash
# guest-channel: boot the opvm test guest under QEMU TCG, record everything
# opvm.ko sends over the virtio-serial port, and check it against what the
# guest itself says (console lines printed by the image's init):
#   - HELLO first: version, CPUs, release, and a KASLR anchor consistent with
#     System.map (anchor - _text equal at run time and in the map);
#   - every process the guest lists in /proc was announced (PROC or EXEC);
#   - libcmix's libc.so.6 text mapping, with libc's real build-id and the
#     file offset of its executable segment; its mmap()+munmap() of a file
#     page with PROT_EXEC as MMAP then MUNMAP;
#   - the threads workload's four threads (THREAD, THREAD_EXIT);
#   - the module list equals the guest's /proc/modules (names and bases),
#     with a module loaded (MODULE) and one unloaded (MODULE_FREE) after
#     opvm.ko;
#   - every forker child announced (PROC, EXEC) and retired (PROC_EXIT);
#   - opvm.ko unloads cleanly (no kernel warning);
# then two shorter boots: a full buffer must give LOST records and a
# well-formed stream; a host that disconnects and connects again must get a
# new HELLO and a complete walk.
# Decodes with `$OPVM channel-dump --json` when it is built, else with
# images/channel-decode.py.  Env: BUILD (default build), OPVM.
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
cd "$(dirname "$0")/../.."

for t in qemu-system-x86_64 python3 readelf; do
	if ! command -v $t >/dev/null; then
		echo "SKIP: $t not installed (scripts/install-deps.sh)"
		exit 77
	fi
done
if ! make -s images BUILD="$BUILD" >"$BUILD/images-build.log" 2>&1; then
	tail -20 "$BUILD/images-build.log"
	echo "FAIL: make images failed (log: $BUILD/images-build.log)"
	exit 1
fi
IMG=$BUILD/images
mkdir -p "$BUILD/tmp"
T=$(mktemp -d "$BUILD/tmp/guest-channel.XXXXXX")
QPID=
RPID=
cleanup() {
	[ -n "$QPID" ] && kill "$QPID" 2>/dev/null
	[ -n "$RPID" ] && kill "$RPID" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

NFORK=${GUEST_CHANNEL_FORKS:-200}

# boot NAME APPEND: boots the image with the channel on a unix socket whose
# host end is recorded to $T/NAME.bin; the console goes to $T/NAME.log.
# Returns 1 (after printing why) if the guest did not finish.
boot() {
	local name=$1 append=$2 sock=$T/$1.sock
	qemu-system-x86_64 -accel tcg -m 512 -smp 2 -nographic -no-reboot \
		-kernel "$IMG/vmlinuz" -initrd "$IMG/initramfs.cpio.gz" \
		-append "console=ttyS0 quiet $append" \
		-device virtio-serial-pci \
		-chardev socket,id=ch0,path="$sock",server=on,wait=off \
		-device virtserialport,chardev=ch0,name=org.opvm.0 \
		-monitor unix:"$T/$name.mon",server=on,wait=off \
		</dev/null >"$T/$name.log" 2>&1 &
	QPID=$!
	# The host end: connect once QEMU made the socket, keep every byte.
	# With RECONNECT=1 the first session ends 1 s after the first bytes;
	# then the slot array HELLO announced is read five times from guest
	# physical memory through the monitor (xp) into $T/NAME.slots, and a
	# second session, 1 s later, is recorded to $T/NAME.bin2.
	python3 - "$sock" "$T/$name.bin" "${RECONNECT:-0}" "$T/$name.mon" <<'PY' &
import socket, struct, sys, time


def session(path, out, limit):
    s = socket.socket(socket.AF_UNIX)
    for _ in range(600):
        try:
            s.connect(path)
            break
        except OSError:
            time.sleep(0.05)
    else:
        sys.exit("guest-channel: cannot connect to " + path)
    end = None
    with open(out, 'wb') as f:
        while True:
            if end is not None:
                s.settimeout(max(0.01, end - time.time()))
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                break
            f.write(b)
            if limit and end is None:
                end = time.time() + 1.0
    s.close()


def hmp(path, cmds):
    m = socket.socket(socket.AF_UNIX)
    m.connect(path)
    m.settimeout(5)
    out, buf = [], b''
    while not buf.endswith(b'(qemu) '):
        buf += m.recv(4096)
    for c in cmds:
        m.sendall(c.encode() + b'\n')
        buf = b''
        while not buf.endswith(b'(qemu) '):
            buf += m.recv(4096)
        out.append(buf.decode(errors='replace'))
        time.sleep(0.2)
    m.close()
    return out


session(sys.argv[1], sys.argv[2], sys.argv[3] == '1')
if sys.argv[3] == '1':
    data = open(sys.argv[2], 'rb').read()
    if len(data) >= 56 and struct.unpack_from('<H', data, 2)[0] == 1:
        ncpu, slot_pa = struct.unpack_from('<IQ', data, 20)
        words = min(ncpu, 8) * 6
        with open(sys.argv[2].replace('.bin', '.slots'), 'w') as f:
            for r in hmp(sys.argv[4], ['xp /%dwx %#x' % (words, slot_pa)] * 5):
                f.write(r + '\n')
    time.sleep(1.0)
    session(sys.argv[1], sys.argv[2] + '2', False)
PY
	RPID=$!
	for _ in $(seq 1200); do
		kill -0 "$QPID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$QPID" 2>/dev/null; then
		tail -20 "$T/$name.log"
		echo "FAIL: the guest ($name) did not power off within 120 s"
		return 1
	fi
	wait "$QPID"
	QPID=
	wait "$RPID"
	RPID=
	if ! grep -q '^OPVM-DONE' "$T/$name.log"; then
		tail -30 "$T/$name.log"
		echo "FAIL: the guest's init ($name) did not finish (console above)"
		return 1
	fi
}

# decode NAME [SUFFIX]: $T/NAME.binSUFFIX -> $T/NAMESUFFIX.json, one JSON
# object per record.
decode() {
	local in=$T/$1.bin${2:-} out=$T/$1${2:-}.json
	if [ -x "$OPVM" ] && "$OPVM" channel-dump --json "$in" \
		>"$out" 2>"$T/$1.err"; then
		DEC="opvm channel-dump"
	else
		DEC="images/channel-decode.py"
		images/channel-decode.py --json "$in" >"$out" || {
			echo "FAIL: the channel stream ($1) does not decode"
			return 1
		}
	fi
}

t0=$(date +%s.%N)
boot main "opvm.workload=libcmix:1+threads:1+forker:$NFORK opvm.dump=1 opvm.modtest=1 opvm.unload=1" || exit 1
t1=$(date +%s.%N)
decode main || exit 1

python3 - "$T/main.json" "$T/main.log" "$IMG" "$DEC" "$NFORK" <<'PY'
import json, re, subprocess, sys

dump, console, img, dec, nfork = sys.argv[1:6]
recs = [json.loads(l) for l in open(dump) if l.startswith('{')]
con = open(console, errors='replace').read().splitlines()
fails = []


def num(v):
    return int(v, 0) if isinstance(v, str) else int(v)


def check(ok, msg):
    if not ok:
        fails.append(msg)
    return ok


print('MEASURED records=%d decoder="%s"' % (len(recs), dec))
# --- HELLO and the KASLR anchor -------------------------------------------
h = recs[0] if recs else {}
if check(h.get('type') == 'HELLO', 'first record is not HELLO'):
    smap = {}
    for line in open(img + '/System.map'):
        a, _, n = line.split()
        smap.setdefault(n, int(a, 16))
    rel = subprocess.run(['ls', img + '/root/lib/modules'], capture_output=True,
                         text=True).stdout.split()
    check(h.get('version') == 1, 'HELLO version %s' % h.get('version'))
    check(h.get('cpus') == 2, 'HELLO cpus %s, guest has 2' % h.get('cpus'))
    check(h.get('slot_size') == 24, 'HELLO slot_size %s' % h.get('slot_size'))
    check(h.get('release') in rel, 'HELLO release %s not in %s' %
          (h.get('release'), rel))
    anchor, text = num(h['anchor_addr']), num(h['text'])
    name = h.get('anchor')
    if check(name in smap and text, 'anchor %s / _text not usable' % name):
        slide = text - smap['_text']
        check(anchor - slide == smap[name],
              'anchor %s at %#x does not match System.map (%#x + slide %#x)'
              % (name, anchor, smap[name], slide))
        print('MEASURED kaslr_slide=%#x' % slide)
    check(num(h.get('slot_pa', 0)) != 0, 'HELLO slot_pa is 0')
seqs = [r['seq'] for r in recs]
check(seqs == list(range(len(seqs))), 'record seq numbers are not 0,1,2,...')
lost = sum(num(r.get('count', 0)) for r in recs if r['type'] == 'LOST')
check(any(r['type'] == 'SYNC' for r in recs), 'no SYNC record')

# --- replay the stream --------------------------------------------------
announced, retired, execd = {}, {}, {}
cookies, mods = {}, {}
for i, r in enumerate(recs):
    t = r['type']
    if t in ('PROC', 'EXEC'):
        announced.setdefault(r['tgid'], []).append((i, t, r.get('comm')))
        if t == 'EXEC':
            execd[r['tgid']] = i
    elif t == 'PROC_EXIT':
        retired[r['tgid']] = i
    elif t == 'COOKIE':
        cookies[num(r['id'])] = r
    elif t == 'MODULE':
        mods[r['name']] = num(r['base'])
    elif t == 'MODULE_FREE':
        mods.pop(r['name'], None)

# --- every process the guest lists ------------------------------------------
ps = [l.split(None, 2)[1:] for l in con if l.startswith('OPVM-PS ')]
missing = [p for p in ps if int(p[0]) not in announced]
check(ps, 'the guest printed no OPVM-PS lines')
check(not missing, '%d of %d guest processes never announced: %s' %
      (len(missing), len(ps), missing[:10]))
print('RESULT guest-channel processes: %d listed, %d announced' %
      (len(ps), len(ps) - len(missing)))

# --- libc in libcmix -----------------------------------------------------------
m = [re.search(r'libcmix pid=(\d+)', l) for l in con]
m = [x for x in m if x]
if check(m, 'no OPVM-TRUTH libcmix pid= line'):
    pid = int(m[0].group(1))
    libc = img + '/root/lib/x86_64-linux-gnu/libc.so.6'
    bid = re.search(r'Build ID: ([0-9a-f]+)', subprocess.run(
        ['readelf', '-n', libc], capture_output=True, text=True).stdout)
    bid = bid.group(1) if bid else None
    xoff = [int(l.split()[1], 16) for l in subprocess.run(
        ['readelf', '-lW', libc], capture_output=True, text=True).stdout
        .splitlines() if l.split()[:1] == ['LOAD'] and 'E' in l.split()[-2]]
    maps = [r for i, r in enumerate(recs) if r['type'] == 'MMAP' and
            r['tgid'] == pid and i > execd.get(pid, -1) and
            num(r['cookie']) in cookies and
            cookies[num(r['cookie'])]['path'].endswith('/libc.so.6')]
    if check(maps, 'no MMAP of libc.so.6 in libcmix (pid %d) after its EXEC'
             % pid):
        r = maps[-1]
        c = cookies[num(r['cookie'])]
        check(num(r['prot']) & 4, 'libc mapping not executable')
        check(c.get('build_id') == bid, 'libc build-id %s, file has %s' %
              (c.get('build_id'), bid))
        check(num(r['pgoff']) in xoff, 'libc text pgoff %#x, file says %s' %
              (num(r['pgoff']), [hex(x) for x in xoff]))
        print('RESULT guest-channel libc: %s %s-%s pgoff=%s build-id ok' %
              (c['path'], r['start'], r['end'], r['pgoff']))

# --- mmap()/munmap() of an executable file page ------------------------------
mp = [re.search(r'libcmix mapped path=(\S+) start=(0x[0-9a-f]+)', l) for l in con]
mp = [x for x in mp if x]
if check(mp, 'libcmix printed no "mapped" line'):
    path, start = mp[0].group(1), int(mp[0].group(2), 16)
    im = [i for i, r in enumerate(recs) if r['type'] == 'MMAP' and
          r['tgid'] == pid and num(r['start']) == start and
          cookies.get(num(r['cookie']), {}).get('path') == path]
    iu = [i for i, r in enumerate(recs) if r['type'] == 'MUNMAP' and
          r['tgid'] == pid and num(r['start']) <= start < num(r['end'])]
    check(im, 'no MMAP of %s at %#x' % (path, start))
    check(iu and im and iu[-1] > im[0], 'no MUNMAP at %#x after its MMAP' %
          start)
    print('RESULT guest-channel mmap+munmap: %s' %
          ('seen' if im and iu else 'missing'))

# --- threads ---------------------------------------------------------------------
tl = [re.search(r'threads pid=(\d+) tid=(\d+)', l) for l in con]
tl = [(int(x.group(1)), int(x.group(2))) for x in tl if x]
check(len(tl) == 4, 'threads printed %d tids, wanted 4' % len(tl))
born = {(r['tid'], r['tgid']) for r in recs if r['type'] == 'THREAD'}
died = {r['tid'] for r in recs if r['type'] == 'THREAD_EXIT'}
bad = [t for t in tl if (t[1], t[0]) not in born or t[1] not in died]
check(not bad, 'threads not announced+retired: %s' % bad)
print('RESULT guest-channel threads: %d, %d tracked' % (len(tl), len(tl) - len(bad)))

# A process is retired once: threads exiting together must not each say so.
gone, twice = set(), []
for r in recs:
    if r['type'] in ('PROC', 'EXEC'):
        gone.discard(r['tgid'])
    elif r['type'] == 'PROC_EXIT':
        if r['tgid'] in gone:
            twice.append(r['tgid'])
        gone.add(r['tgid'])
check(not twice, 'PROC_EXIT sent twice for %s' % twice[:10])

# --- modules -------------------------------------------------------------------
gm = {l.split()[1]: int(l.split()[2], 16) for l in con
      if l.startswith('OPVM-MOD ') and len(l.split()) >= 3}
check(gm, 'the guest printed no OPVM-MOD lines')
check(set(gm) == set(mods), 'modules: guest %s, channel %s' %
      (sorted(gm), sorted(mods)))
bad = [n for n in gm if n in mods and gm[n] and gm[n] != mods[n]]
check(not bad, 'module bases differ: %s' % bad)
print('RESULT guest-channel modules: %d in /proc/modules, %d on the channel'
      % (len(gm), len(mods)))
rm = [re.search(r'modtest removed=(\S+)', l) for l in con]
rm = [x.group(1) for x in rm if x]
if check(rm, 'the guest did not unload a module after opvm.ko'):
    seen = [r['type'] for r in recs if r.get('name') == rm[0]]
    check(seen[-2:] == ['MODULE', 'MODULE_FREE'],
          'module %s: records %s, wanted MODULE then MODULE_FREE' %
          (rm[0], seen))

# --- forker --------------------------------------------------------------------
kids = [int(x.group(1)) for x in
        (re.search(r'forker child=(\d+)', l) for l in con) if x]
check(len(kids) == int(nfork), 'forker reported %d children, wanted %s' %
      (len(kids), nfork))
bad = []
for k in kids:
    a = announced.get(k, [])
    forked = any(t == 'PROC' for _, t, _ in a)
    ex = [i for i, t, c in a if t == 'EXEC' and c == 'opvm-true']
    gone = retired.get(k, -1)
    if not (forked and ex and gone > ex[-1]):
        bad.append(k)
check(not bad, '%d forker children not announced+exec+retired: %s' %
      (len(bad), bad[:10]))
print('RESULT guest-channel forker: %d children, %d fully tracked' %
      (len(kids), len(kids) - len(bad)))
print('RESULT guest-channel lost_records: %d' % lost)
ul = [l for l in con if l.startswith('OPVM-UNLOAD ')]
check(ul == ['OPVM-UNLOAD rc=0'], 'rmmod opvm: %s' % ul)
warn = [l for l in con if l.startswith('OPVM-DMESG ') and
        re.search(r'BUG|WARNING|Oops|RIP:|Call Trace', l)]
check(not warn, 'kernel warnings: %s' % warn[:5])
check(lost == 0, 'the guest dropped %d records' % lost)

for f in fails:
    print('FAIL: ' + f)
sys.exit(1 if fails else 0)
PY
rc=$?
printf 'MEASURED guest-channel boot-to-poweroff: %.1f s, %s bytes on the channel\n' \
	"$(echo "$t1 - $t0" | bc 2>/dev/null || echo 0)" "$(stat -c %s "$T/main.bin")"
if [ $rc != 0 ]; then
	grep -E 'opvm|OPVM-TRUTH exit' "$T/main.log" | grep -v -E 'OPVM-(PS|MOD)' | tail -20
	exit 1
fi

# A full buffer: a 32 KiB ring (the smallest) and the relay started only
# after forker's children filled it.  The stream must stay well-formed, say
# how much was dropped (LOST), and go on after it.
boot lost "opvm.workload=forker:$NFORK opvm.kmod_args=ring_kb=16 opvm.relay=late" || exit 1
decode lost || exit 1
python3 - "$T/lost.json" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
fails = []
seqs = [r['seq'] for r in recs]
if not recs or recs[0]['type'] != 'HELLO':
    fails.append('full buffer: the stream does not start with HELLO')
if seqs != list(range(len(seqs))):
    fails.append('full buffer: seq numbers are not contiguous')
lost = [i for i, r in enumerate(recs) if r['type'] == 'LOST']
n = sum(int(recs[i]['count']) for i in lost)
if not lost or n <= 0:
    fails.append('full buffer: no LOST record')
elif lost[0] == len(recs) - 1:
    fails.append('full buffer: nothing after the LOST record')
print('RESULT guest-channel full-buffer: %d records kept, %d dropped and '
      'reported in %d LOST record(s)' % (len(recs), n, len(lost)))
for f in fails:
    print('FAIL: ' + f)
sys.exit(1 if fails else 0)
PY
[ $? = 0 ] || exit 1

# Host sessions: the host disconnects while the guest runs and connects
# again.  The second session must start from HELLO (seq 0) with a complete
# walk: the running workload announced, its cookies sent again.  Meanwhile
# the slots are read from guest memory where HELLO says they are.
RECONNECT=1 boot reconnect "opvm.workload=abratio:8" || exit 1
[ -s "$T/reconnect.bin2" ] || { echo "FAIL: nothing on the channel after reconnecting"; exit 1; }
decode reconnect "" || exit 1
decode reconnect 2 || exit 1
python3 - "$T/reconnect.json" "$T/reconnect2.json" "$T/reconnect.log" <<'PY'
import json, re, sys
s1 = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
s2 = [json.loads(l) for l in open(sys.argv[2]) if l.startswith('{')]
con = open(sys.argv[3], errors='replace').read()
pid = int(re.search(r'abratio pid=(\d+)', con).group(1))
fails = []
if not s1 or s1[0]['type'] != 'HELLO':
    fails.append('reconnect: first session does not start with HELLO')
h = [i for i, r in enumerate(s2) if r['type'] == 'HELLO']
if not h:
    fails.append('reconnect: no HELLO in the second session')
else:
    tail = s2[h[0]:]
    if [r['seq'] for r in tail] != list(range(len(tail))):
        fails.append('reconnect: seq after HELLO is not 0,1,2,...')
    sync = [i for i, r in enumerate(tail) if r['type'] == 'SYNC']
    walk = tail[:sync[0]] if sync else []
    if not sync:
        fails.append('reconnect: no SYNC after the new HELLO')
    if not any(r['type'] == 'PROC' and r['tgid'] == pid for r in walk):
        fails.append('reconnect: abratio (pid %d) not in the new walk' % pid)
    ids = {int(str(r['id']), 0) for r in tail if r['type'] == 'COOKIE'}
    used = {int(str(r['cookie']), 0) for r in tail if r['type'] == 'MMAP'}
    if used - ids - {0}:
        fails.append('reconnect: MMAPs use cookies not sent in this session: %s'
                     % sorted(used - ids - {0})[:5])
    print('RESULT guest-channel reconnect: second session %d records, %d '
          'before its HELLO, walk of %d records' % (len(s2), h[0], len(walk)))
# The slots, read from guest memory at slot_pa while abratio ran: the
# address HELLO gave must hold abratio's pid, tgid and cr3 on some CPU.
cr3 = {r['tgid']: int(str(r['cr3']), 0) for r in s1 + s2
       if r['type'] in ('PROC', 'EXEC') and r['tgid'] == pid}
try:
    txt = open(sys.argv[1].replace('.json', '.slots')).read()
except OSError:
    txt = ''
samples, hits, odd = 0, 0, 0
for block in txt.split('(qemu)'):
    # only the dump lines ("ADDR: 0x... 0x..."), not the echoed command
    w = [int(x, 16) for line in re.findall(r'^[0-9a-f]{8,16}: (.*)$',
                                           block.replace('\r', ''), re.M)
         for x in re.findall(r'0x([0-9a-f]{8})', line)]
    if len(w) < 6:
        continue
    samples += 1
    for i in range(0, len(w) - 5, 6):
        seq, spid, stgid, flags, lo, hi = w[i:i + 6]
        if seq % 2:
            odd += 1
            continue
        if spid == pid and stgid == pid and flags == 0 and \
                (hi << 32 | lo) == cr3.get(pid):
            hits += 1
            break
if samples == 0:
    fails.append('slots: could not read guest memory at slot_pa')
elif hits == 0:
    fails.append('slots: abratio (pid %d, cr3 %s) never seen in %d reads '
                 'of slot_pa' % (pid, hex(cr3.get(pid, 0)), samples))
print('RESULT guest-channel slots: abratio on a vCPU in %d of %d reads of '
      'slot_pa (%d slots mid-update)' % (hits, samples, odd))
for f in fails:
    print('FAIL: ' + f)
sys.exit(1 if fails else 0)
PY
[ $? = 0 ] || exit 1
echo "PASS: guest-channel"
exit 0
