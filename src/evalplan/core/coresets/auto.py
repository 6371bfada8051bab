"""``method: "auto"``: the selector and predictor chosen per benchmark by nested cross-validation
over the reference models (issue 16 §1; no paper -- a model-selection layer over papers/002's methods).

Candidates are (selector, predictor) pairs the service already builds, each faithful to its source:

* ``random`` + ``mean`` / ``ridge`` / ``kernel_ridge`` (Random, Random+, Random++; 002 §2.4),
* ``mrmr`` (002 §2.1-2.2, both of its schemes ``miq`` / ``mid``) + ``ridge`` / ``kernel_ridge``
  (mRMR+ / mRMR++, 002 §2.3),
* ``lasso`` (002 §2.4) + ``ridge`` / ``kernel_ridge``,
* ``anchor_points`` (Vivek et al. 2024; 002 §2.4) + ``weighted_mean`` / ``kernel_ridge``,
* ``random_search`` (Search+, Zhang et al. 2025b; 002 §2.4) + ``ridge``,
* ``irt`` (tinyBenchmarks' IRT anchors, Polo et al. 2024, ``evalplan.core.irt.irt``) + ``gp_irt`` / ``p_irt``,

plus, per selector, the **average** of its predictors' estimates on the same coreset (an averaged
combination never needs more items; it enters the competition as one more candidate and is chosen
only when it wins the inner cross-validation like any other).

Nested cross-validation (Varma & Simon 2006; Cawley & Talbot 2010 on selection bias):

1. *Inner table* on a set of references: for every candidate, its **cross-fitted errors**
   (:func:`evalplan.core.coresets.intervals.coreset_cross_fitted_errors`: on each of ``inner_folds`` folds the
   selector *and* the predictor are refitted without the fold), RMSE and MAE; the choice is the
   lowest RMSE (ties -> the earlier, cheaper candidate).
2. *Outer loop*: the references are split into ``outer_folds`` folds; in each, the inner table is
   built on the other folds only, its choice refitted on them (selection + predictor) and applied to
   the held-out fold. These **outer errors** never saw the held-out references, the choice
   included, so their RMSE is an honest estimate of the whole ``auto`` procedure; they are also the
   pessimistic half of the coreset's interval calibration
   (:func:`evalplan.core.coresets.intervals.interval_from_errors`).
3. *Final choice*: the inner table on all references; its winner is fitted on all of them and stored,
   with its leave-one-reference-out errors on the chosen coreset (``fixed_errors``, the optimistic
   half: the default ``"calibrated"`` rule is the geometric mean of the two scales, as for every
   score-based coreset).

Cost control: a selector's fits are ``(outer_folds + 1) (inner_folds + 1)`` (one selection per
training set, shared by its predictors). Selectors run cheapest first; before each, one timed fit
on all references estimates its total cost, and it is skipped (``status: "skipped_time"``) when
that estimate exceeds what is left of ``max_seconds``. ``random`` is always evaluated, so there is
always a choice.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalplan.core.coresets.intervals import coreset_cross_fitted_errors, cross_fitted_errors, fixed_coreset_errors
from evalplan.core.coresets.predictors import PREDICTOR_CLASSES, MeanPredictor, WeightedMeanPredictor
from evalplan.core.irt.irt import IRTSelection, irt_predictor_for
from evalplan.core.selection.score_based import SCORE_METHODS

__all__ = [
    "AUTO_PREDICTORS", "AveragePredictor", "AutoResult", "Candidate", "SelectorSpec", "DEFAULT_SELECTORS",
    "CHOICE_RULE", "CHOICE_RULES", "PRIORS", "SE_MULT", "auto_select", "default_selectors", "describe",
    "fit_candidate", "inner_table", "parse_selectors", "prior_candidate",
]

#: predictors a candidate may use; ``average`` = the mean of ``components`` on one coreset
AUTO_PREDICTORS = ("mean", "weighted_mean", "ridge", "kernel_ridge", "gp_irt", "p_irt", "average")
IRT_PREDICTORS = ("gp_irt", "p_irt")
OUTER_FOLDS = 5
INNER_FOLDS = 5
MAX_SECONDS = 50.0
#: how the inner table chooses (:func:`inner_table`): ``"prior"`` (default) or ``"min"`` (lowest inner RMSE)
CHOICE_RULES = ("prior", "min")
CHOICE_RULE = "prior"
#: the prior wins unless another candidate beats it by more than this many standard errors
SE_MULT = 2.0
#: the candidates the ``"prior"`` rule leans toward, first available: mRMR (002 §2.1-2.2) with the mean of
#: ridge and kernel ridge had the lowest mean held-out RMSE ratio to the best candidate on every shared data
#: set when that set itself was left out (docs/DECISIONS.md, "auto: the choice rule"). Without it (mRMR not
#: a candidate) the rule is ``"min"``: Lasso's average as a fallback prior lost on alpacaeval1 (1.4-1.8x).
PRIORS = ("mrmr+average(ridge+kernel_ridge)",)
#: selectors whose ``weights_`` are non-negative item weights (a weighted mean / gp-IRT's anchor part)
WEIGHTED_SELECTORS = ("anchor_points", "irt")


@dataclass(frozen=True)
class SelectorSpec:
    """One selector with its parameters and the predictors tried on its coresets."""

    method: str
    params: Mapping[str, Any] = field(hash=False)  # compared, not hashed (a dict)
    predictors: tuple[str, ...] = ()
    average: bool = True  # also try the mean of the (>= 2) predictors' estimates

    @property
    def key(self) -> str:
        if not self.params:
            return self.method
        return self.method + "(" + ",".join(f"{k}={v}" for k, v in sorted(self.params.items())) + ")"


@dataclass(frozen=True)
class Candidate:
    """A (selector, predictor) pair; ``components`` for ``predictor == "average"``."""

    selector: SelectorSpec
    predictor: str
    components: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        pred = f"average({'+'.join(self.components)})" if self.predictor == "average" else self.predictor
        return f"{self.selector.key}+{pred}"


#: cheapest first (measured on 30 references x 756 items, 2 cores: random 0 s, mRMR ~0.05 s,
#: lasso ~0.05 s, AnchorPoints without PAM swap ~0.1 s, Search+ at 200 trials ~0.5 s, IRT seconds)
DEFAULT_SELECTORS: tuple[SelectorSpec, ...] = (
    SelectorSpec("random", {}, ("mean", "ridge", "kernel_ridge")),
    SelectorSpec("mrmr", {}, ("ridge", "kernel_ridge")),
    SelectorSpec("mrmr", {"scheme": "mid"}, ("ridge", "kernel_ridge")),
    SelectorSpec("lasso", {}, ("ridge", "kernel_ridge")),
    SelectorSpec("anchor_points", {"n_init": 1, "swap": "never"}, ("weighted_mean", "kernel_ridge")),
    SelectorSpec("random_search", {"n_trials": 200}, ("ridge",), average=False),
    SelectorSpec("irt", {}, ("gp_irt", "p_irt"), average=False),
)


#: selectors tried when the request names none: all but two, which ``params.selectors`` can still ask
#: for. ``irt``: tinyBenchmarks' pipeline (three SVI fits of 2,000 epochs: D in {5, 10} by validation,
#: then the model) costs minutes per fit on 2 cores, i.e. hours for the 36 fits of a nested CV.
#: ``random_search`` (Search+) is itself a cross-validation (200 random coresets x 5-fold ridge): on
#: 30 references x 1,000 items it cost 8.5 s per fit against 2.9 s for the other four selectors
#: together (shared 2-core machine), tripling auto's time, and it won no CV table we measured.
DEFAULT_METHODS = ("random", "mrmr", "lasso", "anchor_points")


def default_selectors(binary_range: bool) -> tuple[SelectorSpec, ...]:
    """The specs of :data:`DEFAULT_METHODS` (``binary_range``: scores in [0, 1]; kept for IRT's rule)."""
    return tuple(s for s in DEFAULT_SELECTORS if s.method in DEFAULT_METHODS and (binary_range or s.method != "irt"))


def parse_selectors(names: Sequence[str]) -> tuple[SelectorSpec, ...]:
    """The default specs of the selector ``names`` (``"mrmr"`` keeps both schemes); ValueError on an unknown one."""
    known = {s.method for s in DEFAULT_SELECTORS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown selector(s) {unknown}; one of {sorted(known)}")
    return tuple(s for s in DEFAULT_SELECTORS if s.method in set(names))


def candidates_of(spec: SelectorSpec) -> list[Candidate]:
    out = [Candidate(spec, p) for p in spec.predictors]
    if spec.average and len(spec.predictors) >= 2:
        out.append(Candidate(spec, "average", tuple(spec.predictors)))
    return out


class AveragePredictor:
    """The mean of several predictors' estimates on the same coreset (an unweighted average; its
    components are fitted independently, each with its own lambda selection)."""

    def __init__(self, factories: Sequence[Callable[[], Any]]) -> None:
        self.factories = list(factories)

    def fit(self, X: np.ndarray, y: np.ndarray) -> AveragePredictor:
        self.models_ = [f().fit(X, y) for f in self.factories]
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(np.mean([np.asarray(m.predict(X), dtype=float) for m in self.models_], axis=0))


# ----------------------------------------------------------------------------- fitting
@dataclass
class _Selection:
    idx: np.ndarray
    weights: np.ndarray | None
    selector: Any


def _select(spec: SelectorSpec, Y: np.ndarray, k: int, seed: int) -> _Selection:
    if spec.method == "random":
        # the backtest's random coreset (evalplan.core.backtest.backtest._select)
        rng = np.random.default_rng([seed, 7919])
        return _Selection(np.sort(rng.choice(Y.shape[1], size=k, replace=False)), None, None)
    if spec.method == "irt":
        sel = IRTSelection(k=k, seed=seed, **dict(spec.params)).fit(Y)
        return _Selection(np.asarray(sel.ranking_, dtype=np.int64), np.asarray(sel.weights_, dtype=float), sel)
    sel = SCORE_METHODS[spec.method](k=k, seed=seed, **dict(spec.params)).fit(Y)
    w = getattr(sel, "weights_", None)
    keep = spec.method in WEIGHTED_SELECTORS and w is not None
    return _Selection(np.asarray(sel.ranking_, dtype=np.int64), np.asarray(w, dtype=float) if keep else None, sel)


class _IRTOnCoreset:
    """gp-IRT / p-IRT (``evalplan.core.irt.irt``) for one selection: the IRT model of an ``irt`` selector,
    else tinyBenchmarks' pipeline fitted on the training references' full matrix."""

    def __init__(self, variant: str, Y_train: np.ndarray, sel: _Selection, seed: int) -> None:
        self.variant = variant
        self.pred = irt_predictor_for(Y_train, sel.idx, weights=sel.weights, selector=sel.selector, seed=seed)

    def fit(self, X: np.ndarray, y: np.ndarray) -> _IRTOnCoreset:
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        est = self.pred.predict(np.clip(np.asarray(X, dtype=float), 0.0, 1.0))
        return np.asarray(est.p_irt if self.variant == "p_irt" else est.gp_irt)


def _factory(name: str, sel: _Selection, Y_train: np.ndarray, seed: int, k: int) -> Callable[[], Any]:
    if name == "weighted_mean":
        w = sel.weights if sel.weights is not None else np.full(k, 1.0 / k)
        return lambda: WeightedMeanPredictor(w)
    if name == "mean":
        return MeanPredictor
    if name in IRT_PREDICTORS:
        return lambda: _IRTOnCoreset(name, Y_train, sel, seed)
    return PREDICTOR_CLASSES[name]


def _candidate_factory(cand: Candidate, sel: _Selection, Y_train: np.ndarray, seed: int, k: int
                       ) -> Callable[[], Any]:
    if cand.predictor == "average":
        parts = [_factory(c, sel, Y_train, seed, k) for c in cand.components]
        return lambda: AveragePredictor(parts)
    return _factory(cand.predictor, sel, Y_train, seed, k)


def fit_candidate(cand: Candidate, Y_train: np.ndarray, k: int, seed: int) -> tuple[_Selection, Any]:
    """(selection, fitted predictor) of ``cand`` on the references ``Y_train`` (full score = row mean)."""
    sel = _select(cand.selector, Y_train, k, seed)
    model = _candidate_factory(cand, sel, Y_train, seed, k)().fit(Y_train[:, sel.idx], Y_train.mean(axis=1))
    return sel, model


def _spec_errors(spec: SelectorSpec, Y: np.ndarray, k: int, seed: int, n_folds: int) -> dict[Candidate, np.ndarray]:
    """Cross-fitted errors on ``Y`` of every candidate of ``spec`` (one selection per fold, shared)."""
    y = Y.mean(axis=1)
    cache: dict[tuple[int, ...], tuple[np.ndarray, Any]] = {}
    out: dict[Candidate, np.ndarray] = {}
    plain = [c for c in candidates_of(spec) if c.predictor != "average"]

    def select(Y_train: np.ndarray) -> tuple[np.ndarray, Any]:
        sel = _select(spec, Y_train, k, seed)
        return sel.idx, sel

    for cand in plain:
        if cand.predictor in IRT_PREDICTORS:  # needs the training matrix itself, not only its coreset scores
            def fit_predict(train: np.ndarray, test: np.ndarray, cand: Candidate = cand) -> np.ndarray:
                key = tuple(train.tolist())
                if key not in cache:
                    cache[key] = select(Y[train])
                sel: _Selection = cache[key][1]
                model = _factory(cand.predictor, sel, Y[train], seed, k)().fit(Y[train][:, sel.idx], y[train])
                return np.asarray(model.predict(Y[test][:, sel.idx]))
            out[cand] = cross_fitted_errors(fit_predict, y, n_folds=n_folds, seed=seed)
        else:
            def predictor_for(sel: _Selection, cand: Candidate = cand) -> Callable[[], Any]:
                return _factory(cand.predictor, sel, Y, seed, k)
            out[cand] = coreset_cross_fitted_errors(select, predictor_for, Y, y, n_folds=n_folds, seed=seed,
                                                    cache=cache)
    for cand in candidates_of(spec):
        if cand.predictor == "average":  # same folds, same selections: the average's error is the errors' mean
            out[cand] = np.mean([out[Candidate(spec, c)] for c in cand.components], axis=0)
    return out


def _rmse(e: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.asarray(e, dtype=float) ** 2)))


