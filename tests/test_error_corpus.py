"""No request from outside makes flamedeck answer 500.

Every URL pattern the resolver knows (so URLs added later are covered without
editing this file) is requested with every `<int:…>` part filled with real and bad
ids (0, 2^63-1, 2^63, 10^30; "-1" and "²" never match the int converter and are sent
too), with every method, as a superuser, an operator, a viewer and anonymously.
Then bad query values for every integer parameter a page or the API reads,
malformed, oversized and deeply nested bodies, wrong content types, unusable hosts
and PIDs, and imports with non-finite numbers. Every answer must be below 500.

`-s` prints how many requests were sent (docs/figures.md quotes the figure).
"""

import io
import json
import re
from urllib.parse import urlencode

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from profiles.jobs.services import capture_group_create
from profiles.models import Capture, Comment, KeywordSet
from runs.models import Host, HostChange, Run, RunProcess
from tests.profiles.web.test_views import RAW, imported
from tests.support.walk import WalkClient

pytestmark = pytest.mark.django_db

BAD_IDS = ["0", str(2**63 - 1), str(2**63), str(10**30)]
UNMATCHED_IDS = ["-1", "²", "٣", "1e3", "%00"]
BAD_INTS = ["²", "٣", "-1", str(2**63), "1e3", "x" * 300]
QUERY_NAMES = ["pid", "host", "run", "a", "b", "ks", "capture", "max_nodes", "runs", "page"]
METHODS = ["get", "post"]  # as every persona; put, patch and delete as the superuser
OTHER_METHODS = ["put", "patch", "delete"]
PERSONAS = ["superuser", "operator", "viewer", "anonymous"]
SKIP_PREFIXES = ("static/", "media/", "__debug__/")


def _patterns(resolver=None, prefix: str = ""):
    """(route, name) of every URL pattern, routes joined through includes."""
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _patterns(entry, route)
        elif isinstance(entry, URLPattern):
            yield route, entry.name


def _admin_route(route: str) -> bool:
    return route.startswith("admin/")


PARAM = re.compile(r"<(?:(\w+):)?(\w+)>")


KIND_OF_ID = {"groups": "group", "keywords": "ks", "hosts": "host", "runs": "run"}


def _fill(route: str, real: dict[str, str], bad: str | None) -> str | None:
    """The route with parameters filled: real ids, or `bad` for every int part.

    A real `pk` is the id of the kind of row the route names (`runs/<pk>/` a run)."""
    segments = [s for s in route.split("/") if s and s != "api"]
    kind = KIND_OF_ID.get(segments[0] if segments else "")
    if kind and f"{kind}_pk" in real:
        real = {**real, "pk": real[f"{kind}_pk"]}
    if "^" in route or "(?P" in route:  # regex routes (admin): real ids only
        route = re.sub(r"\^|\$|\\Z", "", route)
        route = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: real.get(m.group(1), "1"), route)
        return "/" + route if bad is None and "(" not in route else None

    def value(match: re.Match) -> str:
        kind, name = match.group(1) or "str", match.group(2)
        if kind == "int" and bad is not None:
            return bad
        return real.get(name, real.get(kind, "1"))

    return "/" + PARAM.sub(value, route)


def real_urls(ids: dict[str, str]):
    """(url, name, route) of every app route (not static or media) filled with real ids."""
    for route, name in _patterns():
        if route.startswith(("static/", "media/")):
            continue
        url = _fill(route, ids, None)
        if url is not None:
            yield url, name, route


