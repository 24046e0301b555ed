"""Every URL × every actor: who gets what (docs/projects.md). Generated from the URL configuration, so a new page
cannot be forgotten: a URL name missing from MATRIX fails `test_every_url_is_in_the_matrix`.

The world: project A ("store") and project B ("shopnest"), each with a dataset, a rubric, cases with labels, a
judge config, two finished runs with judgments, a proposal, a synthesis job, a CI result and a policy, under the
SAME slugs; A also holds a dataset, a rubric and a policy of its own slugs. Every unique name of A's holds
"ALPHA-ONLY", of B's "BRAVO-ONLY", so a page or answer of one project that shows the other's is caught.

The actors: anonymous, a reviewer and a lead of each project, the instance admin, an API token of each scope (and
one of every scope) of each project. The rules (one test per URL × method × actor, named so):
- anonymous, or a token without a session, on a page: the login redirect; on an API: 401 (a session on an API too);
- a member of B (or a token of B) on A's objects: 404, never 200/403/500 (A's project slug, or B's slug with
  A's ids or A's own slugs);
- a reviewer of A on a lead's page: 403; on a member's page: an answer;
- a lead of A and the admin: an answer (not 403/404/500), and no "BRAVO-ONLY" in it;
- a lead and a reviewer of B on B's own objects (the same slugs): no "ALPHA-ONLY" in what they get;
- an API token with the scope: an answer (400 for an empty body is one); without it: 403.

An "answer" is any status below 500 other than 401, 403 and 404 (an empty POST may well be a 400 or a 302).
The size of the matrix: MATRIX_SIZE below (printed by test_every_url_is_in_the_matrix).
"""

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib import admin
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from evalhub.members.services import invitation_create
from evalhub.models import ApiToken, Invitation, Membership, Project, Role, Scope, User
from judges.models import Channel, CiResult, ModelPrice, Monitor, Proposal, Run, SynthesisJob
from judges.promotion.services import rubric_promote
from labeling.models import Dataset, Rubric
from labeling.policies.services import policy_write
from tests.conftest import store_project
from tests.judges.promotion_factories import evidence_run
from tests.judges.report_factories import label, make_run

ALPHA, BRAVO = "alpha-only", "bravo-only"  # compared with the lower-cased body

# ---------------------------------------------------------------------------------------------------------------
# Who may reach a URL with a method
MEMBER = "member"  # a page of a project any member opens
LEAD = "lead"  # a page of a project for its leads (and the admin)
SIGNED_IN = "signed-in"  # an instance page anyone signed in opens
ADMIN = "admin"  # an instance page for the instance admin only
PRICES_READ = "prices-read"  # the price list: the admin's; others may read it or get 403, never 404/500
PUBLIC = "public"  # login, logout, an invitation's link: anyone
INVITEE = "invitee"  # an invitation's accept/decline: its invitee only (404 for anyone else signed in)


@dataclass(frozen=True)
class Api:
    """An API reached with a token carrying every scope of `all_of` and one of `one_of` (neither: any token)."""

    all_of: tuple[str, ...] = ()
    one_of: tuple[str, ...] = ()

    def allows(self, scopes: list[str]) -> bool:
        return all(s in scopes for s in self.all_of) and (not self.one_of or any(s in scopes for s in self.one_of))

    def __str__(self) -> str:
        return "api(" + "+".join(self.all_of) + ("|".join(self.one_of)) + ")"


@dataclass(frozen=True)
class Entry:
    """How to call a URL: its methods and who may, its arguments from the world (an object key, whose slug or pk
    is used, or a callable of the project's objects), its query, the statuses a cross-project call may get."""

    methods: dict
    args: dict = field(default_factory=dict)
    query: dict = field(default_factory=dict)
    cross: frozenset = frozenset({404})
    content_type: str | None = None
    # actor name -> the statuses that actor may get (pages whose answer differs by who asks)
    overrides: dict = field(default_factory=dict)
    follow: bool = False
    # An invitation's link shows its project to whoever holds it: no leak check there.
    shows_other_project: bool = False


G, P, GP = ("GET",), ("POST",), ("GET", "POST")


def page(methods: tuple, access: str, **kwargs) -> Entry:
    return Entry(methods={m: access for m in methods}, **kwargs)


DATASET_RUBRIC = {"slug": "dataset", "rubric_slug": "rubric"}

