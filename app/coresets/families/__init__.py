"""Coreset method families, one module each, behind ``base.CoresetFamily`` (see ``app.coresets.registry``)."""
