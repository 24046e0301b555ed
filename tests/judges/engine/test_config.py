import hashlib
import json

import pytest

from judges.engine import DEFAULT_PROMPT_TEMPLATE, JudgeConfig, config_hash, is_pinned_snapshot, model_family

from .factories import contract_config, judge_config


def test_it_fills_defaults_and_round_trips():
    cfg = JudgeConfig.from_dict(judge_config())
    d = cfg.to_dict()
    assert d["prompt_template"] == DEFAULT_PROMPT_TEMPLATE
    assert d["output_kind"] == "verdict"
    assert d["pass_score"] == 4
    assert d["max_attempts"] == 3
    assert d["secondary"] is None
    assert JudgeConfig.from_dict(d) == cfg
    assert json.loads(json.dumps(d)) == d  # plain JSON


def test_it_orders_layers_contract_first():
    cfg = JudgeConfig.from_dict(judge_config(layers=["behavioral", "contract"], contract_checks=["answer_present"]))
    assert cfg.layers == ("contract", "behavioral")


def test_config_hash_is_sha256_of_canonical_json_without_unused_optional_fields():
    d = JudgeConfig.from_dict(judge_config()).to_dict()
    unused = {"allowed_tools", "forbidden_tools", "max_tool_calls", "secret_patterns", "semantic", "policy_ref",
              "policy_sha256"}
    payload = {k: v for k, v in d.items() if k not in unused}
    assert payload["api_key_env"] == "EVALHUB_JUDGE_API_KEY"
    expected = hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert config_hash(d) == expected


def test_config_hash_covers_the_env_names_and_what_is_asked():
    base = config_hash(judge_config())
    # A config whose only change is its key variable is a new version, not "nothing changed".
    assert config_hash(judge_config(api_key_env="EVALHUB_JUDGE_OTHER_KEY")) != base
    assert config_hash(judge_config(base_url_env="EVALHUB_JUDGE_OTHER_URL")) != base
    assert config_hash(judge_config(criteria="Something else.")) != base
    assert config_hash(judge_config(model="gpt-4o-2024-08-06")) != base
    assert config_hash(judge_config(params={"temperature": 0.7, "max_tokens": 300})) != base


def test_config_hash_covers_the_secondarys_env_names_too():
    secondary = {"role": "fallback", "provider": "anthropic", "model": "claude-haiku-4-5-20251001"}
    one = config_hash(judge_config(secondary={**secondary, "base_url_env": "EVALHUB_JUDGE_A"}))
    two = config_hash(judge_config(secondary={**secondary, "base_url_env": "EVALHUB_JUDGE_B"}))
    assert one != two


# The hashes configs had before the env names and the safety checks existed: unchanged for a
# config naming no variable (a contract config), so its gate config stays valid.
CONTRACT_HASH_BEFORE = "38ea5a600edf4bfd9f593a99f74ee5bf15aea26031a860342fe279cf0941a59f"


def test_a_config_that_names_no_variable_keeps_its_hash():
    assert config_hash(contract_config("answer_present", "expected_tool")) == CONTRACT_HASH_BEFORE


def test_config_hash_of_a_partial_dict_equals_that_of_its_full_form():
    d = judge_config()
    assert config_hash(d) == config_hash(JudgeConfig.from_dict(d).to_dict())
    assert config_hash(d) == JudgeConfig.from_dict(d).config_hash


def test_it_accepts_its_own_hash_and_refuses_a_stale_one():
    d = JudgeConfig.from_dict(judge_config()).to_dict(include_hash=True)
    assert JudgeConfig.from_dict(d).config_hash == d["config_hash"]
    with pytest.raises(ValueError, match="config_hash"):
        JudgeConfig.from_dict({**d, "criteria": "edited after hashing"})


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"rubric": ""}, "rubric"),
        ({"rubric": "has spaces"}, "rubric"),
        ({"layers": []}, "layers"),
        ({"layers": ["vibes"]}, "layers"),
        ({"provider": "cohere"}, "provider"),
        ({"model": ""}, "model"),
        ({"output_kind": "stars"}, "output_kind"),
        ({"pass_score": 6}, "pass_score"),
        ({"pass_score": True}, "pass_score"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"params": {"temperature": 3}}, "params.temperature"),
        ({"params": {"max_tokens": 0}}, "params.max_tokens"),
        ({"params": {"messages": []}}, "params"),
        ({"prompt_template": "Grade {answer} against {rubrik}"}, "prompt_template"),
        ({"prompt_template": "Grade the question {question}"}, "prompt_template"),
        ({"api_key_env": "sk-live-abc123/xyz"}, "api_key_env"),
        ({"base_url_env": "https://api.example.com/v1"}, "base_url_env"),
        ({"provider": "openai-compatible", "base_url_env": None}, "base_url_env"),
        ({"temprature": 0}, "temprature"),
        ({"contract_checks": ["answer_present"]}, "contract_checks"),
    ],
)
def test_it_names_the_field_it_rejects(change, field):
    with pytest.raises(ValueError) as excinfo:
        JudgeConfig.from_dict({**judge_config(), **change})
    assert str(excinfo.value).startswith(field)


