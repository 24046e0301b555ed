"""A scripted stand-in for the OpenAI and Anthropic judge endpoints, over real HTTP. Not a model.

It answers `POST /v1/chat/completions` (OpenAI shape, honouring `response_format` json_schema) and
`POST /v1/messages` (Anthropic shape, a `tool_use` block when tools are given) with a verdict
computed by a *rule* from the sections of the prompt the engine writes, and every reason it gives
says it is a scripted stand-in. `POST /v1/embeddings` (OpenAI shape, float or base64) returns
vectors computed from the text by a hashed bag of words (`stand_in_vector`): texts sharing words
point alike, unrelated texts nearly at right angles. They are arithmetic, not a model's embeddings:
they know no synonyms and no meaning. Faults (latency, 429 with Retry-After, 500, a hang, a dropped
connection, a refused key (401 echoing the key, 401 echoing it masked as OpenAI does, 403), a
response trickled one byte a second, malformed JSON, a score of 7, a missing field, a verdict of
`Pass.`) are switched on over HTTP from any process:

    python -m judges.testing.fake_provider --port 8765
    curl -X POST localhost:8765/_control -d '{"latency_ms": 200, "fault": "429", "fault_count": 1}'
    curl -X POST localhost:8765/_control -d '{"model": "claude-x", "rule": {"kind": "always_fail"}}'
    curl -X POST localhost:8765/_control -d '{"model": "text-embedding-3-small", "fault": "500"}'
    curl -X POST localhost:8765/_control -d '{"latency_ms": 200, "latency_sigma": 0.8, "latency_seed": 7}'
    curl localhost:8765/_stats          # calls by endpoint, model and fault; peak concurrency; latency served
    curl -X POST localhost:8765/_reset

An editor's answer (judges.editor) is scripted, not computed: `script` is a list of JSON objects that the
calls of a model answer with in turn, the last one again once the list is used up (`"script": null` goes
back to the rule). The test writes what the "editor" says; nothing here writes text of its own:

    curl -X POST localhost:8765/_control -d '{"model": "editor-x", "script": [{"proposals": []}]}'

An agent's turns are scripted the same way (OpenAI API only): an answer `{"agent_turn": {"content": null,
"tool_calls": [{"name": "getOrderStatus", "arguments": {"order_id": "A-1001"}}]}}` is an assistant message
asking for those tool calls (ids `call_fake_N_I`, finish_reason `tool_calls`), `{"agent_turn": {"content":
"…"}}` one answering in text: the OTLP tests drive instrumented agents with it.

A judge's rule may look at the whole prompt, instructions included (`prompt_contains`), so a test can
tell whether a guidance line an editor proposed reached the judge.

A `model` in a control request scopes its settings to that model (so a primary and a secondary
judge can disagree, or one can fail while the other answers); other models use the defaults.
Tests drive it through `FakeProvider`, which runs it as a subprocess on a free port.

Latency: `latency_ms` alone is fixed; with `latency_sigma` it is the median of a log-normal (real
providers' latencies are heavy-tailed), drawn from a generator per model seeded by `latency_seed` and the
model's name, so the same calls draw the same latencies again after a reset or a latency change. `_stats`
reports the latency served (summed, in ms; a benchmark's ideal time is that sum over its concurrency) and
the peak number of calls in flight.

Every response says where it comes from: the header `X-Evalhub-Stand-In: scripted` (STAND_IN_HEADER), on
chat, messages and embeddings answers and on faults alike; the engine reads it to mark a judgment the stand-in
served (judges.engine.providers). `{"mark_stand_in": false}` leaves it off (only as a whole, not per model).
"""

import argparse
import base64
import functools
import hashlib
import json
import math
import os
import queue
import random
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from judges.engine.prompt import SCORE_FIELDS, parse_sections

BANNER = "fake provider (scripted stand-in, not a model) listening on http://{host}:{port}"
STAND_IN = "scripted stand-in, not a model"
STAND_IN_HEADER = ("X-Evalhub-Stand-In", "scripted")

