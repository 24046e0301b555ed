"""A newcomer's story of projects, in the browser: two projects, a rubric gated in one; a reviewer of both sees
each project's queue apart and moves between them with the switcher; a lead of one project gets the 404 page on
the other's URLs; CI with each project's token reads its own project's gate config only.

Screenshots go to /work/notes/screens/ (projects_*.png).
"""

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from evalhub.models import ApiToken, Membership, Role, Scope
from judges.promotion.services import rubric_promote
from labeling.models import Dataset, Rubric
from tests.browser import helpers
from tests.browser.helpers import STORE, browser_page, log_in
from tests.conftest import make_user
from tests.judges.promotion_factories import evidence_run
from tests.labeling.queue_helpers import make_cases

pytestmark = pytest.mark.browser

SCREENS = Path("/work/notes/screens")


def shot(page, name: str) -> None:
    # caret="initial": hiding the caret injects a style, which the Content-Security-Policy refuses.
    helpers.SHOTS, before = SCREENS, helpers.SHOTS
    try:
        helpers.shot(page, name, caret="initial")
    finally:
        helpers.SHOTS = before


@pytest.fixture
def two_projects(transactional_db, project, other_project, dataset, rubric, reviewer, lead, other_lead):
    """The store project: its rubric gated on evidence labelled by rob, 5 cases left for rita. ShopNest: its own
    dataset and a rubric of the same slug, rita a reviewer there too, 3 cases left for her."""
    rob = make_user("rob")
    dataset.reviewers.add(rob)
    run = evidence_run(rubric, dataset, lead, rob)
    for stage in ("observe", "warn", "gate"):
        rubric_promote(rubric=rubric, to_stage=stage, run=run, reason="Calibrated on 40 cases.", by=lead)
    make_cases(dataset, 5, prefix="store-open-")

    Membership.objects.create(project=other_project, user=reviewer, role=Role.REVIEWER)
    shop_data = Dataset.objects.create(project=other_project, slug="parcel-chats", name="ShopNest parcel chats")
    shop_data.reviewers.add(reviewer)
    Rubric.objects.create(project=other_project, slug=rubric.slug, name="Does the bot state the 14-day window?",
                          criteria="Pass when the 14-day window is stated.")
    make_cases(shop_data, 3, prefix="shopnest-open-")
    return run


def test_a_reviewer_of_two_projects_sees_each_queue_apart(live_server, two_projects, reviewer):
    with browser_page(viewport={"width": 1280, "height": 800}, capture_csp=True) as page:
        log_in(page, live_server, reviewer.username, lands_on="/")  # two projects: the picker
        cards = page.locator("[data-testid=projects] [data-project]")
        expect(cards).to_have_count(2)
        assert set(cards.evaluate_all("cards => cards.map(c => c.dataset.project)")) == {"store", "shopnest"}
        shot(page, "projects_picker.png")

        page.locator("[data-project=store] >> text=Open").click()
        page.wait_for_url(f"{live_server.url}{STORE}/label/")  # a reviewer lands on the project's queues
        expect(page.get_by_test_id("current-project")).to_have_text("Store support agent")
        main = page.locator("main")
        expect(main).to_contain_text("Store support")
        assert "ShopNest" not in main.inner_text() and "parcel-chats" not in main.inner_text()
        expect(page.get_by_test_id("queue-left").first).to_have_text("5")
        shot(page, "projects_store_queue.png")

        # The switcher lists her two projects and nothing else; ShopNest's queue holds ShopNest's cases only.
        page.get_by_test_id("project-switcher").locator("summary").click()
        links = page.get_by_test_id("project-switcher").locator("ul a")
        assert links.all_inner_texts() == ["ShopNest support bot", "Store support agent", "All projects"]
        links.filter(has_text="ShopNest support bot").click()
        page.wait_for_url(f"{live_server.url}/p/shopnest/label/")
        expect(page.get_by_test_id("current-project")).to_have_text("ShopNest support bot")
        expect(main).to_contain_text("ShopNest parcel chats")
        assert "Store support" not in main.inner_text()
        expect(page.get_by_test_id("queue-left").first).to_have_text("3")
        page.locator("main >> text=Start labeling").click()
        page.wait_for_url(f"{live_server.url}/p/shopnest/label/parcel-chats/return-policy/")
        expect(page.locator("#queue-case")).to_contain_text("shopnest-open-")
        expect(page.locator("main")).to_contain_text("14-day window")
        shot(page, "projects_shopnest_queue.png")
        assert page.csp_errors == []


def test_a_lead_of_one_project_meets_the_404_page_on_the_others_urls(live_server, two_projects, other_lead, rubric):
    run = two_projects
    with browser_page(viewport={"width": 1280, "height": 800}) as page:
        log_in(page, live_server, other_lead.username, lands_on="/p/shopnest/")  # one project: straight in
        for path in (f"{STORE}/", f"{STORE}/runs/{run.pk}/", f"{STORE}/rubrics/{rubric.slug}/promotion/",
                     f"/p/shopnest/runs/{run.pk}/", "/p/no-such-project/"):
            response = page.goto(f"{live_server.url}{path}")
            assert response.status == 404, (path, response.status)
            assert page.locator("h1").inner_text() == "There is nothing here", path
            assert "Store support" not in page.locator("main").inner_text(), path
            if path == f"{STORE}/runs/{run.pk}/":
                shot(page, "projects_404_for_the_other_lead.png")


def test_each_projects_ci_reads_its_own_gate_config(two_projects, project, other_project, lead, other_lead, rubric):
    """The CI half: each token answers for its project; the gated rubric's slug exists in both projects, and
    only the store's is gated."""
    _, store_token = ApiToken.issue(project=project, name="store-ci", scopes=[Scope.GATES_READ], created_by=lead)
    _, shop_token = ApiToken.issue(project=other_project, name="shop-ci", scopes=[Scope.GATES_READ],
                                   created_by=other_lead)
    client = Client()
    store = client.get(reverse("judges:api_gates"), headers={"Authorization": f"Bearer {store_token}"}).json()
    shop = client.get(reverse("judges:api_gates"), headers={"Authorization": f"Bearer {shop_token}"}).json()
    assert [(r["slug"], r["stage"]) for r in store["rubrics"]] == [(rubric.slug, "gate")]
    assert shop["rubrics"] == []