# Every named URL. Project pages (under p/<project>/) get the project slug from the actor's side of the world.
MATRIX: dict[str, Entry] = {
    # evalhub
    "home": page(G, SIGNED_IN),
    "project_home": page(G, MEMBER),
    "login": page(GP, PUBLIC),
    "logout": page(P, PUBLIC),
    "password_change": page(GP, SIGNED_IN),
    "password_change_done": page(G, SIGNED_IN),
    # A bookmark from before projects: to the one project the user may open, where A's run is A's alone.
    "old_page": page(G, SIGNED_IN, args={"path": lambda o: f"runs/{o['run'].pk}/"}, follow=True, overrides={
        # A reviewer of the one project meets the lead's door (403) before the run is looked up.
        "reviewer_a@A": {403}, "reviewer_b@A": {403, 404}, "lead_b@A": {404}, "admin@A": {404},
    }),
    "api_token": Entry(methods={"GET": Api()}),
    # labeling pages
    "labeling:dataset_list": page(G, LEAD),
    "labeling:rubric_list": page(G, LEAD),
    "labeling:dataset_create": page(GP, LEAD),
    "labeling:dataset_detail": page(G, LEAD, args={"slug": "dataset"}),
    "labeling:dataset_import": page(GP, LEAD, args={"slug": "dataset"}),
    "labeling:dataset_kinds": page(P, LEAD, args={"slug": "dataset"}),
    "labeling:dataset_redaction": page(P, LEAD, args={"slug": "dataset"}),
    "labeling:dataset_policies": page(P, LEAD, args={"slug": "dataset"}),
    "labeling:dataset_export": page(G, LEAD, args={"slug": "dataset", "kind": lambda o: "labels"},
                                    query={"rubric": "rubric"}),
    "labeling:dataset_otlp_refused": page(G, LEAD, args={"slug": "dataset"}),
    "labeling:case_detail": page(G, MEMBER, args={"case_id": "case"}),
    "labeling:rubric_create": page(GP, LEAD),
    "labeling:rubric_edit": page(GP, LEAD, args={"slug": "rubric"}),
    "labeling:queue_start": page(G, MEMBER),
    "labeling:history": page(G, MEMBER),
    "labeling:queue": page(G, MEMBER, args=DATASET_RUBRIC),
    "labeling:queue_label": page(P, MEMBER, args=DATASET_RUBRIC),
    "labeling:queue_skip": page(P, MEMBER, args=DATASET_RUBRIC),
    "labeling:queue_undo": page(P, MEMBER, args=DATASET_RUBRIC),
    "labeling:queue_progress": page(G, MEMBER, args=DATASET_RUBRIC),
    "labeling:dataset_rubric": page(G, LEAD, args=DATASET_RUBRIC),
    "labeling:disputes": page(G, LEAD, args=DATASET_RUBRIC),
    "labeling:adjudicate": page(P, LEAD, args={**DATASET_RUBRIC, "case_id": "case"}),
    "labeling:request_label": page(P, LEAD, args={**DATASET_RUBRIC, "case_id": "case"}),
    "labeling:disputes_index": page(G, LEAD),
    "labeling:policy_list": page(G, MEMBER),
    "labeling:policy_create": page(GP, LEAD),
    "labeling:policy_detail": page(G, MEMBER, args={"slug": "policy"}),
    "labeling:policy_write": page(GP, LEAD, args={"slug": "policy"}),
    # labeling APIs
    "labeling:api_dataset": Entry(methods={"GET": Api(one_of=(Scope.CASES_READ, Scope.CASES_WRITE))},
                                  args={"slug": "dataset"}),
    "labeling:api_cases_ingest": Entry(methods={"GET": Api((Scope.CASES_READ,)), "POST": Api((Scope.CASES_WRITE,))},
                                       args={"slug": "dataset"}, content_type="application/json"),
    "labeling:api_otlp_traces": Entry(methods={"POST": Api((Scope.CASES_WRITE,))}, query={"dataset": "dataset"},
                                      content_type="application/json"),
    "labeling:api_otlp_logs": Entry(methods={"POST": Api((Scope.CASES_WRITE,))}, query={"dataset": "dataset"},
                                    content_type="application/json"),
    "labeling:api_policy": Entry(methods={"GET": Api((Scope.POLICIES_READ,))}, args={"slug": "policy"}),
    # judges pages
    "judges:judge_index": page(G, LEAD),
    "judges:config_list": page(G, LEAD, args={"slug": "rubric"}),
    "judges:config_create": page(GP, LEAD, args={"slug": "rubric"}),
    "judges:config_detail": page(G, LEAD, args={"config_id": "config"}),
    "judges:run_create": page(GP, LEAD, args={"config_id": "config"}),
    "judges:run_list": page(G, LEAD),
    "judges:run_detail": page(G, LEAD, args={"run_id": "run"}),
    "judges:run_banner": page(G, LEAD),
    "judges:run_progress": page(G, LEAD, args={"run_id": "run"}),
    "judges:run_cancel": page(P, LEAD, args={"run_id": "run"}),
    "judges:run_retry": page(P, LEAD, args={"run_id": "run"}),
    "judges:run_export": page(G, LEAD, args={"run_id": "run", "fmt": lambda o: "csv"}),
    "judges:run_report": page(G, LEAD, args={"run_id": "run"}),
    "judges:run_agreement": page(G, LEAD, args={"run_id": "run"}),
    "judges:run_send_contested": page(P, LEAD, args={"run_id": "run"}),
    "judges:probes_panel": page(G, LEAD, args={"run_id": "run"}),
    "judges:probes_start": page(P, LEAD, args={"run_id": "run"}),
    # The runs are named in the query: another project's may be refused as a bad request as well as a 404.
    "judges:run_compare": page(G, LEAD, query={"a": "run", "b": "run2"}, cross=frozenset({400, 404})),
    "judges:proposal_create": page(GP, LEAD, args={"run_id": "run"}),
    "judges:proposal_detail": page(G, LEAD, args={"proposal_id": "proposal"}),
    "judges:proposal_cancel": page(P, LEAD, args={"proposal_id": "proposal"}),
    "judges:proposal_keep": page(P, LEAD, args={"proposal_id": "proposal"}),
    "judges:proposal_discard": page(P, LEAD, args={"proposal_id": "proposal"}),
    "judges:audit_sample_create": page(P, LEAD, args={"run_id": "run"}),
    "judges:synthesis_create": page(GP, LEAD, args={"slug": "dataset"}),
    "judges:synthesis_detail": page(G, LEAD, args={"job_id": "job"}),
    "judges:promotion_overview": page(G, LEAD),
    "judges:audit_log": page(G, LEAD),
    "judges:promotion_rubric": page(G, LEAD, args={"slug": "rubric"}),
    "judges:promotion_observe": page(P, LEAD, args={"slug": "rubric"}),
    "judges:promotion_promote": page(P, LEAD, args={"slug": "rubric"}),
    "judges:promotion_renew": page(P, LEAD, args={"slug": "rubric"}),
    "judges:promotion_demote": page(P, LEAD, args={"slug": "rubric"}),
    "judges:promotion_release": page(P, LEAD, args={"slug": "rubric"}),
    "judges:promotion_drift": page(P, LEAD, args={"slug": "rubric"}),
    "judges:traffic_set": page(P, LEAD, args={"slug": "rubric"}),
    "judges:verdict_export": page(GP, LEAD),
    "judges:monitor_list": page(GP, LEAD),
    "judges:monitor_detail": page(G, LEAD, args={"slug": "monitor"}),
    "judges:monitor_settings": page(P, LEAD, args={"slug": "monitor"}),
    "judges:monitor_baseline": page(P, LEAD, args={"slug": "monitor"}),
    "judges:channel_list": page(GP, LEAD),
    "judges:channel_delete": page(P, LEAD, args={"channel_id": "channel"}),
    "judges:promotion_ci_result": page(G, LEAD, args={"slug": "rubric", "result_id": "ci_result"}),
    "judges:promotion_thresholds": page(P, LEAD, args={"slug": "rubric"}),
    # instance pages: prices are instance-wide, edited by the admin
    "judges:price_list": Entry(methods={"GET": PRICES_READ, "POST": ADMIN}),
    "judges:price_edit": page(GP, ADMIN, args={"price_id": "price"}),
    # judges APIs
    "judges:api_ci_runs": Entry(methods={"GET": Api((Scope.CASES_WRITE, Scope.RESULTS_WRITE)),
                                         "POST": Api((Scope.CASES_WRITE, Scope.RESULTS_WRITE))},
                                args={"slug": "dataset"}, query={"ref": lambda o: "main",
                                                                 "config_hash": lambda o: o["config"].config_hash},
                                content_type="application/json"),
    "judges:api_run_report": Entry(methods={"GET": Api((Scope.RUNS_READ,))}, args={"run_id": "run"}),
    "judges:api_run_pass_rate": Entry(methods={"GET": Api((Scope.RUNS_READ,))}, args={"run_id": "run"}),
    "judges:api_gates": Entry(methods={"GET": Api((Scope.GATES_READ,))}),
    "judges:api_ci_results": Entry(methods={"POST": Api((Scope.RESULTS_WRITE,))}, content_type="application/json"),
    # a project's people and tokens: its leads'
    "members:members": page(G, LEAD),
    "members:invite": page(P, LEAD),
    "members:role": page(P, LEAD, args={"membership_id": "membership"}),
    "members:remove": page(P, LEAD, args={"membership_id": "membership"}),
    "members:datasets": page(P, LEAD, args={"membership_id": "membership"}),
    "members:withdraw": page(P, LEAD, args={"invitation_id": "invitation"}),
    "members:tokens": page(G, LEAD),
    "members:token_create": page(P, LEAD),
    "members:token_revoke": page(P, LEAD, args={"token_id": "token"}),
    "members:project_create": page(GP, ADMIN),
    # The invitee's side: A's invitation names nobody of the world, so every signed-in actor gets 404.
    "members:invitation_accept": page(P, INVITEE, args={"invitation_id": "invitation"}),
    "members:invitation_decline": page(P, INVITEE, args={"invitation_id": "invitation"}),
    # The link is the key: whoever holds it may open it (and join; rolled back here).
    "members:invitation": page(GP, PUBLIC, args={"token": "invitation_link"}, shows_other_project=True),
}