@pytest.fixture
def world(owner, django_user_model):
    """One of everything: hosts, a run with a process, done, failed and running
    captures, a group, a comment, a keyword set."""
    run = Run.objects.create(name="corpus")
    host = Host.objects.create(name="gpu-1", address="gpu-1.lan")
    process = RunProcess.objects.create(run=run, host=host, pid=4242, role="rank 0")
    done = imported(owner, run=run)
    failed = imported(owner, raw="<svg></svg>")
    group = capture_group_create(user=owner, run=run, duration=1, rate=10)
    Capture.objects.create(host=host, pid=4243, status=Capture.Status.RUNNING)
    comment = Comment.objects.create(capture=done, author=owner, body="hi")
    assert failed.status == Capture.Status.FAILED
    ids = {
        "pk": str(done.pk),
        "int": str(done.pk),
        "process_pk": str(process.pk),
        "what": "speedscope",
        "group_pk": str(group.pk),
        "ks_pk": str(KeywordSet.objects.get(is_default=True).pk),
        "comment_pk": str(comment.pk),
        "host_pk": str(host.pk),
        "run_pk": str(run.pk),
        "str": "x",
        "path": "x",
        "object_id": str(host.pk),
        "app_label": "runs",
        "content_type_id": "1",
        "uidb64": "x",
        "token": "x",
    }
    return {
        "ids": ids,
        "run": run,
        "host": host,
        "done": done,
        "failed": failed,
        "group": group,
        "process": process,
        "ks": KeywordSet.objects.get(is_default=True),
    }


class Corpus:
    """Sends requests as each persona and collects every answer of 500 or more."""

    def __init__(self, users: dict) -> None:
        self.clients: dict[str, WalkClient] = {}
        for persona, user in users.items():
            client = WalkClient(raise_request_exception=False)
            if user is not None:
                client.force_login(user)
            self.clients[persona] = client
        self.sent = 0
        self.errors: list[str] = []

    def send(self, persona: str, method: str, url: str, **kwargs) -> int:
        response = getattr(self.clients[persona], method)(url, **kwargs)
        self.sent += 1
        if response.status_code >= 500:
            sent = repr(kwargs.get("data"))[:120]
            self.errors.append(
                f"{persona} {method.upper()} {url[:200]} {sent} -> {response.status_code}"
            )
        return response.status_code

    def everyone(self, method: str, url: str, **kwargs) -> None:
        for persona in self.clients:
            body = kwargs.get("data")
            if hasattr(body, "seek"):
                body.seek(0)
            if isinstance(body, dict):
                for value in body.values():
                    if hasattr(value, "seek"):
                        value.seek(0)
            self.send(persona, method, url, **kwargs)


@pytest.fixture
def corpus(owner, teammate, django_user_model):
    root = django_user_model.objects.create_superuser("root", password="root-pass")
    corpus = Corpus({"superuser": root, "operator": owner, "viewer": teammate, "anonymous": None})
    yield corpus
    print(f"\nerror corpus: {corpus.sent} requests, {len(corpus.errors)} answered 5xx")
    assert not corpus.errors, "\n".join(corpus.errors[:60])
    for persona in ("superuser", "operator", "viewer"):  # the walk ran as them to the end
        assert corpus.clients[persona].get("/api/runs/").status_code == 200, persona


def _routes():
    # Not the logout URL: a POST there logged every persona out for the rest of the
    # walk, so it ran anonymously (the corpus fixture now checks they stay logged in).
    return [
        (route, name)
        for route, name in _patterns()
        if not route.startswith(SKIP_PREFIXES) and not _admin_route(route) and name != "logout"
    ]


def test_every_url_with_real_and_bad_ids_and_every_method_never_answers_500(world, corpus):
    routes = _routes()
    assert len(routes) >= 30, routes  # the resolver walk found the whole site
    for route, _name in routes:
        for bad in [None, *BAD_IDS, *UNMATCHED_IDS]:
            url = _fill(route, world["ids"], bad)
            if url is None or (bad is not None and "<int:" not in route):
                continue
            if bad in UNMATCHED_IDS:  # the resolver refuses these before any view
                assert corpus.send("superuser", "get", url) == 404, url
                continue
            for method in METHODS:
                corpus.everyone(method, url)
            for method in OTHER_METHODS:
                corpus.send("superuser", method, url)


