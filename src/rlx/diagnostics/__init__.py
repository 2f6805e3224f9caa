"""Diagnostics: the metric vocabulary, and (later) the doctor's rules and run reports."""

from rlx.diagnostics import metrics

__all__ = ["metrics"]
