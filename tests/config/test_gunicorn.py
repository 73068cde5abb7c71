"""The production web server: gunicorn on a loopback port, static files collected and
compressed offline (COMPRESS_OFFLINE=1), served by WhiteNoise with far-future headers."""

import gzip
import http.cookiejar
import re
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile

from config.env import local_port_answers
from profiles.captures import services
from profiles.models import CaptureGroup, KeywordSet
from runs.models import Host, Run
from runs.permissions import HOST_ADMINS_GROUP, OPERATORS_GROUP
from tests.support.worker import worker_env

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
RAW = (
    "thread (11): MainThread;train (train.py:10);cuStreamSynchronize (libcuda.so.1) 60\n"
    "thread (12): loader;load (data.py:5);cudaMemcpy (libcudart.so) 40\n"
)
ASSET = re.compile(r'(?:href|src)="(/static/[^"]+)"')


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def gunicorn(tmp_path):
    """`make static` (docs/deployment.md's step: collectstatic, offline bundles, pre-gzipped),
    then `gunicorn config.wsgi` for real."""
    env = {**worker_env(), "FLAMEDECK_VAR_DIR": str(tmp_path), "COMPRESS_OFFLINE": "1"}
    env.update(ALLOWED_HOSTS="127.0.0.1", DEBUG="0")
    done = subprocess.run(
        ["make", "-s", "static", f"PY={sys.executable}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    assert list((tmp_path / "static" / "CACHE" / "js").glob("*.js.gz"))
    port = _free_port()
    log = open(tmp_path / "gunicorn.log", "w")  # noqa: SIM115 — closed below
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "-b", f"127.0.0.1:{port}", "-w", "2"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not local_port_answers(port):
        assert server.poll() is None and time.monotonic() < deadline, (
            tmp_path / "gunicorn.log"
        ).read_text()
        time.sleep(0.2)
    yield f"http://127.0.0.1:{port}"
    server.terminate()
    server.wait(timeout=15)
    log.close()


def _logged_in(base: str, username: str, password: str) -> urllib.request.OpenerDirector:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(f"{base}/accounts/login/").read()
    token = next(c.value for c in jar if c.name == "csrftoken")
    form = {"username": username, "password": password, "csrfmiddlewaretoken": token}
    request = urllib.request.Request(  # noqa: S310 — loopback http only
        f"{base}/accounts/login/",
        data=urllib.parse.urlencode(form).encode(),
        headers={"Referer": f"{base}/accounts/login/"},
    )
    assert opener.open(request).geturl().rstrip("/") == base  # redirected to the runs page
    return opener


def _pages(django_user_model) -> list[str]:
    # Hashed with a hasher the production settings know (the tests use MD5).
    hashed = PBKDF2PasswordHasher().encode("owner-pass", "flamedeck-salt", iterations=1000)
    owner = django_user_model.objects.create(username="owner", password=hashed)
    # Both trust levels, so the host forms are among the pages served.
    owner.groups.add(*Group.objects.filter(name__in=[OPERATORS_GROUP, HOST_ADMINS_GROUP]))
    run = Run.objects.create(name="bs64")
    a, b = (
        services.capture_import(user=owner, file=SimpleUploadedFile("s.txt", RAW.encode()), run=run)
        for _ in range(2)
    )
    group = CaptureGroup.objects.create(run=run)
    group.captures.add(a, b)
    host = Host.objects.get(name="local")
    keyword_set = KeywordSet.objects.first()
    return [
        "/",
        f"/runs/{run.pk}/",
        "/runs/new/",
        "/hosts/",
        f"/hosts/{host.pk}/",
        "/captures/",
        f"/captures/{a.pk}/",
        "/captures/import/",
        f"/groups/{group.pk}/",
        f"/compare/?a={a.pk}&b={b.pk}",
        "/compare/",
        "/trends/",
        "/keywords/",
        f"/keywords/{keyword_set.pk}/",
        "/keywords/new/",
        f"/keywords/{keyword_set.pk}/edit/",
        f"/runs/{run.pk}/edit/",
        "/hosts/new/",
        f"/hosts/{host.pk}/edit/",
        "/api/docs/",  # Swagger UI's files beside the bundles, hashed and cached too
    ]


def test_gunicorn_serves_every_page_with_offline_bundles_and_cached_static_files(
    gunicorn, django_user_model
):
    pages = _pages(django_user_model)
    with urllib.request.urlopen(gunicorn + "/accounts/login/") as response:  # noqa: S310
        assert "/CACHE/css/" in response.read().decode()
    opener = _logged_in(gunicorn, "owner", "owner-pass")
    assets = set()
    for page in pages:
        with opener.open(gunicorn + page) as response:
            assert response.status == 200, page
            html = response.read().decode()
        found = ASSET.findall(html)
        assert any("/CACHE/js/" in a for a in found) and any("/CACHE/css/" in a for a in found)
        assets.update(found)
    for asset in assets:
        with urllib.request.urlopen(gunicorn + asset) as response:  # noqa: S310
            assert response.status == 200, asset
            assert "max-age=315360000" in response.headers["Cache-Control"], asset
            assert "immutable" in response.headers["Cache-Control"], asset
    # The bundles go out compressed to a browser that accepts it (WhiteNoise serves the
    # .gz that `make static` wrote beside each one).
    bundle = next(a for a in sorted(assets) if "/CACHE/js/" in a)
    request = urllib.request.Request(  # noqa: S310 — loopback http only
        gunicorn + bundle, headers={"Accept-Encoding": "gzip"}
    )
    with urllib.request.urlopen(request) as response:  # noqa: S310
        assert response.headers["Content-Encoding"] == "gzip", dict(response.headers)
        body = response.read()
    with urllib.request.urlopen(gunicorn + bundle) as response:  # noqa: S310
        plain = response.read()
    assert gzip.decompress(body) == plain and len(body) < len(plain)