def test_admin_pages_with_real_and_bad_ids_never_answer_500(world, corpus):
    urls = {"/admin/"}
    for model in (
        "runs/host",
        "runs/run",
        "runs/apitoken",
        "runs/hostchange",
        "profiles/capture",
        "profiles/keywordset",
        "profiles/capturegroup",
        "profiles/comment",
        "auth/user",
        "runs/tag",
    ):
        urls.add(f"/admin/{model}/")
        urls.add(f"/admin/{model}/add/")
        for pk in [world["ids"]["pk"], *BAD_IDS, "²", "-1"]:
            urls.add(f"/admin/{model}/{pk}/change/")
    for url in sorted(urls):
        corpus.everyone("get", url)
        corpus.everyone("post", url, data={"name": "x"})


def test_bad_integer_query_values_on_every_url_never_answer_500(world, corpus):
    for route, _name in _routes():
        url = _fill(route, world["ids"], None)
        if url is None:
            continue
        # Each bad value in every name at once, then each name on its own (the values
        # in turn): a page that refuses one name first cannot hide a crash on another.
        # A page whose code did not read the first query string cannot tell any other
        # from it (tests/support/walk.py): it gets that one.
        for value in BAD_INTS:
            corpus.send("superuser", "get", url, data=dict.fromkeys(QUERY_NAMES, value))
            if not corpus.clients["superuser"].query_read:
                break
        else:
            for index, name in enumerate(QUERY_NAMES):
                for at in (index, index + 3):
                    value = BAD_INTS[at % len(BAD_INTS)]
                    corpus.send("superuser", "get", url, data={name: value})
        corpus.send("viewer", "get", url, data={"a": world["done"].pk, "b": world["failed"].pk})
        corpus.send("viewer", "get", url, data={"thread": "x" * 5000, "capture": ["1", "²"]})


# The integer query parameters each page and API call reads: a bad value is refused
# with 400 naming the parameter, never ignored (every other URL gets them too, above).
READS = {
    "/": ["host", "page"],
    "/runs/{run}/": ["page"],
    # ?compare= only pre-ticks a box; a bad one is left unticked by design
    # (tests/profiles/web/test_capture_page.py), so it is not listed here.
    "/captures/": ["host", "run", "page"],
    "/captures/import/": ["run"],
    "/captures/{done}/": ["ks"],
    "/compare/": ["a", "b"],
    "/compare/diff.json?a={done}&b={done}": ["max_nodes"],
    "/trends/": ["runs"],
    "/trends.json": ["runs"],
    "/api/captures/{done}/flamegraph/": ["max_nodes"],
    "/api/captures/{done}/sandwich/?frame=f": ["max_nodes"],
    "/api/groups/{group}/flamegraph/": ["capture"],
    "/api/compare/?a={done}&b={done}": ["a", "b"],
}


def test_bad_integer_query_values_are_refused_with_400_where_they_are_read(world, corpus):
    ids = {"run": world["run"].pk, "done": world["done"].pk, "group": world["group"].pk}
    for template, names in READS.items():
        path, _, query = template.format(**ids).partition("?")
        base = dict(pair.split("=") for pair in query.split("&") if pair)
        assert corpus.send("operator", "get", path, data=base) == 200, template
        for name in names:
            for value in BAD_INTS:
                client = corpus.clients["operator"]  # the import page is for operators
                response = client.get(path, {**base, name: value})
                corpus.sent += 1
                assert response.status_code == 400, (template, name, value, response.status_code)
                assert name.encode() in response.content, (template, name, response.content[:200])


def _json(corpus: Corpus, url: str, body, method: str = "post") -> None:
    payload = body if isinstance(body, str | bytes) else json.dumps(body)
    corpus.everyone(method, url, data=payload, content_type="application/json")


