"""What every CI-command test shares: the gate step's cache key, as a pipeline gives it to that step (without
it the command keeps no cache: docs/gate.md, "The cache folder"). Tests of running without one unset it."""

import pytest


@pytest.fixture(autouse=True)
def cache_key(monkeypatch):
    monkeypatch.setenv("EVALHUB_CACHE_KEY", "the gate step's cache key, 32 bytes or more")
