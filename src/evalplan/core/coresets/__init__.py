"""A coreset's predictions: predictors, intervals, the design estimator, metrics, ``method: "auto"``."""
