"""Hashes pinned to digests worked out by hand, not rebuilt the way the code builds them.

Each fixture is the canonical JSON written out by hand (sorted keys, no spaces, ASCII escapes) and its
digest as `printf '%s' '<text>' | sha256sum` prints it. A change to what is hashed or how makes these
fail: such a change needs a migration of the stored hashes and cache keys, and a note in the
docs (docs/gate.md, its versioning notes) that exported gate configs must be exported again.
"""

import hashlib

from judges.engine import JudgeConfig
from judges.engine.cache import cache_key, cache_scope, case_content_key

CONFIG = {"rubric": "no-secrets", "criteria": "No credential in the answer.", "layers": ["contract"],
          "contract_checks": ["no_secrets"], "prompt_template": "Grade {answer} against {criteria}."}
CONFIG_CANONICAL = (
    '{"contract_checks":["no_secrets"],"criteria":"No credential in the answer.","json_schema":null,'
    '"layers":["contract"],"max_attempts":3,"model":null,"model_family":null,"must_match":[],'
    '"must_not_match":[],"output_kind":"verdict","params":{},"pass_score":4,"policy":"",'
    '"prompt_template":"Grade {answer} against {criteria}.","provider":null,"rubric":"no-secrets",'
    '"secondary":null,"timeout_s":30.0}'
)
CONFIG_HASH = "f9f0e1136e8997b85a2ce32f6dc7368017917767b3d3fedce29080ef4d04efce"

CASE = {
    "external_id": "ret-001",  # not judged content: no part of the key
    "input": "Can I return shoes?",
    "output": "Yes — within 30 days.",
    "trace": {"toolCalls": [{"name": "lookup_order", "argument": {"order": 42}}]},
    "golden_answer": "Returns: 30 days.",
    "category": "policy",
    "kind": "good",  # not judged content either
    "metadata": {"references": ["Thirty days."], "agent_model": "gpt-4o-mini-2024-07-18"},
}
CASE_CANONICAL = (
    '{"category":"policy","expected_behaviour":null,"expected_source":null,"expected_tool":null,'
    '"expected_tool_argument":null,"golden_answer":"Returns: 30 days.","input":"Can I return shoes?",'
    '"output":"Yes \\u2014 within 30 days.","references":["Thirty days."],'
    '"trace":{"toolCalls":[{"argument":{"order":42},"name":"lookup_order"}]}}'
)
CASE_KEY = "783f76a30bcad8a6f4ce60ed4a3f2629fcff3eef41b3711ecb0135b5a5dd6984"
CACHE_KEY_REPEAT_2 = "63b5a0a4da8a7609127d978664205dfe912199a4897f7ac5db7d03dc5a7a9b66"
# A run's salt, with a quote and a non-ASCII letter to escape: '..."repeat":2,"salt":"run:7 \u00e9\"x"}'.
SALT = 'run:7 é"x'
SALTED_KEY_REPEAT_2 = "a76bff380c939f946f6cfe341365e74f308426f82d744d2f1885519b4b98d2ce"


def test_the_fixtures_are_what_sha256sum_says():
    assert hashlib.sha256(CONFIG_CANONICAL.encode()).hexdigest() == CONFIG_HASH
    assert hashlib.sha256(CASE_CANONICAL.encode()).hexdigest() == CASE_KEY
    cache_payload = f'{{"case":"{CASE_KEY}","config_hash":"{CONFIG_HASH}","repeat":2}}'
    assert hashlib.sha256(cache_payload.encode()).hexdigest() == CACHE_KEY_REPEAT_2
    salted = cache_payload.removesuffix("}") + ',"salt":"run:7 \\u00e9\\"x"}'
    assert hashlib.sha256(salted.encode()).hexdigest() == SALTED_KEY_REPEAT_2


def test_a_known_config_has_its_known_hash():
    assert JudgeConfig.from_dict(CONFIG).config_hash == CONFIG_HASH
    assert JudgeConfig.from_dict(CONFIG).to_dict(include_hash=True)["config_hash"] == CONFIG_HASH


def test_a_known_case_has_its_known_content_key():
    assert case_content_key(CASE) == CASE_KEY
    # Fields that are not judged content leave the key alone.
    unjudged = {"external_id": "other", "kind": "bad", "metadata": {"references": ["Thirty days."]}}
    assert case_content_key(CASE | unjudged) == CASE_KEY


def test_a_known_judgment_has_its_known_cache_key():
    assert cache_key(CASE, CONFIG_HASH, 2) == CACHE_KEY_REPEAT_2
    assert cache_key(CASE, CONFIG_HASH, 1) != CACHE_KEY_REPEAT_2
    assert cache_key(CASE, CONFIG_HASH, 2, SALT) == SALTED_KEY_REPEAT_2


def test_a_scope_with_contract_rules_has_its_known_digest():
    # printf '%s' '{"config_hash":"<CONFIG_HASH>","contract_rules":"kingfisher-secret-scanner 1.5.0; 488 rules"}'
    # | sha256sum; without rules the scope is the config's hash itself, so other configs' keys stay.
    rules = "kingfisher-secret-scanner 1.5.0; 488 rules"
    assert cache_scope(CONFIG_HASH, rules) == "8cc6fce88024e961bd1449300606d94ebdba1ce16e4b3d0e13fcf802640d7122"
    assert cache_scope(CONFIG_HASH) == CONFIG_HASH
