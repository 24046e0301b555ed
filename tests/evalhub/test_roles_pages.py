"""Each role against each page: anonymous → login, reviewer → 403 on leads' pages and 404 on what is not
theirs, lead and admin → every page, a lead of another project → 404 on every page of this one. And every API
endpoint answers 401 to anyone without a token."""

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from evalhub.models import ApiToken, Scope
from labeling.importing.cases import cases_import_objects
from labeling.models import Case
from tests.conftest import TEST_PROJECT

pytestmark = pytest.mark.django_db

OK, REDIRECT, FORBIDDEN, NOT_FOUND, LOGIN = 200, 302, 403, 404, "login"

# (page, url builder, expected for: reviewer of the dataset, outsider reviewer, lead, admin, lead of another project)
PAGES = [
    # Members of one project land in it (reviewers on their labeling queues, leads on the overview); the admin
    # and a member of several pick one.
    ("home", lambda c: reverse("home"), (REDIRECT, REDIRECT, REDIRECT, OK, REDIRECT)),
    ("project home", lambda c: reverse("project_home", args=[TEST_PROJECT]),
     (REDIRECT, REDIRECT, OK, OK, NOT_FOUND)),
    ("password change", lambda c: reverse("password_change"), (OK, OK, OK, OK, OK)),
    ("dataset list", lambda c: reverse("labeling:dataset_list", args=[TEST_PROJECT]),
     (FORBIDDEN, FORBIDDEN, OK, OK, NOT_FOUND)),
    ("dataset create", lambda c: reverse("labeling:dataset_create", args=[TEST_PROJECT]),
     (FORBIDDEN, FORBIDDEN, OK, OK, NOT_FOUND)),
    ("dataset page", lambda c: reverse("labeling:dataset_detail", args=[TEST_PROJECT, c.dataset.slug]),
     (FORBIDDEN, NOT_FOUND, OK, OK, NOT_FOUND)),
    ("dataset import", lambda c: reverse("labeling:dataset_import", args=[TEST_PROJECT, c.dataset.slug]),
     (FORBIDDEN, NOT_FOUND, OK, OK, NOT_FOUND)),
    ("cases export", lambda c: reverse("labeling:dataset_export", args=[TEST_PROJECT, c.dataset.slug, "cases"]),
     (FORBIDDEN, NOT_FOUND, OK, OK, NOT_FOUND)),
    ("labels export", lambda c: reverse("labeling:dataset_export", args=[TEST_PROJECT, c.dataset.slug, "labels"])
     + "?rubric=return-policy", (FORBIDDEN, NOT_FOUND, OK, OK, NOT_FOUND)),
    ("report export", lambda c: reverse("labeling:dataset_export", args=[TEST_PROJECT, c.dataset.slug, "report"]),
     (FORBIDDEN, NOT_FOUND, OK, OK, NOT_FOUND)),
    ("case page", lambda c: reverse("labeling:case_detail", args=[TEST_PROJECT, c.pk]),
     (OK, NOT_FOUND, OK, OK, NOT_FOUND)),
    ("rubric list", lambda c: reverse("labeling:rubric_list", args=[TEST_PROJECT]),
     (FORBIDDEN, FORBIDDEN, OK, OK, NOT_FOUND)),
    ("rubric create", lambda c: reverse("labeling:rubric_create", args=[TEST_PROJECT]),
     (FORBIDDEN, FORBIDDEN, OK, OK, NOT_FOUND)),
    ("rubric edit", lambda c: reverse("labeling:rubric_edit", args=[TEST_PROJECT, "return-policy"]),
     (FORBIDDEN, FORBIDDEN, OK, OK, NOT_FOUND)),
    ("members", lambda c: reverse("members:members", args=[TEST_PROJECT]),
     (FORBIDDEN, FORBIDDEN, OK, OK, NOT_FOUND)),
    ("tokens", lambda c: reverse("members:tokens", args=[TEST_PROJECT]),
     (FORBIDDEN, FORBIDDEN, OK, OK, NOT_FOUND)),
    # Instance pages: the admin's alone.
    ("new project", lambda c: reverse("members:project_create"), (FORBIDDEN, FORBIDDEN, FORBIDDEN, OK, FORBIDDEN)),
    # The price table is read by any project's lead (their configs' costs come from it), edited by the admin only.
    ("model prices", lambda c: reverse("judges:price_list"), (FORBIDDEN, FORBIDDEN, OK, OK, OK)),
    ("model price edit", lambda c: reverse("judges:price_edit", args=[1]),
     (FORBIDDEN, FORBIDDEN, FORBIDDEN, NOT_FOUND, FORBIDDEN)),
    # Django's admin is the instance admin's only: everyone else is sent to its login.
    ("admin", lambda c: reverse("admin:index"), (LOGIN, LOGIN, LOGIN, OK, LOGIN)),
]
ROLES = ["reviewer", "outsider", "lead", "admin_user", "other_lead"]


