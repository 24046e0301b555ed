"""The verdict on the pull request (docs/ci.md): `evalhub-gate check --comment github|gitlab` writes one comment
per rubric set on the pull request (GitHub) or merge request (GitLab), and updates it in place on each push.

The comment starts with a hidden marker named after the judged rubric set and tier, so a pipeline with two
jobs (say the contract rubrics and the behavioral ones) keeps two comments, each found again and edited
rather than a new one added every push. Only a comment the same kind of author wrote is edited: on GitHub a
bot's (the job's GITHUB_TOKEN writes as `github-actions[bot]`), on GitLab the token's own user's; a marker
someone pasted into their own comment is left alone.

Posting is best effort: a comment that cannot be posted (no token, a read-only token on a fork, the API
down) is a warning, never a failed gate. Every text the gate did not write (slugs, case ids) goes through
`markdown_text`: it cannot break the table, open a link or mention anyone.
"""

from __future__ import annotations

import hashlib
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, TextIO

from judges.gate import VERSION
from judges.gate.judging import OVERALL, RubricResult
from judges.gate.messages import one_line
from judges.gate.report import MAX_LISTED_CASES, BaseChanges, markdown_text, totals, workflow_command

KINDS = ("github", "gitlab")
GITLAB_TOKEN_ENV = "EVALHUB_GITLAB_TOKEN"
HTTP_TIMEOUT_S = 20
# GitHub refuses a comment body over 65,536 characters; the cases listed are cut well before that.
MAX_BODY_CHARS = 60_000
LISTED_PER_RUBRIC = 20
# Comments read before giving up on finding ours (100 a page): a pull request with more is not a usual one.
MAX_PAGES = 30


class CommentError(Exception):
    """Why the comment was not posted; said as a warning."""


@dataclass
class Links:
    """Where the comment points: the pipeline's run, and the pages evalhub's answers named as the check posted,
    filled in as each post succeeds: per rubric slug, the page of its stored CI result (`--post`) and the queue
    where its posted cases are labelled (`--post-cases`)."""

    run_url: str | None
    post_asked: bool = False
    # None: the results were not posted (not asked, or the post failed); {}: posted to a server naming no page.
    result_pages: dict[str, str] | None = None
    queues: dict[str, str] = field(default_factory=dict)


def marker(results: Sequence[RubricResult], tier: str) -> str:
    """The hidden first line naming this comment: a digest of the rubric set and the tier (never the slugs
    themselves, which are untrusted text inside an HTML comment)."""
    key = "\n".join([tier, *sorted(r.rubric.slug for r in results)])
    return f"<!-- evalhub-gate comment {hashlib.sha256(key.encode()).hexdigest()[:16]} -->"


def _safe_url(url: str | None) -> str | None:
    """A URL fit for a Markdown link target: http(s), printable ASCII, nothing that ends the link early."""
    if not url or not url.startswith(("https://", "http://")) or not url.isascii() or not url.isprintable():
        return None
    return None if any(c in url for c in " ()<>[]\"'`") else url


def _rate(r: RubricResult) -> str:
    figures = r.pass_rate
    if figures["status"] == "ok":
        low, high = figures["ci95"]
        text = f"{figures['estimate'] * 100:.1f} % ({low * 100:.1f}–{high * 100:.1f} %)"
        return text + (" approx." if figures["approximate"] else "")
    return figures["status"].replace("_", " ")


def _cost(value: float | None) -> str:
    return "unpriced" if value is None else f"${value:.4f}"


