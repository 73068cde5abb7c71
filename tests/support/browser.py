"""Headless Chromium as the tests and the page benchmark drive it: Debian's
/usr/bin/chromium through Playwright (never `playwright install`)."""

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def logged_in_context(browser, client, base_url: str, width: int = 1440, height: int = 1000):
    """A browser context carrying the session cookie of a Django test `client`
    that has already logged in."""
    context = browser.new_context(viewport={"width": width, "height": height})
    cookie = {"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base_url}
    context.add_cookies([cookie])
    return context
