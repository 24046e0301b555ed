"""The editor client through the real SDKs over HTTP against the stand-in, whose answers a test scripts."""

import pytest

from judges.editor import EditorSpec, EditorTimeout, EditorUnavailable, MalformedEditorAnswer, ask_editor
from judges.engine import SpendTracker
from judges.engine.chain import RetryPolicy

EDITOR_MODEL = "editor-model-2025-01-01"
PRICES = {EDITOR_MODEL: {"input_per_mtok": 1.0, "output_per_mtok": 4.0}}
SCHEMA = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"type": "string"}}, "note": {"type": ["string", "null"]}},
    "required": ["items", "note"],
    "additionalProperties": False,
}
QUICK = RetryPolicy(backoff_base_s=0.01, backoff_max_s=0.02)


def spec(provider: str, **extra) -> EditorSpec:
    url_env = "EVALHUB_JUDGE_ANTHROPIC_URL" if provider == "anthropic" else "EVALHUB_JUDGE_OPENAI_URL"
    return EditorSpec.from_dict({"provider": provider, "model": EDITOR_MODEL, "base_url_env": url_env,
                                 "api_key_env": "EVALHUB_JUDGE_API_KEY", **extra})


def ask(provider: str, **extra):
    return ask_editor(spec(provider, **extra.pop("spec", {})), system="You edit.", user="Propose two items.",
                      schema=SCHEMA, prices=PRICES, retry=QUICK, **extra)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_it_returns_the_scripted_answer_parsed_with_its_tokens_and_cost(fake_provider, provider):
    fake_provider.control(model=EDITOR_MODEL, script=[{"items": ["a", "b"], "note": None}])

    answered = ask(provider)

    assert answered.answer == {"items": ["a", "b"], "note": None}
    assert answered.calls == 1 and answered.input_tokens > 0 and answered.output_tokens > 0
    price = PRICES[EDITOR_MODEL]
    assert answered.cost_usd == pytest.approx(
        (answered.input_tokens * price["input_per_mtok"] + answered.output_tokens * price["output_per_mtok"]) / 1e6)
    [request] = fake_provider.requests()
    assert request["scripted"] is True and request["structured"] is True
    assert (request["system"], request["prompt"]) == ("You edit.", "Propose two items.")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_answer_off_the_schema_is_malformed_after_its_attempts_and_counts_its_cost(fake_provider, provider):
    fake_provider.control(model=EDITOR_MODEL, script=[{"items": "not a list", "note": None}])

    with pytest.raises(MalformedEditorAnswer) as caught:
        ask(provider)

    assert "items" in str(caught.value) and caught.value.calls == 2
    assert caught.value.cost_usd > 0


def test_text_that_is_not_json_is_malformed(fake_provider):
    fake_provider.control(model=EDITOR_MODEL, script=[{"items": [], "note": None}], fault="malformed_json")

    with pytest.raises(MalformedEditorAnswer, match="not JSON"):
        ask("openai", spec={"max_attempts": 1})


def test_an_editor_that_hangs_times_out(fake_provider):
    fake_provider.control(model=EDITOR_MODEL, script=[{"items": [], "note": None}], fault="timeout", hang_s=5)

    with pytest.raises(EditorTimeout) as caught:
        ask("openai", spec={"timeout_s": 0.5, "max_attempts": 1})

    assert caught.value.category == "timeout"


def test_the_spend_cap_stops_the_call_before_it_is_made(fake_provider):
    fake_provider.control(model=EDITOR_MODEL, script=[{"items": [], "note": None}])

    with pytest.raises(EditorUnavailable, match="spend cap"):
        ask("openai", spend=SpendTracker(cap_usd=0.000001))

    assert fake_provider.requests() == []


def test_a_variable_a_judge_may_not_read_is_refused_when_the_spec_is_made_and_when_it_runs(fake_provider):
    with pytest.raises(ValueError, match="editor.api_key_env: DATABASE_URL is never allowed"):
        spec("openai", api_key_env="DATABASE_URL")
    with pytest.raises(ValueError, match="editor.api_key_env: TEAM_KEY is not an allowed variable"):
        spec("openai", api_key_env="TEAM_KEY")
    operator_allowed = EditorSpec.from_dict({"provider": "openai", "model": EDITOR_MODEL, "api_key_env": "TEAM_KEY"},
                                            extra_allowed=["TEAM_KEY"])
    with pytest.raises(EditorUnavailable, match="not an allowed variable"):
        ask_editor(operator_allowed, system="s", user="u", schema=SCHEMA, prices=PRICES)


@pytest.mark.parametrize(("changed", "said"), [
    ({"colour": "red"}, "editor.colour"),
    ({"provider": "nope"}, "editor.provider"),
    ({"provider": "openai-compatible", "base_url_env": None}, "editor.base_url_env"),
    ({"model": ""}, "editor.model"),
    ({"timeout_s": 0}, "editor.timeout_s"),
    ({"max_attempts": 6}, "editor.max_attempts"),
])
def test_a_bad_field_is_refused_by_name(changed, said):
    fine = {"provider": "openai", "model": f"  {EDITOR_MODEL} ", "api_key_env": "EVALHUB_JUDGE_API_KEY"}
    assert EditorSpec.from_dict(fine).model == EDITOR_MODEL
    with pytest.raises(ValueError, match=said):
        EditorSpec.from_dict({**fine, **changed})


def test_the_default_editor_is_the_configs_primary():
    config = {"rubric": "r", "criteria": "c", "layers": ["behavioral"], "provider": "anthropic",
              "model": "claude-x-2025-01-01", "api_key_env": "EVALHUB_JUDGE_API_KEY",
              "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL", "params": {"temperature": 0, "max_tokens": 50}}

    editor = EditorSpec.from_config(config)

    assert (editor.provider, editor.model, editor.api_key_env) == ("anthropic", "claude-x-2025-01-01",
                                                                   "EVALHUB_JUDGE_API_KEY")
    assert editor.params == {"temperature": 0} and editor.max_tokens > 50
    assert EditorSpec.from_config(config, model="claude-y-2025-02-02").model == "claude-y-2025-02-02"
