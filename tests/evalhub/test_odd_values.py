"""Odd values never make a page or an API answer 500 (evalhub/params.py holds the rule they get 400/404 by).

The walk resolves every URL pattern from the URLconf (the admin and Django's own account pages aside),
fills its path parameters with the objects of a small demo-like world, and sends a sample of the odd values
(NUL, `²`, 5,000 digits, 2³¹, a negative, a word, an overflowing float) as a lead and as a reviewer:
- each query parameter the view's module reads (and the tables' and case filters' own) once, with the next
  odd value by turns, and once all of them NUL together;
- for a page with a form (or a view only for posts), three posts with every field set to the next odd value;
- a page that refuses the user, one request with every parameter odd; an int in the path, 20 digits once.
About 1,580 requests, some 25 s (the count is in the failure message). A 500 is collected, not raised, and
a streamed body is read to its end, so a failure lists every request that broke.
"""

import json
import re
import sys
from itertools import cycle
from pathlib import Path

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from evalhub.members import services as members
from evalhub.models import ApiToken, Membership, Role, Scope
from judges.models import CiResult, ModelPrice, Proposal, SynthesisJob
from labeling.importing.cases import cases_import_objects
from labeling.models import Case, PolicyDocument
from tests.conftest import make_user
from tests.judges.report_factories import label, make_config, make_run

pytestmark = pytest.mark.django_db

ODD = ["\x00", "²", "9" * 5000, str(2**31), "-1", "foo", "x\x00y", "1e309"]
SKIPPED = ("admin/", "accounts/")
POSTS = 3  # posts per page with a form, each with every field set to the next odd value
# Query parameters every table reads (evalhub/tables.py) and the case filters of the case list and the API.
COMMON = {"q", "sort", "page", "category", "split", "kind", "sample", "seed", "back"}
_READS = re.compile(
    r"""(?:GET|POST|query|data)(?:\.get|\.getlist)?[(\[]\s*["'](\w+)["']|["'](\w+)["'] in request\.GET""")
_FORM_NAMES = re.compile(r"""<(?:input|select|textarea)[^>]*\bname="([\w-]+)\"""")


def _routes(patterns=None, prefix="") -> list[tuple[str, object]]:
    found = []
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(entry, URLResolver):
            found += _routes(entry.url_patterns, prefix + str(entry.pattern))
        # A regular expression's route (old addresses redirected into a project: tests/evalhub/test_home.py) has no
        # parameters to fill.
        elif isinstance(entry, URLPattern) and not (prefix + str(entry.pattern)).startswith(SKIPPED + ("^",)):
            found.append((prefix + str(entry.pattern), entry.callback))
    return found


def _module_reads(view) -> set[str]:
    """The parameter names a view's module reads from a query string or a form."""
    view = getattr(view, "__wrapped__", view)
    return {a or b for a, b in _READS.findall(Path(sys.modules[view.__module__].__file__).read_text())}


@pytest.fixture
def world(project, dataset, rubric, reviewer, lead):
    """A dataset with a labelled case, a judge config, a finished run, a policy, a price, a CI result; a spare
    member, an invitation and a spare token for the members' and tokens' forms to change."""
    cases_import_objects(dataset=dataset, objects=[
        {"external_id": "c1", "input": "q", "output": "a", "category": "returns"},
        {"external_id": "c2", "input": "q2", "output": "b"},
    ])
    case = Case.objects.order_by("pk").first()
    label(case, rubric, reviewer, "pass")
    config = make_config(rubric, lead)
    run = make_run(config, dataset, lead, {case: ["pass"]})
    policy = PolicyDocument.objects.create(project=project, slug="returns", version=1, text="30 days.",
                                           created_by=lead)
    price = ModelPrice.objects.create(model="gpt-test", input_per_mtok=1, output_per_mtok=2, updated_by=lead)
    result = CiResult.objects.create(rubric=rubric, token_name="ci", exit_code=0, stage="observe",
                                     config_hash="0" * 64, outcome="pass", passed=1, failed=0, not_evaluated=0,
                                     total=1)
    proposal = Proposal.objects.create(rubric=rubric, run=run, editor={"provider": "openai", "model": "gpt-test"},
                                       status=Proposal.Status.FINISHED, created_by=lead)
    job = SynthesisJob.objects.create(dataset=dataset, n=1, types=["ordinary"], seed=1, prompt_version="synth-1",
                                      editor={"provider": "openai", "model": "gpt-test"}, created_by=lead)
    spare = Membership.objects.get(user=make_user("spare"), project=project)
    invitation, invitation_token = members.invitation_create(project=project, invitee="someone", role=Role.REVIEWER,
                                                             by=lead)
    spare_token, _ = members.token_create(project=project, name="spare", scopes=[Scope.RUNS_READ], by=lead)
    return {"slug": {"datasets": dataset.slug, "rubrics": rubric.slug, "label": dataset.slug,
                     "policies": policy.slug, "api": dataset.slug, "monitors": "no-such-monitor"},
            "project": project.slug, "membership_id": spare.pk, "invitation_id": invitation.pk,
            "token": invitation_token, "token_id": spare_token.pk,
            "rubric_slug": rubric.slug, "case_id": case.pk, "config_id": config.pk, "run_id": run.pk,
            "price_id": price.pk, "result_id": result.pk, "job_id": job.pk, "kind": "cases", "fmt": "csv",
            "proposal_id": proposal.pk, "channel_id": 999_999}


