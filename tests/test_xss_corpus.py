"""Text from users and from profiled machines never reaches a page as markup.

Every field a person or a host can fill (host names, notes and command fields and
their change log, run names and descriptions, role names and RANK labels, comments,
tags, keyword sets, process command lines, upload names, error messages, frame names)
carries each payload below; every page that shows them is fetched as each persona and
must contain no payload verbatim (escaped text only). The browser side (labels,
tooltips, tables drawn by JS) is in tests/browser/test_xss.py.
"""

from urllib.parse import urlencode

import pytest
from django.urls import reverse

from profiles.jobs import services as jobs
from profiles.models import Capture, Comment, Keyword, KeywordSet
from runs.models import Host, HostChange, Run, RunProcess, Tag
from tests.profiles.web.test_views import IMG, XSS, imported

pytestmark = pytest.mark.django_db

PAYLOADS = [
    XSS,
    IMG,
    '"><svg onload="window.__xss=3">',
    "</script><script>window.__xss=4</script>",
    "javascript:window.__xss=5",
    "{{ 7*7 }}{% debug %}",
    "[click](javascript:window.__xss=6)",
]


KINDS = ("category", "keyword")


def _markup(payload: str) -> str:
    """The part of a payload that would be live markup if unescaped."""
    return payload if "<" in payload else ""


@pytest.fixture
def hostile_world(owner, host_admin, monkeypatch):
    from profiles.captures import enqueue

    monkeypatch.setattr(enqueue, "capture_enqueue", lambda *, capture: None)
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    text = " ".join(PAYLOADS)
    host = Host.objects.create(
        name=f"gpu {XSS}"[:100], address="gpu.lan", notes=text, exec_prefix="docker exec -i t"
    )
    host.last_check = {
        "ok": False,
        "ssh_ok": True,
        "error": text,
        "reason": IMG,
        "processes": [{"pid": 7, "user": IMG, "command": f"python {XSS} {IMG}", "threads": 1}],
    }
    host.save()
    HostChange.objects.create(
        host=host, changed_by=host_admin, changes={"exec_prefix": [XSS, IMG], "address": [IMG, "x"]}
    )
    run = Run.objects.create(name=f"run {XSS}", description=text)
    run.tags.add(Tag.objects.create(name="tag-script-x"))
    for rank, payload in enumerate(PAYLOADS):
        RunProcess.objects.create(run=run, host=host, pid=100 + rank, role=f"RANK={payload}"[:100])
    capture = imported(owner, run=run)
    Capture.objects.filter(pk=capture.pk).update(
        original_name=f"{XSS}.txt", note=text, host=host, pid=100
    )
    stats = capture.stats
    for row in stats["categories"] + stats["keywords"]:  # call sites under each row
        row["python_callers"] = [
            {"frame": f"{p} (evil.py:{i})", "samples": 1, "percent": 1.0}
            for i, p in enumerate(PAYLOADS)
        ]
    Capture.objects.filter(pk=capture.pk).update(stats=stats)
    failed = imported(owner, raw=f"<svg>{XSS}</svg>")
    attempts = [
        {"attempt": i + 1, "cause": p, "label": p, "said": text, "at": "2026-01-02T03:04:05"}
        for i, p in enumerate(PAYLOADS)
    ]
    Capture.objects.filter(pk=failed.pk).update(error=text, attempt_log=attempts)
    for payload in PAYLOADS:
        Comment.objects.create(capture=capture, author=owner, body=payload, frame=payload)
    keyword_set = KeywordSet.objects.create(name=f"ks {XSS}", description=text)
    Keyword.objects.create(keyword_set=keyword_set, keyword=IMG, category=XSS[:50])
    group = jobs.capture_group_create(user=owner, run=run)
    _hostile_evidence(capture, group)
    return {
        "host": host.get_absolute_url(),
        "capture": capture,
        "failed": failed,
        "pages": [
            "/",
            "/hosts/",
            host.get_absolute_url(),
            reverse("runs:host_edit", args=[host.pk]),
            run.get_absolute_url(),
            reverse("runs:run_edit", args=[run.pk]),
            "/captures/",
            capture.get_absolute_url(),
            failed.get_absolute_url(),
            group.get_absolute_url(),
            "/keywords/",
            keyword_set.get_absolute_url(),
            reverse("profiles:keywordset_edit", args=[keyword_set.pk]),
            f"/compare/?a={capture.pk}&b={failed.pk}",
            *(f"/trends/?{urlencode({'name': p, 'kind': k})}" for p in PAYLOADS for k in KINDS),
            f"/api/hosts/{host.pk}/",
            f"/api/captures/{capture.pk}/",
            f"/api/groups/{group.pk}/",
            f"/admin/runs/host/{host.pk}/change/",
            f"/admin/runs/run/{run.pk}/change/",
        ],
    }


# Frame names as real stacks write them, which an HTML parser would take for tags.
MODULE = "<module> (train.py:1)"
TEMPLATE = "std::vector<int, std::allocator<int> >::push_back (libfoo.so)"
FRAMES = [f"{p} (evil.py:{i})" for i, p in enumerate(PAYLOADS)] + [MODULE, TEMPLATE]