# Django's admin (every admin:* name, and its unnamed routes): one rule for the whole site.
ADMIN_PREFIX = "admin/"
PROJECT_PREFIX = "p/<slug:project>/"


# ---------------------------------------------------------------------------------------------------------------
# The URL configuration, walked


@dataclass(frozen=True)
class Route:
    name: str | None
    route: str
    callback: Callable


def _walk(resolver: URLResolver, prefix: str = "", namespace: str | None = None):
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            inner = namespace
            if pattern.namespace:
                inner = f"{namespace}:{pattern.namespace}" if namespace else pattern.namespace
            yield from _walk(pattern, prefix + str(pattern.pattern), inner)
        elif isinstance(pattern, URLPattern):
            name = pattern.name and (f"{namespace}:{pattern.name}" if namespace else pattern.name)
            yield Route(name, prefix + str(pattern.pattern), pattern.callback)


ROUTES = list(_walk(get_resolver()))


def _is_admin_site(route: Route) -> bool:
    return route.route.startswith(ADMIN_PREFIX)


def _kind(entry: Entry) -> str:
    accesses = set(entry.methods.values())
    if all(isinstance(a, Api) for a in accesses):
        return "api"
    if accesses <= {MEMBER, LEAD}:
        return "project"
    return "instance"


# ---------------------------------------------------------------------------------------------------------------
# The actors of each kind of URL: (name, who, the project whose slug the URL takes, whose objects it names)
# who: a user key of the world, "anonymous", or "token:<A|B>:<scope|all>".