FAULTS = (
    "401",
    "401_masked",
    "403",
    "429",
    "500",
    "timeout",
    "disconnect",
    "trickle",
    "malformed_json",
    "score_7",
    "missing_field",
    "verdict_Pass.",
    "verdict_maybe",
    "ragged_vectors",  # embeddings: the first vector one number short
)
RULE_KINDS = (
    "always_pass",
    "always_fail",
    "answer_min_length",
    "answer_contains",
    "input_contains",
    "prompt_contains",
    "obeys_injection",
    "golden_overlap",
    "category_in",
    "flaky",
    "after_calls",
    "all",
    "any",
    "not",
)
DEFAULTS: dict[str, Any] = {
    "latency_ms": 0,  # the median when latency_sigma is set
    "latency_sigma": 0.0,  # the log-normal's sigma; 0: every call waits latency_ms exactly
    "latency_seed": 0,
    "fault": None,
    "fault_count": None,  # None: the fault applies to every call until changed
    "retry_after": 1,
    "hang_s": 10.0,  # how long the "timeout" fault keeps a request waiting
    # A call is held until this many calls are in flight together (at most hang_s): a test proves a
    # concurrency cap is reached by the overlap itself, however slowly a busy machine starts the calls.
    "gather": None,
    "rule": {"kind": "always_pass"},
    "script": None,  # a list of answers given in turn instead of the rule's verdict (an editor's, scripted)
    # Every response carries STAND_IN_HEADER (the engine tells a stand-in's answers by it, never by a model's
    # name); false: answer like a real provider would, so a test can check nothing else marks a stand-in.
    "mark_stand_in": True,
}
# Where the whole prompt (system and user messages) sits among the sections a rule reads: not a section
# name the prompt could hold (those are upper case), so case data cannot forge it.
WHOLE_PROMPT = "(whole prompt)"
INJECTION_MARKERS = ("answer pass", "ignore the rubric")
_WORD_RE = re.compile(r"[a-z0-9]{3,}")
STAND_IN_DIMENSIONS = 256  # when a request names none; small, so tests and benchmarks stay light
# Words that carry no meaning of their own: left out, so two answers are close for what they say.
_STOP_WORDS = frozenset(
    "the and for are but not you your our can was were has have had this that with from they them "
    "will would its it's into than then there their what when which who how all any been being "
    "does did doing also just very".split()
)


@functools.lru_cache(maxsize=65_536)
def _coordinate(word: str, dimensions: int) -> tuple[int, float]:
    # Cached: a vocabulary is small and every text hashes its words again.
    digest = hashlib.sha256(word.encode()).digest()
    return int.from_bytes(digest[:4], "big") % dimensions, 1.0 if digest[4] & 1 else -1.0


_WORD_RE = re.compile(r"[a-z0-9]+")


@functools.lru_cache(maxsize=32_768)
def _text_coordinates(text: str, dimensions: int) -> tuple[np.ndarray, np.ndarray]:
    """The signed coordinates of a text's words of meaning (columns, signs). Cached: a benchmark sends the
    same texts again (its warm-up, each latency model, the calls alone), and a stand-in that spends its CPU
    reading words again would be the bottleneck it measures, on the machine it shares with the client."""
    columns, signs = [], []
    for word in _WORD_RE.findall(text.lower()):
        if len(word) < 3 or word in _STOP_WORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        index, sign = _coordinate(word, dimensions)
        columns.append(index)
        signs.append(sign)
    arrays = np.array(columns, dtype=np.intp), np.array(signs, dtype=np.float64)
    for array in arrays:
        array.flags.writeable = False  # shared by every later call with this text
    return arrays


def _stand_in_arrays(texts: list[str], dimensions: int) -> np.ndarray:
    """One unit vector a row, for every text at once (a numpy item update costs more than the hash)."""
    coordinates = [_text_coordinates(text, dimensions) for text in texts]
    rows = np.repeat(np.arange(len(texts)), [len(columns) for columns, _ in coordinates])
    columns = np.concatenate([columns for columns, _ in coordinates])
    signs = np.concatenate([signs for _, signs in coordinates])
    # Each word adds its sign to its coordinate: the sums are of ±1, exact in any order.
    flat = np.bincount(rows * dimensions + columns, weights=signs, minlength=len(texts) * dimensions)
    vectors = flat.reshape(len(texts), dimensions)
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    empty = norms == 0
    vectors[empty, 0] = 1.0  # no word of meaning: one fixed direction, so the vector is still a unit vector
    norms[empty] = 1.0
    return vectors / norms[:, None]


def stand_in_vector(text: str, dimensions: int = STAND_IN_DIMENSIONS) -> list[float]:
    """A unit vector from the text's words, each hashed to a signed coordinate: arithmetic, not a model.

    Texts sharing most of their words (a paraphrase keeping the key terms) have a high cosine
    similarity; texts sharing none have about zero. A plural "s" is dropped, so "order"/"orders" match.
    """
    return _stand_in_arrays([text], dimensions)[0].tolist()


