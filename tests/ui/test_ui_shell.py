"""The page shell: HTML 404s for unknown pages, keyboard access, contrast and phone width."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


def test_unknown_page_is_an_html_404_and_the_api_stays_json(client) -> None:
    r = client.get("/ui/no/such/page")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    assert "Page not found" in r.text and "/ui/no/such/page" in r.text
    api = client.get("/v1/no-such-route")
    assert api.status_code == 404 and api.headers["content-type"] == "application/problem+json"
    css = client.get("/ui/static/evalplan.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


def test_error_page_in_the_browser_desktop(live_server, tab) -> None:
    page = tab.page
    tab.expect_console_error("status of 404 (Not Found) (" + live_server.url + "/ui/no-such-page)")
    response = page.goto(f"{live_server.url}/ui/no-such-page")
    assert response is not None and response.status == 404
    assert page.get_by_role("heading", level=1).inner_text() == "Page not found"
    # Keyboard: the first Tab lands on the skip link, which becomes visible and moves focus to main.
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.textContent.trim()")
    assert focused == "Skip to content"
    assert page.evaluate("document.activeElement.getBoundingClientRect().top") >= 0
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"
    page.keyboard.press("Enter")
    assert page.evaluate("location.hash") == "#main"
    tab.check_accessibility()
    tab.screenshot_is_drawn(min_ink=0.03)


def test_error_page_at_phone_width(live_server, phone_tab) -> None:
    page = phone_tab.page
    phone_tab.expect_console_error("status of 404 (Not Found) (" + live_server.url + "/ui/no-such-page)")
    page.goto(f"{live_server.url}/ui/no-such-page")
    assert page.get_by_role("link", name="Go to the home page").is_visible()
    assert phone_tab.has_no_horizontal_scroll()
    phone_tab.check_accessibility()