def comment_body(
    results: Sequence[RubricResult], code: int, *, tier: str, links: Links,
    against_base: Mapping[str, BaseChanges] | None = None, max_cost_usd: float | None = None,
) -> str:
    """The comment: the outcome per rubric, the new failures against the base ref, the corrected pass rate with
    its interval, the cost, and links to the pipeline run, to evalhub's record of this run (each rubric's CI
    result page) and to the cases to label."""
    against_base = against_base or {}
    lines = [marker(results, tier), f"### evalhub-gate: {OVERALL[code].replace('_', ' ')} (exit {code})", ""]
    if tier != "default":
        lines += [f"Judged with each rubric's {markdown_text(tier, 20)} tier.", ""]
    # A column of queue links only when cases were posted for labelling.
    queues = {slug: url for slug, url in links.queues.items() if _safe_url(url)}
    lines += ["| rubric | stage | outcome | pass | fail | not evaluated | new failures vs base | "
              "agent's pass rate (95 % CI) | cost |" + (" to label |" if queues else ""),
              "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: |" + (" --- |" if queues else "")]
    for r in results:
        changes = against_base.get(r.rubric.slug)
        new = "-" if changes is None else str(len(changes.new_failures))
        slug = markdown_text(r.rubric.slug, 80)
        # The rubric links to evalhub's record of this run: its CI result page, as the server named it.
        page = _safe_url((links.result_pages or {}).get(r.rubric.slug))
        queue = queues.get(r.rubric.slug)
        to_label = (f" [cases]({queue}) |" if queue else " - |") if queues else ""
        lines.append(f"| {f'[{slug}]({page})' if page else slug} | {r.rubric.stage} | {r.outcome.replace('_', ' ')} | "
                     f"{r.passed} | {r.failed} | {r.not_evaluated} | {new} | {_rate(r)} | "
                     f"{_cost(r.budget['cost_usd'])} |{to_label}")
    if links.result_pages is None:
        why = ("could not be posted to evalhub (the job's log says why)" if links.post_asked
               else "were not posted to evalhub (no `--post`)")
        lines += ["", f"This run's results {why}: it has no page there."]
    spent = totals(results)
    cap = "" if max_cost_usd is None else f" of a ${max_cost_usd:.2f} cap"
    lines += ["", f"Cost: {_cost(spent['cost_usd'])}{cap}, {spent['calls']} calls, {spent['cache_hits']} cache hits. "
              "The pass rate is the judge's, corrected for its errors on the evidence; it assumes the judge errs on "
              "these outputs as it did there.", ""]
    for r in results:
        changes = against_base.get(r.rubric.slug)
        failing = [c.external_id for c in r.cases if r.counts_as_failure(c)]
        if not (failing or (changes and changes.new_failures)):
            continue
        lines.append(f"<details><summary>{markdown_text(r.rubric.slug, 80)}: {len(failing)} failing</summary>")
        lines.append("")
        if changes and changes.new_failures:
            lines.append(f"Passed at {markdown_text(changes.base_ref, 40)} and fail now: "
                         + ", ".join(markdown_text(i, 80) for i in changes.new_failures[:LISTED_PER_RUBRIC])
                         + (" …" if len(changes.new_failures) > LISTED_PER_RUBRIC else ""))
            lines.append("")
        lines += [f"- {markdown_text(i, 80)}" for i in failing[:LISTED_PER_RUBRIC]]
        if len(failing) > LISTED_PER_RUBRIC:
            lines.append(f"- … and {len(failing) - LISTED_PER_RUBRIC} more (the run's summary lists up to "
                         f"{MAX_LISTED_CASES})")
        lines += ["", "</details>", ""]
    if _safe_url(links.run_url):
        lines += [f"[the pipeline run]({links.run_url})", ""]
    lines.append(f"<sub>evalhub-gate {VERSION}: this comment is updated on each push.</sub>")
    body = "\n".join(lines)
    return body if len(body) <= MAX_BODY_CHARS else body[:MAX_BODY_CHARS] + "\n\n(cut: see the pipeline run)"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """The token never follows a redirect anywhere: these APIs answer in place, so a redirect is an error."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: Any, newurl: str) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def _call(method: str, url: str, headers: Mapping[str, str], payload: dict[str, Any] | None = None) -> Any:
    """The JSON answer of one API call, or a CommentError naming the status (never the token)."""
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={
        **headers, "Accept": "application/json", "User-Agent": f"evalhub-gate/{VERSION}",
        **({"Content-Type": "application/json"} if data is not None else {}),
    })
    try:
        with _OPENER.open(request, timeout=HTTP_TIMEOUT_S) as response:
            answer = response.read()
    except urllib.error.HTTPError as exc:
        hint = {401: "the token was not accepted", 403: "the token may not write comments here",
                404: "no such pull request, or the token cannot see it"}.get(exc.code, "the API refused")
        raise CommentError(f"{method} {_path(url)}: HTTP {exc.code}, {hint}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise CommentError(f"{method} {_path(url)}: cannot connect ({one_line(getattr(exc, 'reason', exc))})") from None
    except ValueError:  # a token with a line break, a URL urllib cannot send
        raise CommentError(f"{method} {_path(url)}: cannot send the request (is the token one line?)") from None
    try:
        return json.loads(answer or b"null")
    except ValueError:
        raise CommentError(f"{method} {_path(url)}: the answer is not JSON") from None


def _path(url: str) -> str:
    return one_line(urllib.parse.urlsplit(url).path, 160)


def _find(pages: Iterable[Any], is_ours: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    for page in pages:
        if not isinstance(page, list):
            raise CommentError("the API's list of comments is not a list")
        for item in page:
            if isinstance(item, dict) and is_ours(item):
                return item
        if len(page) < 100:
            return None
    return None


def post_github(body: str, env: Mapping[str, str]) -> str:
    """Create or update the pull request's comment; what was done, for the log."""
    token = env.get("GITHUB_TOKEN")
    if not token:
        raise CommentError("no $GITHUB_TOKEN: give the step `GITHUB_TOKEN: ${{ github.token }}` (the action does)")
    number = _pull_request_number(env)
    if number is None:
        raise _NotAPullRequest("not a pull request event: no comment")
    repo = env.get("GITHUB_REPOSITORY", "")
    if repo.count("/") != 1:
        raise CommentError("no $GITHUB_REPOSITORY (owner/name)")
    api = f"{env.get('GITHUB_API_URL', 'https://api.github.com').rstrip('/')}/repos/{repo}"
    headers = {"Authorization": f"Bearer {token}", "X-GitHub-Api-Version": "2022-11-28"}
    first_line = body.split("\n", 1)[0]
    pages = (_call("GET", f"{api}/issues/{number}/comments?per_page=100&page={page}", headers)
             for page in range(1, MAX_PAGES + 1))
    ours = _find(pages, lambda c: str(c.get("body") or "").startswith(first_line)
                 and (c.get("user") or {}).get("type") == "Bot")
    if ours is not None:
        _call("PATCH", f"{api}/issues/comments/{int(ours['id'])}", headers, {"body": body})
        return f"updated comment {int(ours['id'])} on pull request #{number}"
    created = _call("POST", f"{api}/issues/{number}/comments", headers, {"body": body})
    return f"commented on pull request #{number} (comment {int((created or {}).get('id') or 0)})"


