"""The small cast every test module shares: one project ("store") with a reviewer, a lead and an outsider; the
instance admin; and another project with its own lead and reviewer, for isolation (docs/projects.md)."""

import os
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from evalhub.models import Membership, Project, Role, User
from judges.testing.fake_provider import FakeProvider
from labeling.models import Dataset, Rubric

PASSWORD = "correct-horse-battery"


def pytest_configure(config) -> None:
    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine and not os.environ.get("EVALHUB_TESTS_ALLOW_SQLITE"):
        pytest.exit(
            "The tests run on PostgreSQL: set DATABASE_URL=postgres://… or use scripts/test.sh "
            "(EVALHUB_TESTS_ALLOW_SQLITE=1 runs them on SQLite anyway).",
            returncode=2,
        )
    # PBKDF2's ~1M rounds cost most of a second per test user; tests need a hash, not its strength.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # The production storage reads the manifest collectstatic writes; tests serve the source folders
    # instead (tests/evalhub/test_serve.py runs the real thing, collectstatic and all).
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    _own_redis_database_per_test_process()


def _own_redis_database_per_test_process() -> None:
    """Under pytest-xdist, process gwN uses the Redis database N after the one configured, so one process's
    workers never take (or flush) the other's tasks."""
    worker, url = os.environ.get("PYTEST_XDIST_WORKER"), settings.CELERY_BROKER_URL
    if not worker or not url.startswith("redis"):
        return
    parts = urlsplit(url)
    database = int(parts.path.lstrip("/") or 0) + int(worker.removeprefix("gw"))
    url = parts._replace(path=f"/{database}").geturl()
    # Django's settings were read before this hook; the worker subprocesses the tests start read the environment.
    settings.CELERY_BROKER_URL = os.environ["CELERY_BROKER_URL"] = url
    from evalhub.celery import app
    app.conf.broker_url = url


# The project every test's data lives in unless it names another: tests/conftest.py's fixtures and make_user use it.
TEST_PROJECT = "store"


def store_project() -> Project:
    """The tests' own project, made the first time a test needs it."""
    return Project.objects.get_or_create(slug=TEST_PROJECT, defaults={"name": "Store support agent"})[0]


def make_user(username: str, role: str | None = Role.REVIEWER, *, project: Project | None = None, **extra) -> User:
    """A user with `role` in `project` (the tests' project unless named; None: a member of nothing)."""
    user = User.objects.create_user(username=username, password=PASSWORD, **extra)
    if role is not None:
        Membership.objects.create(user=user, project=project or store_project(), role=role)
    return user


@pytest.fixture
def project(db) -> Project:
    return store_project()


@pytest.fixture
def other_project(db) -> Project:
    """Another team's project: nothing of it may be seen, counted or changed from the tests' project."""
    return Project.objects.create(slug="shopnest", name="ShopNest support bot")


@pytest.fixture
def dataset(project) -> Dataset:
    return Dataset.objects.create(project=project, slug="store-support", name="Store support")


@pytest.fixture
def other_dataset(project) -> Dataset:
    """A second dataset of the same project (a reviewer may be assigned to one and not the other)."""
    return Dataset.objects.create(project=project, slug="other", name="Other team's data")


@pytest.fixture
def rubric(project) -> Rubric:
    return Rubric.objects.create(
        project=project, slug="return-policy", name="Does the answer follow the return policy?",
        criteria="Pass when the answer states the 30-day return window correctly.",
    )


@pytest.fixture
def reviewer(db, dataset) -> User:
    user = make_user("rita")
    dataset.reviewers.add(user)
    return user


@pytest.fixture
def second_reviewer(db, dataset) -> User:
    user = make_user("rob")
    dataset.reviewers.add(user)
    return user


@pytest.fixture
def outsider(db) -> User:
    """A reviewer of the project assigned to none of its datasets."""
    return make_user("olga")


@pytest.fixture
def lead(db) -> User:
    return make_user("lena", role=Role.LEAD)


@pytest.fixture
def other_lead(other_project) -> User:
    """The lead of another project: a stranger to everything of the tests' project."""
    return make_user("otto", role=Role.LEAD, project=other_project)


@pytest.fixture
def admin_user(db) -> User:
    """The instance admin: Django's superuser, a member of no project and a lead of every one."""
    return make_user("ada", role=None, is_staff=True, is_superuser=True)


@pytest.fixture
def reviewer_client(client, reviewer):
    client.force_login(reviewer)
    return client


@pytest.fixture
def lead_client(client, lead):
    client.force_login(lead)
    return client


@pytest.fixture(scope="session")
def fake_provider_server():
    """The scripted stand-in for OpenAI and Anthropic, in its own process, for the whole session."""
    with FakeProvider() as fake:
        yield fake


@pytest.fixture
def fake_provider(fake_provider_server, monkeypatch):
    """The fake provider reset (no fault, rule always_pass), and the environment a config names."""
    fake_provider_server.reset()
    monkeypatch.setenv("EVALHUB_JUDGE_OPENAI_URL", fake_provider_server.openai_base_url)
    monkeypatch.setenv("EVALHUB_JUDGE_ANTHROPIC_URL", fake_provider_server.anthropic_base_url)
    monkeypatch.setenv("EVALHUB_JUDGE_API_KEY", "sk-test-not-a-real-key")
    yield fake_provider_server
    fake_provider_server.reset()
