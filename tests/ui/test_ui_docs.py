"""/docs (Swagger UI) and /redoc (ReDoc) render in a real browser with no network: their assets
come from the installed package, never from a CDN (the tab fixture blocks and fails on any
request that leaves the loopback server)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


def test_docs_pages_are_self_hosted(client) -> None:
    for path in ("/docs", "/redoc"):
        html = client.get(path).text
        assert "cdn.jsdelivr.net" not in html and "fonts.googleapis.com" not in html, path
        assert "/ui/vendor/api-docs/" in html, path
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"):
        r = client.get(f"/ui/vendor/api-docs/{asset}")
        assert r.status_code == 200 and len(r.content) > 100_000, asset


@pytest.mark.slow
def test_swagger_ui_renders_offline(live_server, tab) -> None:
    page = tab.page
    page.goto(f"{live_server.url}/docs")
    page.wait_for_selector(".swagger-ui .opblock", state="visible")
    assert "Evalplan" in page.locator(".swagger-ui .info .title").inner_text()
    operations = page.locator(".swagger-ui .opblock").count()
    assert operations >= 20, operations
    assert page.locator(".swagger-ui .opblock-summary-path", has_text="/v1/sessions/{session_id}/trajectory").count() >= 1
    # An operation opens and offers "Try it out": the UI is live, not a static picture.
    page.locator(".swagger-ui .opblock-summary", has_text="/health").first.click()
    page.wait_for_selector(".swagger-ui .try-out__btn", state="visible")
    tab.screenshot_is_drawn(min_ink=0.05)


@pytest.mark.slow
def test_redoc_renders_offline(live_server, tab) -> None:
    page = tab.page
    page.goto(f"{live_server.url}/redoc", timeout=60_000)  # a loaded machine served it in 22 s once
    page.wait_for_selector(".api-content h1", state="visible", timeout=30_000)
    assert "Evalplan" in page.locator(".api-content h1").first.inner_text()
    assert page.locator("[role=menuitem], .menu-content li").count() >= 20
    assert page.get_by_text("/v1/coresets").count() >= 1
    tab.screenshot_is_drawn(min_ink=0.05)
