"""Runs: starting, working and importing runs of a config over a dataset."""
