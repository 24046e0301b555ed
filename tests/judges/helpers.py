"""What the judges page tests share: cases, config specs, and starting runs that work eagerly."""

from labeling.models import Case, case_split, labeled_content_hash

MODEL = "gpt-4o-mini-2024-07-18"
CONTRACT_SPEC = {"layers": ["contract"], "contract_checks": ["answer_present", "expected_tool"]}


def behavioral_spec(**extra) -> dict:
    """A judge on the fake provider (the `fake_provider` fixture sets the variables it names)."""
    return {
        "layers": ["behavioral"], "provider": "openai", "model": MODEL, "base_url_env": "EVALHUB_JUDGE_OPENAI_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY", "timeout_s": 5, "max_attempts": 1,
        "params": {"temperature": 0, "max_tokens": 100}, **extra,
    }


def make_cases(dataset, count: int, *, prefix: str = "c") -> list[Case]:
    """`count` distinct cases; every third one has an empty answer, which the contract fails."""
    cases = []
    for i in range(count):
        external_id = f"{prefix}{i:03}"
        question = f"Where is my order ORD-{i}?"
        output = "" if i % 3 == 0 else f"Order ORD-{i} shipped yesterday."
        trace = {"toolCalls": [{"name": "lookup_order", "argument": {"order_id": f"ORD-{i}"}, "result": "ok"}]}
        cases.append(Case(
            dataset=dataset, external_id=external_id, input=question, output=output, trace=trace,
            expected_tool="lookup_order", category="tools" if i % 2 else "policy", split=case_split(external_id),
            content_hash=labeled_content_hash(input=question, output=output, trace=trace),
        ))
    return Case.objects.bulk_create(cases)


EMBEDDING_MODEL = "text-embedding-3-small"


def semantic_spec(**semantic) -> dict:
    """A semantic-only config on the fake provider's stand-in embeddings (pass at 0.5 unless told)."""
    block = {
        "provider": "openai-compatible", "model": EMBEDDING_MODEL, "base_url_env": "EVALHUB_JUDGE_OPENAI_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY", "pass_at": 0.5, **semantic,
    }
    return {"layers": ["semantic"], "semantic": block, "timeout_s": 5, "max_attempts": 1}


def give_golden_answers(cases: list[Case]) -> None:
    """Golden answers for make_cases' cases: its answers share most words with them, its empty ones none."""
    for case in cases:
        number = case.external_id[1:]
        case.golden_answer = f"ORD-{int(number)} shipped yesterday and arrives soon."
    Case.objects.bulk_update(cases, ["golden_answer"])


def recounted_tallies(run) -> dict[int, tuple]:
    """{case_id: (judged, passes, fails, not_evaluated, lowest similarity, slowest ms)} counted from the
    run's judgments here, the way the run page grouped them before the tallies were kept."""
    from django.db.models import Count, Max, Min, Q

    from judges.models import Judgment

    return {
        row["case_id"]: (row["judged"], row["passes"], row["fails"], row["not_evaluated"], row["similarity"],
                         row["slowest"])
        for row in Judgment.objects.filter(run=run).values("case_id").annotate(
            judged=Count("id"), passes=Count("id", filter=Q(outcome="pass")),
            fails=Count("id", filter=Q(outcome="fail")),
            not_evaluated=Count("id", filter=Q(outcome="not_evaluated")), similarity=Min("similarity"),
            slowest=Max("latency_ms")).order_by()
    }


def stored_tallies(run) -> dict[int, tuple]:
    """The run's RunCaseTally rows, in recounted_tallies' shape."""
    from judges.models import RunCaseTally

    return {t.case_id: (t.judged, t.passes, t.fails, t.not_evaluated, t.lowest_similarity, t.slowest_ms)
            for t in RunCaseTally.objects.filter(run=run)}


def project_world(project, lead, *, cases: int = 3):
    """A project's own rubric, dataset, contract config and finished run (its judgments made by the contract), with
    the slugs the tests' project uses too: the same names in two projects are two different things."""
    from types import SimpleNamespace

    from judges.configs.services import judge_config_save
    from judges.models import Run
    from labeling.models import Dataset, Rubric
    from tests.judges.report_factories import make_run

    rubric = Rubric.objects.create(project=project, slug="return-policy", name="Returns",
                                   criteria="Pass when the answer states the 30-day return window correctly.")
    dataset = Dataset.objects.create(project=project, slug="store-support", name="Store support")
    made = make_cases(dataset, cases)
    config = judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    run = make_run(config, dataset, lead, {case: ["pass", "pass"] for case in made}, status=Run.Status.FINISHED)
    return SimpleNamespace(project=project, rubric=rubric, dataset=dataset, cases=made, config=config, run=run)
