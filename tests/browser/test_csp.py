"""The Content-Security-Policy (script-src/style-src 'self', no inline code) holds on
every page: Chromium reports no `securitypolicyviolation` and logs no CSP message.

Pages are found by following every link from the navigation (so pages added later
are visited when linked), plus a list of pages reached by forms or query strings.
"""

import re
from urllib.parse import urljoin, urlsplit

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from profiles.models import Capture, KeywordSet
from runs.models import Host, HostChange
from tests import factories
from tests.browser.test_screenshots import data  # noqa: F401 - realistic pages
from tests.support.browser import logged_in_context

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LISTEN = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  const where = `${e.sourceFile}:${e.lineNumber}`;
  window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI} at ${where}`);
});
"""
SKIP = ("/api/", "/download/", "/static/", "/media/", ".json", "/accounts/logout/")
MAX_PAGES = 60
PER_PATTERN = 2  # /captures/1/ and /captures/2/ are the same page: visit two of a kind


def _pattern(path: str) -> str:
    """/captures/12/?page=2&tag=x → /captures/N/?page&tag (one kind of page)."""
    route, _, query = path.partition("?")
    keys = sorted(part.split("=")[0] for part in query.split("&") if part)
    return re.sub(r"\d+", "N", route) + "?" + "&".join(keys)


def _collect(page) -> list[str]:
    return page.evaluate("window.__csp || []")


def _links(page, base: str) -> set[str]:
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
    found = set()
    for href in hrefs:
        url = urlsplit(urljoin(base + "/", href))
        if url.netloc != urlsplit(base).netloc or any(s in url.path for s in SKIP):
            continue
        found.add(url.path + (f"?{url.query}" if url.query else ""))
    return found


def _visit(page, base: str, path: str, console: list[str]) -> list[str]:
    page.goto(base + path)
    page.wait_for_load_state("networkidle")
    if page.locator("#flamegraph").count():
        # Captures without a stored tree (bulk-made rows) never draw one.
        try:
            page.wait_for_selector("#flamegraph[data-ready='1']", timeout=4_000)
        except PlaywrightTimeout:
            pass
        page.wait_for_timeout(400)  # labels appear after d3-flame-graph's transition
    return [f"{path}: {v}" for v in _collect(page)] + [f"{path}: {c}" for c in console]


def _crawl(context, base: str, start: list[str]) -> tuple[list[str], set[str]]:
    page = context.new_page()
    console: list[str] = []
    page.on(
        "console",
        lambda msg: "Content Security Policy" in msg.text and console.append(msg.text),
    )
    seen: set[str] = set()
    kinds: dict[str, int] = {}
    queue = list(start)
    violations: list[str] = []
    while queue and len(seen) < MAX_PAGES:
        path = queue.pop(0)
        kind = _pattern(path)
        if path in seen or (path not in start and kinds.get(kind, 0) >= PER_PATTERN):
            continue
        seen.add(path)
        kinds[kind] = kinds.get(kind, 0) + 1
        console.clear()
        violations += _visit(page, base, path, console)
        # Admin pages are many; the explicit list covers the ones flamedeck changes.
        if not path.startswith("/admin/"):
            queue += sorted(_links(page, base) - seen)
    return violations, seen


def test_no_page_violates_the_content_security_policy(
    chromium,
    live_server,
    client,
    django_user_model,
    data,  # noqa: F811
):
    root = django_user_model.objects.create_superuser("root", password="root-pass")
    capture, host = data["capture"], data["host"]
    HostChange.objects.create(
        host=host, changed_by=root, changes={"exec_prefix": ["", "pct exec 200 --"]}
    )
    other = Capture.objects.filter(status=Capture.Status.DONE).exclude(pk=capture.pk).first()
    group = capture.run.capture_groups.first()
    explicit = [
        "/",
        capture.get_absolute_url(),
        capture.get_absolute_url() + "?view=icicle&search=cuStream",
        data["dump"].get_absolute_url(),
        f"/compare/?a={other.pk}&b={capture.pk}",
        "/trends/",
        "/captures/import/",
        "/runs/new/",
        f"/runs/{capture.run_id}/edit/",
        "/hosts/new/",
        f"/hosts/{host.pk}/edit/",
        f"/hosts/{Host.objects.get(name='local').pk}/",
        "/keywords/new/",
        f"/keywords/{KeywordSet.objects.get(is_default=True).pk}/edit/",
        "/admin/",
        f"/admin/runs/host/{host.pk}/change/",
        "/admin/runs/apitoken/",
    ]
    if group is not None:
        explicit.append(group.get_absolute_url())
    # Real recordings: findings, thread states, the stored job report, states compared.
    real = data["real"]
    straggler_rank = data["job"].captures.order_by("pid").last()
    explicit += [
        real.get_absolute_url(),
        data["job"].get_absolute_url(),
        f"/compare/?a={straggler_rank.pk}&b={real.pk}",
        f"{straggler_rank.get_absolute_url()}?frame=metric_per_sample%20(train.py%3A88)",
    ]
    # A capture with time, a window of it open: strips, brush, the window's flamegraph.
    explicit.append(factories.timed_capture().get_absolute_url() + "?from=5.7&to=6.3")
    client.force_login(root)
    context = logged_in_context(chromium, client, live_server.url)
    context.add_init_script(LISTEN)
    violations, seen = _crawl(context, live_server.url, explicit)
    context.close()
    assert len(seen) >= 20, seen
    assert not violations, violations

    anonymous = chromium.new_context()
    anonymous.add_init_script(LISTEN)
    page = anonymous.new_page()
    login_violations = _visit(page, live_server.url, "/accounts/login/", [])
    for _ in range(10):  # until the lockout page shows
        if "Too many failed logins" in page.content():
            break
        page.fill("#id_username", "root")
        page.fill("#id_password", "wrong")
        page.click("button[type=submit]")
    assert "Too many failed logins" in page.content()
    login_violations += [f"lockout: {v}" for v in _collect(page)]
    anonymous.close()
    assert not login_violations, login_violations
    print(f"\nCSP: {len(seen) + 2} pages visited in Chromium, no violation")


def _click_if_there(page, selector: str) -> bool:
    """Click the first match when this persona's page has one (a viewer has no
    capture buttons or dialogs); say whether it did."""
    target = page.locator(selector).first
    if not page.locator(selector).count():
        return False
    target.click()
    page.wait_for_timeout(300)
    return True


@pytest.mark.parametrize("persona", ["owner", "teammate"])
def test_panels_dialogs_and_sandwiches_violate_no_policy_for_any_persona(
    open_tab,
    persona,
    request,
    data,  # noqa: F811
):
    """The crawl above only loads pages; what opens on a click (the sandwich, call
    sites, the advanced panel, both dialogs, the attempt log, a group's sandwich link)
    injects nodes and styles too. Opened as an operator and as a viewer."""
    capture, host, run = data["capture"], data["host"], data["run"]
    failed = Capture.objects.create(
        host=host,
        pid=1,
        status=Capture.Status.FAILED,
        error="no such pid",
        attempt_log=[
            {
                "attempt": 1,
                "cause": "unreachable",
                "label": "timeout",
                "said": "x",
                "at": "2026-01-02T03:04:05",
            }
        ],
    )
    launcher = {"pid": 7000, "ppid": 1, "user": "root", "threads": 2, "command": "torchrun"}
    ranks = [
        {**launcher, "pid": 7001 + r, "ppid": 7000, "rank": r, "command": "python train.py"}
        for r in range(2)
    ]
    host.last_check = {**host.last_check, "processes": [launcher, *ranks]}
    host.save(update_fields=["last_check"])
    done = Capture.objects.filter(status=Capture.Status.DONE, kind=Capture.Kind.RECORD)
    other = done.exclude(pk=capture.pk).first()
    tab = open_tab(request.getfixturevalue(persona))
    page = tab.page
    page.add_init_script(LISTEN)
    console: list[str] = []
    page.on("console", lambda m: "Content Security Policy" in m.text and console.append(m.text))
    opened: list[str] = []
    violations: list[str] = []

    def step(path: str, *selectors: str, wait: str = "") -> None:
        page.goto(tab.base_url + path)
        page.wait_for_load_state("networkidle")
        if wait:
            page.wait_for_selector(wait)
        opened.extend(f"{path} {s}" for s in selectors if _click_if_there(page, s))
        page.wait_for_load_state("networkidle")  # a click may have opened another page
        violations.extend(f"{path}: {v}" for v in _collect(page) + console)
        console.clear()

    step(
        capture.get_absolute_url(),
        "#top-self .sandwich-link",
        "#sandwich-callers g.frame",
        "#sandwich-recentre:visible",
        ".caller-link",
        '#flamegraph g[name^="main (train.py"]',
        "#fg-focus-sandwich:visible",
        wait="#flamegraph[data-ready='1']",
    )
    step(
        data["real"].get_absolute_url(),
        "#findings .frame-link",
        "#findings .sandwich-link",
        "#states .caller-link",
        "#threads .thread-link",
        wait="#flamegraph[data-ready='1']",
    )
    step(
        data["job"].get_absolute_url(),
        "#job-report .sandwich-link",
        wait="#job-report[data-ready='1']",
    )
    step(failed.get_absolute_url(), "#attempt-log summary")
    step(data["dump"].get_absolute_url(), "details.dumpthread:not([open]) summary")
    step(run.get_absolute_url(), "#processes .capture-more", "#capture-all")
    page.keyboard.press("Escape")
    step(host.get_absolute_url(), "button.attach-tree")
    step(f"/compare/?a={other.pk}&b={capture.pk}", "#top-self a.sandwich-after")
    group = run.capture_groups.first()
    if group is not None:
        step(
            group.get_absolute_url(),
            "#group-flamegraph g.frame >> nth=3",
            "#group-sandwich:visible",
        )
    wanted = [".sandwich-link", ".caller-link", "#attempt-log", "a.sandwich-after", "#findings"]
    wanted += ["#job-report .sandwich-link"]
    assert all(any(w in entry for entry in opened) for w in wanted), opened
    if persona == "owner":  # a viewer has no capture buttons or dialogs
        assert all(any(w in e for e in opened) for w in ("#capture-all", ".attach-tree")), opened
    assert not violations, (opened, violations)