def _pull_request_number(env: Mapping[str, str]) -> int | None:
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            number = json.load(fh)["pull_request"]["number"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return number if isinstance(number, int) and number > 0 else None


def post_gitlab(body: str, env: Mapping[str, str]) -> str:
    """Create or update the merge request's note; what was done, for the log. A job token (CI_JOB_TOKEN)
    cannot write notes: the pipeline gives a project or group access token in $EVALHUB_GITLAB_TOKEN."""
    token = env.get(GITLAB_TOKEN_ENV)
    if not token:
        raise CommentError(f"no ${GITLAB_TOKEN_ENV}: a project or group access token with the api scope "
                           "(CI_JOB_TOKEN cannot write merge request notes)")
    iid = env.get("CI_MERGE_REQUEST_IID", "")
    if not iid.isdigit():
        raise _NotAPullRequest("not a merge request pipeline (no $CI_MERGE_REQUEST_IID): no comment")
    project = env.get("CI_PROJECT_ID", "")
    api = env.get("CI_API_V4_URL", "").rstrip("/")
    if not project.isdigit() or not api:
        raise CommentError("no $CI_API_V4_URL or $CI_PROJECT_ID: not a GitLab CI job")
    headers = {"PRIVATE-TOKEN": token}
    me = (_call("GET", f"{api}/user", headers) or {}).get("id")
    notes = f"{api}/projects/{project}/merge_requests/{iid}/notes"
    first_line = body.split("\n", 1)[0]
    pages = (_call("GET", f"{notes}?per_page=100&page={page}&sort=asc&order_by=created_at", headers)
             for page in range(1, MAX_PAGES + 1))
    ours = _find(pages, lambda n: str(n.get("body") or "").startswith(first_line)
                 and (n.get("author") or {}).get("id") == me)
    if ours is not None:
        _call("PUT", f"{notes}/{int(ours['id'])}", headers, {"body": body})
        return f"updated note {int(ours['id'])} on merge request !{iid}"
    created = _call("POST", notes, headers, {"body": body})
    return f"commented on merge request !{iid} (note {int((created or {}).get('id') or 0)})"


class _NotAPullRequest(CommentError):
    """Nothing to comment on (a push pipeline): said, not warned."""


def comment_on_request(
    kind: str, results: Sequence[RubricResult], code: int, *, tier: str, env: Mapping[str, str], links: Links,
    against_base: Mapping[str, BaseChanges] | None, max_cost_usd: float | None, out: TextIO | None = None,
) -> bool:
    """`--comment github|gitlab`: the comment, posted or updated; whether it was. A failure is a warning (and a
    GitHub warning annotation), never an error."""
    out = out or sys.stdout
    try:
        body = comment_body(results, code, tier=tier, links=links, against_base=against_base,
                            max_cost_usd=max_cost_usd)
        done = (post_github if kind == "github" else post_gitlab)(body, env)
    except _NotAPullRequest as exc:
        print(f"evalhub-gate: {exc}", file=out)
        return False
    except Exception as exc:  # CommentError, or an answer of an unexpected shape: never a failed gate
        reason = exc if isinstance(exc, CommentError) else f"unexpected {type(exc).__name__}: {exc}"
        message = f"the {'pull' if kind == 'github' else 'merge'} request comment was not posted: {reason}"
        print(f"evalhub-gate: warning: {one_line(message, None)}", file=sys.stderr)
        if env.get("GITHUB_ACTIONS") == "true":
            print(workflow_command("warning", "evalhub comment not posted", message), file=out)
        return False
    print(f"evalhub-gate: {done}", file=out)
    return True