TOKEN_SCOPES = [*Scope.values, "all"]
PAGE_ACTORS = [
    ("anonymous@A", "anonymous", "A", "A"),
    ("token_a@A", "token:A:all", "A", "A"),  # a token is no session: pages send it to log in
    ("reviewer_a@A", "reviewer_a", "A", "A"),
    ("lead_a@A", "lead_a", "A", "A"),
    ("admin@A", "admin", "A", "A"),
    ("reviewer_b@A", "reviewer_b", "A", "A"),
    ("lead_b@A", "lead_b", "A", "A"),
    ("lead_b@B:A-objects", "lead_b", "B", "A*"),  # B's own project, A's ids and A's own slugs
    ("lead_b@B", "lead_b", "B", "B"),
    ("lead_b@B:htmx", "lead_b", "B", "B"),  # GET only: a partial may read through another selector
    ("reviewer_b@B", "reviewer_b", "B", "B"),
]
INSTANCE_ACTORS = [
    ("anonymous", "anonymous", "A", "A"),
    ("token_a", "token:A:all", "A", "A"),
    ("reviewer_a", "reviewer_a", "A", "A"),
    ("lead_a", "lead_a", "A", "A"),
    ("reviewer_b", "reviewer_b", "A", "A"),
    ("lead_b", "lead_b", "A", "A"),
    ("admin", "admin", "A", "A"),
]
# old_page names A's run: actors are named as on pages, for its overrides
OLD_PAGE_ACTORS = [
    ("anonymous@A", "anonymous", "A", "A"),
    ("reviewer_a@A", "reviewer_a", "A", "A"),
    ("lead_a@A", "lead_a", "A", "A"),
    ("admin@A", "admin", "A", "A"),
    ("reviewer_b@A", "reviewer_b", "A", "A"),
    ("lead_b@A", "lead_b", "A", "A"),
]
API_ACTORS = [
    ("anonymous", "anonymous", "A", "A"),
    ("session:lead_a", "lead_a", "A", "A"),  # a session is no token: APIs answer 401
    *[(f"token_a[{s}]", f"token:A:{s}", "A", "A") for s in TOKEN_SCOPES],
    *[(f"token_b[{s}]@A-objects", f"token:B:{s}", "B", "A*") for s in TOKEN_SCOPES],
    *[(f"token_b[{s}]", f"token:B:{s}", "B", "B") for s in TOKEN_SCOPES],
]
ADMIN_SITE_ACTORS = [
    ("anonymous", "anonymous", "A", "A"),
    ("lead_a", "lead_a", "A", "A"),
]
# The superuser may open all of the admin by design: one page of it is enough to see the rule's other side.
ADMIN_SITE_SUPERUSER_PAGES = {"admin:index", "admin:labeling_dataset_changelist", "admin:evalhub_apitoken_changelist"}


def _object_keys(entry: Entry) -> list[str]:
    """The world's objects a URL names (in its path or its query), by key."""
    return [spec for spec in [*entry.args.values(), *entry.query.values()] if isinstance(spec, str)]


def _mixed_actors(entry: Entry) -> list[tuple]:
    """B's lead in B's project naming B's objects but one of A's: a view that finds one object through the project
    and the next one globally is caught here (B's dataset with A's rubric, B's run with A's run to compare)."""
    keys = _object_keys(entry)
    if len(keys) < 2:
        return []
    return [(f"lead_b@B:A-{key}", "lead_b", "B", f"B+A:{key}") for key in dict.fromkeys(keys)]


def _names_objects(entry: Entry) -> bool:
    return bool(entry.args or entry.query)


def _cases() -> list:
    cases = []
    for route in ROUTES:
        if _is_admin_site(route):
            actors = ADMIN_SITE_ACTORS
            if route.name in ADMIN_SITE_SUPERUSER_PAGES:
                actors = [*actors, ("admin", "admin", "A", "A")]
            for actor in actors:
                cases.append(pytest.param(route, "GET", actor, id=f"{route.name or route.route} GET {actor[0]}"))
            continue
        entry = MATRIX.get(route.name)
        if entry is None:
            continue  # test_every_url_is_in_the_matrix says so
        kind = _kind(entry)
        if route.name == "old_page":
            actors = OLD_PAGE_ACTORS
        else:
            actors = {"project": PAGE_ACTORS, "instance": INSTANCE_ACTORS, "api": API_ACTORS}[kind]
            if kind == "project":
                actors = [*actors, *_mixed_actors(entry)]
        for method in entry.methods:
            for actor in actors:
                if actor[3] == "A*" and not _names_objects(entry):
                    continue  # nothing of A's to name: the same as B's own call
                if actor[0].endswith(":htmx") and method != "GET":
                    continue
                cases.append(pytest.param(route, method, actor, id=f"{route.name} {method} {actor[0]}"))
    return cases


CASES = _cases()
MATRIX_SIZE = len(CASES)


# ---------------------------------------------------------------------------------------------------------------
# The world, built once for the module inside a transaction rolled back at its end (each test in a savepoint)


@dataclass
class World:
    projects: dict  # "A"/"B" -> Project
    objects: dict  # "A"/"B" -> {key: object}; "A*": A's objects with A's own slugs
    users: dict  # name -> User
    sessions: dict  # user name -> session key
    tokens: dict  # "A:<scope>" -> raw token
    price: ModelPrice


