"""The prompt preview's case picker, on the editor (a POST of the whole form) and on a config's page (a GET):
which case it starts on, choosing and searching, and what a bad or foreign case id gets."""

import json

import pytest
from django.urls import reverse

from judges.configs import services as config_services
from judges.models import JudgeConfig, Run
from labeling.models import Case, Dataset
from tests.conftest import TEST_PROJECT
from tests.judges.configs.test_views import form_data
from tests.judges.helpers import behavioral_spec, make_cases

HTMX = {"HX-Request": "true"}


def editor_preview(client, rubric, **fields):
    """The editor's htmx preview: the picker and the preview of the posted fields."""
    return client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]),
                       form_data(action="preview", **fields), headers=HTMX)


def test_it_starts_on_the_first_case_of_the_dataset_the_rubric_last_ran_on(lead_client, rubric, dataset, lead):
    make_cases(dataset, 2)  # "store-support" comes first by slug, but the rubric never ran on it
    zeta = Dataset.objects.create(project=dataset.project, slug="zeta", name="Zeta")
    zeta_cases = make_cases(zeta, 3, prefix="z")
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    Run.objects.create(config=config, dataset=zeta, created_by=lead)

    editor = lead_client.get(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]))
    detail = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk]))

    for response in (editor, detail):
        assert response.context["picker"].chosen_id == zeta_cases[0].pk
        assert response.context["preview"].case == zeta_cases[0]
        page = response.content.decode()
        assert f'<input type="radio" name="preview_case" value="{zeta_cases[0].pk}" checked>' in page
        assert 'data-testid="prompt-user"' in page  # previewed at once, no click needed
        assert '<option value="zeta" selected>' in page


def test_it_previews_the_chosen_case_and_keeps_it_chosen_through_a_search(lead_client, rubric, dataset):
    cases = make_cases(dataset, 12)

    response = editor_preview(lead_client, rubric, preview_dataset=dataset.slug, preview_case=cases[5].pk,
                              preview_q="ORD-1")

    page = response.content.decode()
    assert page.lstrip().startswith('<div id="preview-panel"')  # the partial only
    listed = [case.external_id for case in response.context["picker"].cases]
    assert listed == ["c005", "c001", "c010", "c011"]  # the chosen one first, then the matches in order
    assert f'value="{cases[5].pk}" checked' in page and page.count(" checked") == 1
    assert "Where is my order ORD-5?" in response.context["preview"].user


def test_it_lists_a_few_cases_and_says_how_many_more_there_are(lead_client, rubric, dataset, lead):
    make_cases(dataset, 12)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)

    response = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk]),
                               {"preview_dataset": dataset.slug}, headers=HTMX)

    assert len(response.context["picker"].cases) == 8
    assert "4 more cases: type in “Find a case” to narrow the list." in response.content.decode()
    nothing = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk]),
                              {"preview_dataset": dataset.slug, "preview_q": "<b>no such</b>"}, headers=HTMX)
    assert "No other case matches “&lt;b&gt;no such&lt;/b&gt;”." in nothing.content.decode()
    assert [case.external_id for case in nothing.context["picker"].cases] == ["c000"]  # still chosen


def test_it_never_previews_a_case_of_another_dataset(lead_client, rubric, dataset, other_dataset, lead):
    make_cases(dataset, 2)
    foreign = Case.objects.create(dataset=other_dataset, external_id="secret-case", input="Other team's question",
                                  output="Other team's answer", split="dev")
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)

    editor = editor_preview(lead_client, rubric, preview_dataset=dataset.slug, preview_case=foreign.pk)
    detail = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk]),
                             {"preview_dataset": dataset.slug, "preview_case": foreign.pk})

    for response in (editor, detail):
        assert response.status_code == 200
        page = response.content.decode()
        assert f"The dataset store-support has no case with id {foreign.pk}: choose one of its cases" in page
        assert "secret-case" not in page and "Other team's question" not in page
        assert response.context["preview"].case is None
        assert 'data-testid="prompt-user"' not in page


