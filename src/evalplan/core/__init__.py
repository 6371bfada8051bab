"""The science: pure numpy/scipy/scikit-learn/torch code, no web, DB or queue imports."""