def _project_objects(project: Project, *, tag: str, lead: User, reviewer: User) -> dict:
    """A dataset, a rubric, labelled cases, a judge config, two finished runs, a proposal, a synthesis job, a CI
    result and a policy; the same slugs in every project, names carrying the project's `tag`."""
    upper = tag.upper()
    dataset = Dataset.objects.create(project=project, slug="support", name=f"{upper} support dataset")
    dataset.reviewers.add(reviewer)
    rubric = Rubric.objects.create(project=project, slug="return-policy", name=f"{upper} return rubric",
                                   criteria=f"{upper}: pass when the 30-day window is stated.")
    run = evidence_run(rubric, dataset, lead, reviewer, n=8, prefix=f"{tag}-case")
    config = run.config
    cases = list(dataset.cases.order_by("pk"))
    run2 = make_run(config, dataset, lead, {case: ["pass"] for case in cases[:4]})
    # A dispute (the lead disagrees with the reviewer on the first case), for the disputes pages to list.
    first_verdict = cases[0].labels.get(reviewer=reviewer).verdict
    label(cases[0], rubric, lead, "fail" if first_verdict == "pass" else "pass")
    rubric_promote(rubric=rubric, to_stage="observe", reason=f"{upper} observe from day one.", by=lead,
                   config=config)
    policy = policy_write(project=project, slug="returns", text=f"{upper}: returns within 30 days.", by=lead)
    ci_result = CiResult.objects.create(
        rubric=rubric, token_name=f"{tag}-ci", exit_code=0, stage="observe", config_hash=config.config_hash,
        outcome="pass", passed=1, failed=0, not_evaluated=0, total=1, commit=f"{tag}-commit", ref="main",
        received_at=timezone.now() - timedelta(minutes=5),
    )
    proposal = Proposal.objects.create(rubric=rubric, run=run, editor={"provider": "openai", "model": "gpt-test"},
                                       status=Proposal.Status.FINISHED, created_by=lead)
    job = SynthesisJob.objects.create(dataset=dataset, n=1, types=["ordinary"], seed=1, prompt_version="synth-1",
                                      editor={"provider": "openai", "model": "gpt-test"}, created_by=lead,
                                      status=SynthesisJob.Status.FINISHED)
    membership = Membership.objects.get(project=project, user=reviewer)
    invitation, link = invitation_create(project=project, invitee=f"{tag}-newcomer", role=Role.REVIEWER, by=lead)
    token, _ = ApiToken.issue(project=project, name=f"{tag}-spare", scopes=[Scope.RUNS_READ], created_by=lead)
    monitor = Monitor.objects.create(project=project, slug="prod-watch", rubric=rubric, dataset=dataset, seed=1,
                                     created_by=lead)
    channel = Channel.objects.create(project=project, name=f"{upper} channel", kind=Channel.Kind.EMAIL,
                                     addresses=f"{tag}@example.com", created_by=lead)
    return {"monitor": monitor, "channel": channel, "dataset": dataset, "rubric": rubric, "case": cases[0], "config": config, "run": run, "run2": run2,
            "policy": policy, "ci_result": ci_result, "proposal": proposal, "job": job, "membership": membership,
            "invitation": invitation, "invitation_link": lambda o, link=link: link, "token": token}


def _build_world() -> World:
    a, b = store_project(), Project.objects.create(slug="shopnest", name="ShopNest support bot")
    users = {}
    for name, project, role in [("reviewer_a", a, Role.REVIEWER), ("lead_a", a, Role.LEAD),
                                ("reviewer_b", b, Role.REVIEWER), ("lead_b", b, Role.LEAD)]:
        tag = ALPHA if project == a else BRAVO
        users[name] = User.objects.create_user(username=f"{tag}-{name.split('_')[0]}", password="x")
        Membership.objects.create(user=users[name], project=project, role=role)
    users["admin"] = User.objects.create_user(username="matrix-admin", password="x", is_staff=True,
                                              is_superuser=True)
    objects = {
        "A": _project_objects(a, tag=ALPHA, lead=users["lead_a"], reviewer=users["reviewer_a"]),
        "B": _project_objects(b, tag=BRAVO, lead=users["lead_b"], reviewer=users["reviewer_b"]),
    }
    # A's own slugs, which B does not have: B's token or lead naming them must get a 404.
    only_dataset = Dataset.objects.create(project=a, slug="alpha-only-data", name="ALPHA-ONLY second dataset")
    only_rubric = Rubric.objects.create(project=a, slug="alpha-only-rubric", name="ALPHA-ONLY second rubric",
                                        criteria="ALPHA-ONLY criteria.")
    only_policy = policy_write(project=a, slug="alpha-only-policy", text="ALPHA-ONLY policy.", by=users["lead_a"])
    only_monitor = Monitor.objects.create(project=a, slug="alpha-only-monitor", rubric=only_rubric,
                                          dataset=only_dataset, seed=1, created_by=users["lead_a"])
    objects["A*"] = {**objects["A"], "dataset": only_dataset, "rubric": only_rubric, "policy": only_policy,
                     "monitor": only_monitor}
    sessions = {}
    for name, user in users.items():
        client = Client()
        client.force_login(user)
        sessions[name] = client.cookies[settings.SESSION_COOKIE_NAME].value
    tokens = {}
    for side, project, lead in [("A", a, users["lead_a"]), ("B", b, users["lead_b"])]:
        for scope in TOKEN_SCOPES:
            scopes = list(Scope.values) if scope == "all" else [scope]
            tag = ALPHA if side == "A" else BRAVO
            _, raw = ApiToken.issue(project=project, name=f"{tag}-{scope}", scopes=scopes, created_by=lead)
            tokens[f"{side}:{scope}"] = raw
    price = ModelPrice.objects.create(model="gpt-test", input_per_mtok=1, output_per_mtok=2,
                                      updated_by=users["admin"])
    return World(projects={"A": a, "B": b}, objects=objects, users=users, sessions=sessions, tokens=tokens,
                 price=price)


