"""Drift checks: re-judging a promoted rubric's evidence and comparing the figures."""
