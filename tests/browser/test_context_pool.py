"""The browser contexts `open_tab` hands from test to test carry nothing over: a
tab taken after another gets no cookie, storage or page of the one before."""

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_context_handed_on_keeps_no_cookie_storage_or_page_of_the_last_test(
    contexts, live_server, client, owner, teammate
):
    client.force_login(owner)
    first = contexts.take(client, live_server.url, 800, 600)
    first.goto(live_server.url + "/")
    first.evaluate("localStorage.setItem('left', '1'); sessionStorage.setItem('left', '1')")
    first.context.add_cookies([{"name": "left", "value": "1", "url": live_server.url}])
    first.context.new_page()  # a second tab the test opened
    context = first.context
    contexts.give_back(context, live_server.url)

    client.force_login(teammate)
    page = contexts.take(client, live_server.url, 1024, 700)
    assert page.context is context  # the same context, reused
    assert len(context.pages) == 2  # its blank page and this one
    assert [c["name"] for c in context.cookies()] == ["sessionid"]
    page.goto(live_server.url + "/")
    assert page.evaluate("[localStorage.length, sessionStorage.length]") == [0, 0]
    assert page.viewport_size == {"width": 1024, "height": 700}
    assert page.locator(".username").inner_text().strip() == "teammate"
    contexts.give_back(context, live_server.url)