@pytest.fixture
def case(dataset, rubric) -> Case:
    cases_import_objects(dataset=dataset, objects=[{"external_id": "c1", "input": "q", "output": "a"}])
    return Case.objects.get()


@pytest.mark.parametrize(("page", "url", "expected"), PAGES, ids=[p[0] for p in PAGES])
@pytest.mark.parametrize("role", ROLES)
def test_each_role_against_each_page(client, request, case, page, url, expected, role):
    client.force_login(request.getfixturevalue(role))
    status = expected[ROLES.index(role)]

    response = client.get(url(case))

    if status == LOGIN:
        assert response.status_code == 302 and "/login/" in response["Location"]
    else:
        assert response.status_code == status


@pytest.mark.parametrize(("page", "url", "expected"), PAGES, ids=[p[0] for p in PAGES])
def test_anonymous_users_go_to_login(client, case, page, url, expected):
    response = client.get(url(case))
    assert response.status_code == 302 and "login" in response["Location"]


# --- every route, including the ones added later -------------------------------------------------


def _routes(patterns=None, prefix="") -> list[tuple[str, object]]:
    found = []
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(entry, URLResolver):
            found += _routes(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            found.append((prefix + str(entry.pattern), entry.callback))
    return found


def _sample_url(route: str) -> str:
    """A concrete URL for a route, with made-up values for its parameters."""
    return "/" + re.sub(r"<(?:(\w+):)?\w+>", lambda m: "1" if m.group(1) == "int" else "x", route)


def _api_routes() -> list[str]:
    return [route for route, _ in _routes() if route.startswith("api/")]


def test_only_the_api_the_login_and_an_invitations_link_skip_the_login_requirement():
    exempt = {
        route for route, view in _routes()
        if getattr(view, "login_required", True) is False and not route.startswith(("api/", "admin/"))
    }
    # An invitation's link makes the account that joins (its token is the credential: evalhub/members/views.py).
    assert exempt <= {"accounts/login/", "invitations/<str:token>/"}, exempt


def test_every_api_endpoint_refuses_requests_without_a_token(client, lead_client):
    assert _api_routes(), "the ingest API at least"
    for route in _api_routes():
        for method in ("get", "post"):
            for who in (client, lead_client):  # nobody, then a lead's session cookie alone
                response = getattr(who, method)(_sample_url(route))
                assert response.status_code == 401, (route, method, response.status_code)


# The endpoints that do not open to exactly one scope, each by design (docs/security.md): what it opens to.
API_SCOPE_EXCEPTIONS = {
    "api/token": set(Scope.values),  # any token may ask which scopes it carries
    "api/datasets/<slug:slug>": {Scope.CASES_READ, Scope.CASES_WRITE},  # a dataset's redaction, for either
    "api/datasets/<slug:slug>/ci-runs": set(),  # needs cases:write and results:write together (below)
}


def test_each_api_endpoint_opens_to_exactly_one_scope(client, project, lead):
    # Per method: one address may serve two scopes (GET cases:read, POST cases:write on a dataset's cases).
    tokens = {scope: ApiToken.issue(project=project, name=scope, scopes=[scope], created_by=lead)[1]
              for scope in Scope.values}
    for route in _api_routes():
        opened_by_method = {}
        for method in ("get", "post"):
            opened = set()
            for scope, raw in tokens.items():
                headers = {"Authorization": f"Bearer {raw}"}
                extra = {"data": "{}", "content_type": "application/json"} if method == "post" else {}
                response = getattr(client, method)(_sample_url(route), headers=headers, **extra)
                if response.status_code not in (401, 403, 405):
                    opened.add(scope)
            if route in API_SCOPE_EXCEPTIONS:
                assert opened in (API_SCOPE_EXCEPTIONS[route], set()), (route, method, opened)
            else:
                assert len(opened) <= 1, (route, method, opened)
            opened_by_method[method] = opened
        if route not in API_SCOPE_EXCEPTIONS:
            assert any(opened_by_method.values()), (route, "opens to no scope")
    assert set(API_SCOPE_EXCEPTIONS) <= set(_api_routes())


def test_posting_ci_runs_needs_both_scopes_together(client, project, lead):
    url = _sample_url("api/datasets/<slug:slug>/ci-runs")
    both = ApiToken.issue(project=project, name="ci", scopes=[Scope.CASES_WRITE, Scope.RESULTS_WRITE],
                          created_by=lead)[1]
    response = client.post(url, data="{}", content_type="application/json", headers={"Authorization": f"Bearer {both}"})
    assert response.status_code not in (401, 403), response.content
