"""RepCore (paper 003, "Learning More from Less"): aligned hidden-state embeddings (§2.2,
``alignment``), consensus spherical k-means anchors (§2.3, ``anchors``), ridge extrapolation
(§2.4, ``extrapolation``) and a synthetic data generator (``synthetic``).

Import the submodules directly: only ``alignment`` needs torch, and the API process, which
predicts with ``extrapolation``, must not load it.
"""
