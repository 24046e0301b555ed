"""Calibration: a run's figures against the human verdicts, the promotion rules, the report and its charts."""
