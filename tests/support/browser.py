"""Headless Chromium as the tests and the page benchmark drive it: Debian's
chromium-headless-shell through Playwright (never `playwright install`).

The headless shell is Chromium's engine without the browser's UI layer, built from the
same source as Debian's /usr/bin/chromium (same version), and the binary Playwright
itself launches for headless runs. Over the suite's browser tests it spent 98 CPU-s of
the machine against 157 for /usr/bin/chromium in headless mode (the browser process
51 → 18, the renderers 77 → 64, the GPU process 23 → 15; `bench/suite/suite_cpu.py --kinds`,
docs/figures.md), and the suite is bound by the two cores' CPU."""

CHROMIUM = "/usr/bin/chromium-headless-shell"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def session_cookie(client, base_url: str) -> dict:
    """The session cookie of a Django test `client` that has already logged in."""
    return {"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base_url}


def logged_in_context(browser, client, base_url: str, width: int = 1440, height: int = 1000):
    """A browser context carrying the session cookie of a Django test `client`
    that has already logged in."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.add_cookies([session_cookie(client, base_url)])
    return context


class ContextPool:
    """Browser contexts handed from test to test, each with a blank page kept open.

    A context whose last page closed starts its next page from nothing: Chromium
    compiles the page's scripts and styles again. Six tests of three pages each took
    11.2 CPU-s of the machine with a new context per test and 5.6 CPU-s taking one
    from here (tests/browser/conftest.py's `open_tab`). Between tests a context gets
    back none of the last test's state: its pages are closed (the kept one is blank),
    its cookies, permissions and the origin's storage are cleared. The HTTP cache is
    kept, as a browser keeps it between visits."""

    def __init__(self, browser) -> None:
        self.browser = browser
        self._free: list = []
        self._blank: dict = {}  # context → its kept blank page

    def take(self, client, base_url: str, width: int, height: int):
        """A new page of a free context, logged in as the test `client` is."""
        if self._free:
            context = self._free.pop()
        else:
            context = self.browser.new_context()
            self._blank[context] = context.new_page()
        context.add_cookies([session_cookie(client, base_url)])
        page = context.new_page()
        page.set_viewport_size({"width": width, "height": height})
        return page

    def give_back(self, context, base_url: str) -> None:
        blank = self._blank.pop(context)
        try:
            for page in context.pages:
                if page is not blank:
                    page.close()
            context.clear_cookies()
            context.clear_permissions()
            cdp = context.new_cdp_session(blank)
            cdp.send("Storage.clearDataForOrigin", {"origin": base_url, "storageTypes": "all"})
            cdp.detach()
        except Exception:  # a context the test broke is not handed on
            context.close()
            return
        self._blank[context] = blank
        self._free.append(context)

    def close(self) -> None:
        for context in self._free:
            context.close()
        self._free.clear()
