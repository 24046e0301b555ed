"""Judge configs are their rubric's project's (docs/projects.md): another project's lead gets 404 for a config, a
rubric's config pages and the editor, as for ones that do not exist; the judge index lists the project's rubrics
only; the prompt preview picks among the project's datasets only."""

from django.urls import reverse

from judges.models import JudgeConfig
from tests.conftest import TEST_PROJECT
from tests.judges.configs.test_views import form_data


def config_pages(world) -> list[tuple[str, list]]:
    return [("judges:config_detail", [world.config.pk]), ("judges:run_create", [world.config.pk]),
            ("judges:config_list", [world.rubric.slug]), ("judges:config_create", [world.rubric.slug])]


def test_another_projects_lead_gets_404_for_the_config_pages(client, our_world, their_world, other_lead):
    client.force_login(other_lead)
    for name, args in config_pages(our_world):
        assert client.get(reverse(name, args=[TEST_PROJECT, *args])).status_code == 404, name
    assert client.post(reverse("judges:config_create", args=[TEST_PROJECT, our_world.rubric.slug]),
                       form_data()).status_code == 404
    # Under their own project's address our config's id is no config of their_world.
    for name in ("judges:config_detail", "judges:run_create"):
        mine = client.get(reverse(name, args=[their_world.project.slug, our_world.config.pk]))
        missing = client.get(reverse(name, args=[their_world.project.slug, 999999]))
        assert mine.status_code == missing.status_code == 404
    assert JudgeConfig.objects.filter(rubric=our_world.rubric).count() == 1


def test_a_lead_gets_404_for_another_projects_config_under_their_own_project(lead_client, their_world):
    for name in ("judges:config_detail", "judges:run_create"):
        assert lead_client.get(reverse(name, args=[TEST_PROJECT, their_world.config.pk])).status_code == 404


def test_a_rubric_slug_names_the_projects_own_rubric(lead_client, our_world, their_world):
    """Both projects have a rubric "return-policy": the page shows our_world and our versions, never their_world."""
    response = lead_client.get(reverse("judges:config_list", args=[TEST_PROJECT, "return-policy"]))
    assert response.context["rubric"] == our_world.rubric
    assert [c.pk for c in response.context["configs"]] == [our_world.config.pk]
    lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, "return-policy"]), form_data(note="v2"))
    assert their_world.rubric.judge_configs.count() == 1 and our_world.rubric.judge_configs.count() == 2


def test_the_judge_index_lists_only_the_projects_rubrics(lead_client, our_world, their_world):
    their_world.rubric.slug = "their-own-rubric"
    their_world.rubric.save(update_fields=["slug"])
    response = lead_client.get(reverse("judges:judge_index", args=[TEST_PROJECT]))
    assert [r.pk for r in response.context["rubrics"]] == [our_world.rubric.pk]
    assert "their-own-rubric" not in response.content.decode()
    assert response.context["rubrics"][0].run_count == 1


def test_the_preview_picks_among_the_projects_datasets_only(lead_client, our_world, their_world):
    their_world.dataset.slug = "their-own-data"
    their_world.dataset.save(update_fields=["slug"])
    url = reverse("judges:config_create", args=[TEST_PROJECT, our_world.rubric.slug])
    assert "their-own-data" not in lead_client.get(url).content.decode()
    response = lead_client.post(url, form_data(action="preview", preview_dataset="their-own-data",
                                               preview_case=their_world.cases[1].pk), headers={"HX-Request": "true"})
    assert response.context["picker"].cases == [] and response.context["preview"].case is None
    assert their_world.cases[1].input not in response.content.decode()