def _hostile_finding(rule: str, ranks: list[str] | None = None) -> dict:
    finding = {
        "rule": rule, "severity": "high", "title": f"title {XSS}", "value": 30.0,
        "interval": [25.0, 35.0], "threshold": 5.0, "frames": FRAMES,
        "user_callers": [{"frame": f, "samples": 1, "percent": 1.0} for f in FRAMES],
        "advice": f"`{IMG}` (in `{MODULE}`) and `{TEMPLATE}`: {XSS}",
    }  # fmt: skip
    return {**finding, "ranks": ranks} if ranks else finding


def _hostile_evidence(capture: Capture, group) -> None:
    """What the analysis stores for the evidence pages, each text field hostile:
    states' call sites, thread names, findings; the group's stored report (rank names
    are the hostile roles), with every rank ended so the page draws it."""
    stats = capture.stats
    callers = [{"frame": f, "samples": 1, "percent": 1.0} for f in FRAMES]
    for row in stats["states"]:
        row["user_callers"] = callers
    for thread, payload in zip(stats["threads"], PAYLOADS, strict=False):
        thread["name"] = payload
    stats["findings"] = [_hostile_finding("host_sync")]
    stats["step_threads"] = {**stats.get("step_threads", {}), "names": [XSS]}
    Capture.objects.filter(pk=capture.pk).update(stats=stats)
    captures = list(group.captures.select_related("process").order_by("pk"))
    names = [c.process.role for c in captures]
    step = [
        {"state": "compute", "samples": 10, "percent": 50.0, "user_callers": callers[:1]},
        {"state": "collective", "samples": 10, "percent": 50.0, "user_callers": callers[1:2]},
    ]
    explanation = [{"frame": f, "function": f, "percent": 40.0, "others_percent": 0.0,
                    "delta": 40.0, "interval": [30.0, 50.0]} for f in FRAMES]  # fmt: skip
    report = {
        "ranks": [{"name": n, "step_threads": [XSS], "detected_by": IMG, "samples": 20,
                   "states": step} for n in names],
        "straggler": {"name": names[0], "wait_percent": 1.0, "others_wait_percent": 60.0,
                      "explanation": explanation},
        "classes": [{"ranks": names, "label": f"ranks {XSS}: `{TEMPLATE}`", "states": step,
                     "distinctive": None}],
        "findings": [_hostile_finding("straggler", names[:1])],
        "without_samples": [],
        "captures": {n: c.pk for n, c in zip(names, captures, strict=True)},
    }  # fmt: skip
    Capture.objects.filter(group=group).update(status=Capture.Status.DONE)
    type(group).objects.filter(pk=group.pk).update(job_report=report)


@pytest.mark.parametrize("persona", ["superuser", "host_admin", "owner", "teammate"])
def test_no_page_shows_a_payload_as_markup(client, hostile_world, persona, request):
    if persona == "superuser":
        user = request.getfixturevalue("django_user_model").objects.create_superuser("root")
    else:
        user = request.getfixturevalue(persona)
    client.force_login(user)
    fetched = 0
    for url in hostile_world["pages"]:
        response = client.get(url)
        if response.status_code in (302, 403) and ("/admin/" in url or "/edit/" in url):
            continue  # not this persona's page
        assert response.status_code == 200, url
        fetched += 1
        if url.startswith("/api/"):  # data, never rendered as a page by the browser
            assert response["Content-Type"].startswith("application/json"), url
            assert response["X-Content-Type-Options"] == "nosniff"
            continue
        body = response.content.decode()
        for payload in PAYLOADS:
            live = _markup(payload)
            assert not live or live not in body, (url, payload)
        assert 'href="javascript:' not in body.lower(), url
    assert fetched >= 14 + len(PAYLOADS) * len(KINDS)


def test_comments_render_markdown_without_live_markup_or_script_links(owner_client, hostile_world):
    capture = Capture.objects.exclude(comments=None).first()
    body = owner_client.get(capture.get_absolute_url()).content.decode()
    assert "<img src=x" not in body and "<svg onload" not in body
    assert 'href="javascript' not in body.lower()
    # CommonMark makes no link of a javascript: target: it stays text.
    assert "<p>[click](javascript:window.__xss=6)</p>" in body


def test_the_hostile_parts_are_on_the_pages_as_escaped_text(owner_client, hostile_world):
    """The corpus reaches what it means to test: the attempt log, call sites, trends."""
    failed = owner_client.get(hostile_world["failed"].get_absolute_url()).content.decode()
    assert 'id="attempt-log"' in failed and "&lt;svg onload=" in failed
    page = owner_client.get(hostile_world["capture"].get_absolute_url()).content.decode()
    assert "\\u003Cimg src=x" in page  # python_callers, in json_script for the JS
    trends = owner_client.get(f"/trends/?{urlencode({'name': IMG})}").content.decode()
    assert "&lt;img src=x" in trends
    # The evidence (findings, states' call sites, the job report) reaches the pages'
    # JSON escaped, frame names that look like tags included.
    group = hostile_world["capture"].run.capture_groups.get()
    for url in (hostile_world["capture"].get_absolute_url(), group.get_absolute_url()):
        body = owner_client.get(url).content.decode()
        assert "\\u003Cmodule\\u003E (train.py:1)" in body, url
        assert "<module>" not in body and "allocator<int>" not in body, url
