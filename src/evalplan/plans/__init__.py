"""Budget plans (``POST /v1/plans``, issue 16 §4): the smallest coreset per benchmark that reaches a precision."""