def prior_candidate(candidates: Sequence[Candidate]) -> Candidate | None:
    """The first of :data:`PRIORS` among ``candidates`` (None when none is)."""
    labels = {c.label: c for c in candidates}
    for label in PRIORS:
        if label in labels:
            return labels[label]
    return None


def inner_table(errors: Mapping[Candidate, np.ndarray], rule: str = CHOICE_RULE, se_mult: float = SE_MULT
                ) -> tuple[Candidate, list[dict[str, Any]]]:
    """(the chosen candidate, rows ``{label, selector, params, predictor, components, cv_rmse, cv_mae,
    excess_se}``) of candidates' cross-fitted errors, in the order given.

    ``rule="min"``: the lowest RMSE (ties -> the earlier candidate). ``rule="prior"``: the prior
    candidate (:func:`prior_candidate`) unless the lowest-RMSE one beats it by more than ``se_mult``
    standard errors of their paired per-reference squared-error difference (the k-SE rule of
    Hastie, Tibshirani & Friedman, ESL §7.10, applied toward the method that wins on average rather
    than toward the simplest); ``excess_se`` is each row's mean squared-error excess over the
    lowest-RMSE candidate in those standard errors."""
    if rule not in CHOICE_RULES:
        raise ValueError(f"unknown choice rule {rule!r}; one of {CHOICE_RULES}")
    rows: list[dict[str, Any]] = []
    best: Candidate | None = None
    best_rmse = math.inf
    for cand, e in errors.items():
        r = _rmse(e)
        rows.append({"label": cand.label, "selector": cand.selector.method, "params": dict(cand.selector.params),
                     "predictor": cand.predictor, "components": list(cand.components), "cv_rmse": r,
                     "cv_mae": float(np.mean(np.abs(e)))})
        if np.isfinite(r) and r < best_rmse - 1e-12:
            best, best_rmse = cand, r
    if best is None:
        raise ValueError("no candidate has finite cross-validated errors")
    b2 = np.asarray(errors[best], dtype=float) ** 2
    for cand, row in zip(errors, rows):
        d = np.asarray(errors[cand], dtype=float) ** 2 - b2
        se = float(np.std(d, ddof=1) / math.sqrt(d.size)) if d.size > 1 else math.inf
        row["excess_se"] = float(np.mean(d) / se) if se > 0 and np.isfinite(se) else (0.0 if not d.any() else math.inf)
    if rule == "prior":
        prior = prior_candidate(list(errors))
        if prior is not None:
            row = rows[list(errors).index(prior)]
            if np.isfinite(row["cv_rmse"]) and row["excess_se"] <= se_mult:
                return prior, rows
    return best, rows


