"""Coreset method families, one module each, behind ``base.CoresetFamily`` (see ``evalplan.coresets.registry``)."""
