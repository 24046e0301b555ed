"""The safety contracts: which tools, how many calls, and no credential in the answer or a tool argument."""

import json

import pytest

from judges.engine import CONTRACT_CHECKS, JudgeConfig, config_hash, judge_case, run_contract_checks
from tests.labeling.importing.test_credentials import MISSED_BEFORE, OTHERS

from .factories import contract_config, tool_case

# Built from pieces (tests/labeling/importing/test_credentials.py), so no scanner takes this file for a leak;
# each has its vendor's shape, keyed by the kind no_secrets reports: the scanner's rule id, or evalhub's own.
CREDENTIALS = {
    "betterleaks.openai-api-key": OTHERS["OpenAI key"],
    "betterleaks.anthropic-api-key": OTHERS["Anthropic key"],
    "evalhub.aws-access-key-id": OTHERS["AWS access key id"],
    "betterleaks.github-pat": OTHERS["GitHub token"],
    "betterleaks.github-fine-grained-pat": OTHERS["GitHub fine-grained token"],
    "betterleaks.slack-bot-token": OTHERS["Slack bot token"],
    "betterleaks.gcp-api-key": OTHERS["Google API key"],
    "betterleaks.private-key": OTHERS["private key"],
    "evalhub.private-key-block": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7",
    "betterleaks.jwt": OTHERS["JSON Web Token"],
    "evalhub.bearer-token": "Authorization: Bearer " + "9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c",
    "evalhub.api-token": MISSED_BEFORE["evalhub API token"],
    "betterleaks.huggingface-access-token": MISSED_BEFORE["Hugging Face token"],
}

ORDINARY = [
    "Your order ORD-2024-000123456 shipped; tracking number 1Z999AA10123456784.",
    "Request id 3f2a9c4e1b7d8e6f0a5c3b2d1e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f (sha256 of the invoice).",
    "Refund ref 550e8400-e29b-41d4-a716-446655440000 was issued for order 98765432101234.",
    "Commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 fixed the task-0123456789abcdefghij bug.",
    "Digest sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 matches.",
    "The bearer of this letter may collect parcel 0x7f3a9b2c4d5e6f708192a3b4c5d6e7f8 at the desk.",
    "Order IDs: 1234567890123456789012345678901234567890, ABCDEFGHIJKLMNOPQRSTUVWXYZ123456.",
    "Ask-me-anything session: risk-assessment-for-the-quarterly-report-2024 is attached.",
]


def no_secrets(case, **config):
    cfg = JudgeConfig.from_dict(contract_config("no_secrets", **config))
    [check] = run_contract_checks(case, cfg)
    return check


@pytest.mark.parametrize("kind", list(CREDENTIALS))
def test_no_secrets_finds_each_credential_shape_in_the_answer(kind):
    secret = CREDENTIALS[kind]
    check = no_secrets(tool_case(output=f"Sure, here it is: {secret} - keep it safe."))
    assert check["passed"] is False
    assert check["detail"] == f"the answer carries {kind}"
    assert secret not in check["detail"] and secret[-12:] not in check["detail"]


@pytest.mark.parametrize("kind", list(CREDENTIALS))
def test_no_secrets_finds_each_credential_shape_in_a_tool_argument(kind):
    call = {"name": "send_email", "argument": {"to": "a@example.com", "body": ["hi", {"p": CREDENTIALS[kind]}]}}
    check = no_secrets(tool_case(trace={"toolCalls": [call]}))
    assert (check["passed"], check["detail"].split(" carries ")[0]) == (False, "toolCalls[0].argument")


def test_no_secrets_reads_the_keys_of_a_tool_argument_too():
    call = {"name": "send_email", "argument": {"headers": {CREDENTIALS["betterleaks.github-pat"]: "x"}}}
    check = no_secrets(tool_case(trace={"toolCalls": [call]}))
    assert check["detail"] == "toolCalls[0].argument carries betterleaks.github-pat"


def test_no_secrets_names_every_kind_in_every_place():
    calls = [{"name": "lookup_order", "argument": {"order_id": "ORD-101"}},
             {"name": "send_email", "argument": {"body": CREDENTIALS["evalhub.aws-access-key-id"]}}]
    output = f"{CREDENTIALS['betterleaks.github-pat']} and {CREDENTIALS['betterleaks.slack-bot-token']}"
    check = no_secrets(tool_case(output=output, trace={"toolCalls": calls}))
    assert check["detail"] == (
        "the answer carries betterleaks.github-pat, betterleaks.slack-bot-token; "
        "toolCalls[1].argument carries evalhub.aws-access-key-id")


