"""The judge config pages: versions, the editor (save, no-op save, engine errors, alias warning),
the diff between versions and the prompt preview."""

import pytest
from django.urls import reverse
from django.utils.html import escape

from judges.configs import services as config_services
from judges.configs.cases import engine_case
from judges.engine import DEFAULT_PROMPT_TEMPLATE, build_messages
from judges.models import JudgeConfig, Run
from labeling.policies.services import policy_write
from tests.conftest import TEST_PROJECT, make_user
from tests.judges.helpers import CONTRACT_SPEC, MODEL, behavioral_spec, make_cases


def form_data(**overrides) -> dict:
    """The editor's fields for a behavioral judge on the fake provider."""
    data = {
        "layers": ["behavioral"], "contract_checks": [], "must_match": "", "must_not_match": "", "json_schema": "",
        "provider": "openai", "model": MODEL, "model_family": "", "prompt_template": DEFAULT_PROMPT_TEMPLATE,
        "policy": "Returns within 30 days.", "params": '{"temperature": 0, "max_tokens": 400}',
        "output_kind": "verdict", "pass_score": "4", "timeout_s": "30", "max_attempts": "3",
        "base_url_env": "EVALHUB_JUDGE_OPENAI_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY", "note": "",
        "action": "save",
    }
    data.update(overrides)
    return data


@pytest.mark.parametrize("name, args", [
    ("judges:judge_index", [TEST_PROJECT]), ("judges:config_list", [TEST_PROJECT, "return-policy"]),
    ("judges:config_create", [TEST_PROJECT, "return-policy"]), ("judges:price_list", []),
    ("judges:run_list", [TEST_PROJECT]),
])
def test_it_forbids_reviewers(reviewer_client, rubric, name, args):
    assert reviewer_client.get(reverse(name, args=args)).status_code == 403


def test_it_forbids_reviewers_a_config_page(reviewer_client, rubric, lead):
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    assert reviewer_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk])).status_code == 403
    create = reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])
    assert reviewer_client.post(create, form_data()).status_code == 403
    assert JudgeConfig.objects.count() == 1


def test_it_saves_the_form_as_the_first_version_with_the_rubrics_criteria(lead_client, rubric, lead):
    response = lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]),
                                form_data(note="first try"))

    config = JudgeConfig.objects.get()
    assert response.status_code == 302
    assert response.url == reverse("judges:config_detail", args=[TEST_PROJECT, config.pk])
    assert (config.version, config.note, config.created_by) == (1, "first try", lead)
    assert config.spec["criteria"] == rubric.criteria
    assert config.spec["model"] == MODEL and config.spec["params"] == {"temperature": 0, "max_tokens": 400}
    assert config.spec["prompt_template"] == DEFAULT_PROMPT_TEMPLATE


def test_it_keeps_the_template_hash_when_the_browser_sends_crlf(lead_client, rubric, lead):
    spec = behavioral_spec(params={"temperature": 0, "max_tokens": 400}, timeout_s=30, max_attempts=3,
                           policy="Returns within 30 days.")
    first = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    crlf = form_data(prompt_template=DEFAULT_PROMPT_TEMPLATE.replace("\n", "\r\n"),
                     policy="Returns within 30 days.")
    lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]), crlf)
    assert list(JudgeConfig.objects.values_list("pk", flat=True)) == [first.pk]


def test_it_makes_no_new_version_when_nothing_changed_and_says_so(lead_client, rubric):
    url = reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])
    lead_client.post(url, form_data())
    response = lead_client.post(url, form_data(), follow=True)

    assert JudgeConfig.objects.count() == 1
    assert "Nothing changed: v1 already says exactly this" in response.content.decode()


def test_it_prefills_the_editor_from_the_newest_version(lead_client, rubric, lead):
    config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(policy="old policy"), by=lead)
    config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(policy="the newest policy"), by=lead)

    page = lead_client.get(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])).content.decode()

    assert "the newest policy" in page and "old policy" not in page
    assert f'value="{MODEL}"' in page
    assert "Prefilled from v2" in page
    assert escape(rubric.criteria) in page  # shown read-only


