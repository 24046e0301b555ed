import pytest
from django.urls import reverse

from labeling.importing.cases import cases_import_objects
from labeling.models import Case, Dataset
from tests.conftest import TEST_PROJECT, make_user, store_project

pytestmark = pytest.mark.django_db


def add_cases(dataset, n: int, **fields) -> None:
    cases_import_objects(dataset=dataset, objects=[
        {"external_id": f"{dataset.slug}-{i:04d}", "input": f"question {i}", "output": f"answer {i}", **fields}
        for i in range(n)
    ])


def test_the_list_shows_datasets_with_case_counts_and_reviewers(lead_client, dataset, other_dataset, reviewer):
    add_cases(dataset, 3)
    response = lead_client.get(reverse("labeling:dataset_list", args=[TEST_PROJECT]))
    rows = {d.slug: d for d in response.context["datasets"]}
    assert (rows["store-support"].case_count, rows["other"].case_count) == (3, 0)
    body = response.content.decode()
    assert reverse("labeling:dataset_detail", args=[TEST_PROJECT, "store-support"]) in body and "rita" in body


@pytest.mark.parametrize("n", [1, 4, 12])
def test_the_dataset_list_query_count_does_not_grow(lead_client, django_assert_num_queries, n):
    for i in range(n):
        d = Dataset.objects.create(project=store_project(), slug=f"d{i}", name=f"D{i}")
        d.reviewers.add(make_user(f"u{i}"))
        add_cases(d, 2)
    # session + user, the membership (+ project), the user's projects (the menu), datasets with case counts,
    # their reviewers (prefetched)
    with django_assert_num_queries(5):
        lead_client.get(reverse("labeling:dataset_list", args=[TEST_PROJECT]))


def test_it_creates_a_dataset_and_goes_to_its_import_page(lead_client):
    response = lead_client.post(reverse("labeling:dataset_create", args=[TEST_PROJECT]),
                                {"slug": "web", "name": "Web chat"})
    assert response["Location"] == reverse("labeling:dataset_import", args=[TEST_PROJECT, "web"])
    assert Dataset.objects.get(slug="web").name == "Web chat"


@pytest.mark.parametrize("slug", ["store-support", "new", "no spaces"])
def test_it_refuses_a_taken_reserved_or_bad_slug(lead_client, dataset, slug):
    response = lead_client.post(reverse("labeling:dataset_create", args=[TEST_PROJECT]), {"slug": slug, "name": "x"})
    assert response.status_code == 200 and "slug" in response.context["form"].errors
    assert Dataset.objects.count() == 1


def test_the_case_list_pages_by_50(lead_client, dataset):
    add_cases(dataset, 120)
    url = reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug])

    first = lead_client.get(url)
    third = lead_client.get(url, {"page": 3})

    assert [r["external_id"] for r in first.context["page"].object_list][:2] == ["store-support-0000",
                                                                                 "store-support-0001"]
    assert len(first.context["page"].object_list) == 50
    assert len(third.context["page"].object_list) == 20
    case = Case.objects.get(external_id="store-support-0100")
    assert reverse("labeling:case_detail", args=[TEST_PROJECT, case.pk]) in third.content.decode()


def test_it_filters_by_category_and_split(lead_client, dataset):
    add_cases(dataset, 30, category="policy")
    cases_import_objects(dataset=dataset, objects=[
        {"external_id": f"t{i}", "input": "q", "output": "a", "category": "tools"} for i in range(10)
    ])
    url = reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug])

    tools = lead_client.get(url, {"category": "tools"}).context["page"].paginator.count
    holdout = lead_client.get(url, {"category": "policy", "split": "holdout"}).context["page"].object_list

    assert tools == 10
    expected = set(Case.objects.filter(category="policy", split="holdout").values_list("external_id", flat=True))
    assert {r["external_id"] for r in holdout} == expected and expected


def test_an_htmx_request_gets_only_the_case_table(lead_client, dataset):
    add_cases(dataset, 3)
    response = lead_client.get(reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug]), {"split": "dev"},
                               headers={"HX-Request": "true"})
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="case-table">') and "<html" not in body
    assert "HX-Request" in response["Vary"]


@pytest.mark.parametrize("n", [1, 60, 150])
@pytest.mark.parametrize("query", [{}, {"q": "question", "sort": "-id"}])
def test_the_case_list_query_count_does_not_grow(lead_client, dataset, django_assert_num_queries, n, query):
    add_cases(dataset, n, category="policy")
    # session + user, the membership (+ project), the user's projects (the menu), dataset, count, page of rows,
    # categories, rubrics with labels here, all rubrics, the latest redaction changes, the policy documents to
    # choose from, the latest changes of the dataset's; the synthetic-cases card: its policy documents, the judge
    # configs an editor comes from, the latest requests
    with django_assert_num_queries(15):
        lead_client.get(reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug]), {"page": 2, **query})


def test_it_searches_cases_by_id_input_or_answer(lead_client, dataset):
    cases_import_objects(dataset=dataset, objects=[
        {"external_id": "refund-1", "input": "Where is my parcel?", "output": "It ships today."},
        {"external_id": "ship-2", "input": "Can I get a REFUND?", "output": "Yes."},
        {"external_id": "other-3", "input": "Hello", "output": "The refund desk opens at 9."},
        {"external_id": "other-4", "input": "Hi", "output": "Hi!"},
    ])
    url = reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug])

    def found(**query):
        return [r["external_id"] for r in lead_client.get(url, query).context["page"].object_list]

    assert found(q="refund") == ["refund-1", "ship-2", "other-3"]  # in import order
    assert found(q="refund", sort="-id") == ["ship-2", "refund-1", "other-3"]
    assert found(sort="id") == ["other-3", "other-4", "refund-1", "ship-2"]
    assert found(sort="input") == ["refund-1", "ship-2", "other-3", "other-4"]  # not offered: import order
    assert found(q="  parcel  ") == ["refund-1"]
    page = lead_client.get(url, {"q": "nowhere"}, headers={"HX-Request": "true"}).content.decode()
    assert "No case matches these filters." in page


def test_long_answers_are_cut_in_the_list(lead_client, dataset):
    cases_import_objects(dataset=dataset, objects=[{"external_id": "long", "input": "q", "output": "x" * 5000}])
    body = lead_client.get(reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug])).content.decode()
    assert "x" * 139 in body and "x" * 200 not in body
