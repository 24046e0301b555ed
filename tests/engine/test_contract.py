import pytest

from judges.engine import JudgeConfig, json_equal, judge_case, run_contract_checks

from .factories import contract_config, policy_case, tool_case

ALL_TOOL_CHECKS = ("answer_present", "expected_tool", "expected_tool_argument", "no_tool_when_none_expected")


def checks_of(case, *names, **config):
    cfg = JudgeConfig.from_dict(contract_config(*names, **config))
    return {c["name"]: c for c in run_contract_checks(case, cfg)}


def test_it_passes_the_right_answer_with_the_right_call():
    j = judge_case(tool_case(), contract_config(*ALL_TOOL_CHECKS), 1)
    assert j.outcome == "pass"
    assert j.layer == "contract"
    assert [c["name"] for c in j.checks] == list(ALL_TOOL_CHECKS)
    assert all(c["passed"] for c in j.checks)
    assert j.provider_calls == 0


def test_seed_the_right_answer_without_the_required_tool_call_fails():
    case = tool_case(external_id="tools-002", trace={"retrievedSources": [], "toolCalls": [], "context": ""})
    j = judge_case(case, contract_config(*ALL_TOOL_CHECKS), 1)
    assert j.outcome == "fail"
    failed = [c["name"] for c in j.checks if not c["passed"]]
    assert failed == ["expected_tool", "expected_tool_argument"]
    assert "lookup_order was not called" in j.reason


def test_seed_the_right_tool_with_the_wrong_order_fails_the_argument_check():
    call = {"name": "lookup_order", "argument": {"order_id": "ORD-999"}, "result": {"status": "unknown"}}
    case = tool_case(external_id="tools-003", trace={"toolCalls": [call]})
    checks = checks_of(case, *ALL_TOOL_CHECKS)
    assert checks["expected_tool"]["passed"] is True
    assert checks["expected_tool_argument"]["passed"] is False
    assert "ORD-999" in checks["expected_tool_argument"]["detail"]
    assert "ORD-101" in checks["expected_tool_argument"]["detail"]
    assert judge_case(case, contract_config(*ALL_TOOL_CHECKS), 1).outcome == "fail"


def test_seed_a_policy_question_answered_with_a_tool_call_fails_no_tool_expected():
    call = {"name": "lookup_order", "argument": {"order_id": "ORD-101"}, "result": {}}
    case = policy_case(trace={"retrievedSources": ["returns-policy"], "toolCalls": [call], "context": ""})
    checks = checks_of(case, *ALL_TOOL_CHECKS)
    assert checks["no_tool_when_none_expected"]["passed"] is False
    assert "lookup_order" in checks["no_tool_when_none_expected"]["detail"]
    assert checks["expected_tool"]["passed"] is True  # nothing expected, nothing to object to


def test_a_policy_answer_without_a_tool_call_passes_no_tool_expected():
    assert checks_of(policy_case(), "no_tool_when_none_expected")["no_tool_when_none_expected"]["passed"]


def test_tool_checks_do_not_apply_where_nothing_is_expected():
    checks = checks_of(policy_case(), "expected_tool", "expected_tool_argument")
    assert all(c["passed"] and c["detail"].startswith("not applicable") for c in checks.values())
    case = tool_case(expected_tool_argument=None, trace={"toolCalls": [{"name": "lookup_order", "argument": 1}]})
    assert checks_of(case, "expected_tool_argument")["expected_tool_argument"]["detail"].startswith("not applicable")


def test_a_no_tool_expected_check_does_not_apply_to_a_tools_case():
    assert checks_of(tool_case(), "no_tool_when_none_expected")["no_tool_when_none_expected"]["passed"]


def test_an_argument_given_as_json_text_is_compared_as_json():
    call = {"name": "lookup_order", "argument": '{"order_id": "ORD-101"}', "result": {}}
    assert checks_of(tool_case(trace={"toolCalls": [call]}), "expected_tool_argument")["expected_tool_argument"][
        "passed"
    ]