def _url(route: str, world: dict) -> str:
    def fill(match: re.Match) -> str:
        name = match.group(1)
        value = world[name]
        if name == "slug":
            # A policy's own pages take its slug; a dataset's policies page the dataset's.
            inner = route.removeprefix("p/<slug:project>/")
            policies = inner.startswith(("policies/", "api/policies/"))
            value = value["policies"] if policies else value[inner.split("/")[0]]
            if inner.startswith("api/") and "policies" not in inner:
                value = world["slug"]["datasets"]
        return str(value)

    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", fill, route)


def test_odd_values_never_answer_500(world, project, lead, reviewer):
    _, token = ApiToken.issue(project=project, name="all", scopes=list(Scope.values), created_by=lead)
    api = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    # A view's exception becomes its 500 here, as in production, so that one run lists every one.
    lead_client, reviewer_client = Client(raise_request_exception=False), Client(raise_request_exception=False)
    lead_client.force_login(lead)
    reviewer_client.force_login(reviewer)
    odd = cycle(ODD)
    broken: list[str] = []
    sent = 0

    def send(who: Client, method: str, url: str, data: dict, **extra) -> tuple[int, str]:
        nonlocal sent
        sent += 1
        response = getattr(who, method)(url, data, **extra)
        try:  # a streamed body is read to its end: an export must not fail half-way either
            body = b"".join(response.streaming_content) if response.streaming else response.content
        except Exception as exc:  # noqa: BLE001 - any failure while streaming is the finding
            broken.append(f"{method.upper()} {url} {json.dumps(data)[:120]} → failed while streaming: {exc!r}")
            return response.status_code, ""
        if response.status_code >= 500:
            broken.append(f"{method.upper()} {url} {json.dumps(data)[:120]} → {response.status_code}")
        return response.status_code, body.decode(errors="replace")

    for route, view in _routes():
        url = _url(route, world)
        extra = api if route.startswith("api/") else {}
        reads = _module_reads(view) | COMMON
        for who in (lead_client, reviewer_client):
            status, page = send(who, "get", url, {}, **extra)
            if status in (403, 404):  # refused whatever it asks: once with every parameter odd
                send(who, "get", url, {name: next(odd) for name in reads}, **extra)
                continue
            send(who, "get", url, {name: "\x00" for name in reads}, **extra)  # the odd value most views met
            for name in sorted(reads):
                send(who, "get", url, {name: next(odd)}, **extra)
            fields = set(_FORM_NAMES.findall(page)) - {"csrfmiddlewaretoken"}
            if status == 405 or 'method="post"' in page:  # a form to post, or a view only for posts
                for _ in range(POSTS):
                    value = next(odd)
                    send(who, "post", url, {name: value for name in fields | reads}, **extra)
        # An id in the path that no object has, of 20 digits (more than a bigint holds).
        if "<int:" in route:
            send(lead_client, "get", re.sub(r"/\d+/", "/" + "9" * 20 + "/", url, count=1), {}, **extra)
    assert not broken, f"{len(broken)} of {sent} requests answered 500:\n" + "\n".join(broken)
