import pytest

from judges.engine import RetryPolicy
from judges.testing.fake_provider import FakeProvider

# Looks like a key; the tests check it never reaches a reason or an error.
FAKE_KEY = "sk-test-0123456789abcdef"


@pytest.fixture(scope="session")
def fake_server():
    with FakeProvider() as fake:
        yield fake


@pytest.fixture
def fake(fake_server):
    """The fake provider, reset before each test: no fault, no latency, rule always_pass."""
    fake_server.reset()
    yield fake_server
    fake_server.reset()


@pytest.fixture
def env(fake):
    return {
        "EVALHUB_JUDGE_OPENAI_URL": fake.openai_base_url,
        "EVALHUB_JUDGE_ANTHROPIC_URL": fake.anthropic_base_url,
        "EVALHUB_JUDGE_API_KEY": FAKE_KEY,
    }


@pytest.fixture
def quick_retry():
    """Backoff in milliseconds so fault tests stay fast; Retry-After still decides its own waits."""
    return RetryPolicy(backoff_base_s=0.01, backoff_max_s=0.05)
