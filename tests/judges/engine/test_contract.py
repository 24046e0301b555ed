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


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (True, True, True),
        (True, False, False),
        (["a"], {"a": 1}, False),  # a list is not an object with the same keys
        (["a"], "a", False),
    ],
)
def test_json_equal_keeps_booleans_lists_and_objects_apart(a, b, equal):
    assert json_equal(a, b) is equal


# ---- each check's detail: stored with the judgment and shown in its reason, word for word --------

OTHER_CALLS = {"toolCalls": [{"name": "refund", "argument": {}}, {"argument": 1}]}


@pytest.mark.parametrize(
    ("name", "case", "config", "passed", "detail"),
    [
        ("answer_present", tool_case(output="  Shipped.  "), {}, True, "answer of 8 characters"),
        ("answer_present", tool_case(output=" "), {}, False, "the answer is empty"),
        ("expected_tool", policy_case(), {}, True, "not applicable: no tool call is expected"),
        ("expected_tool", tool_case(), {}, True, "lookup_order was called"),
        ("expected_tool", tool_case(trace={"toolCalls": []}), {}, False,
         "lookup_order was not called (called: none)"),
        ("expected_tool", tool_case(trace=OTHER_CALLS), {}, False,
         "lookup_order was not called (called: refund, None)"),
        ("expected_tool_argument", policy_case(), {}, True, "not applicable: no argument to check"),
        ("expected_tool_argument", tool_case(trace={"toolCalls": []}), {}, False,
         'lookup_order was not called, so not with {"order_id": "ORD-101"}'),
        ("expected_tool_argument", tool_case(), {}, True, 'lookup_order called with {"order_id": "ORD-101"}'),
        # Text that is not JSON is not the expected object; keys are shown sorted, accents as they are.
        ("expected_tool_argument",
         tool_case(expected_tool_argument={"id": "ORD-101", "city": "Zürich"},
                   trace={"toolCalls": [{"name": "lookup_order", "argument": "ORD-101"},
                                        {"name": "lookup_order", "argument": {"id": "ORD-9"}}]}),
         {}, False,
         'lookup_order called with "ORD-101", {"id": "ORD-9"}, expected {"city": "Zürich", "id": "ORD-101"}'),
        ("no_tool_when_none_expected", tool_case(), {}, True, "not applicable: a tool call is expected"),
        ("no_tool_when_none_expected", policy_case(trace=OTHER_CALLS), {}, False,
         "no tool call expected, but called: refund, None"),
        ("no_tool_when_none_expected", policy_case(), {}, True, "no tool called"),
        ("expected_source", tool_case(), {}, True, "not applicable: retrieval is not checked"),
        ("expected_source", policy_case(), {}, True, "returns-policy was retrieved"),
        ("expected_source", policy_case(trace={"retrievedSources": ["shipping-faq", "faq-2"]}), {}, False,
         "returns-policy was not retrieved (retrieved: shipping-faq, faq-2)"),
        ("expected_source", policy_case(trace={}), {}, False, "returns-policy was not retrieved (retrieved: none)"),
        ("must_match", tool_case(), {"must_match": ["ORD", "Friday"]}, True, "all 2 pattern(s) match"),
        ("must_match", tool_case(), {"must_match": ["refund", "ORD", "(?i)monday"]}, False,
         "no match for 'refund', '(?i)monday'"),
        ("must_match", tool_case(output=None), {"must_match": ["ORD"]}, False, "no match for 'ORD'"),
        ("must_not_match", tool_case(), {"must_not_match": ["refund", "monday"]}, True, "none of 2 pattern(s) match"),
        ("must_not_match", tool_case(), {"must_not_match": ["ORD", "refund", "Friday"]}, False,
         "forbidden match for 'ORD', 'Friday'"),
        ("must_not_match", tool_case(output=None), {"must_not_match": ["."]}, True, "none of 1 pattern(s) match"),
    ],
)
def test_each_check_says_what_it_found(name, case, config, passed, detail):
    assert checks_of(case, name, **config)[name] == {"name": name, "passed": passed, "detail": detail}


@pytest.mark.parametrize(("length", "cut"), [(118, False), (119, True), (300, True)])
def test_a_long_argument_is_cut_to_120_characters(length, cut):
    argument = "x" * length  # shown as JSON text: two quotes more
    case = tool_case(trace={"toolCalls": [{"name": "lookup_order", "argument": argument}]})
    detail = checks_of(case, "expected_tool_argument")["expected_tool_argument"]["detail"]
    got = detail.removeprefix("lookup_order called with ").removesuffix(', expected {"order_id": "ORD-101"}')
    assert got == (f'"{argument}'[:117] + "..." if cut else f'"{argument}"')


SCHEMA = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "object"}}}


@pytest.mark.parametrize(
    ("output", "detail"),
    [
        ('{"a": {}, "b": 2}', "the answer validates against the schema"),
        # The first error by its path, whatever order the schema lists its properties in.
        ('{"b": "two", "a": 1}', "2 schema error(s); at a: 1 is not of type 'object'"),
        ('{"b": [{"c": 1}]}', "1 schema error(s); at b: [{'c': 1}] is not of type 'integer'"),
        ("[]", "1 schema error(s); at (root): [] is not of type 'object'"),
    ],
)
def test_a_schema_error_is_told_at_its_path(output, detail):
    check = checks_of(tool_case(output=output), "json_schema", json_schema=SCHEMA)["json_schema"]
    assert (check["passed"], check["detail"]) == (detail.startswith("the answer validates"), detail)


def test_a_nested_schema_error_names_its_whole_path():
    schema = {"type": "object", "properties": {"order": {"type": "object", "properties": {"eta": {"type": "integer"}}}}}
    check = checks_of(tool_case(output='{"order": {"eta": "soon"}}'), "json_schema", json_schema=schema)["json_schema"]
    assert check["detail"] == "1 schema error(s); at order/eta: 'soon' is not of type 'integer'"