@pytest.mark.parametrize("overrides, field", [
    ({"layers": ["contract"], "provider": "", "model": ""}, "contract_checks"),
    ({"layers": ["contract", "behavioral"], "contract_checks": ["must_match"], "must_match": "(unclosed"},
     "must_match"),
    ({"params": '{"temperature": 5}'}, "params"),
    ({"base_url_env": "https://api.example.com/v1"}, "base_url_env"),
    ({"provider": ""}, "provider"),
    ({"second_opinion_provider": "openai", "second_opinion_model": "gpt-4.1-2025-04-14"}, "second_opinion_model"),
    ({"params": "{not json"}, "params"),
    # JSON that the strict reader refuses (docs/cases.md, "Strict JSON"): a 500 or a silently dropped key otherwise
    ({"params": '{"temperature": 0, "temperature": 1}'}, "params"),
    ({"params": '{"temperature": NaN}'}, "params"),
    ({"params": '{"max_tokens": 1e999}'}, "params"),
    ({"params": '{"stop": "\\ud800"}'}, "params"),
])
def test_it_shows_an_engine_error_on_the_field_it_names(lead_client, rubric, overrides, field):
    response = lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]),
                                form_data(**overrides))

    assert response.status_code == 200
    assert field in response.context["form"].errors, response.context["form"].errors
    assert JudgeConfig.objects.count() == 0


def test_it_shows_a_remote_schema_reference_refused_on_its_field(lead_client, rubric):
    # A schema is data: a reference outside it would be fetched by every worker and CI runner that judges.
    data = form_data(layers=["contract", "behavioral"], contract_checks=["json_schema"],
                     json_schema='{"properties": {"order": {"$ref": "http://127.0.0.1:9/schema"}}}')
    response = lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]), data)

    assert response.status_code == 200
    assert response.context["form"].errors["json_schema"] == [
        "json_schema: the reference 'http://127.0.0.1:9/schema' ($ref at /properties/order) leaves the schema;"
        ' a schema may only refer within itself, as "#/$defs/name" does'
    ]
    assert JudgeConfig.objects.count() == 0


def test_it_warns_when_the_model_is_an_alias(lead_client, rubric):
    secondary = {"fallback_provider": "anthropic", "fallback_model": "claude-sonnet-4-5"}
    response = lead_client.post(
        reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]), form_data(model="gpt-4o-mini", **secondary),
        follow=True,
    )

    page = response.content.decode()
    config = JudgeConfig.objects.get()
    assert config.spec["model"] == "gpt-4o-mini"  # saved all the same
    assert "The model &#x27;gpt-4o-mini&#x27; is an alias, not a pinned snapshot" in page
    assert page.count("is an alias, not a pinned snapshot") == 2  # once per model, not again as a message
    assert "The fallback &#x27;claude-sonnet-4-5&#x27; is an alias" in page
    # The config page keeps saying it, not only the message after saving.
    detail = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk])).content.decode()
    assert "is an alias, not a pinned snapshot" in detail


def test_it_does_not_warn_about_a_pinned_snapshot(lead_client, rubric, lead):
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    page = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk])).content.decode()
    assert "is an alias" not in page


def test_it_never_changes_a_version_that_has_run(lead_client, rubric, dataset, lead):
    make_cases(dataset, 2)
    v1 = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(policy="v1 policy"), by=lead)
    Run.objects.create(config=v1, dataset=dataset, created_by=lead, total=2)
    spec_before, hash_before = v1.spec, v1.config_hash

    lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]) + f"?from={v1.pk}",
                     form_data(policy="v2 policy"))

    v1.refresh_from_db()
    assert (v1.spec, v1.config_hash) == (spec_before, hash_before)
    v2 = JudgeConfig.objects.get(version=2)
    assert v2.spec["policy"] == "v2 policy" and v2.config_hash != hash_before
    assert v1.runs.count() == 1 and v2.runs.count() == 0


def test_it_lists_versions_with_hash_model_layers_and_runs(lead_client, rubric, dataset, lead):
    v1 = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead, note="contract only")
    v2 = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    Run.objects.create(config=v1, dataset=dataset, created_by=lead)
    Run.objects.create(config=v1, dataset=dataset, created_by=lead)

    response = lead_client.get(reverse("judges:config_list", args=[TEST_PROJECT, rubric.slug]))

    page = response.content.decode()
    assert v1.config_hash[:12] in page and v2.config_hash[:12] in page
    assert MODEL in page and "contract only" in page
    runs = {c.version: c.run_count for c in response.context["configs"]}
    assert runs == {1: 2, 2: 0}
    # The newest two are compared by default: v1 had no model, v2 names one.
    assert response.context["old"] == v1 and response.context["new"] == v2
    assert ("add", f'+  "model": "{MODEL}",') in response.context["diff"]
    assert ("del", '-  "model": null,') in response.context["diff"]


