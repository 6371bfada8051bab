"""Issue 34, "coreset predict p99 <= 1 s": the extrapolation guard's AIPW interval (leave-one-reference-out
split conformal, M refits on the references) is never computed per request: the selection job stores the
references' LOO errors (``fit["loo_errors"]``), a coreset stored before computes them once per cached
coreset; either way the interval is exactly the one ``loo_conformal_interval`` gives for the same target."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sqlalchemy import select, update
from test_api_score_coresets import create, make_suite, stored_fits, upload

from evalplan.core.coresets import intervals
from evalplan.coresets.families import score_predictions
from evalplan.coresets.families.score_predictions import predictor_factory, reference_loo_errors
from evalplan.db.models import Coreset

LEVEL = 0.95


def test_the_aipw_loo_interval_is_computed_once_per_coreset(committed_client, committed_session_factory,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    client = committed_client
    suite = make_suite(60, seed=3)
    upload(client, "gen", suite["ref"])
    coreset = create(client, method="anchor_points", benchmarks=["gen"], budget=10, reference_models="all")
    (bid, fit), = stored_fits(committed_session_factory, coreset["id"]).items()
    X, y = np.asarray(fit["X_ref"], dtype=float), np.asarray(fit["y_ref"], dtype=float)
    means = X.mean(axis=1)
    outside = 1.0 if means.max() < 1.0 else 0.0  # a target above (or below) every reference's coreset mean
    assert means.max() < 1.0 or means.min() > 0.0
    chosen = [i["item"] for i in coreset["items"]]
    posted = [{"benchmark": "gen", "item": item, "score": outside} for item in chosen]
    calls: list[int] = []
    real = intervals.loo_conformal_interval

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(score_predictions, "loo_conformal_interval", counted)
    stored = np.asarray(fit["loo_errors"]["aipw"])  # the selection job's
    np.testing.assert_allclose(stored, reference_loo_errors(fit, "aipw"), atol=1e-12)
    calls.clear()

    def predict_three() -> list[Any]:
        score_predictions._PREPARED.clear()  # a new process
        outs = [client.post(f"/v1/coresets/{coreset['id']}/predict", json={"scores": posted, "level": level})
                for level in (LEVEL, LEVEL, 0.8)]
        for r in outs:
            assert r.status_code == 200, r.text
        entry = outs[0].json()["benchmarks"]["gen"]
        assert outs[0].json()["extrapolation"] is True and entry["predictor"] == "aipw"
        assert entry["calibration"] == "leave_one_reference_out"
        return outs

    stored_outs = predict_three()
    assert calls == []  # the stored errors: no M-refit loop in any request
    with committed_session_factory() as session:  # a coreset selected before the errors were stored
        state = session.scalar(select(Coreset.fitted_state).where(Coreset.id == coreset["id"]))
        del state["fits"][bid]["loo_errors"]
        session.execute(update(Coreset).where(Coreset.id == coreset["id"]).values(fitted_state=state))
        session.commit()
    outs = predict_three()
    assert len(calls) == 1  # once per cached coreset; before: one M-refit loop per request (3)
    assert [r.json() for r in outs] == [r.json() for r in stored_outs]
    # the same interval as loo_conformal_interval on the stored references, at each level
    x_t = np.full((1, X.shape[1]), outside)
    for r, level in zip(outs, (LEVEL, LEVEL, 0.8)):
        ci = real(predictor_factory("aipw", fit), X, y, x_t, level=level, method="split")
        got = r.json()["benchmarks"]["gen"]
        clip = [min(max(float(v), 0.0), 1.0) for v in (ci.center[0], ci.lower[0], ci.upper[0])]
        assert got["estimate"] == pytest.approx(clip[0], abs=1e-12)
        assert got["interval"] == pytest.approx(clip[1:], abs=1e-12)
