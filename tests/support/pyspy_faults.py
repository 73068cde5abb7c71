"""py-spy's failure modes, injected: stand-ins for the py-spy binary a host names. Each
is the real py-spy except for one behaviour that real py-spy shows only on some
machines or targets, written as py-spy 0.4.3 behaves there:

- `unbuilt`: a py-spy built without native unwinding (`--native` left out of its
  help and refused with py-spy's own words);
- `old`: a py-spy that says it is 0.3.14 (too old to merge native frames of 3.11);
- `merge_fails`: given `--native`, every sample fails as on a target whose native
  frames py-spy cannot merge (py-spy issue #673): it announces sampling, counts each
  round as an error (warning as py-spy does), and writes an empty raw file;
- `stops_target`: the real py-spy, after which the target is left stopped (SIGSTOP),
  as a py-spy killed while it held the process paused leaves it;
- `misses_exit`: the real py-spy with its "Stopped sampling because process exited"
  line removed (py-spy 0.4.3 misses the exit of a process killed mid-sample);
- `python_unsupported`: refuses the target as py-spy does a Python it cannot read;
- `crashes_with_subprocesses`: given `record --subprocesses`, the real py-spy until it
  has sampled about 0.5 s, then a segfault without samples (exit 139 to the shell), as
  py-spy 0.4.3 once did while a rank's DataLoader worker was killed mid-capture.
"""

from __future__ import annotations

import sys
from pathlib import Path

REAL = str(Path(sys.executable).with_name("py-spy"))

_HEAD = f"""#!{sys.executable}
import os, signal, subprocess, sys, time
REAL = {REAL!r}
args = sys.argv[1:]


def arg(name):
    return args[args.index(name) + 1]


def passthrough(filter_line=None, after=None):
    child = subprocess.Popen([REAL, *args], stdout=subprocess.PIPE, text=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, f: child.send_signal(s))
    for line in child.stdout:
        if filter_line is None or not filter_line(line):
            sys.stdout.write(line)
            sys.stdout.flush()
    code = child.wait()
    if after is not None:
        after()
    sys.exit(code)
"""

_BODIES = {
    "unbuilt": """
if "--native" in args:
    print("Collecting stack traces from native extensions (`--native`) is not supported "
          "on your platform.", file=sys.stderr)
    sys.exit(1)
if args[:2] == ["record", "--help"]:
    out = subprocess.run([REAL, *args], capture_output=True, text=True).stdout
    sys.stdout.write("".join(l for l in out.splitlines(True) if "--native" not in l))
    sys.exit(0)
os.execv(REAL, [REAL, *args])
""",
    "old": """
if args == ["--version"]:
    print("py-spy 0.3.14")
    sys.exit(0)
os.execv(REAL, [REAL, *args])
""",
    "merge_fails": """
if args[:1] != ["record"] or "--native" not in args:
    os.execv(REAL, [REAL, *args])
rate, duration, out, pid = int(arg("--rate")), int(arg("--duration")), arg("-o"), arg("--pid")
print(f"py-spy> Sampling process {rate} times a second for {duration} seconds. "
      "Press Control-C to exit.", flush=True)
print(flush=True)
stop = []
signal.signal(signal.SIGINT, lambda s, f: stop.append(s))
start, errors = time.monotonic(), 0
while not stop and time.monotonic() - start < duration:
    time.sleep(1 / rate)
    errors += 1
    if errors % rate == 1:
        print(f"WARN py_spy] Failed to get stack trace from {pid}: Failed to merge native "
              "and python frames (Have 1 native and 2 python)", file=sys.stderr, flush=True)
open(out, "w").close()
if stop:
    print("\\npy-spy> Stopped sampling because Control-C pressed", flush=True)
print(f"py-spy> Wrote raw flamegraph data to '{out}'. Samples: 0 Errors: {errors}", flush=True)
""",
    "stops_target": """
if args[:1] != ["record"]:
    os.execv(REAL, [REAL, *args])


def leave_stopped():
    # Stopped before this py-spy is gone, as a py-spy killed mid-sample leaves it (the
    # signal lands when the target is next scheduled: wait for the T state).
    pid = int(arg("--pid"))
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.01)


passthrough(after=leave_stopped)
""",
    "misses_exit": """
if args[:1] != ["record"]:
    os.execv(REAL, [REAL, *args])
passthrough(filter_line=lambda line: "Stopped sampling because process exited" in line)
""",
    "python_unsupported": """
if args[:1] in (["record"], ["dump"]) and "--help" not in args:
    print("Error: Unsupported version of Python: 3.99.0", file=sys.stderr)
    sys.exit(1)
os.execv(REAL, [REAL, *args])
""",
    "crashes_with_subprocesses": """
import resource

if args[:1] != ["record"] or "--subprocesses" not in args:
    os.execv(REAL, [REAL, *args])
child = subprocess.Popen([REAL, *args], stdout=subprocess.PIPE, text=True)
signal.signal(signal.SIGINT, lambda s, f: child.send_signal(s))


def crash(*_):
    child.kill()  # the real py-spy, before it could write a sample
    child.wait()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGSEGV, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGSEGV)


signal.signal(signal.SIGALRM, crash)
for line in child.stdout:
    sys.stdout.write(line)
    sys.stdout.flush()
    if line.startswith("py-spy> Sampling process"):
        signal.setitimer(signal.ITIMER_REAL, 0.5)
sys.exit(child.wait())
""",
}


def fault_pyspy(directory: Path, kind: str) -> str:
    """Write the `kind` stand-in into `directory`; its path, for a host's py-spy."""
    path = directory / f"py-spy-{kind.replace('_', '-')}"
    path.write_text(_HEAD + _BODIES[kind])
    path.chmod(0o755)
    return str(path)