def test_it_diffs_the_versions_chosen_as_a_partial(lead_client, rubric, lead):
    for policy in ("one", "two", "three"):
        config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(policy=policy), by=lead)

    response = lead_client.get(reverse("judges:config_list", args=[TEST_PROJECT, rubric.slug]), {"a": 1, "b": 3},
                               headers={"HX-Request": "true"})

    page = response.content.decode()
    assert page.lstrip().startswith('<div id="diff"')
    assert '-  &quot;policy&quot;: &quot;one&quot;,' in page and '+  &quot;policy&quot;: &quot;three&quot;,' in page


@pytest.mark.parametrize("versions", [1, 4, 12])
def test_it_lists_versions_in_constant_queries(lead_client, rubric, lead, django_assert_num_queries, versions):
    for i in range(versions):
        config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(policy=f"p{i}"), by=lead)
    # session, user, the project door's memberships (with their projects: the switcher too), rubric, the versions
    # with their run counts and authors, the versions chart's configs with their newest finished run (no run here:
    # no judgments to read; see calibration/test_charts.py)
    with django_assert_num_queries(6):
        lead_client.get(reverse("judges:config_list", args=[TEST_PROJECT, rubric.slug]))


def test_it_previews_the_exact_prompt_the_engine_sends_for_a_chosen_case(lead_client, rubric, dataset, lead):
    cases = make_cases(dataset, 3)
    spec = behavioral_spec(policy="No refunds <b>ever</b>.")
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    system, user = build_messages(engine_case(cases[1]), template=config.spec["prompt_template"],
                                  criteria=rubric.criteria, policy="No refunds <b>ever</b>.", output_kind="verdict")

    response = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk]),
                               {"preview_dataset": dataset.slug, "preview_case": cases[1].pk},
                               headers={"HX-Request": "true"})

    page = response.content.decode()
    assert escape(user) in page and escape(system) in page
    assert "<b>ever</b>" not in page  # case and policy text is escaped, never markup


def test_it_previews_unsaved_editor_fields_without_saving(lead_client, rubric, dataset):
    cases = make_cases(dataset, 3)
    data = form_data(policy="Draft policy text", prompt_template="Judge {answer} by {policy}.",
                     preview_dataset=dataset.slug, preview_case=cases[2].pk, action="preview")

    response = lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]), data,
                                headers={"HX-Request": "true"})

    page = response.content.decode()
    assert "Judge Order ORD-2 shipped yesterday. by Draft policy text." in page
    assert JudgeConfig.objects.count() == 0


def test_it_shows_the_spec_as_readable_fields_with_the_json_folded(lead_client, rubric, lead):
    spec = behavioral_spec(policy="Refunds within 30 days.\nNever <b>promise</b> more.",
                           prompt_template="Judge this.\n{criteria}\n{policy}\n{question}\n{answer}")
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)

    page = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk])).content.decode()

    assert 'data-testid="spec-fields"' in page
    assert "Refunds within 30 days.<br>Never &lt;b&gt;promise&lt;/b&gt; more." in page  # text, escaped
    assert '<pre class="prompt-text" data-testid="spec-prompt">Judge this.\n{criteria}' in page
    assert "key from <code>EVALHUB_JUDGE_API_KEY</code>" in page and "temperature</span> 0" in page
    assert '<details class="raw-spec"><summary>The whole spec as JSON</summary>' in page
    assert "names no key variable" not in page


def test_it_warns_when_a_behavioral_config_names_no_key_variable(lead_client, rubric, lead):
    keyless = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(api_key_env=None), by=lead)
    contract = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)

    page = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, keyless.pk])).content.decode()
    start = lead_client.get(reverse("judges:run_create", args=[TEST_PROJECT, keyless.pk])).content.decode()

    assert "names no key variable (api_key_env): its runs use the provider&#x27;s default OPENAI_API_KEY" in page
    assert "names no key variable" in start
    assert "names no key variable" not in lead_client.get(
        reverse("judges:config_detail", args=[TEST_PROJECT, contract.pk])).content.decode()  # no model, no key


def test_each_warning_shows_once_on_the_config_page_and_the_start_form(lead_client, rubric, lead):
    spec = behavioral_spec(model="gpt-4o-mini", api_key_env=None)  # an alias, and no key variable
    saved = lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]),
                             form_data(model="gpt-4o-mini", api_key_env=""), follow=True).content.decode()
    config = JudgeConfig.objects.get()
    assert config.spec["model"] == spec["model"] and not config.spec.get("api_key_env")

    pages = [saved, lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk])).content.decode(),
             lead_client.get(reverse("judges:run_create", args=[TEST_PROJECT, config.pk])).content.decode()]
    for page in pages:
        assert page.count("is an alias, not a pinned snapshot") == 1
        assert page.count("names no key variable") == 1


