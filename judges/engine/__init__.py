"""The judging engine: plain Python, no Django, so the app and the CI command run the same judge.

Judge one case with `judge_case(case, config_dict, repeat, cache=FolderCache(path), prices=prices)`,
many with `judge_batch([(case, 1), (case, 2)], config_dict, concurrency=8, spend_cap_usd=5.0)`; the
worker and the CI command stream theirs through `judge_many` (batch.py), which judge_batch wraps.
The semantic layer embeds through `embedding_cache=FolderCache(path)` (or the app's table) when given.
Whether a config may read the environment variables it names: `env_name_refusals(config)`.
"""

from .batch import judge_batch, judge_many
from .cache import Cache, MemoryCache, cache_key, case_content_key, judge_cache_key
from .chain import RetryPolicy
from .config import CONTRACT_CHECKS, JudgeConfig, SecondaryJudge, config_hash
from .contract import json_equal, run_contract_checks
from .credentials import redact_key, secret_kinds
from .envnames import ALLOWED_ENV_NAMES, env_name_refusals, is_never_allowed, parse_env_allow
from .families import is_pinned_snapshot, model_family
from .folder_cache import CacheFolderWarning, FolderCache
from .judgment import ERRORS, OUTCOMES, Judgment
from .prompt import DEFAULT_PROMPT_TEMPLATE, SCORE_FIELDS, build_messages, parse_sections
from .providers import KEY_REFUSED
from .runner import Engine, judge_case
from .semantic import SEMANTIC_PROVIDERS, SemanticLayer, cosine, decide, embedding_key, references
from .spend import SpendTracker, call_cost
from .validation import InvalidOutput, normalise_verdict, validate_answer

__all__ = [
    "ALLOWED_ENV_NAMES",
    "KEY_REFUSED",
    "CONTRACT_CHECKS",
    "DEFAULT_PROMPT_TEMPLATE",
    "ERRORS",
    "OUTCOMES",
    "SCORE_FIELDS",
    "SEMANTIC_PROVIDERS",
    "SemanticLayer",
    "Cache",
    "CacheFolderWarning",
    "Engine",
    "FolderCache",
    "InvalidOutput",
    "JudgeConfig",
    "Judgment",
    "MemoryCache",
    "RetryPolicy",
    "SecondaryJudge",
    "SpendTracker",
    "build_messages",
    "cache_key",
    "call_cost",
    "case_content_key",
    "config_hash",
    "cosine",
    "decide",
    "embedding_key",
    "env_name_refusals",
    "is_never_allowed",
    "is_pinned_snapshot",
    "json_equal",
    "judge_batch",
    "judge_many",
    "judge_cache_key",
    "judge_case",
    "model_family",
    "normalise_verdict",
    "parse_env_allow",
    "parse_sections",
    "redact_key",
    "references",
    "run_contract_checks",
    "secret_kinds",
    "validate_answer",
]