def describe(cand: Candidate) -> str:
    """In words: ``"mrmr coreset, the mean of the ridge and kernel_ridge estimates"``."""
    sel = cand.selector.key
    if cand.predictor == "average":
        return f"{sel} coreset, the mean of the {' and '.join(cand.components)} estimates"
    return f"{sel} coreset, {cand.predictor} estimate"


# ----------------------------------------------------------------------------- nested CV
@dataclass
class AutoResult:
    """What :func:`auto_select` found (see the module docstring)."""

    choice: Candidate
    table: list[dict[str, Any]]  # the final inner table on all references, + status rows for skipped selectors
    outer: list[dict[str, Any]]  # per outer fold: {fold, test, chosen, rmse}
    outer_errors: np.ndarray  # (M,) y_i - auto_{-fold(i)}(i): the honest errors, the interval calibration
    selection: _Selection
    model: Any
    seconds: float
    skipped: list[dict[str, Any]] = field(default_factory=list)
    #: (M,) leave-one-reference-out errors of the chosen predictor on the final (chosen) coreset: the
    #: optimistic half of the ``"calibrated"`` interval rule
    #: (:func:`evalplan.core.coresets.intervals.calibrated_half_width`)
    fixed_errors: np.ndarray | None = None
    #: ``{rule, se_mult, prior}``: how the inner table chose (:func:`inner_table`)
    rule: dict[str, Any] = field(default_factory=dict)

    @property
    def honest_rmse(self) -> float:
        return _rmse(self.outer_errors)

    def summary(self) -> dict[str, Any]:
        """JSON-safe ``diagnostics.auto``: the choice, the CV table, the outer folds, the cost."""
        c = self.choice
        return {"choice": {"label": c.label, "selector": c.selector.method, "params": dict(c.selector.params),
                           "predictor": c.predictor, "components": list(c.components),
                           "description": describe(c)},
                "choice_rule": dict(self.rule),
                "cv_table": self.table, "honest_rmse": self.honest_rmse,
                "honest_mae": float(np.mean(np.abs(self.outer_errors))),
                "outer_folds": [{k: v for k, v in o.items() if k != "test"} | {"n_test": len(o["test"])}
                                for o in self.outer],
                "skipped": self.skipped, "seconds": round(self.seconds, 3)}


