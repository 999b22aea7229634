#!/bin/bash
# docs/reports.md's JSON example is the report fixture's real output
# (tests/golden/report.json, which test-report compares with what opvm
# prints), cut to its first symbol row: every key and value must match.
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 is not installed"; exit 77; }
python3 - docs/reports.md tests/golden/report.json <<'PY'
import json, re, sys
doc = open(sys.argv[1]).read()
m = re.search(r"### JSON \(stable contract\)\n\n```json\n(.*?)```", doc, re.S)
if not m:
    print("FAIL: no JSON example under '### JSON (stable contract)'"); sys.exit(1)
ex = json.loads(m.group(1))
real = json.load(open(sys.argv[2]))
bad = [k for k in real if k not in ex]
bad += [k for k in ex if k != "symbols" and ex[k] != real.get(k)]
rows = ex.get("symbols", [])
if not rows or rows != real["symbols"][:len(rows)]:
    bad.append("symbols")
if bad:
    print("FAIL: the example differs from the real output in", bad); sys.exit(1)
print("RESULT docs JSON example: %d keys, %d symbol row(s), all as opvm prints them"
      % (len(ex), len(rows)))
PY
