"""A monitored project: a rubric at observe whose CI judge is the stand-in provider, and a traffic dataset."""

from judges.configs.services import judge_config_save
from judges.models import RubricEvent
from labeling.importing.cases import cases_import_objects
from labeling.models import Dataset, Rubric

MODEL = "gpt-4o-mini-2024-07-18"
SPEC = {"layers": ["behavioral"], "provider": "openai", "model": MODEL, "base_url_env": "EVALHUB_JUDGE_OPENAI_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY", "timeout_s": 5}


def observed(*, project, lead, slug="prod"):
    """(dataset, rubric, config): the rubric at observe with the stand-in judge named for CI."""
    dataset = Dataset.objects.create(project=project, slug=slug, name="Production traffic")
    rubric = Rubric.objects.create(project=project, slug=f"{slug}-ships", name="Does it say when it ships?",
                                   criteria="Pass when the answer says when the order ships.")
    config = judge_config_save(rubric=rubric, by=lead, spec=dict(SPEC))
    RubricEvent.objects.create(rubric=rubric, kind=RubricEvent.Kind.PROMOTE, from_stage="draft", to_stage="observe",
                               config=config, reason="watch production", by=lead)
    Rubric.objects.filter(pk=rubric.pk).update(stage=Rubric.Stage.OBSERVE)
    rubric.refresh_from_db()
    return dataset, rubric, config


def ingest(dataset, prefix: str, count: int, *, ships=lambda i: i % 5 != 0) -> None:
    """`count` new cases; the stand-in (rule answer_contains "ships") passes those with `ships(i)`."""
    cases_import_objects(dataset=dataset, objects=[
        {"external_id": f"{prefix}{i:05}", "input": "Where is my order?",
         "output": f"Your order {prefix}{i} ships today." if ships(i) else f"Order {prefix}{i} is somewhere."}
        for i in range(count)
    ])
