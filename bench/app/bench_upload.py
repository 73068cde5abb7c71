"""Peak memory of the web process while it takes a 30 MB speedscope upload.

Default: starts `gunicorn config.wsgi -w 1` (one sync worker) on the embedded default (SQLite
and the filesystem broker under a temp dir; no Celery worker: the upload is queued),
posts the file to `POST /api/captures/import/` with a token, and reads the gunicorn
worker's peak RSS (VmHWM) before and after.

Run: .venv/bin/python bench/app/bench_upload.py [--mb 30] [--root CHECKOUT]
`--root` runs another checkout's code with this venv (e.g. a clone at the commit
before uploads were queued, to measure "before").

`--worker` measures the analysis worker's side instead: a fresh child process (of
`--root`'s code) reads the stored gzip file as `_analyze_samples` does, and prints
each step's peak RSS (VmHWM, reset between steps through /proc/self/clear_refs),
its growth over the idle child and its CPU time: `parse` (read_profile), `analyze`
(analyze + thread_tables with the default keywords) and `export` (export_bytes).
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "support"))

import gen_raw  # noqa: E402

from config.env import local_port_answers  # noqa: E402
from profiles import pyspy  # noqa: E402


def speedscope_file(megabytes: float, out: Path) -> Path:
    """A real speedscope export (the engine's own) of generated deep native stacks."""
    raw = out.with_suffix(".txt")
    size = megabytes
    for _ in range(3):
        gen_raw.main(str(raw), size)
        out.write_text(json.dumps(pyspy.to_speedscope(pyspy.read_profile(raw))))
        got = out.stat().st_size / 1024 / 1024
        if abs(got - megabytes) < 1.5:
            break
        size *= megabytes / got
    return out


def _vm(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(key)


def _manage(root: Path, env: dict, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=root, env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    return done.stdout


def _token(root: Path, env: dict) -> str:
    _manage(root, env, "migrate", "-v0")
    # A superuser (imports need the operator level); hashed tokens where the checkout
    # has them, DRF's plain ones for an older checkout given with --root.
    code = (
        "from django.contrib.auth.models import User;"
        "u = User.objects.create_superuser('bench', password='x');\n"
        "try:\n"
        "    from runs.tokens import api_token_create; print(api_token_create(user=u)[1])\n"
        "except ImportError:\n"
        "    from rest_framework.authtoken.models import Token\n"
        "    print(Token.objects.create(user=u).key)"
    )
    return _manage(root, env, "shell", "-c", code).strip().splitlines()[-1]


def _multipart(path: Path) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="{path.name}"\r\nContent-Type: application/json\r\n\r\n'
    ).encode()
    return head + path.read_bytes() + f"\r\n--{boundary}--\r\n".encode(), boundary


def measure(root: Path, upload: Path, port: int = 8765) -> dict:
    var = tempfile.mkdtemp(prefix="flamedeck-bench-upload-")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", FLAMEDECK_VAR_DIR=var)
    token = _token(root, env)
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "-b", f"127.0.0.1:{port}", "-w", "1"],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not local_port_answers(port):
            time.sleep(0.2)
        headers = {"Authorization": f"Token {token}"}
        url = f"http://127.0.0.1:{port}/api/"
        urllib.request.urlopen(urllib.request.Request(url + "hosts/", headers=headers)).read()  # noqa: S310
        worker = int(Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()[0])
        idle_mb = _vm(worker, "VmHWM")
        body, boundary = _multipart(upload)
        headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
        started = time.monotonic()
        request = urllib.request.Request(url + "captures/import/", body, headers)  # noqa: S310
        with urllib.request.urlopen(request, timeout=600) as response:  # noqa: S310
            answer = json.loads(response.read())
        return {
            "upload_mb": round(upload.stat().st_size / 1024 / 1024, 1),
            "answer": answer.get("status"),
            "request_s": round(time.monotonic() - started, 2),
            "web_peak_rss_before_mb": round(idle_mb),
            "web_peak_rss_after_mb": round(_vm(worker, "VmHWM")),
        }
    finally:
        server.terminate()
        server.wait(timeout=30)


WORKER_STEPS = """
import json, os, sys, time
from pathlib import Path
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.conf import settings
from profiles import pyspy
from profiles.storage.files import export_bytes

def vm_hwm():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

def step(name, fn):
    Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
    idle, cpu = vm_hwm(), time.process_time()
    result = fn()
    peak = vm_hwm()
    figures[name] = {"peak_rss_mb": round(peak), "growth_mb": round(peak - idle),
                     "cpu_s": round(time.process_time() - cpu, 2)}
    return result

figures = {"idle_rss_mb": round(vm_hwm())}
profile = step("parse", lambda: pyspy.read_profile(sys.argv[1]))
keywords = tuple(pyspy.GPU_KEYWORDS)
options = pyspy.AnalysisOptions(keywords=keywords, max_nodes=settings.FLAMEDECK_FLAMEGRAPH_NODES)
step("analyze", lambda: (pyspy.analyze(profile, options), pyspy.thread_tables(profile, keywords)))
step("export", lambda: export_bytes(profile, "speedscope"))
print(json.dumps(figures))
"""


def measure_worker(root: Path, upload: Path) -> dict:
    """The analysis worker's steps on the stored (gzip) file, in a fresh child process."""
    stored = upload.with_suffix(".json.gz")
    stored.write_bytes(gzip.compress(upload.read_bytes(), compresslevel=6))
    var = tempfile.mkdtemp(prefix="flamedeck-bench-worker-")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(FLAMEDECK_VAR_DIR=var, PYTHONPATH=str(root))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", WORKER_STEPS, str(stored)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return {
        "upload_mb": round(upload.stat().st_size / 1024 / 1024, 1),
        "stored_gzip_mb": round(stored.stat().st_size / 1024 / 1024, 1),
        "worker_s": round(time.monotonic() - started, 2),
        **json.loads(done.stdout.strip().splitlines()[-1]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=30)
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--worker", action="store_true", help="the analysis worker's side")
    args = parser.parse_args()
    upload = speedscope_file(args.mb, Path(tempfile.mkdtemp()) / "big.speedscope.json")
    figures = (measure_worker if args.worker else measure)(args.root, upload)
    print(json.dumps({"root": str(args.root), **figures}))


if __name__ == "__main__":
    main()