def test_bad_capture_requests_are_refused_with_4xx(world, corpus):
    host, run, process = world["host"], world["run"], world["process"]
    before = Capture.objects.count()
    for pid in [0, -1, 2**31, 2**63, 4194305, "²", "٣", "1e3", True, None, [], {}, 1.5, "x"]:
        _json(corpus, "/api/captures/", {"host": host.pk, "pid": pid})
    for ref in ["²", str(2**63), "٣", "", " ", "x" * 500, 0, -1, 2**63, [1]]:
        _json(corpus, "/api/captures/", {"host": ref, "pid": 5})
        _json(corpus, "/api/captures/", {"host": host.pk, "pid": 5, "run": ref})
        _json(corpus, "/api/captures/", {"process": ref})
        _json(corpus, f"/api/runs/{run.pk}/capture/", {"duration": ref, "rate": ref})
    for field in ["duration", "rate", "native", "kind"]:
        for value in ["²", 2**63, -1, 10**30, "yes please", None, [], {}]:
            _json(corpus, "/api/captures/", {"host": host.pk, "pid": 5, field: value})
    _json(corpus, "/api/captures/", {"process": process.pk, "duration": 2**63})
    made = [
        (c.pid, c.duration, c.native, c.kind, c.run_id, c.process_id, c.group_id)
        for c in Capture.objects.all()
    ]
    assert Capture.objects.count() == before, made


def _row(host: Host) -> dict:
    return {f: getattr(host, f) for f in Host.EDITABLE_FIELDS}


def test_unusable_hosts_are_refused_with_4xx(world, corpus):
    host = world["host"]
    before = _row(Host.objects.get(pk=host.pk))
    bad_fields = [
        ("address", "127.0.0.1;touch${IFS}x"),
        ("address", "-oProxyCommand=x"),
        ("username", "a$(b)"),
        ("exec_prefix", "'unbalanced"),
        ("exec_prefix", "a\x00b"),
        ("port", 2**63),
        ("port", "²"),
        ("port", "٣"),
        ("port", -1),
        ("py_spy", ""),
        ("py_spy", "py-\nspy"),
        ("transport", "telnet"),
        ("name", "x" * 500),
    ]
    for field, value in bad_fields:
        body = {"name": "new", "transport": "ssh", "address": "ok.lan", field: value}
        _json(corpus, "/api/hosts/", body)
        _json(corpus, f"/api/hosts/{host.pk}/", {field: value}, method="patch")
        status = corpus.send(
            "superuser", "patch", f"/api/hosts/{host.pk}/",
            data=json.dumps({field: value}), content_type="application/json",
        )  # fmt: skip
        assert status == 400, (field, value, status)
        assert _row(Host.objects.get(pk=host.pk)) == before, (field, value)
        for persona in ("superuser", "operator"):
            corpus.send(persona, "post", "/hosts/new/", data=body)
            corpus.send(persona, "post", f"/hosts/{host.pk}/edit/", data=body)
    assert not Host.objects.filter(name="new").exists()
    assert _row(Host.objects.get(pk=host.pk)) == before
    assert not HostChange.objects.filter(host=host).exclude(via="shell").exists()


def test_malformed_oversized_and_deeply_nested_bodies_are_refused_with_4xx(world, corpus):
    nested = "[" * 100_000 + "]" * 100_000
    deep_object = '{"a":' * 50_000 + "1" + "}" * 50_000
    bodies = [nested, deep_object, "{", "null", "[]", '"x"', "1e999", "NaN", "\xff\xfe", ""]
    json_urls = [
        "/api/hosts/",
        "/api/captures/",
        f"/api/runs/{world['run'].pk}/capture/",
        "/api/runs/",
        f"/api/captures/{world['done'].pk}/cancel/",
        f"/api/hosts/{world['host'].pk}/",
    ]
    for url in json_urls:
        for body in bodies:
            method = "patch" if url.startswith("/api/hosts/") and url != "/api/hosts/" else "post"
            _json(corpus, url, body, method=method)
        for content_type in ["text/plain", "application/xml", "multipart/form-data", "x/y"]:
            corpus.everyone("post", url, data="<a>1</a>", content_type=content_type)
        big = json.dumps({"name": "x" * (11 * 1024 * 1024)})
        corpus.send("superuser", "post", url, data=big, content_type="application/json")