def _folds(M: int, n_folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The fold assignment of :func:`evalplan.core.coresets.intervals.cross_fitted_errors` (same permutation)."""
    K = max(2, min(int(n_folds), M))
    perm = np.random.default_rng([int(seed), 104729]).permutation(M)
    return [(np.sort(np.setdiff1d(perm, test)), np.sort(test)) for test in np.array_split(perm, K)]


def auto_select(Y: Any, k: int, seed: int = 0, selectors: Sequence[SelectorSpec] | Sequence[str] | None = None,
                outer_folds: int = OUTER_FOLDS, inner_folds: int = INNER_FOLDS,
                max_seconds: float | None = MAX_SECONDS,
                checkpoint: Callable[[], None] | None = None, choice: str = CHOICE_RULE,
                se_mult: float = SE_MULT) -> AutoResult:
    """Nested-CV choice of a coreset method for the references' score matrix ``Y`` (M x N, finite).

    ``selectors`` (specs, or names for :func:`parse_selectors`) default to :func:`default_selectors`;
    ``checkpoint`` is called between selectors (it raises to cancel); ``choice`` (the rule) / ``se_mult``: see
    :func:`inner_table` (the same rule chooses in every outer fold, so the outer errors price it)."""
    choice_rule = choice
    if choice_rule not in CHOICE_RULES:
        raise ValueError(f"unknown choice rule {choice_rule!r}; one of {CHOICE_RULES}")
    if not (math.isfinite(se_mult) and se_mult >= 0):
        raise ValueError(f"se_mult must be a finite number >= 0, got {se_mult!r}")
    started = time.perf_counter()
    Y = np.asarray(Y, dtype=float)
    if Y.ndim != 2 or not np.isfinite(Y).all():
        raise ValueError("Y must be a finite (references x items) matrix")
    M, N = Y.shape
    if not 1 <= int(k) <= N:
        raise ValueError(f"k must be in [1, {N}], got {k}")
    k = int(k)
    if M < 2 * max(2, outer_folds) or M < 6:
        raise ValueError(f"auto needs at least {max(6, 2 * max(2, outer_folds))} references for "
                         f"{outer_folds} outer folds, got {M}")
    in01 = bool(np.all((Y >= 0) & (Y <= 1)))
    specs: list[SelectorSpec]
    if selectors is None:
        specs = list(default_selectors(in01))
    elif all(isinstance(s, str) for s in selectors):  # names, as a request gives them
        specs = list(parse_selectors([str(s) for s in selectors]))
    else:
        specs = [s for s in selectors if isinstance(s, SelectorSpec)]
    if not specs:
        raise ValueError("need at least one selector")
    if not in01 and any(s.method == "irt" for s in specs):
        raise ValueError("irt / gp_irt / p_irt need scores in [0, 1]")
    folds = _folds(M, outer_folds, seed)
    levels: list[np.ndarray] = [train for train, _ in folds] + [np.arange(M)]  # outer training sets, then all
    errors: list[dict[Candidate, np.ndarray]] = [{} for _ in levels]
    skipped: list[dict[str, Any]] = []
    n_fits = len(levels) * (inner_folds + 1)
    for i, spec in enumerate(specs):
        if checkpoint is not None:
            checkpoint()
        t0 = time.perf_counter()
        try:
            _select(spec, Y, k, seed)  # a timed probe (and an early failure for a selector that cannot fit)
        except ValueError as exc:
            skipped.append({"selector": spec.key, "status": "failed", "reason": str(exc)})
            continue
        estimate = (time.perf_counter() - t0) * n_fits
        left = math.inf if max_seconds is None else max_seconds - (time.perf_counter() - started)
        if i > 0 and estimate > left:
            skipped.append({"selector": spec.key, "status": "skipped_time",
                            "reason": f"estimated {estimate:.1f} s > {max(left, 0.0):.1f} s left of max_seconds",
                            "estimated_seconds": round(estimate, 2)})
            continue
        try:
            per_level = [_spec_errors(spec, Y[train], k, seed, inner_folds) for train in levels]
        except ValueError as exc:
            skipped.append({"selector": spec.key, "status": "failed", "reason": str(exc)})
            continue
        for store, errs in zip(errors, per_level):
            store.update(errs)
    outer: list[dict[str, Any]] = []
    outer_errors = np.full(M, np.nan)
    y = Y.mean(axis=1)
    for f, ((train, test), errs) in enumerate(zip(folds, errors[:-1])):
        chosen, _ = inner_table(errs, choice_rule, se_mult)
        sel, model = fit_candidate(chosen, Y[train], k, seed)
        pred = np.asarray(model.predict(Y[test][:, sel.idx]), dtype=float)
        outer_errors[test] = y[test] - pred
        outer.append({"fold": f, "test": test.tolist(), "chosen": chosen.label, "rmse": _rmse(y[test] - pred)})
    final, table = inner_table(errors[-1], choice_rule, se_mult)
    prior = prior_candidate(list(errors[-1])) if choice_rule == "prior" else None
    prior_label = None if prior is None else prior.label
    selection, model = fit_candidate(final, Y, k, seed)
    fixed = fixed_coreset_errors(_candidate_factory(final, selection, Y, seed, k), Y[:, selection.idx], y)
    return AutoResult(final, table, outer, outer_errors, selection, model, time.perf_counter() - started, skipped,
                      fixed, {"rule": choice_rule, "se_mult": se_mult, "prior": prior_label})
