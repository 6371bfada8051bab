"""Issue 33 item 3: one method table (``methods.METHOD_SPECS``), the variants as typed parameters, one default,
the former names as aliases that reproduce their sessions exactly, readable working-model names, and the paper's
stopping rule written once."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from evalplan.core.sequential import DEFAULT_METHOD, BucketPrior, SessionConfig, make_estimator
from evalplan.core.sequential.config import (
    FORMER_NAMES,
    METHODS,
    PUBLIC_METHODS,
    ActiveDesignParams,
    BayesAMEParams,
    MethodParams,
    RandomParams,
    RefGPParams,
)
from evalplan.core.sequential.methods import (
    DEFAULT_MULTI_TARGET_METHOD,
    METHOD_SPECS,
    MULTI_TARGET_METHODS,
    answered_name,
    default_method,
    method_table,
    resolve,
)

SEQUENTIAL = Path(__file__).resolve().parents[2] / "src" / "evalplan" / "core" / "sequential"


def _scores(seed: int = 0, n_models: int = 14, n_items: int = 60) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = 1 / (1 + np.exp(-(rng.normal(size=n_models)[:, None] - rng.normal(size=n_items)[None, :])))
    return (rng.random(p.shape) < p).astype(float)


def _trajectory(config: SessionConfig, Y: np.ndarray, n: int = 25) -> list[tuple]:
    est = make_estimator(BucketPrior.from_reference_scores(Y[1:]), config, (0.0, 1.0))
    out = []
    while est.n_observed < n and not est.stopped:
        for i in est.propose():
            est.observe(i, float(Y[0, i]))
            out.append((int(i), est.estimate, est.variance, tuple(est.interval(0.95)), est.stopped, est.stop_reason))
    return out


def test_one_default_and_the_multi_target_default_comes_from_the_table() -> None:
    assert SessionConfig().method == DEFAULT_METHOD == default_method() == "active_design"
    assert tuple(METHOD_SPECS) == PUBLIC_METHODS and set(METHODS) == set(PUBLIC_METHODS) | set(FORMER_NAMES)
    multi = [s.name for s in METHOD_SPECS.values() if s.multi_target]
    assert DEFAULT_MULTI_TARGET_METHOD == (DEFAULT_METHOD if DEFAULT_METHOD in multi else multi[0]) == "bayesame"
    assert default_method(multi_target=True) == DEFAULT_MULTI_TARGET_METHOD and default_method(paired=True) == "random"
    assert MULTI_TARGET_METHODS == ("bayesame", "bayesame_rs")
    table = method_table()
    assert table["default"] == DEFAULT_METHOD and table["default_multi_target"] == DEFAULT_MULTI_TARGET_METHOD
    for entry in table["methods"]:  # every spec: typed parameters with their defaults and JSON schema
        spec = METHOD_SPECS[entry["name"]]
        assert issubclass(spec.params, MethodParams) and entry["method_params"] == list(spec.params.model_fields)
        assert entry["method_params_schema"]["additionalProperties"] is False


def test_former_names_resolve_to_a_public_method_with_fixed_parameters() -> None:
    assert resolve("rs_mean") == ("random", RandomParams(interval="paper_normal"))
    assert resolve("bayesame_rs") == ("bayesame", BayesAMEParams(selection="random"))
    assert resolve("refgp_dr") == ("refgp", RefGPParams(mean="reference", variance="design_loo", selection="random",
                                                         directions=16))
    assert answered_name("rs_mean") == "rs_mean" and answered_name("bayesame_rs") == "bayesame_rs"
    assert answered_name("refgp_v3") == "refgp" and answered_name("random") == "random"
    with pytest.raises(ValueError, match="method_params: not allowed with method 'rs_mean'"):
        resolve("rs_mean", {"interval": "paper_normal"})
    with pytest.raises(ValueError, match="method: must be one of"):
        resolve("magic")


@pytest.mark.parametrize(("former", "public", "params"), [
    ("bayesame_rs", "bayesame", {"selection": "random"}),
    ("rs_mean", "random", {"interval": "paper_normal"}),
    ("refgp_ivr", "refgp", {"mean": "reference", "variance": "model", "selection": "ivr", "directions": 16}),
])
def test_a_former_name_and_its_public_spelling_give_the_same_session(former: str, public: str, params: dict) -> None:
    Y = _scores(3)
    old = _trajectory(SessionConfig(method=former, seed=4, epsilon1=0.0, epsilon2=0.0), Y)
    new = _trajectory(SessionConfig(method=public, method_params=params, seed=4, epsilon1=0.0, epsilon2=0.0), Y)
    assert len(old) == 25 and old == new


def test_random_and_bayesame_default_parameters_are_the_plain_methods() -> None:
    Y = _scores(5)
    for method, params in (("random", {"interval": "finite_population"}), ("bayesame", {"selection": "information_gain"})):
        plain = _trajectory(SessionConfig(method=method, seed=1), Y)
        given = _trajectory(SessionConfig(method=method, method_params=params, seed=1), Y)
        assert plain == given
    rs = _trajectory(SessionConfig(method="random", method_params={"interval": "paper_normal"}, seed=1), Y)
    assert rs != _trajectory(SessionConfig(method="random", seed=1), Y)  # the parameter changes the interval


def test_working_models_have_readable_names_and_the_former_values_still_work() -> None:
    Y = _scores(7)
    for old, new in (("refgp_v3", "reference_gp_evidence_mix"), ("refgp_ivr", "reference_gp")):
        assert ActiveDesignParams(working_model=old).working_model == new  # type: ignore[arg-type]
        a = SessionConfig(method="active_design", method_params={"working_model": old}, seed=2)
        b = SessionConfig(method="active_design", method_params={"working_model": new}, seed=2)
        assert _trajectory(a, Y, 15) == _trajectory(b, Y, 15)
        est = make_estimator(BucketPrior.from_reference_scores(Y[1:]), a, (0.0, 1.0))
        assert est.design_state()["working_model"] == new
    default = make_estimator(BucketPrior.from_reference_scores(Y[1:]), SessionConfig(), (0.0, 1.0))
    assert default.design_state()["working_model"] == ActiveDesignParams().working_model


@pytest.mark.parametrize(("method", "params", "message"), [
    ("active_design", {"bogus": 1}, r"method_params\.bogus: unknown key for active_design \(allowed: uniform_share"),
    ("active_design", {"uniform_share": 0}, r"method_params\.uniform_share: must be greater than 0, got 0"),
    ("active_design", {"uniform_share": True}, r"method_params\.uniform_share: must be a valid number"),
    ("active_design", {"uniform_share": 0.9}, r"method_params\.extrapolation_share: must be >= uniform_share"),
    ("active_design", {"working_model": "x"}, r"method_params\.working_model: must be 'reference_gp_evidence_mix'"),
    ("active_design", {"adaptive_share": 1}, r"method_params\.adaptive_share: must be a valid boolean"),
    ("random", {"interval": "exact"}, r"method_params\.interval: must be 'finite_population' or 'paper_normal'"),
    ("bayesame", {"uniform_share": 0.5}, r"method_params\.uniform_share: unknown key for bayesame"),
    ("fluid_irt", {"x": 1}, r"method_params\.x: unknown key for fluid_irt \(it takes no parameters\)"),
    ("refgp", {"variance": "design_loo"}, r"method_params\.variance: design_loo .* needs selection random"),
    ("refgp", [1], r"method_params: must be an object"),
])
def test_bad_parameters_name_their_key(method: str, params: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SessionConfig(method=method, method_params=params).validate()  # type: ignore[arg-type]


def test_hyperparameters_and_only_proposed_items_follow_the_parameters() -> None:
    SessionConfig(method="rs_mean", hyperparameters={"alpha": 2.0}).validate()
    SessionConfig(method="random", method_params={"interval": "paper_normal"}, hyperparameters={"alpha": 2.0}).validate()
    with pytest.raises(ValueError, match="hyperparameters: apply to bayesame, bayesame_rs, rs_mean only"):
        SessionConfig(method="random", hyperparameters={"alpha": 2.0}).validate()
    assert RandomParams().only_proposed_items() and not RandomParams(interval="paper_normal").only_proposed_items()
    assert RefGPParams(variance="design_loo", selection="random").only_proposed_items()
    assert not ActiveDesignParams().only_proposed_items() and not BayesAMEParams().only_proposed_items()


def test_interval_kinds_come_from_the_table() -> None:
    SessionConfig(method="active_design", interval_kind="anytime").validate()
    with pytest.raises(ValueError, match="interval_kind: applies to active_design only"):
        SessionConfig(method="random", interval_kind="anytime").validate()
    assert METHOD_SPECS["active_design"].interval_kinds == ("sequential", "anytime", "fixed_n")


def test_the_papers_stopping_rule_is_written_once() -> None:
    """``base.paper_converged`` is the only code reading ``epsilon1`` / ``epsilon2`` (the config defines and checks
    them); every estimator that stops on the paper's rule calls it."""
    readers = {p.name for p in SEQUENTIAL.glob("*.py") if re.search(r"\.epsilon[12]\b", p.read_text())}
    assert readers == {"base.py"}, readers
    base = (SEQUENTIAL / "base.py").read_text()
    assert len(re.findall(r"config\.epsilon[12]", base)) == 2 and "def paper_converged" in base
    callers = {p.name for p in SEQUENTIAL.glob("*.py") if "paper_converged(" in p.read_text()}
    assert {"base.py", "active_design.py", "multi_target.py"} <= callers


def test_a_config_replaced_to_another_method_is_checked_against_that_methods_parameters() -> None:
    cfg = SessionConfig(method="active_design", method_params={"uniform_share": 0.5})
    with pytest.raises(ValueError, match=r"method_params\.uniform_share: unknown key for refgp"):
        dataclasses.replace(cfg, method="refgp").validate()