@pytest.fixture(scope="module", autouse=True)
def _quiet_requests():
    """Hundreds of 403s and 404s are the point here: keep django.request's warnings out of failure reports."""
    logger = logging.getLogger("django.request")
    level, logger.level = logger.level, logging.ERROR
    yield
    logger.setLevel(level)


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        with transaction.atomic():
            built = _build_world()
            yield built
            transaction.set_rollback(True)


# ---------------------------------------------------------------------------------------------------------------
# Calling a URL as an actor


def _value(spec, objects: dict, world: World) -> str:
    if callable(spec):
        return str(spec(objects))
    if spec == "price":
        return str(world.price.pk)
    obj = objects[spec]
    if callable(obj):
        return str(obj(objects))
    return str(getattr(obj, "slug", None) or obj.pk)


def _url(route: Route, entry: Entry, side: str, objects_side: str, world: World) -> str:
    """The URL in project `side` naming the objects of `objects_side` ("B+A:rubric": B's, but A's own rubric)."""
    objects = world.objects[objects_side] if "+" not in objects_side else {
        **world.objects["B"], objects_side.split(":")[1]: world.objects["A*"][objects_side.split(":")[1]]}
    kwargs = {name: _value(spec, objects, world) for name, spec in entry.args.items()}
    if route.route.startswith(PROJECT_PREFIX):
        kwargs["project"] = world.projects[side].slug
    url = reverse(route.name, kwargs=kwargs)
    if entry is not None and entry.query:
        url += "?" + "&".join(f"{k}={_value(v, objects, world)}" for k, v in entry.query.items())
    return url


# One client for the module: a new one loads the middleware again (WhiteNoise scans the static folders then).
_CLIENT = Client(raise_request_exception=False)


def _client(who: str, world: World) -> tuple[Client, dict]:
    _CLIENT.cookies.clear()
    headers = {}
    if who.startswith("token:"):
        _, side, scope = who.split(":", 2)
        headers["Authorization"] = f"Bearer {world.tokens[f'{side}:{scope}']}"
    elif who != "anonymous":
        _CLIENT.cookies[settings.SESSION_COOKIE_NAME] = world.sessions[who]
    return _CLIENT, headers


def _call(client: Client, method: str, url: str, headers: dict, entry: Entry | None, *, signed_in: bool):
    follow = bool(entry and entry.follow and signed_in)
    if method == "GET":
        return client.get(url, headers=headers, follow=follow)
    if entry is not None and entry.content_type:
        # "{}": the test client sends no Content-Type with an empty body
        return client.post(url, data=b"{}", content_type=entry.content_type, headers=headers)
    return client.post(url, data={}, headers=headers)


def _body(response) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode("utf-8", "replace").lower()
    return response.content.decode("utf-8", "replace").lower()


def _answers(status: int) -> bool:
    return status < 500 and status not in (401, 403, 404)


def _login_redirect(response) -> bool:
    return response.status_code == 302 and response["Location"].startswith(reverse("login"))


def _expected(route: Route, entry: Entry | None, method: str, actor: tuple, world: World):
    """(a check of the response, what it expects in words)."""
    name, who, side, objects_side = actor
    if entry is None:  # the admin site
        if who == "admin":
            return (lambda r: r.status_code < 500), "no 500"
        if route.name in ("admin:login", "admin:logout"):
            return (lambda r: r.status_code < 500 and r.status_code != 200 or route.name == "admin:login"), \
                "the admin's login form, or away"
        return (lambda r: r.status_code == 302 and ("/admin/login/" in r["Location"] or _login_redirect(r))), \
            "302 to a login page"
    access = entry.methods[method]
    if name in entry.overrides:
        wanted = entry.overrides[name]
        return (lambda r: r.status_code in wanted), f"status in {sorted(wanted)}"
    if isinstance(access, Api):
        if who == "anonymous" or not who.startswith("token:"):
            return (lambda r: r.status_code == 401), "401 (no token)"
        scope = who.split(":", 2)[2]
        scopes = list(Scope.values) if scope == "all" else [scope]
        if not access.allows(scopes):
            return (lambda r: r.status_code == 403), f"403 (the token lacks {access})"
        if objects_side == "A*":
            return (lambda r: r.status_code == 404), "404 (another project's object)"
        return (lambda r: _answers(r.status_code)), "an answer"
    if who == "anonymous" or who.startswith("token:"):
        if access == PUBLIC:
            return (lambda r: r.status_code < 500 and r.status_code != 404), "an answer (public)"
        return _login_redirect, "302 to the login page"
    if access == INVITEE:
        return (lambda r: r.status_code == 404), "404 (not the invitee)"
    if access == PUBLIC or access == SIGNED_IN:
        return (lambda r: _answers(r.status_code)), "an answer"
    if access == ADMIN:
        if who == "admin":
            return (lambda r: _answers(r.status_code)), "an answer (the admin)"
        return (lambda r: r.status_code == 403), "403 (the admin's page)"
    if access == PRICES_READ:
        if who == "admin":
            return (lambda r: _answers(r.status_code)), "an answer (the admin)"
        return (lambda r: _answers(r.status_code) or r.status_code == 403), "an answer or 403"
    # a project page
    member_of = {"reviewer_a": "A", "lead_a": "A", "reviewer_b": "B", "lead_b": "B", "admin": side}[who]
    if member_of != side:
        return (lambda r: r.status_code == 404), "404 (not a member of the project)"
    if objects_side == "A*" or "+" in objects_side:
        wanted = entry.cross
        return (lambda r: r.status_code in wanted), f"{'/'.join(map(str, sorted(wanted)))} (another project's object)"
    if access == LEAD and who.startswith("reviewer"):
        return (lambda r: r.status_code == 403), "403 (a reviewer on a lead's page)"
    return (lambda r: _answers(r.status_code)), "an answer"


