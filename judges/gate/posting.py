"""CI traffic comes back (docs/gate.md, "Posting the cases back"): what the check judged becomes cases of a
living dataset and the judgments of a CI run, one bounded request per chunk of cases; and the base ref's
CI run, read back, says which cases pass at the base and fail now.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from judges.gate.judging import RubricResult
from judges.gate.messages import ConfigError, one_line
from judges.gate.report import BaseChanges, ci_context
from judges.gate.server import fetch_ci_verdicts, post_case_chunk, token_scopes

CASES_SCHEMA = "evalhub.ci-cases/v1"
# Cases per request: a few hundred keeps a request well under the server's body limit with K repeats of
# full judgments each, and a failed request costs one chunk.
CHUNK_CASES = 250
POST_SCOPES = ("cases:write", "results:write")
# A ref becomes the first part of every posted case's external_id (at most 200 characters in all).
MAX_REF_CHARS = 100
_REF_RE = re.compile(r"^[^\s\x00-\x1f\x7f]+$")


def server_of(server: str | None, config: str) -> str:
    """--server, else the origin of a --config URL."""
    if server:
        return server.rstrip("/")
    if config.startswith(("http://", "https://")):
        parts = urllib.parse.urlsplit(config)
        return f"{parts.scheme}://{parts.netloc}"
    raise ConfigError("--post-cases needs --server URL (the gate config was read from a file, not from the server)")


def resolve_ref(ref: str | None, env: Mapping[str, str]) -> str:
    """--ref, else $GITHUB_SHA, else the commit checked out here (git rev-parse HEAD)."""
    if not ref:
        ref = env.get("GITHUB_SHA") or _git_head()
    if not ref:
        raise ConfigError("--post-cases needs a ref: pass --ref REF (no $GITHUB_SHA, and no git commit here)")
    problem = ref_problem(ref)
    if problem:
        raise ConfigError(f"--ref {one_line(ref, 120)}: {problem}")
    return ref


def ref_problem(ref: str) -> str | None:
    """Why a ref cannot name posted cases, or None. It may hold `/` (a branch name does)."""
    if not 1 <= len(ref) <= MAX_REF_CHARS or not _REF_RE.match(ref):
        return f"expected 1 to {MAX_REF_CHARS} characters, no space or control character"
    return None


def _git_head() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def default_base_ref(env: Mapping[str, str]) -> str | None:
    """A pull request's base commit, from the event GitHub Actions describes ($GITHUB_EVENT_PATH)."""
    path = env.get("GITHUB_EVENT_PATH")
    if env.get("GITHUB_ACTIONS") != "true" or not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            event = json.load(fh)
        sha = event["pull_request"]["base"]["sha"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return sha if isinstance(sha, str) and _REF_RE.match(sha) else None


def check_post_scopes(server: str, token: str) -> None:
    """Refuse, before anything is judged, a token the server says lacks cases:write or results:write."""
    missing = [scope for scope in POST_SCOPES if scope not in token_scopes(server, token)]
    if missing:
        raise ConfigError(f"--post-cases needs a token with {' and '.join(POST_SCOPES)}; this one lacks "
                          f"{', '.join(missing)}")


@dataclass(frozen=True)
class CaseSource:
    """Where the posted cases say they come from: the ref, its branch and the pipeline run."""

    ref: str
    branch: str | None
    run_url: str | None

    @classmethod
    def of(cls, ref: str, env: Mapping[str, str]) -> CaseSource:
        context = ci_context(env)
        branch = env.get("GITHUB_HEAD_REF") or context["ref"]
        return cls(ref=ref, branch=branch or None, run_url=context["run_url"])


def chunk_body(result: RubricResult, cases: Mapping[str, dict[str, Any]], source: CaseSource, repeats: int,
           start: int, size: int) -> dict[str, Any]:
    """One request's body: built when it is sent, so the posting holds one chunk at a time."""
    return {
        "schema": CASES_SCHEMA, "ref": source.ref, "branch": source.branch, "run_url": source.run_url,
        "rubric": result.rubric.slug, "config_hash": result.rubric.judge.config_hash, "repeats": repeats,
        "cases": [
            {"case": cases[case.external_id], "verdict": case.verdict,
             "judgments": [j.to_dict() for j in case.judgments]}
            for case in result.cases[start : start + size]
        ],
    }


def ci_result_pages(answer: Any) -> dict[str, str]:
    """{rubric slug: its CI result's page} from the answer of POST /api/ci-results (an older server names none)."""
    stored = answer.get("stored") if isinstance(answer, dict) else None
    if not isinstance(stored, list):
        return {}
    return {item["rubric"]: item["url"] for item in stored
            if isinstance(item, dict) and isinstance(item.get("rubric"), str) and isinstance(item.get("url"), str)}


def post_cases(
    results: Sequence[RubricResult], cases: Sequence[dict[str, Any]], *, server: str, dataset: str, token: str,
    source: CaseSource, repeats: int, out: TextIO, queues: dict[str, str], chunk_cases: int = CHUNK_CASES,
) -> None:
    """Post each rubric's judged cases, a chunk per request; print what each rubric's CI run became, and put in
    `queues` the queue where they are labelled, as the server names it (filled as each rubric's cases are posted).

    A refused or failed chunk stops the posting: the server wrote nothing of that chunk, and the error
    says which chunks were written before it (posting the same ref again completes the run: what was
    written stays unchanged).
    """
    by_id = {case["external_id"]: case for case in cases}
    for result in results:
        slug = one_line(result.rubric.slug, 80)
        starts = range(0, len(result.cases), chunk_cases)
        totals = {"created": 0, "updated": 0, "unchanged": 0}
        run = queue = None
        for index, start in enumerate(starts, start=1):
            what = f"posting the cases of {slug}: chunk {index} of {len(starts)}"
            body = chunk_body(result, by_id, source, repeats, start, chunk_cases)
            try:
                answer = post_case_chunk(server, dataset, token, body, what)
            except ConfigError as exc:
                raise ConfigError(
                    f"{exc} (nothing of this chunk was written; {start} case(s) of {slug} were posted before "
                    f"it, in {index - 1} chunk(s); post the same ref again to finish)"
                ) from None
            run, queue = answer.get("run"), answer.get("queue_url")
            for name in totals:
                totals[name] += int(answer.get(name) or 0)
        print(f"evalhub-gate: posted {len(result.cases)} case(s) of {slug} to dataset {one_line(dataset, 80)} "
              f"as CI run {run} of ref {one_line(source.ref, 80)}: {totals['created']} new, {totals['updated']} "
              f"changed, {totals['unchanged']} already there", file=out)
        if isinstance(queue, str):
            queues[result.rubric.slug] = queue
            print(f"evalhub-gate: cases of {slug} to label: {one_line(queue, 300)}", file=out)


def changes_against_base(
    results: Sequence[RubricResult], *, server: str, dataset: str, token: str, base_ref: str, out: TextIO,
) -> dict[str, BaseChanges]:
    """Per rubric whose config posted `base_ref`: the cases that passed there and fail now, and the reverse."""
    changes = {}
    for result in results:
        verdicts = fetch_ci_verdicts(server, dataset, token, ref=base_ref, config_hash=result.rubric.judge.config_hash)
        if verdicts is None:
            print(f"evalhub-gate: base {one_line(base_ref, 80)} was not posted for {one_line(result.rubric.slug, 80)} "
                  "with this judge: no comparison", file=out)
            continue
        changes[result.rubric.slug] = BaseChanges(
            base_ref=base_ref,
            new_failures=[c.external_id for c in result.cases
                          if c.verdict == "fail" and verdicts.get(c.external_id) == "pass"],
            new_passes=[c.external_id for c in result.cases
                        if c.verdict == "pass" and verdicts.get(c.external_id) == "fail"],
        )
    return changes