def test_bad_imports_are_refused_or_fail_cleanly(world, corpus, settings, inline_analysis):
    speedscope_inf = json.dumps(
        {
            "$schema": "https://www.speedscope.app/file-format-schema.json",
            "shared": {"frames": [{"name": "f"}]},
            "profiles": [
                {
                    "type": "sampled",
                    "name": "t",
                    "unit": "none",
                    "startValue": 0,
                    "endValue": 1,
                    "samples": [[0]],
                    "weights": [1],
                }
            ],
        }
    ).replace('"weights": [1]', '"weights": [Infinity]')
    files = [
        ("inf.json", speedscope_inf.encode()),
        ("nan.json", speedscope_inf.replace("Infinity", "NaN").encode()),
        ("deep.json", b"[" * 100_000 + b"]" * 100_000),
        ("bin.raw", bytes(range(256)) * 10),
        ("empty.txt", b""),
        ("big-count.txt", b"a;b 99999999999999999999999999\n"),
        ("gz.txt.gz", b"\x1f\x8b\x08\x00garbage"),
        ("ok.txt", RAW.encode()),
    ]
    for name, content in files:
        for url in ("/api/captures/import/", "/captures/import/"):
            upload = SimpleUploadedFile(name, content)
            for persona in PERSONAS:
                upload.seek(0)
                corpus.send(persona, "post", url, data={"file": upload})
        for run in ["²", str(2**63), "-1", "x"]:
            upload = SimpleUploadedFile(name, content)
            corpus.send(
                "operator", "post", "/api/captures/import/", data={"file": upload, "run": run}
            )
    corpus.send("operator", "post", "/api/captures/import/", data={"log": io.BytesIO(b"x")})
    assert not Capture.objects.filter(status=Capture.Status.PARSING).exists()
    inf = Capture.objects.filter(original_name="inf.json").first()
    assert inf is not None and inf.status == Capture.Status.FAILED, inf and inf.error
    assert (
        "weight of inf" in inf.error
        and "must be finite" in inf.error
        and "raw file and log are kept" in inf.error
    )


def test_downloads_of_captures_that_could_not_be_parsed_are_404(world, corpus):
    failed = world["failed"]
    for what in ["folded", "speedscope", "log", "x"]:
        for persona in ("superuser", "viewer"):
            status = corpus.send(persona, "get", f"/captures/{failed.pk}/download/{what}/")
            assert status in (200, 404)
    status = corpus.send("viewer", "get", f"/captures/{failed.pk}/download/speedscope/")
    assert status == 404


def test_pids_out_of_range_are_refused_on_every_path(world, corpus):
    run, host = world["run"], world["host"]
    for pid in ["0", "-1", "4194305", str(2**31), str(2**63), "²", "٣"]:
        for persona in ("superuser", "operator"):
            corpus.send(
                persona, "post", f"/runs/{run.pk}/processes/", data={"host": host.pk, "pid": pid}
            )
    assert set(RunProcess.objects.values_list("pid", flat=True)) == {4242}


def test_bad_integers_in_page_forms_are_form_errors(world, corpus):
    run = world["run"]
    for value in ["٣", "²", str(2**63), "-1", "1e3"]:
        form = {"name": "r", "status": "running", "schedule_every_min": value}
        for url in ("/runs/new/", f"/runs/{run.pk}/edit/"):
            assert corpus.send("operator", "post", url, data=form) == 200, (url, value)
        body = {"keyword_set": value}
        corpus.send("operator", "post", f"/captures/{world['done'].pk}/reanalyze/", data=body)
    assert not Run.objects.filter(name="r").exists()
    assert Run.objects.get(pk=run.pk).schedule_every_min == 0


