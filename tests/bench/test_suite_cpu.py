"""bench/suite/suite_cpu.py's `--machine`: the machine's core-seconds over a command, as
`python bench/suite/suite_cpu.py --machine -- CMD` prints them (a real child that burns CPU)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE_CPU = ROOT / "bench" / "suite" / "suite_cpu.py"
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass"


def _machine(*command: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, str(SUITE_CPU), "--machine", "--", *command],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout


def test_the_machine_mode_counts_the_cpu_a_command_spends_and_passes_its_exit_code_on():
    code, out = _machine(sys.executable, "-c", BURN.format(s=1.5))
    found = re.search(r"user (\d+), system (\d+), idle (\d+), stolen (\d+); ([\d.]+) cores", out)
    assert code == 0 and found, out
    user, system, _, _, busy = (float(g) for g in found.groups())
    assert user + system >= 1, out  # the child's 1.5 CPU-s, whatever else runs
    assert busy >= 0.5, out
    code, out = _machine(sys.executable, "-c", "raise SystemExit(3)")
    assert code == 3 and "suite_cpu --machine:" in out, out