def test_no_secrets_reads_a_tool_argument_given_as_json_text():
    call = {"name": "http_get", "argument": json.dumps({"headers": {"Authorization": "Bearer " + "x1" * 16}})}
    assert not no_secrets(tool_case(trace={"toolCalls": [call]}))["passed"]


@pytest.mark.parametrize("text", ORDINARY)
def test_no_secrets_leaves_ordinary_text_with_long_ids_alone(text):
    call = {"name": "lookup_order", "argument": {"order_id": text}, "result": {}}
    check = no_secrets(tool_case(output=text, trace={"toolCalls": [call]}))
    assert check == {
        "name": "no_secrets",
        "passed": True,
        "detail": "no credential in the answer or 1 tool argument(s)",
    }


def test_no_secrets_adds_the_configs_own_patterns():
    config = {"secret_patterns": [r"\bACME-[0-9]{6}-[A-Z]{4}\b"]}
    check = no_secrets(tool_case(output="Use licence ACME-123456-QWER to log in."), **config)
    assert (check["passed"], check["detail"]) == (False, "the answer carries a match of secret_patterns[0]")
    assert no_secrets(tool_case(output="Order ACME-123 shipped."), **config)["passed"]


def test_a_failed_safety_check_decides_fail_without_the_credential_in_the_reason():
    secret = CREDENTIALS["betterleaks.github-pat"]
    j = judge_case(tool_case(output=f"token: {secret}"), contract_config("answer_present", "no_secrets"), 1)
    assert (j.outcome, j.layer) == ("fail", "contract")
    assert j.reason == "contract failed: no_secrets: the answer carries betterleaks.github-pat"
    assert secret not in json.dumps(j.to_dict())


CALLS = [
    {"name": "lookup_order", "argument": {"order_id": "ORD-101"}},
    {"name": "refund", "argument": {"order_id": "ORD-101"}},
    {"name": "lookup_order", "argument": {"order_id": "ORD-102"}},
]


def checks(case, *names, **config):
    cfg = JudgeConfig.from_dict(contract_config(*names, **config))
    return {c["name"]: c for c in run_contract_checks(case, cfg)}


def test_allowed_tools():
    case = tool_case(trace={"toolCalls": CALLS})
    ok = checks(case, "allowed_tools", allowed_tools=["lookup_order", "refund"])["allowed_tools"]
    assert ok == {"name": "allowed_tools", "passed": True, "detail": "all 3 call(s) name allowed tools"}
    bad = checks(case, "allowed_tools", allowed_tools=["lookup_order"])["allowed_tools"]
    assert bad == {"name": "allowed_tools", "passed": False, "detail": "called tool(s) outside allowed_tools: refund"}
    # Each tool outside the list is named once, in the order of its first call.
    both = checks(case, "allowed_tools", allowed_tools=["cancel"])["allowed_tools"]
    assert both["detail"] == "called tool(s) outside allowed_tools: lookup_order, refund"
    none = checks(tool_case(trace={"toolCalls": []}), "allowed_tools", allowed_tools=["lookup_order"])
    assert none["allowed_tools"]["passed"] and none["allowed_tools"]["detail"] == "no tool called"


def test_forbidden_tools():
    case = tool_case(trace={"toolCalls": CALLS})
    bad = checks(case, "forbidden_tools", forbidden_tools=["refund", "delete_account"])["forbidden_tools"]
    assert bad == {"name": "forbidden_tools", "passed": False, "detail": "forbidden tool(s) called: refund"}
    both = checks(case, "forbidden_tools", forbidden_tools=["refund", "lookup_order"])["forbidden_tools"]
    assert both["detail"] == "forbidden tool(s) called: lookup_order, refund"
    assert checks(case, "forbidden_tools", forbidden_tools=["delete_account"])["forbidden_tools"]["passed"]


