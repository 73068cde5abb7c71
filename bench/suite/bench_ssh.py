"""What one connection to the test suite's sshd costs, client and server together.

The suite's tests of the remote seam, whole-job captures and fault cases connect to a
real OpenSSH sshd on 127.0.0.1 (tests/support/sshd.py) some 140 times a run. Each
variant below starts such a server, runs `ssh ALIAS true` `--count` times in a row, and
prints per connection the CPU seconds of the `ssh` client, of the sshd side (the
listener and every process it forked, counted when the listener is reaped) and the wall
seconds:
- `openssh defaults`: the server as OpenSSH ships it (key exchange sntrup761x25519,
  and a bash that reads the user's ~/.bashrc because sshd started it);
- `curve25519`: only the key exchange the test server offers;
- `no bashrc`: only the session environment the test server sets (SHLVL=1);
- `test server`: both, as the suite runs it.

Run: .venv/bin/python bench/suite/bench_ssh.py [--count N]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.sshd import ALIAS, LEAN, SSHServer  # noqa: E402

KEX_LINE, ENV_LINE = LEAN
VARIANTS = {  # name → the test server's lines it keeps
    "openssh defaults": (),
    "curve25519": (KEX_LINE,),
    "no bashrc": (ENV_LINE,),
    "test server": LEAN,
}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(keep: tuple[str, ...], count: int) -> tuple[float, float, float]:
    """(client CPU-s, server CPU-s, wall s) per connection with the server's lines
    `keep` of the ones the test server adds to OpenSSH's defaults."""
    server = SSHServer()
    config = server.dir / "sshd_config"
    lines = config.read_text().splitlines()
    config.write_text("".join(f"{line}\n" for line in lines if line not in LEAN or line in keep))
    server.start()
    try:
        argv = ["ssh", "-F", str(server.config), "-T", "-o", "BatchMode=yes", ALIAS, "true"]
        cpu, wall = _children_cpu_s(), time.monotonic()
        for _ in range(count):
            subprocess.run(argv, check=True, timeout=30)
        client, wall = _children_cpu_s() - cpu, time.monotonic() - wall
    finally:
        cpu = _children_cpu_s()
        server.cleanup()
    return client / count, (_children_cpu_s() - cpu) / count, wall / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=30, help="connections per variant")
    args = parser.parse_args()
    print(f"{args.count} connections each; per connection:")
    print(f"{'server':18} {'client CPU-s':>12} {'sshd CPU-s':>11} {'wall s':>7}")
    for name, keep in VARIANTS.items():
        client, server, wall = measure(keep, args.count)
        print(f"{name:18} {client:12.3f} {server:11.3f} {wall:7.3f}")


if __name__ == "__main__":
    main()