def test_it_never_echoes_a_key_pasted_into_an_env_name():
    with pytest.raises(ValueError) as excinfo:
        JudgeConfig.from_dict(judge_config(api_key_env="sk-live-SECRET-abc"))
    assert "SECRET" not in str(excinfo.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"contract_checks": []}, "contract_checks"),
        ({"contract_checks": ["answer_present", "answer_present"]}, "contract_checks"),
        ({"contract_checks": ["tool_used"]}, "contract_checks"),
        ({"contract_checks": ["must_match"]}, "must_match"),
        ({"must_match": ["ORD-\\d+"]}, "must_match"),
        ({"contract_checks": ["must_not_match"], "must_not_match": ["(unclosed"]}, "must_not_match"),
        ({"contract_checks": ["json_schema"]}, "json_schema"),
        ({"contract_checks": ["json_schema"], "json_schema": {"type": "nonsense"}}, "json_schema"),
        ({"provider": "openai"}, "provider"),
    ],
)
def test_it_checks_the_contract_fields(change, field):
    with pytest.raises(ValueError) as excinfo:
        JudgeConfig.from_dict({**contract_config("answer_present"), **change})
    assert str(excinfo.value).startswith(field)


def test_a_contract_only_config_needs_no_provider():
    cfg = JudgeConfig.from_dict(contract_config("answer_present", "expected_tool"))
    assert cfg.provider is None and cfg.model is None


def test_it_refuses_a_second_opinion_of_the_same_family():
    secondary = {"role": "second_opinion", "provider": "openai", "model": "gpt-4o-2024-08-06"}
    with pytest.raises(ValueError, match="another model family.*'openai'"):
        JudgeConfig.from_dict(judge_config(secondary=secondary))


def test_it_accepts_a_second_opinion_of_another_family_and_a_same_family_fallback():
    other = {"role": "second_opinion", "provider": "anthropic", "model": "claude-haiku-4-5-20251001"}
    assert JudgeConfig.from_dict(judge_config(secondary=other)).secondary.when == {"mode": "always"}
    same = {"role": "fallback", "provider": "openai", "model": "gpt-4o-2024-08-06"}
    assert JudgeConfig.from_dict(judge_config(secondary=same)).secondary.role == "fallback"


def test_a_local_model_family_can_be_set_where_the_name_says_nothing():
    local = {
        "role": "second_opinion",
        "provider": "openai-compatible",
        "model": "judge-local",
        "model_family": "meta",
        "base_url_env": "LOCAL_URL",
    }
    cfg = JudgeConfig.from_dict(judge_config(secondary=local))
    assert cfg.secondary.family == "meta"


@pytest.mark.parametrize(
    ("when", "message"),
    [
        ({"mode": "sometimes"}, "secondary.when.mode"),
        ({"mode": "categories"}, "secondary.when.categories"),
        ({"mode": "sample", "share": 1.5}, "secondary.when.share"),
        ({"mode": "borderline"}, "secondary.when.mode: borderline needs output_kind scores"),
    ],
)
def test_it_checks_when_a_second_opinion_is_asked(when, message):
    secondary = {"role": "second_opinion", "provider": "anthropic", "model": "claude-haiku-4-5-20251001"}
    with pytest.raises(ValueError, match=message):
        JudgeConfig.from_dict(judge_config(secondary={**secondary, "when": when}))


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gpt-4o-2024-08-06", "openai"),
        ("o3-mini", "openai"),
        ("o1", "openai"),
        ("claude-sonnet-4-5-20250929", "anthropic"),
        ("meta-llama/Llama-3.1-8B-Instruct", "meta"),
        ("llama3.1:8b", "meta"),
        ("mistral-large-2411", "mistral"),
        ("mixtral-8x7b", "mistral"),
        ("gemini-1.5-pro-002", "google"),
        ("gemma2:9b", "google"),
        ("qwen2.5:7b-instruct", "alibaba"),
        ("deepseek-r1-distill-llama-70b", "deepseek"),
        ("judge-local", "unknown"),
    ],
)
def test_model_family(model, family):
    assert model_family(model) == family


def test_model_family_override_wins():
    assert model_family("judge-local", "Meta") == "meta"


@pytest.mark.parametrize(
    ("model", "pinned"),
    [
        ("gpt-4o-2024-08-06", True),
        ("claude-sonnet-4-5-20250929", True),
        ("claude-3-5-sonnet-20241022", True),
        ("gpt-4-0613", True),
        ("gemini-1.5-pro-002", True),
        ("mistral-7b-instruct-v0.3", True),
        ("gpt-4o", False),
        ("claude-sonnet-4-5", False),
        ("claude-3-5-sonnet-latest", False),
        ("mistral-large-latest", False),
        ("o3-mini", False),
        ("llama3.1:8b", False),
    ],
)
def test_is_pinned_snapshot(model, pinned):
    assert is_pinned_snapshot(model) is pinned


@pytest.mark.parametrize("pattern, why", [
    (r"(a)\1", "invalid escape sequence"),
    (r"ORD-(?=\d)", "invalid perl operator"),
])
@pytest.mark.parametrize("field", ["must_match", "must_not_match"])
def test_a_pattern_re2_cannot_take_is_refused_with_its_reason(field, pattern, why):
    spec = {"rubric": "r", "criteria": "c", "layers": ["contract"], "contract_checks": [field], field: [pattern]}
    with pytest.raises(ValueError, match=rf"^{field}: RE2 cannot take pattern 1, .*{why}.*no backreferences"):
        JudgeConfig.from_dict(spec)
