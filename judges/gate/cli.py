"""evalhub-gate: CI runs the calibrated judge on new agent outputs (docs/gate.md).

    evalhub-gate cases --server URL --dataset SLUG [--sample N --seed S] [--category C] [--split S]
                       [--kind K] --out cases.jsonl [--token TOKEN]
    evalhub-gate check --config URL_OR_FILE [--token TOKEN] [--cases cases.jsonl] --outputs FILE.jsonl
                       [--repeats K] [--max-cost-usd X] [--require-calibrated] [--junit FILE] [--json FILE]
                       [--post URL] [--cache-dir DIR] [--concurrency N] [--redact KIND…]

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
import json
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import NoReturn

from judges.engine import FolderCache
from judges.gate.config import (
    ENV_ALLOW_ENV,
    allowed_env_names,
    check_calibrated,
    check_env_names,
    check_environment,
    check_prices,
    load_gate_config,
    parse_gate_config,
)
from judges.gate.judging import EXIT_CONFIG, EXIT_PASS, RubricResult, exit_code, judge_all, refused_keys
from judges.gate.messages import ConfigError, one_line, print_error
from judges.gate.outputs import read_cases, read_cases_and_outputs, read_outputs
from judges.gate.report import (
    junit_xml,
    results_payload,
    write_github_annotations,
    write_recalibration,
    write_step_summary,
    write_summary,
)
from judges.gate.server import TOKEN_ENV, fetch_cases, post_results
from labeling.importing.reading import CASE_KINDS
from labeling.importing.redaction import REDACT_KINDS, Redactor


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
    check.add_argument("--require-calibrated", action="store_true",
                       help="a rubric marked recalibration needed is a config error (exit 2), not a warning")
    check.add_argument("--junit", metavar="FILE", help="write JUnit XML here")
    check.add_argument("--json", metavar="FILE", help="write the results JSON (what --post sends) here")
    check.add_argument("--post", metavar="URL", help="POST the results here (…/api/ci-results, results:write)")
    check.add_argument("--cache-dir", default=".evalhub-cache", metavar="DIR",
                       help="where identical work is cached between runs (default: .evalhub-cache)")
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
    try:
        return _check(args, env) if args.command == "check" else _cases(args, env)
    except ConfigError as exc:
        print_error(exc)
        return EXIT_CONFIG


def _cases(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    if (args.seed is None) != (args.sample is None):
        raise ConfigError("--sample N and --seed S go together: the same seed picks the same N cases")
    token = args.token or env.get(TOKEN_ENV) or None
    filters = {"category": args.category, "split": args.split, "kind": args.kind, "sample": args.sample,
               "seed": args.seed}
    partial = fetch_cases(args.server, args.dataset, token=token, filters=filters, out=args.out)
    try:
        count = len(read_cases(partial, shown_as=f"the cases {args.server} sent"))
        os.replace(partial, args.out)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    print(f"evalhub-gate: wrote {count} case(s) of dataset {one_line(args.dataset, 80)} to {one_line(args.out)}")
    return EXIT_PASS


def _check(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    token = args.token or env.get(TOKEN_ENV) or None
    if args.post and not token:
        raise ConfigError(f"--post needs a token with results:write (--token or ${TOKEN_ENV})")
    allowed_env = allowed_env_names(args.allow_env, env)
    rubrics = parse_gate_config(load_gate_config(args.config, token=token))
    check_env_names(rubrics, allowed_env)  # before any variable is read, let alone sent anywhere
    if args.require_calibrated:
        check_calibrated(rubrics)
    if args.max_cost_usd is not None:
        check_prices(rubrics)
    cases = read_cases_and_outputs(args.cases, args.outputs) if args.cases else read_outputs(args.outputs)
    redactor = Redactor(args.redact)
    cases = [redactor.fields(case) for case in cases]  # before a judge, the cache or a report sees them
    check_environment(rubrics, env)
    cache = None if args.no_cache else FolderCache(args.cache_dir)
    github = env.get("GITHUB_ACTIONS") == "true"

    started = time.monotonic()
    print(
        f"evalhub-gate: {len(cases)} cases × {args.repeats} repeat(s), {len(rubrics)} rubric(s)", file=sys.stdout
    )
    write_recalibration(rubrics, sys.stdout, github=github)
    results = judge_all(
        rubrics, cases, repeats=args.repeats, concurrency=args.concurrency, cache=cache, env=env,
        max_cost_usd=args.max_cost_usd, allowed_env=allowed_env,
    )
    code = exit_code(results)
    print(f"evalhub-gate: judged in {time.monotonic() - started:.1f} s", file=sys.stdout)
    refused = refused_keys(results)
    if refused:
        # Nothing is reported or posted, as for any config error. The reason names the variable, never the key.
        print_error(ConfigError("; ".join(f"the key for rubric {one_line(slug)} was refused: {one_line(why)}"
                                          for slug, why in refused)))
        return code
    write_summary(results, code, sys.stdout)
    if github:
        write_github_annotations(results, sys.stdout)
        if env.get("GITHUB_STEP_SUMMARY"):
            write_step_summary(results, code, env["GITHUB_STEP_SUMMARY"])
    try:
        _report(args, token, results, code, n_cases=len(cases), env=env)
    except ConfigError as exc:
        # A report asked for (a file, a post) that could not be made is a config error the pipeline must see.
        print_error(exc)
        return exit_code(results, report_failed=True)
    return code


def _report(
    args: argparse.Namespace, token: str | None, results: list[RubricResult], code: int, *, n_cases: int,
    env: Mapping[str, str],
) -> None:
    if args.junit:
        _write(args.junit, junit_xml(results))
    payload = results_payload(
        results, code=code, repeats=args.repeats, n_cases=n_cases, env=env, max_cost_usd=args.max_cost_usd
    )
    if args.json:
        _write(args.json, json.dumps(payload, indent=2).encode())
    if args.post:
        sys.stdout.flush()
        assert token is not None  # _check refuses --post without a token
        post_results(args.post, token, payload)
        print(f"evalhub-gate: results posted to {one_line(args.post)}", file=sys.stdout)


def _write(path: str, data: bytes) -> None:
    try:
        with open(path, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        raise ConfigError(f"writing {path}: {exc.strerror or exc}") from None


if __name__ == "__main__":
    sys.exit(main())
