#!/usr/bin/env bash
# Re-record the real py-spy fixtures in tests/data/pyspy/ (run as root, from the repo root).
# Each capture profiles bench/targets/workload.py (named threads target-0..N, a loader, a queue).
# After re-recording, review and run the tests with FLAMEDECK_UPDATE_GOLDEN=1.
set -euo pipefail
PS=${PYSPY:-.venv/bin/py-spy}
PY=${PYTHON:-.venv/bin/python}
W=bench/targets/workload.py
D=tests/data/pyspy
T=$(mktemp -d)
rec() { local out=$1; shift; "$PS" record -o "$T/out" "$@" > "$D/$out.log" 2>&1 || true; cp "$T/out" "$D/$out"; }

rec threads.txt --format raw --threads --rate 100 --duration 3 -- "$PY" $W 4
rec native.txt --format raw --threads --native --rate 100 --duration 3 -- "$PY" $W 4
rec idle.txt --format raw --threads --idle --rate 50 --duration 2 -- "$PY" $W 3
rec nolineno.txt --format raw --nolineno --rate 50 --duration 2 -- "$PY" $W 3
rec speedscope.json --format speedscope --threads --rate 50 --duration 2 -- "$PY" $W 3
cat > "$T/sub.py" <<PYEOF
import subprocess, sys
procs = [subprocess.Popen([sys.executable, "$W", "3", "2"]) for _ in range(2)]
for p in procs: p.wait()
PYEOF
rec subprocesses.txt --format raw --threads --subprocesses --rate 50 --duration 2 -- "$PY" "$T/sub.py"
# A command line with newlines: py-spy writes the record across several lines.
rec multiline_cmdline.txt --format raw --threads --subprocesses --rate 50 --duration 1 -- "$PY" -c \
  'import subprocess,sys
subprocess.run([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<2: sum(range(1000))"])'
# Lag: --native at a rate 2 CPUs cannot follow; one ends by duration, one by Ctrl-C.
rec lag_duration.txt --format raw --threads --native --rate 2000 --duration 2 -- "$PY" $W 30 12
timeout -s INT 8 "$PS" record --format raw --threads --native --rate 3000 --duration 60 \
  -o "$T/out" -- "$PY" $W 30 12 > "$D/lag_ctrlc.log" 2>&1 || true
# The same on a terminal: the progress-bar variant of the warning, with ANSI codes.
script -qfc "timeout -s INT 6 $PS record --format raw --native --rate 3000 --duration 60 -o $T/tty -- $PY $W 30 12" \
  "$D/lag_tty.log" > /dev/null || true
"$PY" $W 30 3 & P=$!
sleep 1.5
"$PS" dump --pid $P > "$D/dump.txt"
"$PS" dump --native --pid $P > "$D/dump_native.txt"
"$PS" dump --locals --pid $P > "$D/dump_locals.txt"
"$PS" dump --json --native --locals --pid $P > "$D/dump.json"
kill $P; wait $P 2>/dev/null || true
rm -rf "$T"
