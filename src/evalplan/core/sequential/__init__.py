"""Sequential evaluation: the default ``active_design`` (entry point ``active_design.run_active_design``), the
reference-score GP family (``refgp``: one class, ``refgp.RefGPEstimator``, whose mean, variance, selection and
directions are parameters; its presets keep the former names ``refgp_v3``, ``refgp_ivr``, ``refgp_v2``, ...),
BayesAME (papers/004), ``random``, the peers' baselines. The method table: ``methods.METHOD_SPECS``."""

from .config import DEFAULT_METHOD, METHODS, SessionConfig
from .estimator import Z975, SequentialEstimator
from .hyper import fit_alpha_beta, neg_log_marginal_likelihood
from .methods import ESTIMATORS, METHOD_SPECS, make_estimator
from .prior import BucketPrior

__all__ = ["METHODS", "SessionConfig", "BucketPrior", "SequentialEstimator", "Z975", "fit_alpha_beta",
           "neg_log_marginal_likelihood", "DEFAULT_METHOD", "ESTIMATORS", "METHOD_SPECS", "make_estimator"]