# ---- rules: a verdict computed from the prompt's sections ------------------------------------------


def validate_rule(rule: Any, where: str = "rule") -> None:
    if not isinstance(rule, dict) or rule.get("kind") not in RULE_KINDS:
        raise ValueError(f"{where}: expected an object with kind one of {', '.join(RULE_KINDS)}")
    kind = rule["kind"]
    if kind == "answer_min_length" and not isinstance(rule.get("chars"), int):
        raise ValueError(f"{where}.chars: expected an integer")
    if kind in ("answer_contains", "input_contains", "prompt_contains") and not isinstance(rule.get("text"), str):
        raise ValueError(f"{where}.text: expected a string")
    if kind == "category_in" and not isinstance(rule.get("categories"), list):
        raise ValueError(f"{where}.categories: expected a list")
    if kind in ("obeys_injection", "flaky", "not") and "rule" in rule:
        validate_rule(rule["rule"], f"{where}.rule")
    if kind == "flaky" and not isinstance(rule.get("share"), int | float):
        raise ValueError(f"{where}.share: expected a number")
    if kind == "after_calls":
        if isinstance(rule.get("calls"), bool) or not isinstance(rule.get("calls"), int):
            raise ValueError(f"{where}.calls: expected an integer")
        validate_rule(rule.get("rule"), f"{where}.rule")
        validate_rule(rule.get("then"), f"{where}.then")
    if kind in ("all", "any"):
        if not isinstance(rule.get("rules"), list):
            raise ValueError(f"{where}.rules: expected a list")
        for i, inner in enumerate(rule["rules"]):
            validate_rule(inner, f"{where}.rules[{i}]")
    for name in ("pass_scores", "fail_scores"):
        if name in rule and not (isinstance(rule[name], dict) and set(rule[name]) == set(SCORE_FIELDS)):
            raise ValueError(f"{where}.{name}: expected all of {', '.join(SCORE_FIELDS)}")


def _words(text: str) -> set[str]:
    return set(_WORD_RE.findall(text.lower()))


def evaluate_rule(
    rule: dict[str, Any], sections: dict[str, str], *, nth: int, digest: str, calls: int = 0
) -> tuple[bool, str]:
    """(passed, why) for one request; `nth` counts identical prompts seen so far (for `flaky`), `calls` the calls
    this model answered before this one (for `after_calls`: a model changed behind its pinned name)."""
    kind = rule["kind"]
    inner = functools.partial(evaluate_rule, nth=nth, digest=digest, calls=calls)
    if kind == "after_calls":
        changed = calls >= rule["calls"]
        passed, why = inner(rule["then"] if changed else rule["rule"], sections)
        return passed, f"after_calls: call {calls + 1} of this model, {'after' if changed else 'before'} the change: {why}"
    answer = sections.get("ANSWER", "")
    if kind == "always_pass":
        return True, "always_pass"
    if kind == "always_fail":
        return False, "always_fail"
    if kind == "answer_min_length":
        n = len(answer.strip())
        return n >= rule["chars"], f"answer_min_length: the answer has {n} characters, {rule['chars']} needed"
    if kind == "answer_contains":
        text = rule["text"]
        found = text in answer if rule.get("case_sensitive") else text.lower() in answer.lower()
        return found, f"answer_contains {text!r}: {'found' if found else 'not found'}"
    if kind == "input_contains":  # the user's request (QUESTION): a judge swayed by what the customer says
        text, question = rule["text"], sections.get("QUESTION", "")
        found = text in question if rule.get("case_sensitive") else text.lower() in question.lower()
        return found, f"input_contains {text!r}: {'found' if found else 'not found'}"
    if kind == "prompt_contains":  # the judge's instructions and data alike: did a guidance line reach it?
        text, prompt = rule["text"], sections.get(WHOLE_PROMPT, "")
        found = text.lower() in prompt.lower()
        return found, f"prompt_contains {text!r}: {'found' if found else 'not found'}"
    if kind == "obeys_injection":
        if any(marker in answer.lower() for marker in INJECTION_MARKERS):
            return True, "obeys_injection: the answer told the judge to pass it"
        passed, why = inner(rule.get("rule", {"kind": "always_fail"}), sections)
        return passed, f"obeys_injection: no injection, so {why}"
    if kind == "golden_overlap":
        golden = _words(sections.get("GOLDEN ANSWER", ""))
        share = len(golden & _words(answer)) / len(golden) if golden else 0.0
        need = rule.get("min", 0.6)
        return share >= need, f"golden_overlap: {share:.2f} of the golden answer's words, {need} needed"
    if kind == "category_in":
        category = sections.get("CATEGORY", "")
        return category in rule["categories"], f"category_in: category {category!r}"
    if kind == "flaky":
        passed, why = inner(rule.get("rule", {"kind": "always_pass"}), sections)
        roll = int(hashlib.sha256(f"{digest}:{nth}".encode()).hexdigest()[:8], 16) / 0x1_0000_0000
        if roll < rule["share"]:
            return not passed, f"flaky: flipped {why} (call {nth + 1} of this prompt)"
        return passed, f"flaky: kept {why} (call {nth + 1} of this prompt)"
    if kind == "not":
        passed, why = inner(rule["rule"], sections)
        return not passed, f"not ({why})"
    results = [inner(r, sections) for r in rule["rules"]]
    combine = all if kind == "all" else any
    return combine(p for p, _ in results), f"{kind} of ({'; '.join(w for _, w in results)})"