def _foreign_tag(entry: Entry | None, actor: tuple) -> str | None:
    """The tag an answer must not hold: the other project's, for an actor of one project (the admin: on A's
    project pages); None where the call names A's own slugs (B's 404 page may repeat the path)."""
    name, who, side, objects_side = actor
    if entry is None or entry.shows_other_project or objects_side != side or who == "anonymous":
        return None
    if who == "admin":
        return BRAVO if _kind(entry) == "project" else None
    if who.startswith("token:A") or who.endswith("_a"):
        return BRAVO
    if who.startswith("token:B") or who.endswith("_b"):
        return ALPHA
    return None


@pytest.mark.parametrize(("route", "method", "actor"), CASES)
def test_the_matrix(world, db, route, method, actor):
    entry = None if _is_admin_site(route) else MATRIX[route.name]
    name, who, side, objects_side = actor
    if entry is None:
        url = _admin_site_url(route, world)
    else:
        url = _url(route, entry, side, objects_side, world)
    client, headers = _client(who, world)
    if name.endswith(":htmx"):
        headers["HX-Request"] = "true"
    response = _call(client, method, url, headers, entry, signed_in=who != "anonymous")
    check, wanted = _expected(route, entry, method, actor, world)
    status = response.status_code
    detail = ""
    if getattr(response, "exc_info", None):
        detail = f" — {response.exc_info[0].__name__}: {str(response.exc_info[1])[:200]}"
    if not check(response) and status < 500 and "json" in response.get("Content-Type", ""):
        detail += f" — {_body(response)[:160]!r}"
    assert check(response), f"{route.name} {method} {name}: {status}, expected {wanted} ({url}){detail}"
    tag = _foreign_tag(entry, actor)
    if tag and status in (200, 201):
        body = _body(response)
        if tag in body:
            at = body.index(tag)
            raise AssertionError(f"{route.name} {method} {name}: LEAK, the answer shows {tag!r} ({url}): "
                                 f"…{body[max(0, at - 60):at + 60]}…")


def _admin_site_url(route: Route, world: World) -> str:
    if route.name is None:
        return "/" + route.route.replace("(?P<url>.*)$", "no-such-page/").replace("<path:object_id>/", "1/")
    kwargs = {}
    for part in ("app_label", "object_id", "content_type_id", "id"):
        if f"<{part}>" in route.route or f":{part}>" in route.route or f"<path:{part}>" in route.route:
            kwargs[part] = _admin_argument(route, part, world)
    return reverse(route.name, kwargs=kwargs)


def _admin_argument(route: Route, part: str, world: World) -> str:
    if part == "app_label":
        return "labeling"
    if part == "id":  # a user's password form
        return str(world.users["reviewer_a"].pk)
    if part == "content_type_id":
        from django.contrib.contenttypes.models import ContentType

        return str(ContentType.objects.get_for_model(Dataset).pk)
    # object_id: A's object of the model, if the world has one
    model_name = route.name.split(":", 1)[1].rsplit("_", 1)[0]
    for model in admin.site._registry:
        if f"{model._meta.app_label}_{model._meta.model_name}" == model_name:
            obj = model.objects.order_by("pk").first()
            return str(obj.pk) if obj is not None else "1"
    return str(world.objects["A"]["dataset"].pk)


# ---------------------------------------------------------------------------------------------------------------
# The matrix covers the URL configuration; the doors stand where the matrix says


def test_every_url_is_in_the_matrix():
    unnamed = [r.route for r in ROUTES if r.name is None and not _is_admin_site(r)]
    missing = sorted({r.name for r in ROUTES if r.name and not _is_admin_site(r) and r.name not in MATRIX})
    names = {r.name for r in ROUTES}
    stale = sorted(set(MATRIX) - names)
    print(f"\nisolation matrix: {len(ROUTES)} URL patterns ({sum(_is_admin_site(r) for r in ROUTES)} of the admin "
          f"site), {len(MATRIX)} classified names, {MATRIX_SIZE} checks (URL × method × actor)")
    assert not unnamed, f"URL patterns with no name cannot be classified: {unnamed}"
    assert not missing, f"URL names missing from the isolation MATRIX (classify them): {missing}"
    assert not stale, f"MATRIX names no URL has any more: {stale}"


def _door(callback: Callable) -> str | None:
    view, door = callback, None
    while view is not None:
        door = door or getattr(view, "project_door", None)
        view = getattr(view, "__wrapped__", None)
    return door


@pytest.mark.parametrize("route", [r for r in ROUTES if r.name in MATRIX], ids=lambda r: r.name)
def test_every_project_page_carries_its_door_and_no_other_view_does(route):
    """A member's page has member_required; a lead's page lead_required, or member_required where the view itself
    answers 404 before 403 (a reviewer's unassigned dataset): the matrix checks the statuses either way."""
    door = _door(route.callback)
    accesses = set(MATRIX[route.name].methods.values())
    if route.route.startswith(PROJECT_PREFIX):
        wanted = {"member"} if MEMBER in accesses else {"lead", "member"}
        assert door in wanted, (
            f"{route.name} ({route.route}): door {door!r}, the matrix wants {' or '.join(sorted(wanted))} "
            "(member_required / lead_required of evalhub.access)"
        )
    else:
        assert door is None, f"{route.name} ({route.route}) is no project page but carries the door {door!r}"