def test_the_editor_folds_the_sections_a_config_does_not_use(lead_client, rubric, lead):
    url = reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])
    config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    plain = lead_client.get(url).content.decode()
    for role in ("fallback", "second_opinion", "adjudicator"):
        assert f'<details class="card fold" data-testid="fold-{role}">' in plain  # folded
    assert '<details class="card fold" data-testid="fold-semantic">' in plain
    assert '<details class="card fold" data-testid="fold-contract">' in plain

    secondary = {"role": "fallback", "provider": "openai", "model": "gpt-4.1-2025-04-14"}
    config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(
        layers=["contract", "behavioral"], contract_checks=["answer_present"], secondary=secondary), by=lead)
    used = lead_client.get(url).content.decode()
    assert '<details class="card fold" data-testid="fold-fallback" open>' in used  # the older secondary, as it names
    assert '<details class="card fold" data-testid="fold-second_opinion">' in used
    assert '<details class="card fold" data-testid="fold-contract" open>' in used
    assert '<details class="card fold" data-testid="fold-semantic">' in used


def test_it_shows_a_contract_only_config_without_a_prompt(lead_client, rubric, lead):
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    page = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk])).content.decode()
    assert "this config sends no prompt and calls no model" in page
    assert config.config_hash in page


def test_it_shows_the_judges_index_to_leads(lead_client, rubric, lead):
    config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    make_user("other-lead", role="lead")
    response = lead_client.get(reverse("judges:judge_index", args=[TEST_PROJECT]))
    row = response.context["rubrics"][0]
    assert (row.slug, row.config_count, row.newest_version) == (rubric.slug, 1, 1)


@pytest.mark.parametrize(("template", "refusal"), [
    ("Judge {answer.foo}.", "unknown placeholder(s) answer.foo"),  # was a 500 (AttributeError)
    ("Judge {answer:>5000000}.", "placeholder {answer} may not carry a format spec"),  # was 5 MB of spaces
    ("Judge {answer!r}.", "placeholder {answer} may not carry a format spec"),
    ("Judge {answer[0]}.", "unknown placeholder(s) answer[0]"),
    ("Judge {0} and {}.", "unknown placeholder(s)"),
    ("Judge {answer.", "prompt_template: "),  # unbalanced
    ("Judge the question {question} alone.", "must show the judge the agent&#x27;s answer"),
])
def test_it_refuses_to_preview_a_template_the_save_would_refuse(lead_client, rubric, dataset, template, refusal):
    make_cases(dataset, 1)
    data = form_data(prompt_template=template, preview_dataset=dataset.slug, action="preview")
    url = reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])

    preview = lead_client.post(url, data, headers={"HX-Request": "true"})
    assert preview.status_code == 200
    assert len(preview.content) < 5_000
    assert "A save would refuse this template: prompt_template: " in preview.content.decode()
    assert refusal in preview.content.decode()

    saved = lead_client.post(url, {**data, "action": "save"})
    assert saved.status_code == 200 and refusal in saved.content.decode()  # the same refusal
    assert JudgeConfig.objects.count() == 0


def test_it_previews_a_template_without_the_answer_for_a_contract_only_draft(lead_client, rubric, dataset):
    make_cases(dataset, 1)
    data = form_data(layers=["contract"], prompt_template="Only {question}.", preview_dataset=dataset.slug,
                     action="preview")
    page = lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]), data).content.decode()
    # Not refused, though the answer is missing: a contract-only draft sends no prompt to a judge at all.
    assert "A save would refuse" not in page and "no prompt is sent to a judge model" in page


@pytest.mark.parametrize("versions", [1, 4])
def test_it_lists_versions_on_policies_in_constant_queries(lead_client, rubric, lead, django_assert_num_queries,
                                                           versions):
    for i in range(versions):
        policy_write(project=rubric.project, slug="returns", text=f"Returns, take {i}.", by=lead)
        spec = behavioral_spec(policy_ref={"slug": "returns", "version": i + 1})
        config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    # as above, and one query for the policies' newest versions (the "behind" marks)
    with django_assert_num_queries(7):
        page = lead_client.get(reverse("judges:config_list", args=[TEST_PROJECT, rubric.slug])).text
    assert page.count("policy behind") == versions - 1