def _unusable_host(kind: str, settings) -> Host:
    """(a) a row saved before validation existed, its address written with .update();
    (b) a local host left over after FLAMEDECK_LOCAL_HOST was turned off."""
    if kind == "legacy address":
        host = Host.objects.create(name="legacy", address="legacy.lan")
        Host.objects.filter(pk=host.pk).update(address="127.0.0.1;touch${IFS}x")
    else:
        host = Host.objects.get(name="local")
        settings.FLAMEDECK_LOCAL_HOST = False
    return Host.objects.get(pk=host.pk)


@pytest.mark.parametrize("kind", ["legacy address", "leftover local host"])
def test_every_url_with_an_unusable_host_answers_4xx_or_a_warning(
    world, corpus, settings, owner, kind
):
    host = _unusable_host(kind, settings)
    run = Run.objects.create(name=f"on {kind}")
    process = RunProcess.objects.create(run=run, host=host, pid=4242, role="rank 0")
    Capture.objects.create(host=host, pid=4242, run=run, status=Capture.Status.FAILED)
    ids = {**world["ids"], "host_pk": str(host.pk), "run_pk": str(run.pk)}
    ids["process_pk"] = str(process.pk)
    for route, _name in _routes():
        url = _fill(route, ids, None)
        if url is None:
            continue
        for method in METHODS:
            corpus.everyone(method, url)
        for method in OTHER_METHODS:
            corpus.send("superuser", method, url)
    named = "address" if kind == "legacy address" else "FLAMEDECK_LOCAL_HOST"
    RunProcess.objects.get_or_create(run=run, host=host, pid=4242)  # the walk detached it
    client = Client()
    client.force_login(owner)
    check = client.post(f"/api/runs/{run.pk}/processes/check/")
    assert check.status_code == 200, check.content
    (error,) = check.json()["errors"]
    assert error["host"] == host.name and "host_config" in error["error"], error
    assert named in error["error"] and check.json()["processes"][0]["alive"] is None
    attach = {"host": host.pk, "pid": 4243, "role": "x"}
    api = client.post(f"/api/runs/{run.pk}/processes/", attach, content_type="application/json")
    assert api.status_code == 400 and "host_config" in str(api.json()), api.content
    assert named in str(api.json())
    for url, body in [
        (f"/runs/{run.pk}/processes/", attach),
        (f"/hosts/{host.pk}/attach/", {"pids": "4243", "run": run.pk}),
    ]:
        page = client.post(url, body, follow=True)
        shown = " ".join(str(m) for m in page.context["messages"])
        assert page.status_code == 200 and "host_config" in shown and named in shown, shown
    assert not RunProcess.objects.filter(pid=4243).exists()


def _arabic_indic(number: int) -> str:
    """The same number in Arabic-Indic digits ("٣" for 3): `int()` takes them."""
    return "".join(chr(0x660 + int(d)) for d in str(number))


def test_page_numbers_form_ids_and_command_options_go_through_the_one_parser(world, owner):
    from django.core.management import CommandError, call_command

    client = Client()
    client.force_login(owner)
    run, host = world["run"], world["host"]
    Run.objects.bulk_create(Run(name=f"r{i}") for i in range(30))  # two pages of runs
    for url in ("/", f"/runs/{run.pk}/", "/captures/"):
        for page in ["٢", "²", "0", "-1", "x", str(2**63)]:
            response = client.get(url, {"page": page})
            assert response.status_code == 400, (url, page, response.status_code)
            assert b"page" in response.content
    assert client.get("/", {"page": "2"}).context["page"].number == 2
    assert client.get("/", {"page": "999"}).context["page"].number == 2  # past the end: last
    attach = {"pids": "4300", "run": _arabic_indic(run.pk)}
    response = client.post(f"/hosts/{host.pk}/attach/", attach, follow=True)
    shown = " ".join(str(m) for m in response.context["messages"])
    assert "Could not attach" in shown and "run" in shown, shown
    assert not RunProcess.objects.filter(pid=4300).exists()
    for ref in [_arabic_indic(host.pk), "²", "-1", str(2**63), f"{host.pk}.0"]:
        with pytest.raises(CommandError, match="no host"):
            call_command("capture", "--host", ref, "--pid", "5")