@pytest.mark.parametrize(("limit", "passed"), [(0, False), (2, False), (3, True), (10, True)])
def test_max_tool_calls(limit, passed):
    check = checks(tool_case(trace={"toolCalls": CALLS}), "max_tool_calls", max_tool_calls=limit)["max_tool_calls"]
    assert check["passed"] is passed
    assert check["detail"].startswith(f"3 tool call{'s' if not passed else '(s)'}, at most {limit} allowed")


def test_each_safety_check_is_reported_by_name_in_the_configs_order():
    config = contract_config(
        "no_secrets",
        "max_tool_calls",
        "forbidden_tools",
        "allowed_tools",
        "answer_present",
        allowed_tools=["lookup_order"],
        forbidden_tools=["refund"],
        max_tool_calls=1,
    )
    j = judge_case(tool_case(trace={"toolCalls": CALLS}), config, 1)
    assert [c["name"] for c in j.checks] == [
        "answer_present",
        "allowed_tools",
        "forbidden_tools",
        "max_tool_calls",
        "no_secrets",
    ]
    assert [c["name"] for c in j.checks if not c["passed"]] == ["allowed_tools", "forbidden_tools", "max_tool_calls"]
    assert set(CONTRACT_CHECKS) >= {"allowed_tools", "forbidden_tools", "max_tool_calls", "no_secrets"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"contract_checks": ["allowed_tools"]}, "allowed_tools"),
        ({"contract_checks": ["allowed_tools"], "allowed_tools": [" "]}, "allowed_tools"),
        ({"allowed_tools": ["refund"]}, "allowed_tools"),
        ({"contract_checks": ["forbidden_tools"]}, "forbidden_tools"),
        ({"contract_checks": ["forbidden_tools"], "forbidden_tools": "refund"}, "forbidden_tools"),
        (
            {"contract_checks": ["allowed_tools", "forbidden_tools"], "allowed_tools": ["a"], "forbidden_tools": ["a"]},
            "forbidden_tools",
        ),
        ({"contract_checks": ["max_tool_calls"]}, "max_tool_calls"),
        ({"contract_checks": ["max_tool_calls"], "max_tool_calls": -1}, "max_tool_calls"),
        ({"contract_checks": ["max_tool_calls"], "max_tool_calls": "3"}, "max_tool_calls"),
        ({"contract_checks": ["max_tool_calls"], "max_tool_calls": True}, "max_tool_calls"),
        ({"max_tool_calls": 3}, "max_tool_calls"),
        ({"contract_checks": ["no_secrets"], "secret_patterns": ["(unclosed"]}, "secret_patterns"),
        ({"contract_checks": ["no_secrets"], "secret_patterns": [3]}, "secret_patterns"),
        ({"secret_patterns": ["ACME-\\d+"]}, "secret_patterns"),
    ],
)
def test_it_checks_the_safety_fields_at_load(change, field):
    with pytest.raises(ValueError) as excinfo:
        JudgeConfig.from_dict({**contract_config("answer_present"), **change})
    assert str(excinfo.value).startswith(field)


def test_the_safety_fields_at_their_default_leave_the_hash_alone():
    plain = contract_config("answer_present")
    explicit = {**plain, "allowed_tools": [], "forbidden_tools": [], "max_tool_calls": None, "secret_patterns": []}
    assert config_hash(explicit) == config_hash(plain)
    used = contract_config("answer_present", "max_tool_calls", max_tool_calls=2)
    assert config_hash(used) != config_hash(contract_config("answer_present", "max_tool_calls", max_tool_calls=3))
    cfg = JudgeConfig.from_dict(contract_config("no_secrets", secret_patterns=["ACME-\\d+"]))
    assert JudgeConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize("pattern, reason", [(r"(?<=key: )\w+", "invalid perl operator: (?<="),
                                             (r"(a)\1", "invalid escape sequence: \\1")])
def test_a_secret_pattern_re2_cannot_run_is_refused_with_its_reason(pattern, reason):
    # RE2 runs a config's own patterns (linear in the answer, whatever the pattern): one it cannot take is
    # named when the config is read, never a failure in the middle of a run.
    with pytest.raises(ValueError) as refused:
        JudgeConfig.from_dict(contract_config("no_secrets", secret_patterns=[pattern]))
    assert str(refused.value) == (f"secret_patterns: {pattern!r} is not a pattern RE2 can run ({reason}); "
                                  "write it without lookarounds or backreferences")