DOOR_CODE = "_project_door.<locals>.wrapper"


@pytest.mark.parametrize("route", [r for r in ROUTES if r.route.startswith(PROJECT_PREFIX)], ids=lambda r: r.name)
def test_the_door_is_the_outermost_decorator(route):
    """The door first, so no other decorator answers (405, a cached answer) before membership is known."""
    code = getattr(route.callback, "__code__", None)
    assert code is not None and code.co_qualname == DOOR_CODE, (
        f"{route.name}: the outermost decorator is {getattr(code, 'co_qualname', route.callback)!r}, not the door"
    )


# ---------------------------------------------------------------------------------------------------------------
# Lists of B never show A (beyond the matrix's one page per URL)


def test_the_home_page_of_a_member_of_both_lists_both_projects_and_nothing_else(world, db):
    both = User.objects.create_user(username="matrix-both", password="x")
    Membership.objects.create(user=both, project=world.projects["A"], role=Role.REVIEWER)
    Membership.objects.create(user=both, project=world.projects["B"], role=Role.LEAD)
    third = Project.objects.create(slug="third-secret", name="THIRD-SECRET project")
    client = _client("anonymous", world)[0]
    client.force_login(both)
    body = client.get(reverse("home")).content.decode()
    assert world.projects["A"].name in body and world.projects["B"].name in body
    assert third.name not in body and third.slug not in body


def test_the_api_answers_json_for_each_project(world, db):
    """One token per project reads the same slug: each gets its own project's dataset, never the other's."""
    for side, tag in (("A", "ALPHA-ONLY"), ("B", "BRAVO-ONLY")):
        client, headers = _client(f"token:{side}:all", world)
        response = client.get(reverse("labeling:api_dataset", args=["support"]), headers=headers)
        assert response.status_code == 200, (side, response.status_code)
        assert json.loads(response.content)["name"] == f"{tag} support dataset", side




# ---------------------------------------------------------------------------------------------------------------
# Another project's objects named in a form or a body (beyond the matrix's empty POSTs)


def _as(who: str, world: World) -> Client:
    return _client(who, world)[0]


def test_a_run_of_bs_judge_cannot_be_started_on_as_dataset(world, db):
    config, before = world.objects["B"]["config"], Run.objects.count()
    url = reverse("judges:run_create", args=["shopnest", config.pk])
    response = _as("lead_b", world).post(url, {"dataset": "alpha-only-data", "repeats": 1, "concurrency": 1})
    assert response.status_code in (200, 400, 404), response.status_code
    assert Run.objects.count() == before
    assert ALPHA not in _body(response)


def test_a_reviewer_of_b_cannot_be_assigned_as_dataset(world, db):
    membership = world.objects["B"]["membership"]
    url = reverse("members:datasets", args=["shopnest", membership.pk])
    _as("lead_b", world).post(url, {"datasets": [world.objects["A"]["dataset"].pk,
                                                world.objects["A*"]["dataset"].pk]})
    assigned = set(membership.user.assigned_datasets.values_list("project__slug", flat=True))
    assert assigned <= {"shopnest"}


def test_bs_dataset_cannot_name_as_policy(world, db):
    dataset = world.objects["B"]["dataset"]
    url = reverse("labeling:dataset_policies", args=["shopnest", dataset.slug])
    _as("lead_b", world).post(url, {"policies": ["alpha-only-policy"]})
    dataset.refresh_from_db()
    assert "alpha-only-policy" not in (dataset.policies or [])


def test_cases_posted_with_bs_token_land_in_bs_dataset_of_the_same_slug(world, db):
    a_dataset, b_dataset = world.objects["A"]["dataset"], world.objects["B"]["dataset"]
    a_before, b_before = a_dataset.cases.count(), b_dataset.cases.count()
    client, headers = _client("token:B:all", world)
    response = client.post(reverse("labeling:api_cases_ingest", args=["support"]), headers=headers,
                           data=json.dumps({"external_id": "posted-by-b", "input": "Where is my parcel?",
                                            "output": "On its way."}), content_type="application/json")
    assert response.status_code == 201, response.content
    assert (a_dataset.cases.count(), b_dataset.cases.count()) == (a_before, b_before + 1)


def test_a_lead_of_b_cannot_invite_into_a_nor_revoke_as_token(world, db):
    client = _as("lead_b", world)
    client.post(reverse("members:invite", args=["store"]), {"invitee": "someone", "role": Role.LEAD})
    assert not Invitation.objects.filter(project=world.projects["A"], invitee="someone").exists()
    token = world.objects["A"]["token"]
    assert client.post(reverse("members:token_revoke", args=["shopnest", token.pk])).status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


# The leak checks above look for the other project's tag; these pages show the actor's own, so a check that
# finds nothing finds nothing because nothing is there, not because the page is empty.
OWN_LISTS = ["project_home", "labeling:dataset_list", "labeling:rubric_list", "labeling:policy_list",
             "labeling:disputes_index", "judges:audit_log",
             "judges:run_list", "judges:judge_index", "judges:promotion_overview", "members:members", "members:tokens"]


@pytest.mark.parametrize("url_name", OWN_LISTS)
def test_each_lead_sees_their_own_projects_objects(world, db, url_name):
    for who, project, own in (("lead_a", "store", ALPHA), ("lead_b", "shopnest", BRAVO)):
        response = _as(who, world).get(reverse(url_name, args=[project]))
        assert response.status_code == 200, (url_name, who, response.status_code)
        assert own in _body(response), f"{url_name}: {who}'s page shows nothing of their own project"