NON_OBJECT_BODIES = {
    "[]": "not an array",
    '"s"': "not a string",
    "null": "not null",
    "5": "not a number",
    "true": "not a boolean",
    json.dumps(list(range(300_000))): "not an array",  # 2 MB
    "NaN": "not valid JSON",
    '{"a": Infinity}': "not valid JSON",
    "{": "not valid JSON",
    "\xff\xfe": "not valid JSON",
    "[" * 100_000: "nests too deeply",
}
WRITE_METHODS = ["post", "put", "patch", "delete"]


def test_every_write_endpoint_refuses_a_json_body_that_is_not_an_object_with_400(world, corpus):
    urls = [url for route, _ in _routes() if (url := _fill(route, world["ids"], None))]
    assert any(url.startswith("/api/") for url in urls) and len(urls) >= 30
    for url in urls:
        for body, named in NON_OBJECT_BODIES.items():
            # The big ones by POST only: each method takes the same path through the check.
            for method in WRITE_METHODS if len(body) < 1000 else ["post"]:
                persona = "superuser" if method != "post" else "viewer"
                response = getattr(corpus.clients[persona], method)(
                    url, data=body, content_type="application/json"
                )
                corpus.sent += 1
                assert response.status_code == 400, (method, url, body[:20], response.status_code)
                assert named in response.content.decode(), (url, body[:20], response.content)


def test_forms_over_djangos_field_and_size_limits_answer_400_or_413_naming_the_limit(
    world, corpus, settings
):
    fields = {f"f{i}": "x" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)}
    form = "application/x-www-form-urlencoded"
    too_many = urlencode(fields)
    too_big = "a=" + "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    urls = [url for route, _ in _routes() if (url := _fill(route, world["ids"], None))]
    # Multipart too where files are sent: Django's multipart parser takes ~0.1 s over
    # 1,001 parts before it refuses them, and on any other page it ends in the same
    # refusal as the form encoding (TooManyFieldsSent from `request.POST`).
    multipart = ["/accounts/login/", "/captures/import/", "/api/captures/import/"]
    for url in [*urls, "/accounts/login/"]:
        for persona in ("viewer", "anonymous"):
            client = corpus.clients[persona]
            bodies = [{"data": too_many, "content_type": form}]
            bodies += [{"data": fields}] if url in multipart else []
            for body in bodies:
                response = client.post(url, **body)
                assert response.status_code == 400, (url, response.status_code)
                assert b"DATA_UPLOAD_MAX_NUMBER_FIELDS" in response.content, url
            response = client.post(url, data=too_big, content_type=form)
            assert response.status_code == 413, (url, response.status_code)
            assert b"DATA_UPLOAD_MAX_MEMORY_SIZE" in response.content, url
            corpus.sent += len(bodies) + 1


WATCH_VALUES = [2**63, 10**20, 2**63 - 1, -1, 0, "²", "٣", "1e3", 1.5, True, None, [], {}]
WATCH_VALUES += ["x" * 300]
# Values of WATCH_VALUES that are fine for a field: no targets, a snooze ended or of 1.5 h.
VALID_FOR = {"notify": [[]], "snooze_hours": [0, 1.5], "min_effect_points": [1.5]}


def _watch_row(watch) -> tuple:
    watch.refresh_from_db()
    return (watch.baseline_id, watch.min_effect_points, watch.min_samples, watch.snoozed_until)


