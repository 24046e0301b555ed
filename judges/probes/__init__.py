"""Bias probes: a run judged again on changed cases, and what moved."""