def test_any_call_of_the_tool_may_carry_the_argument():
    calls = [
        {"name": "lookup_order", "argument": {"order_id": "ORD-999"}},
        {"name": "lookup_order", "argument": {"order_id": "ORD-101"}},
    ]
    assert checks_of(tool_case(trace={"toolCalls": calls}), "expected_tool_argument")["expected_tool_argument"][
        "passed"
    ]


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}, True),
        (1, 1.0, True),
        (1, True, False),
        ("1", 1, False),
        ([1, 2], [2, 1], False),
        ({"a": None}, {}, False),
        (None, None, True),
    ],
)
def test_json_equal(a, b, equal):
    assert json_equal(a, b) is equal


def test_answer_present():
    assert checks_of(tool_case(), "answer_present")["answer_present"]["passed"]
    assert not checks_of(tool_case(output="   \n"), "answer_present")["answer_present"]["passed"]
    assert not checks_of(tool_case(output=None), "answer_present")["answer_present"]["passed"]


def test_expected_source():
    case = policy_case()
    assert checks_of(case, "expected_source")["expected_source"]["passed"]
    missing = policy_case(trace={"retrievedSources": ["shipping-faq"], "toolCalls": []})
    check = checks_of(missing, "expected_source")["expected_source"]
    assert not check["passed"] and "returns-policy was not retrieved" in check["detail"]
    assert checks_of(tool_case(), "expected_source")["expected_source"]["detail"].startswith("not applicable")


def test_must_match_and_must_not_match():
    cfg = {"must_match": [r"ORD-\d{3}", r"(?i)friday"], "must_not_match": [r"(?i)guarantee"]}
    checks = checks_of(tool_case(), "must_match", "must_not_match", **cfg)
    assert checks["must_match"]["passed"] and checks["must_not_match"]["passed"]
    case = tool_case(output="We guarantee delivery of your parcel.")
    checks = checks_of(case, "must_match", "must_not_match", **cfg)
    assert not checks["must_match"]["passed"]
    assert "ORD-" in checks["must_match"]["detail"]
    assert not checks["must_not_match"]["passed"]


def test_json_schema():
    schema = {
        "type": "object",
        "properties": {"order_id": {"type": "string", "pattern": "^ORD-"}, "eta_days": {"type": "integer"}},
        "required": ["order_id", "eta_days"],
    }
    good = tool_case(output='{"order_id": "ORD-101", "eta_days": 2}')
    assert checks_of(good, "json_schema", json_schema=schema)["json_schema"]["passed"]
    wrong_type = tool_case(output='{"order_id": "ORD-101", "eta_days": "two"}')
    check = checks_of(wrong_type, "json_schema", json_schema=schema)["json_schema"]
    assert not check["passed"] and "eta_days" in check["detail"]
    not_json = checks_of(tool_case(), "json_schema", json_schema=schema)["json_schema"]
    assert not not_json["passed"] and "not JSON" in not_json["detail"]


def test_a_failed_contract_calls_no_model(fake, env):
    config = {
        "rubric": "order-status",
        "criteria": "c",
        "layers": ["contract", "behavioral"],
        "contract_checks": ["expected_tool"],
        "provider": "openai",
        "model": "gpt-4o-mini-2024-07-18",
        "base_url_env": "EVALHUB_JUDGE_OPENAI_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY",
    }
    case = tool_case(trace={"toolCalls": []})
    j = judge_case(case, config, 1, env=env)
    assert (j.outcome, j.layer, j.provider_calls) == ("fail", "contract", 0)
    assert fake.stats()["total"] == 0
    passed = judge_case(tool_case(), config, 1, env=env)
    assert (passed.outcome, passed.layer, passed.provider_calls) == ("pass", "behavioral", 1)
    assert passed.checks == [{"name": "expected_tool", "passed": True, "detail": "lookup_order was called"}]