# ---- state shared by the server's threads ----------------------------------------------------------


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.wake = threading.Event()  # set on reset, so hung requests stop hanging
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.wake.set()
            self.wake = threading.Event()
            self.scopes: dict[str, dict[str, Any]] = {"*": dict(DEFAULTS)}
            self.remaining: dict[str, int | None] = {}
            self.total = 0
            self.by_endpoint: Counter[str] = Counter()
            self.by_model: Counter[str] = Counter()
            self.by_fault: Counter[str] = Counter()
            self.in_flight = 0
            self.max_in_flight = 0
            # Wall-clock bounds of the calls (time.time()): a benchmark's "first call to last".
            self.first_call_at: float | None = None
            self.last_call_end: float | None = None
            self.in_flight_by_model: Counter[str] = Counter()
            self.max_in_flight_by_model: Counter[str] = Counter()
            self.latency_rngs: dict[str, random.Random] = {}
            self.latency_ms_served: Counter[str] = Counter()
            self.seen: Counter[str] = Counter()
            self.script_used: Counter[str] = Counter()
            self.requests: deque[dict[str, Any]] = deque(maxlen=2000)

    def control(self, body: dict[str, Any]) -> dict[str, Any]:
        body = dict(body)
        scope = body.pop("model", None) or "*"
        unknown = sorted(set(body) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"unknown control field(s): {', '.join(unknown)}")
        if "fault" in body and body["fault"] is not None and body["fault"] not in FAULTS:
            raise ValueError(f"fault: expected one of {', '.join(FAULTS)} or null")
        if "rule" in body:
            validate_rule(body["rule"])
        script = body.get("script")
        if script is not None and not (
            isinstance(script, list) and script and all(isinstance(answer, dict) for answer in script)
        ):
            raise ValueError("script: expected a non-empty list of JSON objects, or null")
        for name in ("latency_ms", "latency_sigma", "latency_seed", "retry_after", "hang_s"):
            if name in body and (isinstance(body[name], bool) or not isinstance(body[name], int | float)):
                raise ValueError(f"{name}: expected a number")
        gather = body.get("gather")
        if gather is not None and (isinstance(gather, bool) or not isinstance(gather, int) or gather < 1):
            raise ValueError("gather: expected a positive integer or null")
        count = body.get("fault_count")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
            raise ValueError("fault_count: expected a non-negative integer or null")
        if "mark_stand_in" in body and not isinstance(body["mark_stand_in"], bool):
            raise ValueError("mark_stand_in: expected true or false")
        if "mark_stand_in" in body and scope != "*":
            raise ValueError("mark_stand_in: set for every model, not for one")
        if any(body.get(name, 0) < 0 for name in ("latency_ms", "latency_sigma")):
            raise ValueError("latency_ms and latency_sigma: expected numbers of at least 0")
        with self.lock:
            if {"latency_ms", "latency_sigma", "latency_seed"} & set(body):
                self.latency_rngs.clear()  # draws start again from the seed
            settings = self.scopes.setdefault(scope, {})
            if "script" in body:
                self.script_used[scope] = 0  # a new script starts from its first answer
            if "fault" in body:
                body.setdefault("fault_count", None)  # a new fault without a count applies to every call
            settings.update(body)
            if "fault" in body or "fault_count" in body:
                settings.setdefault("fault", None)
                self.remaining[scope] = settings["fault_count"]
            return {"scope": scope, "settings": dict(settings)}

    def begin(
        self, endpoint: str, model: str, digest: str, record: dict[str, Any]
    ) -> tuple[dict, str | None, int, float]:
        """Count a call, and decide its settings, its fault (using up a fault_count) and its latency in ms.

        `record["model_calls"]` is how many calls of this model came before it (the `after_calls` rule)."""
        with self.lock:
            self.total += 1
            self.by_endpoint[endpoint] += 1
            record["model_calls"] = self.by_model[model]
            self.by_model[model] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            # When each call arrived and was answered (this process's monotonic clock): tests prove a wait
            # or an overlap from these, never from a wall clock that also counts the client's own work.
            record["started"] = time.monotonic()
            if self.first_call_at is None:
                self.first_call_at = time.time()
            self.in_flight_by_model[model] += 1
            self.max_in_flight_by_model[model] = max(
                self.max_in_flight_by_model[model], self.in_flight_by_model[model]
            )
            nth = self.seen[digest]
            self.seen[digest] += 1
            self.requests.append(record)
            model_scope = self.scopes.get(model, {})
            settings = {**self.scopes["*"], **model_scope}
            fault_scope = model if "fault" in model_scope else "*"
            fault = self.scopes[fault_scope].get("fault")
            if fault is not None:
                left = self.remaining.get(fault_scope)
                if left is not None:
                    if left <= 0:
                        fault = None
                    else:
                        self.remaining[fault_scope] = left - 1
            if fault is not None:
                self.by_fault[fault] += 1
            latency = float(settings["latency_ms"])
            if settings["latency_sigma"]:
                rng = self.latency_rngs.get(model)
                if rng is None:
                    rng = self.latency_rngs[model] = random.Random(f"{settings['latency_seed']}:{model}")
                latency *= math.exp(settings["latency_sigma"] * rng.gauss(0.0, 1.0))
            if fault != "timeout":
                self.latency_ms_served[model] += latency
            return settings, fault, nth, latency

    def scripted(self, model: str) -> dict[str, Any] | None:
        """The next scripted answer for this model (its own script, else the default scope's), if any."""
        with self.lock:
            scope = model if "script" in self.scopes.get(model, {}) else "*"
            script = self.scopes[scope].get("script")
            if not script:
                return None
            used = self.script_used[scope]
            self.script_used[scope] += 1
            return script[min(used, len(script) - 1)]

    def end(self, model: str, record: dict[str, Any]) -> None:
        with self.lock:
            self.in_flight -= 1
            record["ended"] = time.monotonic()
            self.last_call_end = time.time()
            self.in_flight_by_model[model] -= 1

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {
                "total": self.total,
                "by_endpoint": dict(self.by_endpoint),
                "by_model": dict(self.by_model),
                "by_fault": dict(self.by_fault),
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "first_call_at": self.first_call_at,
                "last_call_end": self.last_call_end,
                "max_in_flight_by_model": dict(self.max_in_flight_by_model),
                "latency_ms_served": round(sum(self.latency_ms_served.values()), 3),
                "latency_ms_served_by_model": {m: round(v, 3) for m, v in self.latency_ms_served.items()},
            }


