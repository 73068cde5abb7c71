#!/usr/bin/env bash
# Re-record the real PyTorch captures in tests/data/pyspy/ (run as root, from the repo root).
# Needs a torch venv: python3 -m venv /work/torchenv && /work/torchenv/bin/pip install torch==2.13.0
# (TORCH_PYTHON=... to use another). Each capture attaches to bench/targets/torch_target.py (threads
# loader, trainer, metrics, evaluator; a queue.Queue; .item() calls) with the repo's py-spy;
# py-spy's stdout is kept beside each file as FILE.log. Review, then run the engine tests
# with FLAMEDECK_UPDATE_GOLDEN=1.
set -euo pipefail
PS=${PYSPY:-.venv/bin/py-spy}
TPY=${TORCH_PYTHON:-/work/torchenv/bin/python}
D=tests/data/pyspy
"$TPY" bench/targets/torch_target.py 60 2>/dev/null &
P=$!
trap 'kill $P 2>/dev/null || true' EXIT
sleep 8  # torch import and first steps
rec() {
  local out=$1; shift
  "$PS" record --native --threads --rate 50 -d 8 --pid "$P" -o "$D/$out" "$@" > "$D/$out.log" 2>&1
}
rec torch_native_idle.txt --format raw --idle
rec torch_native_gil.txt --format raw --gil
rec torch_speedscope.json --format speedscope --idle
ls -la "$D"/torch_*
