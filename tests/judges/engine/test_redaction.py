"""Neither a key nor any fragment of it a provider echoes reaches a reason."""

import json

import pytest

from judges.engine import KEY_REFUSED, judge_case, redact_key

from .conftest import FAKE_KEY
from .factories import judge_config, tool_case

KEY = "sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"invalid key {KEY}.", "invalid key ***."),
        (
            "Incorrect API key provided: sk-proj-****************************1Hg0Fe.",
            "Incorrect API key provided: " + "*" * 34 + ".",  # head and tail hidden, the provider's mask kept
        ),
        ("key ending 0Fe ok", "key ending 0Fe ok"),  # three characters give nothing away
        ("key ending g0Fe.", "key ending ***."),
        ("key starting sk-p…", "key starting ***…"),
        ("a middle run Ts6Rq5Po4Nm here", "a middle run *** here"),
        ("nothing of it here", "nothing of it here"),
    ],
)
def test_redact_key_hides_the_key_and_its_fragments(text, expected):
    assert redact_key(text, KEY) == expected


def test_a_placeholder_key_is_hidden_whole_but_its_words_stay():
    # The demo's key: before, the stand-in's reason "scripted stand-in, not a model" read "scripted ***, not a model".
    demo = "stand-in-needs-no-key"
    assert redact_key("scripted stand-in, not a model", demo) == "scripted stand-in, not a model"
    assert redact_key(f"bad key {demo}!", demo) == "bad key ***!"
    assert redact_key("key sk-pro…", "sk-proj-Ab3") == "key ***…"  # a key with digits is still hidden in part


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("fault", ["401", "401_masked", "403"])
def test_a_refused_key_echoed_whole_or_masked_is_never_shown(fake, env, provider, fault):
    fake.control(fault=fault)
    j = judge_case(tool_case(), judge_config(provider), 1, env=env)
    assert (j.outcome, j.error) == ("not_evaluated", KEY_REFUSED)
    assert "***" in j.reason
    stored = json.dumps(j.to_dict())
    assert FAKE_KEY not in stored
    assert FAKE_KEY[:8] not in stored and FAKE_KEY[-4:] not in stored