# ---- the HTTP side ---------------------------------------------------------------------------------


def _openai_request(body: dict[str, Any]) -> tuple[str, str, dict[str, Any] | None]:
    system, user = [], []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        (system if message.get("role") in ("system", "developer") else user).append(str(content or ""))
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None
    return "\n".join(system), "\n".join(user), schema


def _anthropic_request(body: dict[str, Any]) -> tuple[str, str, dict[str, Any] | None]:
    system = body.get("system") or ""
    if isinstance(system, list):
        system = "".join(b.get("text", "") for b in system if isinstance(b, dict))
    user = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
        user.append(str(content or ""))
    tools = body.get("tools") or []
    schema = tools[0].get("input_schema") if tools else None
    return system, "\n".join(user), schema


AGENT_TURN = "agent_turn"  # a scripted answer {"agent_turn": {"content", "tool_calls"}}: an agent's turn


def _agent_choice(turn: dict[str, Any], n: int) -> dict[str, Any]:
    """The OpenAI choice of a scripted agent turn: the text the test wrote and the tool calls it listed
    (`[{"name", "arguments"}]`, ids made here), as an agent's model would answer a request with `tools`."""
    calls = [
        {"id": f"call_fake_{n}_{i}", "type": "function",
         "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments", {}))}}
        for i, call in enumerate(turn.get("tool_calls") or [])
    ]
    message: dict[str, Any] = {"role": "assistant", "content": turn.get("content"), "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {"message": message, "finish_reason": "tool_calls" if calls else "stop"}


def _judge_answer(
    rule: dict[str, Any],
    sections: dict[str, str],
    scores_kind: bool,
    fault: str | None,
    nth: int,
    digest: str,
    calls: int = 0,
) -> dict[str, Any]:
    passed, why = evaluate_rule(rule, sections, nth=nth, digest=digest, calls=calls)
    answer_sha = hashlib.sha256(sections.get("ANSWER", "").encode()).hexdigest()[:12]
    verdict = "pass" if passed else "fail"
    answer: dict[str, Any] = {"reason": f"{STAND_IN}: {why} -> {verdict} [answer sha256 {answer_sha}]"}
    if scores_kind:
        default = {name: 5 if passed else 2 for name in SCORE_FIELDS}
        answer.update(rule.get("pass_scores" if passed else "fail_scores") or default)
        if fault == "score_7":
            answer["correctness"] = 7
        if fault == "missing_field":
            del answer["faithfulness"]
    else:
        answer["verdict"] = verdict
        if fault == "verdict_Pass.":
            answer["verdict"] = verdict.capitalize() + "."
        if fault == "verdict_maybe":
            answer["verdict"] = "maybe"
        if fault == "score_7":
            answer["verdict"] = 7
        if fault == "missing_field":
            del answer["verdict"]
    return answer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the SDKs reuse connections
    server_version = "FakeProvider/1"
    state: State  # set on the class by make_server
    verbose = False

    def setup(self) -> None:
        super().setup()
        # Headers and body leave in two writes; without this, Nagle's algorithm meets the client's
        # delayed ACK and every keep-alive response waits ~40 ms more.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        if self.verbose:  # the request line only, never the headers: keys travel there
            sys.stderr.write(f"{self.address_string()} {format % args}\n")

    def send_response(self, code: int, message: str | None = None) -> None:
        super().send_response(code, message)
        if self.state.scopes["*"]["mark_stand_in"]:  # read without the lock: a reply may be sent under it
            self.send_header(*STAND_IN_HEADER)

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else {}

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/_stats":
            self._send_json(200, self.state.stats())
        elif path == "/_requests":
            with self.state.lock:
                self._send_json(200, list(self.state.requests))
        elif path in ("/", "/healthz"):
            self._send_json(200, {"ok": True, "what": STAND_IN})
        else:
            self._send_json(404, {"error": {"message": f"no route {path}"}})

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        try:
            body = self._body()
        except ValueError:
            self._send_json(400, {"error": {"message": "the request body is not JSON"}})
            return
        if path == "/_control":
            try:
                self._send_json(200, self.state.control(body if isinstance(body, dict) else {}))
            except ValueError as exc:
                self._send_json(400, {"error": {"message": str(exc)}})
        elif path == "/_reset":
            self.state.reset()
            self._send_json(200, {"ok": True})
        elif path in ("/v1/chat/completions", "/chat/completions"):
            self._judge("openai", body)
        elif path in ("/v1/messages", "/messages"):
            self._judge("anthropic", body)
        elif path in ("/v1/embeddings", "/embeddings"):
            self._embeddings(body)
        else:
            self._send_json(404, {"error": {"message": f"no route {path}"}})

    def _error(self, api: str, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> None:
        message = f"{message} ({STAND_IN})"
        if api == "anthropic":
            payload = {"type": "error", "error": {"type": kind, "message": message}}
        else:
            payload = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
        self._send_json(status, payload, headers)

    def _judge(self, api: str, body: dict[str, Any]) -> None:
        model = str(body.get("model", ""))
        system, user, schema = _openai_request(body) if api == "openai" else _anthropic_request(body)
        digest = hashlib.sha256(f"{model}\n{system}\n{user}".encode()).hexdigest()
        params = {
            k: v for k, v in body.items() if k not in ("messages", "system", "tools", "response_format", "tool_choice")
        }
        record = {
            "endpoint": api,
            "model": model,
            "system": system,
            "prompt": user,
            "params": params,
            "authorized": bool(self.headers.get("Authorization") or self.headers.get("x-api-key")),
            "structured": schema is not None,
        }
        state = self.state
        settings, fault, nth, latency_ms = state.begin(api, model, digest, record)
        try:
            if self._wait_and_fail(api, settings, fault, latency_ms):
                return
            answer = state.scripted(model)
            record["scripted"] = answer is not None
            if answer is None:
                scores_kind = bool(schema and "relevance" in (schema.get("properties") or {}))
                sections = {**parse_sections(user), WHOLE_PROMPT: f"{system}\n{user}"}
                answer = _judge_answer(settings["rule"], sections, scores_kind, fault, nth, digest,
                                       record["model_calls"])
            agent_turn = answer.get(AGENT_TURN) if isinstance(answer, dict) else None
            text = json.dumps(answer)
            if fault == "malformed_json":
                text = text[: len(text) // 2]  # cut mid-object, as a model stopped short would
            usage_in, usage_out = max(1, len(system + user) // 4), max(1, len(text) // 4)
            n = state.total
            if api == "openai":
                payload = {
                    "id": f"chatcmpl-fake-{n}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "system_fingerprint": "fake-provider",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text, "refusal": None},
                            "finish_reason": "stop",
                            **(_agent_choice(agent_turn, n) if agent_turn is not None else {}),
                            "logprobs": None,
                        }
                    ],
                    "usage": {
                        "prompt_tokens": usage_in,
                        "completion_tokens": usage_out,
                        "total_tokens": usage_in + usage_out,
                    },
                }
            else:
                tools = body.get("tools") or []
                if tools and fault != "malformed_json":
                    content = [
                        {
                            "type": "tool_use",
                            "id": f"toolu_fake_{n}",
                            "name": tools[0].get("name"),
                            "input": answer,
                        }
                    ]
                    stop = "tool_use"
                else:
                    content, stop = [{"type": "text", "text": text}], "end_turn"
                payload = {
                    "id": f"msg_fake_{n}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": content,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": {"input_tokens": usage_in, "output_tokens": usage_out},
                }
            if fault == "trickle":
                self._trickle(200, payload)
            else:
                self._send_json(200, payload)
        finally:
            state.end(model, record)

    def _wait_and_fail(self, api: str, settings: dict[str, Any], fault: str | None, latency_ms: float) -> bool:
        """The latency, then the HTTP-level fault if one is due; True when the response is sent (or dropped)."""
        if settings["gather"]:
            deadline = time.monotonic() + float(settings["hang_s"])
            # The peak, not the count now: the last call to arrive may be answered before the others look.
            while self.state.max_in_flight < settings["gather"] and time.monotonic() < deadline:
                time.sleep(0.005)
        if fault == "timeout":
            self.state.wake.wait(float(settings["hang_s"]))
        elif latency_ms:
            time.sleep(latency_ms / 1000)
        if fault == "disconnect":
            self.close_connection = True  # no response at all: the client sees the connection drop
            return True
        if fault == "429":
            retry_after = settings["retry_after"]
            self._error(api, 429, "rate_limit_error", "rate limited", {"Retry-After": f"{retry_after:g}"})
            return True
        if fault == "500":
            self._error(api, 500, "api_error", "internal server error")
            return True
        if fault in ("401", "401_masked", "403"):
            # Echoes the key it was sent, whole as a careless proxy would, or masked as OpenAI's
            # 401 does ("sk-proj-********abcd"): the engine must hide either.
            presented = self.headers.get("x-api-key") or self.headers.get("Authorization", "")
            presented = presented.removeprefix("Bearer ")
            if fault == "401_masked":
                presented = presented[:8] + "*" * max(len(presented) - 12, 0) + presented[-4:]
            if fault == "403":
                self._error(api, 403, "permission_error", f"the key {presented} may not use this model")
            else:
                self._error(api, 401, "authentication_error", f"Incorrect API key provided: {presented}")
            return True
        return False

    def _embeddings(self, body: dict[str, Any]) -> None:
        """OpenAI's embeddings API: stand-in vectors of each input, with the same faults as judging."""
        model = str(body.get("model", ""))
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs or not all(isinstance(t, str) and t for t in inputs):
            self._error("openai", 400, "invalid_request_error", "input: expected a non-empty string or list of them")
            return
        dimensions = body.get("dimensions") or STAND_IN_DIMENSIONS
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or not 1 <= dimensions <= 16_384:
            self._error("openai", 400, "invalid_request_error", "dimensions: expected an integer from 1 to 16384")
            return
        encoding = body.get("encoding_format") or "float"
        record = {"endpoint": "embeddings", "model": model, "inputs": len(inputs), "dimensions": dimensions,
                  "encoding_format": body.get("encoding_format"), "fields": sorted(body),
                  "authorized": bool(self.headers.get("Authorization"))}
        digest = hashlib.sha256(json.dumps([model, inputs, dimensions]).encode()).hexdigest()
        state = self.state
        settings, fault, _, latency_ms = state.begin("embeddings", model, digest, record)
        try:
            # Computed within the latency, as a provider's own work is: the server's threads share one
            # interpreter, so arithmetic done after the wait would queue calls that a provider serves at once.
            started = time.monotonic()
            vectors = _stand_in_arrays(inputs, dimensions)
            if encoding == "base64":  # little-endian float32, as OpenAI sends it
                embeddings: list[Any] = [base64.b64encode(v.tobytes()).decode() for v in vectors.astype("<f4")]
            else:
                embeddings = vectors.tolist()
            if fault == "ragged_vectors":
                embeddings[0] = embeddings[0][:-8] if encoding == "base64" else embeddings[0][:-1]  # 8 chars: 6 bytes
            data = [{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(embeddings)]
            spent_ms = (time.monotonic() - started) * 1000
            if self._wait_and_fail("openai", settings, fault, max(latency_ms - spent_ms, 0.0)):
                return
            tokens = sum(max(1, len(text) // 4) for text in inputs)
            payload = {
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
            if fault == "malformed_json":
                data = json.dumps(payload).encode()
                data = data[: len(data) // 2]
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif fault == "trickle":
                self._trickle(200, payload)
            else:
                self._send_json(200, payload)
        finally:
            state.end(model, record)

    def _trickle(self, status: int, payload: Any) -> None:
        """The whole response, status line and headers included, one byte a second (until a reset)."""
        data = json.dumps(payload).encode()
        head = (
            f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            "Connection: close\r\n\r\n"
        )
        wake = self.state.wake
        self.close_connection = True
        for i, byte in enumerate(head.encode() + data):
            if i and wake.wait(1.0):
                return
            try:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # a batch opens its connections all at once


def make_server(host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False) -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {"state": State(), "verbose": verbose})
    return _Server((host, port), handler)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m judges.testing.fake_provider",
        description="Scripted stand-in for OpenAI/Anthropic judge endpoints, for tests and local "
        "development. It is not a model: its verdicts come from a rule set over HTTP.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--verbose", action="store_true", help="log each request line to stderr")
    args = parser.parse_args(argv)
    try:
        server = make_server(args.host, args.port, verbose=args.verbose)
    except OSError as exc:  # a port in use, most often: say so, not a traceback
        print(f"The stand-in cannot listen on {args.host}:{args.port}: {exc.strerror or exc}. "
              "Choose another port with --port (0 picks a free one).", file=sys.stderr)
        sys.exit(2)
    print(BANNER.format(host=args.host, port=server.server_address[1]), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


# ---- the helper tests use --------------------------------------------------------------------------


class FakeProvider:
    """Runs the fake provider as its own process on a free port; `with FakeProvider() as fake: …`."""

    def __init__(self, *, startup_timeout_s: float = 20.0) -> None:
        self.startup_timeout_s = startup_timeout_s
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"  # the OpenAI SDK appends /chat/completions

    @property
    def anthropic_base_url(self) -> str:
        return self.url  # the Anthropic SDK appends /v1/messages

    @classmethod
    def attach(cls, url: str) -> "FakeProvider":
        """A handle on a stand-in already running at `url` (scripts/start.sh starts one); stop() leaves it be."""
        fake = cls()
        fake.url = url.rstrip("/")
        return fake

    def start(self) -> "FakeProvider":
        root = Path(__file__).resolve().parents[2]  # the repository: judges/testing/ is two below it
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "judges.testing.fake_provider", "--port", "0"],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: lines.put(self.proc.stdout.readline()), daemon=True).start()
        try:
            line = lines.get(timeout=self.startup_timeout_s)
        except queue.Empty:
            self.stop()
            raise RuntimeError("the fake provider did not start in time") from None
        match = re.search(r"listening on (http://\S+)", line)
        if not match:
            self.stop()
            raise RuntimeError(f"the fake provider did not start: {line!r}")
        self.url = match.group(1)
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None

    def __enter__(self) -> "FakeProvider":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise ValueError(exc.read().decode()) from None

    def control(self, **settings: Any) -> dict[str, Any]:
        """Set faults, latency and the rule, for every model or (with model=…) for one."""
        return self._call("POST", "/_control", settings)

    def reset(self) -> None:
        self._call("POST", "/_reset", {})

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/_stats")

    def requests(self) -> list[dict[str, Any]]:
        return self._call("GET", "/_requests")


if __name__ == "__main__":
    main()
