"""Model responses on the pages (issue 26 item 3): the session page shows the target's stored response next to
each observed item's text (also when an item is searched); the coreset page shows a chosen model's responses
(``?model=``, a picker listing the models with responses) and every model's for a searched item. The responses
come from a real lm-eval samples log imported through the API. SQLite and PostgreSQL."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from support.lm_eval_logs import make_docs, records_to_bytes, samples_filename, samples_log_records
from support.ui_data import create_coreset

TASK = "respgen"


def import_generations(client: TestClient, model: str, seed: int) -> dict[str, dict[str, Any]]:
    """A generate_until log of 12 docs for ``model``; item id -> its record (the same docs for every seed)."""
    records = samples_log_records(TASK, make_docs(12, seed=1), kind="generate_until", seed=seed)
    for record in records:  # a distinct answer per model and item, easy to find in the page
        record["resps"] = [[f"{model} says: answer {record['doc_id']} <b>bold</b>"]]
    r = client.post("/v1/imports/lm-eval", data={"model": model},
                    files=[("files", (samples_filename(TASK), records_to_bytes(records), "application/jsonl"))])
    assert r.status_code == 201, r.text
    assert r.json()["n_responses"] == 12
    return {str(rec["doc_id"]): rec for rec in records}


def page(client: TestClient, path: str, status: int = 200) -> str:
    r = client.get(path)
    assert r.status_code == status, (path, r.status_code, r.text[:2000])
    assert r.headers["content-type"].startswith("text/html")
    return r.text


def response_cells(text: str) -> dict[str, str]:
    """data-model -> the <details class="response"> element's text (unescaped), for every response shown."""
    return {m: html.unescape(body) for m, body in
            re.findall(r'<details class="response" data-model="([^"]+)">(.*?)</details>', text, re.DOTALL)}


def rows_of(text: str, table_id: str | None = None) -> list[str]:
    if table_id is not None:
        text = text.split(f'id="{table_id}"', 1)[1]
    body = text.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return re.findall(r"<tr>.*?</tr>", body, re.DOTALL)


def test_session_page_shows_the_targets_response(client: TestClient) -> None:
    records = import_generations(client, "org/target", seed=3)
    import_generations(client, "org/other", seed=4)
    import_generations(client, "org/third", seed=5)  # a session needs two reference models
    r = client.post("/v1/sessions", json={"benchmark": TASK, "target": "org/target", "method": "rs_mean"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    for item in ("2", "5", "7"):
        r = client.post(f"/v1/sessions/{sid}/observations", json={"item": item, "score": records[item]["exact_match"]})
        assert r.status_code == 200, r.text

    text = page(client, f"/ui/sessions/{sid}")
    assert "response of the target" in text
    rows = rows_of(text, "observations")
    assert len(rows) == 3
    for row, item in zip(rows, ("7", "5", "2"), strict=True):  # newest first
        assert f"<code>{item}</code>" in row
        assert f"org/target says: answer {item} &lt;b&gt;bold&lt;/b&gt;" in row  # escaped, never markup
        assert "org/other" not in row  # the target's response only
        assert records[item]["doc"]["question"] in html.unescape(row)  # next to the prompt already shown
    assert "(lm_eval)" in text and '"filter": "none"' in html.unescape(text)

    found = page(client, f"/ui/sessions/{sid}?item=5")
    assert list(response_cells(found)) == ["org/target"] and "answer 5 " in response_cells(found)["org/target"]
    live = page(client, f"/ui/sessions/{sid}/live?item=5")
    assert "org/target says: answer 5" in live and "answer 7" not in live


def test_session_page_without_stored_responses_has_no_response_column(client: TestClient) -> None:
    import_generations(client, "org/someone", seed=3)
    import_generations(client, "org/someone-else", seed=4)
    r = client.post("/v1/sessions", json={"benchmark": TASK, "target": "org/new-model", "method": "rs_mean"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    assert client.post(f"/v1/sessions/{sid}/observations", json={"item": "1", "score": 1}).status_code == 200
    text = page(client, f"/ui/sessions/{sid}")
    assert "response of the target" not in text and 'class="response"' not in text
    assert "<code>1</code>" in text


@pytest.mark.slow  # the coreset job (the embedding model, once per process): about 10 s
def test_coreset_page_shows_a_chosen_models_responses(committed_client: TestClient) -> None:
    http = committed_client
    import_generations(http, "org/target", seed=3)
    import_generations(http, "org/other", seed=4)
    coreset = create_coreset(http, {"method": "random", "benchmarks": [TASK], "budget": 5, "seed": 2})
    picked = [i["item"] for i in coreset["items"]]
    base = f"/ui/coresets/{coreset['id']}"

    plain = page(http, base)
    assert 'id="response-model"' in plain
    assert '<option value="org/other">' in plain and '<option value="org/target">' in plain
    assert response_cells(plain) == {}  # no model chosen: no response column

    chosen = page(http, base + "?model=org/target")
    assert "response of org/target" in chosen and '<option value="org/target" selected>' in chosen
    rows = rows_of(chosen.split('aria-labelledby="items-title"', 1)[1])
    assert len(rows) == 5
    for row, item in zip(rows, picked, strict=True):
        assert f"<code>{item}</code>" in row and f"org/target says: answer {item} " in html.unescape(row)
        assert "org/other says" not in row
    assert 'type="hidden" name="model" value="org/target"' in chosen  # the item search keeps the model

    searched = page(http, base + f"?item={picked[0]}")  # a searched item: every model's response
    cells = response_cells(searched)
    assert sorted(cells) == ["org/other", "org/target"]
    assert f"org/other says: answer {picked[0]} " in cells["org/other"]
    one = page(http, base + f"?item={picked[0]}&model=org/other")
    assert list(response_cells(one)) == ["org/other"]
    page(http, base + "?model=nobody-at-all", 404)


@pytest.mark.browser
def test_session_page_response_opens_in_the_browser(live_server, tab) -> None:
    """The response column in headless Chromium: the folded response opens, the table fits at 1280 px, no
    axe-core violation, nothing fetched off the machine."""
    http = live_server.http
    import_generations(http, "org/target", seed=3)
    import_generations(http, "org/ref-a", seed=4)
    import_generations(http, "org/ref-b", seed=5)
    r = http.post("/v1/sessions", json={"benchmark": TASK, "target": "org/target", "method": "rs_mean"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    for item in ("3", "8"):
        assert http.post(f"/v1/sessions/{sid}/observations", json={"item": item, "score": 1}).status_code == 200
    response = tab.page.goto(f"{live_server.url}/ui/sessions/{sid}")
    assert response is not None and response.status == 200
    tab.page.wait_for_load_state("networkidle")
    row = tab.page.locator("#observations tbody tr").first
    assert row.locator("td code").first.inner_text() == "8"
    row.locator("details.response summary").click()
    assert row.locator("details.response pre").first.inner_text() == "org/target says: answer 8 <b>bold</b>"
    assert tab.page.evaluate("""() => [...document.querySelectorAll('.table-wrap')]
        .every(w => w.scrollWidth <= w.clientWidth + 1)""")
    tab.check_accessibility()