@pytest.mark.parametrize("case_id, message", [
    ("abc", "&#x27;abc&#x27; is not a case id"),
    ("-1", "&#x27;-1&#x27; is not a case id"),
    ("1e3", "&#x27;1e3&#x27; is not a case id"),
    ("²", "&#x27;²&#x27; is not a case id"),  # a digit to str.isdigit, not to int()
    ("9" * 40, "is not a case id"),  # past any bigint: refused before the query
    ("<script>x</script>", "&#x27;&lt;script&gt;x&lt;/script&gt;&#x27; is not a case id"),
    ("999999", "The dataset store-support has no case with id 999999"),
])
def test_it_says_what_is_wrong_with_a_bad_case_id(lead_client, rubric, dataset, lead, case_id, message):
    make_cases(dataset, 2)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)

    editor = editor_preview(lead_client, rubric, preview_dataset=dataset.slug, preview_case=case_id)
    detail = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk]),
                             {"preview_dataset": dataset.slug, "preview_case": case_id})

    for response in (editor, detail):
        assert response.status_code == 200
        assert message in response.content.decode()
        assert "<script>x" not in response.content.decode()
    assert JudgeConfig.objects.count() == 1  # a preview saves nothing


def test_it_asks_for_a_dataset_when_the_one_named_does_not_exist(lead_client, rubric, dataset):
    make_cases(dataset, 2)
    response = editor_preview(lead_client, rubric, preview_dataset="no-such-dataset")
    assert response.status_code == 200
    assert "Choose a dataset to preview the prompt with one of its cases." in response.content.decode()
    assert response.context["picker"].cases == []


def test_it_refuses_a_preview_to_a_reviewer(reviewer_client, rubric, dataset):
    make_cases(dataset, 1)
    response = editor_preview(reviewer_client, rubric, preview_dataset=dataset.slug)
    assert response.status_code == 403
    assert b"Where is my order" not in response.content


@pytest.mark.parametrize("count", [12, 400])
def test_it_previews_in_constant_queries(lead_client, rubric, dataset, django_assert_num_queries, count):
    cases = make_cases(dataset, count)
    # session, user, the project door's membership, rubric, newest config, the policy choices; the dataset, the
    # chosen case, the picker's matches and how many more there are: never one per case
    with django_assert_num_queries(10):
        editor_preview(lead_client, rubric, preview_dataset=dataset.slug, preview_case=cases[1].pk, preview_q="c0")


def test_the_picker_escapes_what_the_cases_say(lead_client, rubric, dataset):
    hostile = Case.objects.create(dataset=dataset, external_id="<b>id</b>", input="<script>alert(1)</script>",
                                  output="<img src=x onerror=alert(2)>", split="dev")

    html = editor_preview(lead_client, rubric, preview_dataset=dataset.slug, preview_case=hostile.pk).content.decode()

    assert "&lt;b&gt;id&lt;/b&gt;" in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>id</b>" not in html and "<script>" not in html and "<img src=x" not in html


def test_a_config_page_previews_and_shows_the_guidance_and_examples_it_sends(lead_client, rubric, dataset, lead):
    make_cases(dataset, 1)
    example = {"external_id": "ex-1", "input": "Can I return <i>shoes</i>?", "output": "Yes, within 30 days.",
               "verdict": "pass", "reason": ""}
    spec = behavioral_spec() | {"guidance": "Fail an answer that <b>skips</b> the fee.", "examples": [example]}
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)

    page = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk])).content.decode()

    # the system message
    assert "Guidance for this rubric:\nFail an answer that &lt;b&gt;skips&lt;/b&gt; the fee." in page
    assert 'data-testid="spec-guidance">Fail an answer that &lt;b&gt;skips&lt;/b&gt; the fee.</div>' in page
    assert "Question: Can I return &lt;i&gt;shoes&lt;/i&gt;?" in page  # the example, in the user message as sent


def test_the_editor_previews_the_examples_as_typed_and_says_when_a_save_would_refuse_them(lead_client, rubric,
                                                                                          dataset):
    make_cases(dataset, 1)
    example = {"external_id": "ex-1", "input": "Can I return shoes?", "output": "Yes, within 30 days.",
               "verdict": "pass"}
    typed = editor_preview(lead_client, rubric, preview_dataset=dataset.slug,
                           examples=json.dumps([example])).content.decode()
    assert "Example 1\nQuestion: Can I return shoes?" in typed and 'data-testid="examples-left-out"' not in typed

    for text, why in (("[{", "they are not valid JSON"), (json.dumps([example | {"verdict": "maybe"}]), "verdict")):
        refused = editor_preview(lead_client, rubric, preview_dataset=dataset.slug, examples=text).content.decode()
        note = refused[refused.index('data-testid="examples-left-out"'):]
        assert why in note[:note.index("</p>")] and "Example 1" not in refused
        assert 'data-testid="prompt-user"' in refused  # the prompt is still previewed, without them
