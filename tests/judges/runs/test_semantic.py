"""Runs of a semantic config: the similarity on each judgment, embeddings cached in the database (a
second config version embeds nothing), and the `similarity` column exported and imported unchanged."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from judges.configs import services as config_services
from judges.models import CachedEmbedding, Judgment, Run
from judges.runs import services
from labeling.models import Case
from tests.judges.helpers import give_golden_answers, make_cases, semantic_spec


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.EVALHUB_CHUNK_CASES = 4


def start(config, dataset, lead, capture, repeats=2) -> Run:
    with capture(execute=True):
        run = services.run_start(config=config, dataset=dataset, repeats=repeats, concurrency=2, spend_cap_usd=None,
                                 by=lead)
    run.refresh_from_db()
    return run


def embedding_calls(fake) -> int:
    return fake.stats()["by_endpoint"].get("embeddings", 0)


def test_a_semantic_run_keeps_each_similarity_and_its_embeddings(
    eager, dataset, rubric, lead, fake_provider, django_capture_on_commit_callbacks
):
    give_golden_answers(make_cases(dataset, 6))
    config = config_services.judge_config_save(rubric=rubric, spec=semantic_spec(), by=lead)
    run = start(config, dataset, lead, django_capture_on_commit_callbacks)

    assert (run.status, run.done, run.not_evaluated) == ("finished", 12, 0)
    rows = list(Judgment.objects.filter(run=run).order_by("case__external_id", "repeat")
                .values_list("case__external_id", "outcome", "layer", "similarity"))
    # c000 and c003 have empty answers: similarity 0, a fail; the others share most words with their golden answer.
    assert [(eid, outcome) for eid, outcome, _, _ in rows[::2]] == [
        ("c000", "fail"), ("c001", "pass"), ("c002", "pass"), ("c003", "fail"), ("c004", "pass"), ("c005", "pass")]
    assert {layer for _, _, layer, _ in rows} == {"semantic"}
    assert rows[0][3] == 0.0 and all(0.5 <= s < 1 for _, outcome, _, s in rows if outcome == "pass")
    # Four answers and four golden answers embedded; the batch reads both chunks ahead: one call for all eight.
    assert CachedEmbedding.objects.count() == 8
    assert run.provider_calls == embedding_calls(fake_provider) == 1
    assert run.input_tokens > 0 and run.cache_hits == 0


def test_another_config_version_embeds_nothing_again(
    eager, dataset, rubric, lead, fake_provider, django_capture_on_commit_callbacks
):
    give_golden_answers(make_cases(dataset, 6))
    first = config_services.judge_config_save(rubric=rubric, spec=semantic_spec(), by=lead)
    start(first, dataset, lead, django_capture_on_commit_callbacks)
    calls = embedding_calls(fake_provider)
    stricter = config_services.judge_config_save(rubric=rubric, spec=semantic_spec(pass_at=0.95), by=lead)
    assert stricter.version == 2  # another config_hash: the judgment cache cannot answer

    run = start(stricter, dataset, lead, django_capture_on_commit_callbacks)

    assert embedding_calls(fake_provider) == calls
    assert run.provider_calls == 0 and run.cache_hits == 0
    assert set(Judgment.objects.filter(run=run).values_list("outcome", flat=True)) == {"fail"}


def test_embeddings_that_fail_leave_the_run_not_evaluated_with_the_reason(
    eager, dataset, rubric, lead, fake_provider, django_capture_on_commit_callbacks
):
    give_golden_answers(make_cases(dataset, 3))
    fake_provider.control(fault="500")
    config = config_services.judge_config_save(rubric=rubric, spec=semantic_spec(), by=lead)
    run = start(config, dataset, lead, django_capture_on_commit_callbacks, repeats=1)
    # c000's empty answer needs no embedding: similarity 0 fails it; the others could not be compared.
    rows = dict(Judgment.objects.filter(run=run).values_list("case__external_id", "error"))
    assert rows == {"c000": "", "c001": "server error", "c002": "server error"}
    assert not CachedEmbedding.objects.exists()
    reason = Judgment.objects.get(run=run, case__external_id="c001").reason
    assert reason.startswith("embeddings unavailable: server error: HTTP 500")


def _export(run_id: int, path) -> str:
    call_command("export_judgments", str(run_id), str(path), stdout=StringIO())
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("ext", ["jsonl", "csv"])
def test_the_similarity_column_exports_and_imports_unchanged(
    eager, tmp_path, dataset, rubric, lead, fake_provider, django_capture_on_commit_callbacks, ext
):
    give_golden_answers(make_cases(dataset, 4))
    config = config_services.judge_config_save(rubric=rubric, spec=semantic_spec(), by=lead)
    run = start(config, dataset, lead, django_capture_on_commit_callbacks)

    exported = _export(run.pk, tmp_path / f"run.{ext}")
    out = StringIO()
    call_command("import_judgments", dataset.slug, str(tmp_path / f"run.{ext}"), rubric=rubric.slug, stdout=out)
    imported = int(out.getvalue().strip())
    again = _export(imported, tmp_path / f"again.{ext}")

    assert exported == again
    original = dict(Judgment.objects.filter(run=run).values_list("case__external_id", "similarity"))
    copied = dict(Judgment.objects.filter(run_id=imported).values_list("case__external_id", "similarity"))
    assert copied == original and None not in original.values()
    if ext == "jsonl":
        first = json.loads(exported.splitlines()[0])
        assert first["similarity"] == original["c000"] == 0.0
        assert first["judge"] == "text-embedding-3-small"  # the semantic layer decided
    else:
        assert exported.splitlines()[0] == "external_id,repeat,verdict,scores,similarity,reason,judge"


@pytest.mark.parametrize(
    ("ext", "text", "message"),
    [
        ("jsonl", '{"external_id": "c000", "repeat": 1, "verdict": "pass", "similarity": 1.5}\n', "not 1.5"),
        ("jsonl", '{"external_id": "c000", "repeat": 1, "verdict": "pass", "similarity": "high"}\n', "not 'high'"),
        ("jsonl", '{"external_id": "c000", "repeat": 1, "verdict": "pass", "similarity": true}\n', "not True"),
        ("csv", "external_id,repeat,verdict,similarity\nc000,1,pass,high\n", "not 'high'"),
    ],
)
def test_it_refuses_a_similarity_that_is_not_a_cosine(tmp_path, dataset, rubric, lead, ext, text, message):
    make_cases(dataset, 1)
    path = tmp_path / f"bad.{ext}"
    path.write_text(text, encoding="utf-8")
    err = StringIO()
    with pytest.raises(CommandError, match="rejected with 1 error"):
        call_command("import_judgments", dataset.slug, str(path), rubric=rubric.slug, stdout=StringIO(), stderr=err)
    [line] = err.getvalue().splitlines()
    assert line.startswith(f"line {1 + (ext == 'csv')}: similarity: must be a number from -1 to 1")
    assert line.endswith(message)
    assert not Run.objects.exists()


def test_the_estimate_of_a_semantic_run_counts_its_embeddings(dataset, rubric, lead):
    from decimal import Decimal

    from judges.models import ModelPrice
    from judges.runs.selectors import run_estimate

    cases = make_cases(dataset, 4)
    give_golden_answers(cases)
    config = config_services.judge_config_save(rubric=rubric, spec=semantic_spec(), by=lead)
    unpriced = run_estimate(config=config, dataset=dataset, repeats=3)
    assert (unpriced.cost_usd, unpriced.missing_prices) == (None, ["text-embedding-3-small"])
    chars = sum(len(c.output) + len(c.golden_answer) for c in cases)
    assert unpriced.embedding_tokens == round(chars / 4)  # once, whatever the repeats
    ModelPrice.objects.create(model="text-embedding-3-small", input_per_mtok=Decimal("1000"),
                              output_per_mtok=Decimal(0), updated_by=lead)
    priced = run_estimate(config=config, dataset=dataset, repeats=3)
    assert priced.cost_usd == (Decimal(priced.embedding_tokens) * 1000 / 1_000_000).quantize(Decimal("0.0001"))
    assert "The semantic layer embeds each answer and reference once" in priced.notes[0]


def test_the_workers_batch_judges_each_case_as_the_one_case_path_does_and_again_from_its_cache(
    eager, dataset, rubric, lead, fake_provider, django_capture_on_commit_callbacks, monkeypatch
):
    from judges.configs.cases import engine_case
    from judges.engine import judge_case
    from judges.runs import worker

    monkeypatch.setattr(worker, "READ_AHEAD_CASES", 4)  # two chunks of 4 a group: the 10 cases span three groups
    cases = make_cases(dataset, 10)
    give_golden_answers(cases[:7])  # the last three have no reference: not evaluated, "no reference"
    for i, case in enumerate(cases):  # answers further and further from their golden answer: each its own similarity
        case.output = case.output and case.output + " Tracking follows by mail" * (i % 4)
    Case.objects.bulk_update(cases, ["output"])
    spec = {**semantic_spec(), "layers": ["contract", "semantic"], "contract_checks": ["answer_present"]}
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    first = start(config, dataset, lead, django_capture_on_commit_callbacks, repeats=1)
    again = start(config, dataset, lead, django_capture_on_commit_callbacks, repeats=1)

    def rows(run):
        return {j.case.external_id: (j.outcome, j.reason, j.layer, j.similarity, j.checks, j.error)
                for j in Judgment.objects.filter(run=run).select_related("case")}

    alone = {}
    for case in dataset.cases.all():
        j = judge_case(engine_case(case), config.spec, 1)
        alone[case.external_id] = (j.outcome, j.reason, j.layer, j.similarity, j.checks, j.error)
    assert {o for o, *_ in alone.values()} == {"pass", "fail", "not_evaluated"}  # every kind of verdict
    assert rows(first) == alone
    assert rows(again) == alone
    again.refresh_from_db()
    # What was evaluated came from the cache; what was not is asked again (and still has no reference).
    assert again.cache_hits == sum(o != "not_evaluated" for o, *_ in alone.values()) and again.provider_calls == 0


def test_a_windows_stored_embeddings_are_its_current_groups_and_the_new_ones_until_saved(project):
    import numpy as np

    from judges.runs.embeddings import StoredEmbeddings, embeddings_save

    a, b, c = "a" * 64, "b" * 64, "c" * 64
    stored = StoredEmbeddings()
    stored.preload({a: np.ones(3)})
    stored.preload({b: np.ones(3)})  # the next group's: the last group's are not kept for the rest of the window
    assert stored.get(a) is None and stored.get(b)["vector"].tolist() == [1.0, 1.0, 1.0]
    stored.put(c, {"vector": np.full(3, 2.0)})
    assert stored.get(c)["vector"].tolist() == [2.0, 2.0, 2.0]  # the engine may ask again before it is saved
    embeddings_save(embeddings=stored, project_id=project.pk)
    assert stored.get(c) is None and CachedEmbedding.objects.filter(project=project, key=c).exists()


def test_a_run_whose_engine_keeps_no_vector_it_is_done_with_still_embeds_each_text_once(
    eager, dataset, rubric, lead, fake_provider, django_capture_on_commit_callbacks, monkeypatch
):
    from judges.engine import embeddings as engine_embeddings
    from judges.runs import worker

    monkeypatch.setattr(engine_embeddings, "KEPT_DONE", 0)  # a vector goes as soon as no waiting case holds it
    monkeypatch.setattr(worker, "READ_AHEAD_CASES", 4)  # one chunk of 4 a group: the 12 cases span three groups
    cases = make_cases(dataset, 12)
    for case in cases:
        case.golden_answer = "Every order ships within two days."  # one reference all cases share
    Case.objects.bulk_update(cases, ["golden_answer"])
    config = config_services.judge_config_save(rubric=rubric, spec=semantic_spec(), by=lead)
    run = start(config, dataset, lead, django_capture_on_commit_callbacks)

    assert (run.status, run.done) == ("finished", 24)
    answers = {case.output for case in cases if case.output}
    texts = sum(r["inputs"] for r in fake_provider.requests() if r["endpoint"] == "embeddings")
    assert texts == len(answers) + 1 == CachedEmbedding.objects.count()
