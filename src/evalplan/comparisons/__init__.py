"""Checkpoint comparison: several sessions side by side, and paired "is B better than A?"."""
