"""CI cannot pass on the wrong services or by skipping: .ci/run sets CI itself, its
service check fails with one line when a service does not answer, and under CI a
skipped test is a failed one."""

import os
import subprocess
import sys
from pathlib import Path

from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[2]


def _services(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / ".ci/services")], env={**os.environ, **env},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_the_ci_service_check_fails_in_one_line_when_postgresql_does_not_answer():
    closed = free_port()  # nothing listens there, and starting the cluster does not change it
    result = _services(CI_PG_PORT=str(closed), CI_SERVICE_WAIT_S="1")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"ci: postgresql does not answer on 127.0.0.1:{closed} 1s after starting it; "
        "not running the tests on the fallbacks"
    )


def test_the_ci_service_check_passes_when_the_services_answer():
    result = _services()
    assert result.returncode == 0, result.stderr
    assert "postgresql on 127.0.0.1:5432 and redis on 127.0.0.1:6379 answer" in result.stdout


def test_ci_run_sets_ci_itself_and_hides_no_failed_service_start():
    script = (ROOT / ".ci/run").read_text()
    assert "export CI=true" in script and ".ci/services" in script
    assert "|| true" not in script + (ROOT / ".ci/services").read_text()


SKIPPING = """
import pytest

def test_needs_a_part_that_is_missing():
    pytest.skip("the part is missing")

@pytest.mark.xfail(reason="known")
def test_known_to_fail():
    assert False
"""


def _pytest_on(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    clean = {k: v for k, v in os.environ.items() if k != "CI"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.support.ci",
         "-p", "no:django", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_under_ci_a_skipped_test_fails_with_its_reason(tmp_path):
    result = _pytest_on(tmp_path, CI="true")
    assert result.returncode == 1, result.stdout
    assert "skipped under CI, which must run every test: Skipped: the part is missing" in (
        result.stdout
    )
    assert "1 failed, 1 xfailed" in result.stdout


def test_outside_ci_a_missing_part_skips(tmp_path):
    result = _pytest_on(tmp_path)
    assert result.returncode == 0 and "1 skipped, 1 xfailed" in result.stdout, result.stdout
