"""Cases and configs for the engine's tests, shaped like the seed dataset's."""

import copy
from typing import Any

OPENAI_MODEL = "gpt-4o-mini-2024-07-18"
ANTHROPIC_MODEL = "claude-haiku-4-5-20251001"
PRICES = {
    OPENAI_MODEL: {"input_per_mtok": 0.15, "output_per_mtok": 0.6},
    ANTHROPIC_MODEL: {"input_per_mtok": 1.0, "output_per_mtok": 5.0},
}


def tool_case(**overrides: Any) -> dict[str, Any]:
    """A tools case answered right: lookup_order called with ORD-101."""
    case = {
        "external_id": "tools-001",
        "input": "Where is my order ORD-101?",
        "output": "Your order ORD-101 shipped yesterday and arrives on Friday.",
        "trace": {
            "retrievedSources": ["shipping-faq"],
            "toolCalls": [
                {"name": "lookup_order", "argument": {"order_id": "ORD-101"}, "result": {"status": "shipped"}}
            ],
            "context": "Orders ship within 2 days.",
        },
        "golden_answer": "ORD-101 has shipped and arrives Friday.",
        "expected_behaviour": "Look the order up, then give its status.",
        "expected_tool": "lookup_order",
        "expected_tool_argument": {"order_id": "ORD-101"},
        "expected_source": None,
        "category": "tools",
        "metadata": {"agent_model": "agent-v1"},
    }
    case.update(copy.deepcopy(overrides))
    return case


def policy_case(**overrides: Any) -> dict[str, Any]:
    """A policy question: answered from the policy, no tool call expected."""
    case = {
        "external_id": "policy-001",
        "input": "Can I return shoes after 20 days?",
        "output": "Yes. Returns are accepted within 30 days of delivery, so 20 days is fine.",
        "trace": {"retrievedSources": ["returns-policy"], "toolCalls": [], "context": "Returns: 30 days."},
        "golden_answer": "Yes, within 30 days of delivery.",
        "expected_behaviour": "Answer from the returns policy without calling a tool.",
        "expected_tool": None,
        "expected_source": "returns-policy",
        "category": "policy",
        "metadata": {},
    }
    case.update(copy.deepcopy(overrides))
    return case


def contract_config(*checks: str, **overrides: Any) -> dict[str, Any]:
    config = {
        "rubric": "order-status",
        "criteria": "The agent looks the order up before answering.",
        "layers": ["contract"],
        "contract_checks": list(checks),
    }
    config.update(overrides)
    return config


def judge_config(provider: str = "openai", **overrides: Any) -> dict[str, Any]:
    """A behavioral judge pointed at the fake provider through the `env` fixture's variables."""
    anthropic = provider == "anthropic"
    config = {
        "rubric": "order-status",
        "criteria": "The answer gives the order's true status.",
        "layers": ["behavioral"],
        "provider": provider,
        "model": ANTHROPIC_MODEL if anthropic else OPENAI_MODEL,
        "policy": "Never promise a delivery date the carrier has not given.",
        "params": {"temperature": 0, "max_tokens": 300},
        "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL" if anthropic else "EVALHUB_JUDGE_OPENAI_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY",
        "timeout_s": 0.5,
        "max_attempts": 3,
    }
    config.update(overrides)
    return config


EMBEDDING_MODEL = "text-embedding-3-small"
PRICES[EMBEDDING_MODEL] = {"input_per_mtok": 0.02, "output_per_mtok": 0.0}


def semantic_block(**overrides: Any) -> dict[str, Any]:
    """An embeddings endpoint at the fake provider (the `env` fixture's variables)."""
    block = {
        "provider": "openai-compatible",
        "model": EMBEDDING_MODEL,
        "base_url_env": "EVALHUB_JUDGE_OPENAI_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY",
        "pass_at": 0.8,
    }
    block.update(overrides)
    return block


def semantic_config(**overrides: Any) -> dict[str, Any]:
    """A semantic-only config: no judge model, a pass at similarity 0.8, a fail below it."""
    config = {
        "rubric": "order-status",
        "criteria": "The answer gives the order's true status.",
        "layers": ["semantic"],
        "semantic": semantic_block(),
        "timeout_s": 0.5,
        "max_attempts": 3,
    }
    config.update(overrides)
    return config