def test_bad_watch_requests_are_refused_with_400_naming_the_field_and_save_nothing(world, corpus):
    from profiles.watches.models import Alert, NotifyTarget, Watch
    from tests import factories

    baseline = factories.capture(world["process"], factories.state_stats(5000))
    watch = factories.watch(baseline)
    alert = Alert.objects.create(watch=watch, key="state:idle", label="idle", direction=1)
    elsewhere = factories.capture(
        factories.process(factories.run("elsewhere"), "rank 0", pid=77),
        factories.state_stats(5000),
    )
    foreign = Alert.objects.create(
        watch=factories.watch(elsewhere), key="state:idle", label="idle", direction=1
    )
    before, watches = _watch_row(watch), Watch.objects.count()
    url = f"/api/watches/{watch.pk}/"
    patches = [("acknowledge", lambda v: {"acknowledge": [alert.pk, v]})]
    patches += [(f, lambda v, f=f: {"min_effect_points": 9, f: v}) for f in (
        "baseline", "min_effect_points", "min_samples", "snooze_hours", "notify")]  # fmt: skip
    creates = [(f, lambda v, f=f: {"run": world["run"].pk, "role": "rank 9",
                                   "baseline": baseline.pk, f: v}) for f in (
        "run", "process", "baseline", "min_samples", "notify")]  # fmt: skip
    foreign_ids = [
        ("acknowledge", {"acknowledge": [foreign.pk], "min_effect_points": 9}),
        ("baseline", {"baseline": elsewhere.pk, "min_effect_points": 9}),
    ]
    for value in WATCH_VALUES:
        for field, make in patches:
            if value in VALID_FOR.get(field, []) and type(value) is not bool:
                continue  # a valid change, not a bad value
            _json(corpus, url, make(value), method="patch")
            status = corpus.send("superuser", "patch", url, data=json.dumps(make(value)),
                                 content_type="application/json")  # fmt: skip
            # A well-formed id of no capture, or of no alert of this watch: 404 (issue 49).
            named = value == 2**63 - 1 and field in ("baseline", "acknowledge")
            assert status == (404 if named else 400), (field, value, status)
        for _field, make in creates:
            _json(corpus, "/api/watches/", make(value))
        pages = [(f"/watches/{watch.pk}/acknowledge/", {"alert": value}),
                 (f"/watches/{watch.pk}/edit/", {"baseline": value, "min_effect_points": 9,
                                                 "min_samples": 1000}),
                 ("/watches/new/", {"baseline": value})]  # fmt: skip
        for page, form in pages:
            if not isinstance(value, list | dict):
                form = {k: "" if v is None else v for k, v in form.items()}
                corpus.everyone("post", page, data=form)
                assert corpus.send("superuser", "post", page, data=form) == 400, (page, value)
    # Another watch's alert is not this watch's (404); another run's capture is not a
    # baseline this watch's state takes (409).
    for (field, body), status in zip(foreign_ids, (404, 409), strict=True):
        response = corpus.clients["operator"].patch(url, json.dumps(body), "application/json")
        assert response.status_code == status, response.content
        assert response.json()["detail"].startswith(f"{field}: "), response.content
    assert _watch_row(watch) == before and Watch.objects.count() == watches
    assert set(Alert.objects.values_list("status", flat=True)) == {"open"}
    assert not NotifyTarget.objects.exists()


def test_the_servers_own_processes_are_refused_to_all_but_host_admins(world, corpus):
    import os

    from profiles.models import CaptureGroup

    run = Run.objects.create(name="holds the server")
    RunProcess.objects.create(run=run, host=Host.objects.get(name="local"), pid=os.getpid())
    for persona in ("operator", "viewer", "anonymous"):
        for url, body in (
            ("/api/captures/", {"host": "local", "pid": os.getpid(), "rate": 2000}),
            (f"/api/runs/{run.pk}/capture/", {"rate": 2000}),
        ):
            status = corpus.send(persona, "post", url, data=json.dumps(body),
                                 content_type="application/json")  # fmt: skip
            assert status in (401, 403), (persona, url, status)
    assert not Capture.objects.filter(pid=os.getpid()).exists()
    assert not CaptureGroup.objects.filter(run=run).exists()
