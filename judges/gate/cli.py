"""evalhub-gate: CI runs the calibrated judge on new agent outputs (docs/gate.md).

    evalhub-gate cases --server URL --dataset SLUG [--sample N --seed S] [--category C] [--split S]
                       [--kind K] --out cases.jsonl [--token TOKEN]
    evalhub-gate check --config URL_OR_FILE [--token TOKEN] [--cases cases.jsonl] --outputs FILE.jsonl
                       [--repeats K] [--max-cost-usd X] [--require-calibrated] [--junit FILE] [--json FILE]
                       [--post URL] [--cache-dir DIR] [--cache-key-env NAME] [--concurrency N] [--redact KIND…]
                       [--rubric SLUG]… [--stage STAGE]… [--layers contract]
                       [--post-cases DATASET [--server URL] [--ref REF] [--base-ref REF]] [--comment github|gitlab]

Plain Python with no Django import: a pipeline runs it with the package installed and no server or
database. `cases` writes the cases a pipeline runs its agent on (a cases:read token); `check` reads the
gate config (a URL fetched with a `gates:read` token, or a file), judges every case of the outputs file
with each rubric's pinned judge through the same engine the app uses, the rubrics side by side under
one concurrency cap and one spend cap, and applies the stages: observe records only, warn reports,
gate fails.

Exit codes, the contract a pipeline relies on:
    0  pass: no gate-stage case failed and every gate-stage case was evaluated
    1  fail: a gate-stage case failed (or was not evaluated under fail_closed)
    3  not evaluated: nothing failed, but some gate-stage judgment could not be made (the provider was
       down, the spend cap ran out, a tie, a contested second opinion)
    2  usage or config error, whatever the stage: nothing was judged, a judge's key was refused, or the
       results could not be posted
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import NoReturn, TextIO

from judges.engine import FolderCache
from judges.engine.folder_cache import MIN_KEY_BYTES
from judges.gate import VERSION
from judges.gate.comment import KINDS as COMMENT_KINDS
from judges.gate.comment import Links, comment_on_request
from judges.gate.config import (
    ENV_ALLOW_ENV,
    STAGES,
    TIERS,
    GateRubric,
    allowed_env_names,
    check_calibrated,
    check_env_names,
    check_environment,
    check_prices,
    gate_project,
    load_gate_config,
    parse_gate_config,
    select_rubrics,
    select_tier,
)
from judges.gate.judging import (
    EXIT_CONFIG,
    EXIT_PASS,
    RubricResult,
    calls_models,
    exit_code,
    judge_all,
    refused_keys,
)
from judges.gate.messages import ConfigError, one_line, print_error
from judges.gate.outputs import read_cases, read_cases_and_outputs, read_outputs
from judges.gate.posting import (
    CaseSource,
    changes_against_base,
    check_post_scopes,
    ci_result_pages,
    default_base_ref,
    post_cases,
    resolve_ref,
    server_of,
)
from judges.gate.report import (
    BaseChanges,
    ci_context,
    junit_xml,
    results_payload,
    write_github_annotations,
    write_recalibration,
    write_step_summary,
    write_summary,
)
from judges.gate.server import TOKEN_ENV, checked_token, checked_url, fetch_cases, fetch_redaction, post_results
from labeling.importing.files import write_whole
from labeling.importing.reading import CASE_KINDS
from labeling.importing.redaction import REDACT_KINDS, Redactor

# The cache key's variable: set on the gate step only, never on a step that runs the agent (docs/gate.md).
CACHE_KEY_ENV = "EVALHUB_CACHE_KEY"


class _Parser(argparse.ArgumentParser):
    """argparse, with its error messages (which quote the arguments) made safe to print like any other."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_CONFIG, f"{self.prog}: error: {one_line(message, None)}\n")


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def _usd(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an amount in USD, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise argparse.ArgumentTypeError(f"expected a finite amount ≥ 0, got {value!r}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="evalhub-gate",
        description="Run evalhub's calibrated judges on new agent outputs in CI. "
        "Exit 0 pass, 1 fail, 3 not evaluated, 2 usage or config error.",
    )
    # Compared with the gate config's requires_cli (judges.gate.versions).
    parser.add_argument("--version", action="version", version=f"evalhub-gate {VERSION}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    cases = commands.add_parser(
        "cases", help="write a dataset's cases (for the agent to answer) to a JSONL file",
        description="Fetch a dataset's cases from evalhub (GET /api/datasets/<slug>/cases, a cases:read token): "
        "every case field but the output. Filters apply first, then the sample: the same N cases for the "
        "same seed.",
    )
    cases.add_argument("--server", required=True, metavar="URL", help="evalhub's address, e.g. https://evalhub.example.com")
    cases.add_argument("--dataset", required=True, metavar="SLUG", help="the dataset's slug")
    cases.add_argument("--sample", type=_positive, metavar="N", help="at most N cases, chosen by --seed")
    cases.add_argument("--seed", metavar="S", help="any string: the same seed picks the same sample (with --sample)")
    cases.add_argument("--category", metavar="C", help="only cases of this category")
    cases.add_argument("--split", choices=("dev", "holdout"), help="only cases of this split")
    cases.add_argument("--kind", choices=CASE_KINDS, help="only cases of this calibration kind")
    cases.add_argument("--out", required=True, metavar="FILE", help="write the cases here (JSONL)")
    cases.add_argument("--token", help=f"API token with cases:read (default: ${TOKEN_ENV})")

    check = commands.add_parser(
        "check", help="judge an outputs file against the gate config",
        description="Judge every case of the outputs file with each rubric's pinned judge and apply its stage: "
        "observe records only, warn reports, gate fails.",
    )
    check.add_argument("--config", required=True, metavar="URL_OR_FILE",
                       help="the gate config: https://…/api/gates (needs a gates:read token) or a JSON file")
    check.add_argument("--token", help=f"API token (default: ${TOKEN_ENV}); gates:read to fetch, results:write "
                                       "to post")
    check.add_argument("--cases", metavar="FILE",
                       help="the cases (as `evalhub-gate cases` writes them): the expectations come from here, and "
                            "each outputs line carries only external_id, output, trace and metadata")
    check.add_argument("--outputs", required=True, metavar="FILE",
                       help="the agent outputs, one JSONL line per case (a whole case without --cases)")
    check.add_argument("--repeats", type=_positive, default=1, metavar="K",
                       help="judge each case K times; its verdict is the majority, a tie is not evaluated")
    check.add_argument("--max-cost-usd", type=_usd, metavar="X",
                       help="cap the whole check's spend (from the gate config's prices; gate-stage rubrics spend "
                            "first; what is left is not evaluated: spend cap)")
    check.add_argument("--tier", choices=TIERS, default="default",
                       help="which judge each rubric is judged with: its default one (pull requests), or the stronger "
                       "one it promoted for releases (a rubric with no release tier uses its default judge, and the "
                       "summary says so)")
    check.add_argument("--require-calibrated", action="store_true",
                       help="a rubric marked recalibration needed is a config error (exit 2), not a warning")
    check.add_argument("--junit", metavar="FILE", help="write JUnit XML here")
    check.add_argument("--json", metavar="FILE", help="write the results JSON (what --post sends) here")
    check.add_argument("--post", metavar="URL", help="POST the results here (…/api/ci-results, results:write)")
    check.add_argument("--cache-dir", default=".evalhub-cache", metavar="DIR",
                       help="where identical work is cached between runs (default: .evalhub-cache)")
    check.add_argument("--cache-key-env", default=CACHE_KEY_ENV, metavar="NAME",
                       help=f"the variable holding the cache key, a secret given only to this step (default: "
                            f"${CACHE_KEY_ENV}): the folder's entries are signed with it, and an entry that does not "
                            "verify is judged again; without a key the check keeps no cache")
    check.add_argument("--no-cache", action="store_true", help="ask the judges again even for cached work")
    check.add_argument("--concurrency", type=_positive, default=4, metavar="N",
                       help="judge calls in flight at once, all rubrics together (default: 4)")
    check.add_argument("--redact", nargs="+", choices=REDACT_KINDS, default=[], metavar="KIND",
                       help=f"replace these kinds of personal data in the cases by placeholders before anything is "
                            f"judged or posted ({', '.join(REDACT_KINDS)})")
    check.add_argument("--allow-env", action="append", default=[], metavar="NAME",
                       help="let a judge read this variable too (repeatable; also $" + ENV_ALLOW_ENV + ", "
                       "comma-separated); OPENAI_*/ANTHROPIC_* keys and URLs and EVALHUB_JUDGE_* need no "
                       "leave, and GITHUB_*, ACTIONS_*, RUNNER_*, CI_* and the app's own are never allowed")
    scope = check.add_argument_group("scope", "judge only some of the gate config's rubrics (a scope that selects "
                                              "none is a config error)")
    scope.add_argument("--rubric", action="append", default=[], metavar="SLUG",
                       help="only this rubric (repeatable; a slug the gate config lacks is a config error)")
    scope.add_argument("--stage", action="append", default=[], choices=STAGES, help="only rubrics at this stage "
                                                                                     "(repeatable)")
    scope.add_argument("--layers", choices=("contract",),
                       help="contract: only deterministic rubrics (contract checks, no model): the fast job")
    check.add_argument("--comment", choices=COMMENT_KINDS,
                       help="comment the verdict on the pull request (github: $GITHUB_TOKEN) or merge request (gitlab: "
                            "$EVALHUB_GITLAB_TOKEN), one comment per rubric set, updated on each push; a comment that "
                            "cannot be posted is a warning, never a failed gate")
    loop = check.add_argument_group("posting back", "what the check judged becomes cases of a living dataset for "
                                                    "reviewers, and the judgments of a CI run of each rubric")
    loop.add_argument("--post-cases", metavar="DATASET",
                      help="post the judged cases to this dataset (a token with cases:write and results:write)")
    loop.add_argument("--server", metavar="URL", help="evalhub's address (default: the origin of a --config URL)")
    loop.add_argument("--ref", metavar="REF",
                      help="the ref the cases are named after, <ref>/<external_id> (default: $GITHUB_SHA, else the "
                           "git commit)")
    loop.add_argument("--base-ref", metavar="REF",
                      help="name the cases that passed at this posted ref and fail now, and the reverse (default: a "
                           "pull request's base commit on GitHub Actions, when it was posted)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on a usage error, 0 on --help
        return int(exc.code or 0)
    if args.command not in ("check", "cases"):
        parser.print_help(sys.stderr)
        return EXIT_CONFIG
    env = os.environ
    # A console that cannot show a character (PYTHONIOENCODING=ascii, a cp1252 runner) gets an escape
    # instead of an exception halfway through the summary.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    try:
        return _check(args, env) if args.command == "check" else _cases(args, env)
    except ConfigError as exc:
        print_error(exc)
        return EXIT_CONFIG
    except Exception as exc:  # a bug, never a failed gate: exit 1 would tell the pipeline a case failed
        traceback.print_exc()
        print_error(ConfigError(f"unexpected {type(exc).__name__} (a bug in evalhub-gate, not a failed gate; "
                                "the traceback is above)"))
        return EXIT_CONFIG


def _cases(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    if (args.seed is None) != (args.sample is None):
        raise ConfigError("--sample N and --seed S go together: the same seed picks the same N cases")
    token = _token(args, env)
    checked_url(args.server, given_as="--server")
    if os.path.isdir(args.out):
        raise ConfigError(f"--out {args.out}: is a folder; name the file to write the cases to")
    filters = {"category": args.category, "split": args.split, "kind": args.kind, "sample": args.sample,
               "seed": args.seed}
    partial = fetch_cases(args.server, args.dataset, token=token, filters=filters, out=args.out)
    try:
        count = len(read_cases(partial, shown_as=f"the cases {args.server} sent"))
        os.replace(partial, args.out)
    except OSError as exc:
        raise ConfigError(f"writing {args.out}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    print(f"evalhub-gate: wrote {count} case(s) of dataset {one_line(args.dataset, 80)} to {one_line(args.out)}")
    return EXIT_PASS


def _token(args: argparse.Namespace, env: Mapping[str, str]) -> str | None:
    if args.token:
        return checked_token(args.token, given_as="--token")
    return checked_token(env.get(TOKEN_ENV) or None, given_as=f"${TOKEN_ENV}")


def _check(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    token = _token(args, env)
    if args.post:
        checked_url(args.post, given_as="--post")  # before any judging: a bad address would waste the calls
        if not token:
            raise ConfigError(f"--post needs a token with results:write (--token or ${TOKEN_ENV})")
    server = ref = None
    if args.post_cases:
        if not token:
            raise ConfigError(
                f"--post-cases needs a token with cases:write and results:write (--token or ${TOKEN_ENV})"
            )
        server = checked_url(server_of(args.server, args.config), given_as="--server")
        ref = resolve_ref(args.ref, env)
    elif args.base_ref or args.server or args.ref:
        raise ConfigError("--server, --ref and --base-ref go with --post-cases DATASET (the dataset CI runs are "
                          "posted to)")
    allowed_env = allowed_env_names(args.allow_env, env)
    gates = load_gate_config(args.config, token=token)
    rubrics = select_rubrics(
        select_tier(parse_gate_config(gates), args.tier),
        slugs=args.rubric, stages=args.stage, contract_only=args.layers == "contract",
    )
    if not rubrics:
        print("evalhub-gate: nothing to gate: the gate config has no rubric yet (a rubric is in it once a lead "
              "promotes it to observe or above); exit 0", file=sys.stderr)
        return EXIT_PASS
    project = gate_project(gates)  # checked with the rest by parse_gate_config; --post sends it back
    check_env_names(rubrics, allowed_env)  # before any variable is read, let alone sent anywhere
    if args.require_calibrated:
        check_calibrated(rubrics)
    if args.max_cost_usd is not None:
        check_prices(rubrics)
    cases = read_cases_and_outputs(args.cases, args.outputs) if args.cases else read_outputs(args.outputs)
    check_environment(rubrics, env)
    kinds = set(args.redact)
    if server is not None:
        assert token is not None
        check_post_scopes(server, token)  # a token that cannot post is refused before anything is judged
        # The dataset's own redaction too, so the posted cases and their judgments are of the same text.
        kinds.update(fetch_redaction(server, args.post_cases, token=token))
    redactor = Redactor(sorted(kinds))
    cases = [redactor.fields(case) for case in cases]  # before a judge, the cache or a report sees them
    cache = None if args.no_cache or not any(calls_models(r) for r in rubrics) else _cache(args, env)
    github = env.get("GITHUB_ACTIONS") == "true"

    started = time.monotonic()
    print(
        f"evalhub-gate: {len(cases)} cases × {args.repeats} repeat(s), {len(rubrics)} rubric(s)", file=sys.stdout
    )
    write_tier(rubrics, args.tier, sys.stdout)
    write_recalibration(rubrics, sys.stdout, github=github)
    try:
        results = judge_all(
            rubrics, cases, repeats=args.repeats, concurrency=args.concurrency, cache=cache, env=env,
            max_cost_usd=args.max_cost_usd, allowed_env=allowed_env,
            # A rotating second-opinion sample draws per ref: the posted ref, else the commit CI checked out.
            sample_salt=ref or args.ref or env.get("GITHUB_SHA") or "",
        )
    finally:
        if cache is not None:
            cache.close()  # what was judged is kept (one pack), whatever comes after
    code = exit_code(results)
    print(f"evalhub-gate: judged in {time.monotonic() - started:.1f} s", file=sys.stdout)
    refused = refused_keys(results)
    if refused:
        # Nothing is reported or posted, as for any config error. The reason names the variable, never the key.
        print_error(ConfigError("; ".join(f"the key for rubric {one_line(slug)} was refused: {one_line(why)}"
                                          for slug, why in refused)))
        return code
    problems = []
    try:
        against_base = _against_base(args, server, token, results, env)
    except ConfigError as exc:  # the verdicts are still summarised and reported, without the comparison
        against_base = None
        problems.append(exc)
    write_summary(results, code, sys.stdout, against_base=against_base)
    if github:
        write_github_annotations(results, sys.stdout)
    links = Links(run_url=ci_context(env)["run_url"], post_asked=bool(args.post))
    try:
        _report(args, token, results, code, cases=cases, env=env, server=server, ref=ref, against_base=against_base,
                project=project, links=links)
    except ConfigError as exc:
        problems.append(exc)
    if args.comment:
        sys.stdout.flush()
        comment_on_request(args.comment, results, code, tier=args.tier, env=env, against_base=against_base,
                           max_cost_usd=args.max_cost_usd, links=links)
    if problems:
        # A report asked for (a comparison, a file, a post) that could not be made is a config error the
        # pipeline must see.
        for problem in problems:
            print_error(problem)
        return exit_code(results, report_failed=True)
    return code


def write_tier(rubrics: Sequence[GateRubric], tier: str, out: TextIO) -> None:
    """With --tier release, which judge each rubric is judged with; nothing for the default tier."""
    if tier == "default":
        return
    for rubric in rubrics:
        which = (f"has no {tier} tier: judged with its default judge" if rubric.tier_fallback
                 else f"judged with its {tier} judge (config_hash {rubric.judge.config_hash[:12]})")
        print(f"evalhub-gate: --tier {tier}: rubric {one_line(rubric.slug, 80)} {which}", file=out)


def _cache(args: argparse.Namespace, env: Mapping[str, str]) -> FolderCache | None:
    """The cache folder, its entries signed with the step's cache key; None (said) without a key: an entry
    anyone could write (a committed folder, a cache restored from another ref, the agent run earlier in the
    job) must never decide a verdict."""
    key = env.get(args.cache_key_env, "")
    if not key:
        print(f"evalhub-gate: no cache: ${one_line(args.cache_key_env, 80)} is not set, so every case is judged "
              "(a cached verdict is used only when signed with a key the gate step alone holds; docs/gate.md)",
              file=sys.stdout)
        return None
    if len(key.encode()) < MIN_KEY_BYTES:
        raise ConfigError(f"${one_line(args.cache_key_env, 80)}: a cache key needs at least {MIN_KEY_BYTES} bytes "
                          "(e.g. the output of `openssl rand -hex 32`, kept as a secret of the gate step)")
    try:
        return FolderCache(args.cache_dir, key=key.encode(), warn=_cache_warning)
    except OSError as exc:  # a file of that name, or a folder it may not create
        raise ConfigError(f"--cache-dir {args.cache_dir}: {exc.strerror or exc}") from None


def _cache_warning(message: str) -> None:
    """A cache folder's damaged pack, or one it could not write: said, never a failure (the work is judged)."""
    print(f"evalhub-gate: warning: {one_line(message, None)}", file=sys.stderr)


def _against_base(
    args: argparse.Namespace, server: str | None, token: str | None, results: list[RubricResult],
    env: Mapping[str, str],
) -> dict[str, BaseChanges] | None:
    """The cases that changed verdict against the base ref's CI runs, read from the server (--post-cases)."""
    base_ref = args.base_ref or default_base_ref(env)
    if server is None or token is None or not base_ref:
        return None
    return changes_against_base(results, server=server, dataset=args.post_cases, token=token, base_ref=base_ref,
                                out=sys.stdout)


def _report(
    args: argparse.Namespace, token: str | None, results: list[RubricResult], code: int, *,
    cases: list[dict], env: Mapping[str, str], server: str | None, ref: str | None,
    against_base: dict[str, BaseChanges] | None, project: str | None, links: Links,
) -> None:
    """The reports asked for; `links` gets the pages the server names for what was posted, as each post succeeds."""
    if env.get("GITHUB_STEP_SUMMARY"):
        write_step_summary(results, code, env["GITHUB_STEP_SUMMARY"], against_base=against_base)
    if args.junit:
        _write(args.junit, junit_xml(results))
    common = {"code": code, "repeats": args.repeats, "n_cases": len(cases), "env": env,
              "max_cost_usd": args.max_cost_usd, "against_base": against_base, "project": project}
    if args.json:
        _write(args.json, json.dumps(results_payload(results, per_case=True, **common), indent=2).encode())
    if args.post:
        sys.stdout.flush()
        assert token is not None  # _check refuses --post without a token
        answer = post_results(args.post, token, results_payload(results, per_case=True, **common))
        links.result_pages = ci_result_pages(answer)
        print(f"evalhub-gate: results posted to {one_line(args.post)}", file=sys.stdout)
        for slug, page in links.result_pages.items():
            print(f"evalhub-gate: CI result of {one_line(slug, 80)}: {one_line(page, 300)}", file=sys.stdout)
    if server is not None and ref is not None:
        sys.stdout.flush()
        assert token is not None  # _check refuses --post-cases without a token
        post_cases(results, cases, server=server, dataset=args.post_cases, token=token,
                   source=CaseSource.of(ref, env), repeats=args.repeats, out=sys.stdout, queues=links.queues)


def _write(path: str, data: bytes) -> None:
    try:
        write_whole(path, [data], binary=True)  # whole or not at all: a full disk leaves no truncated file
    except OSError as exc:
        raise ConfigError(f"writing {path}: {exc.strerror or exc}; nothing was written there") from None


if __name__ == "__main__":
    sys.exit(main())
