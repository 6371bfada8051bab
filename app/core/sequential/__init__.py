"""Sequential evaluation: single-target BayesAME (papers/004) and its baselines."""

from .config import METHODS, SessionConfig
from .estimator import Z975, SequentialEstimator
from .hyper import fit_alpha_beta, neg_log_marginal_likelihood
from .prior import BucketPrior

__all__ = ["METHODS", "SessionConfig", "BucketPrior", "SequentialEstimator", "Z975",
           "fit_alpha_beta", "neg_log_marginal_likelihood"]
