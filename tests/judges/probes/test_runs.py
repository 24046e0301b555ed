"""Bias probes through the real run machinery: the engine, the fake provider over HTTP, chunks, cache.

The fake provider's rule decides every verdict from the request it receives (the prompt's sections),
never from a list of replies; each test works out which cases must move from the cases themselves.
"""

import pytest

from judges.calibration.selectors import run_figures, stale_reasons
from judges.configs import services as config_services
from judges.configs.cases import engine_case
from judges.models import Judgment, Run
from judges.probes.selectors import probe_figures
from judges.probes.services import probes_start
from judges.runs import services
from judges.runs.services import RunError
from judges.runs.variants import make_variant
from labeling.models import Case, Label, case_split, labeled_content_hash
from tests.judges.helpers import behavioral_spec

LONG = (
    "I checked your order in our system and read the store's return policy for this product line carefully, "
    "including the exceptions for sale items and worn goods, before writing back to you today. "
)
ANSWERS = [
    "Returns are accepted within 30 days with the receipt.",  # short, right
    "No.",  # short, wrong
    LONG + "You may return it within 30 days.",  # long, right
    LONG + "Sadly it cannot be returned at all.",  # long, wrong
]
LENGTH_RULE = {"kind": "answer_min_length", "chars": 200}
KEYWORD = "30 days"


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.EVALHUB_CHUNK_CASES = 4


@pytest.fixture
def world(db, dataset, rubric, reviewer, lead):
    """14 cases: 12 labeled (pass and fail alternate), 2 without a label (no human verdict)."""
    cases = []
    for i in range(14):
        external_id, question, output = f"c{i:03}", f"Can I return order {i}?", ANSWERS[i % 4]
        cases.append(Case(
            dataset=dataset, external_id=external_id, input=question, output=output, category="policy",
            split=case_split(external_id), content_hash=labeled_content_hash(input=question, output=output, trace={}),
        ))
    cases = Case.objects.bulk_create(cases)
    humans = {}
    for i, case in enumerate(cases[:12]):
        humans[case.pk] = "pass" if i % 3 else "fail"
        Label.objects.create(case=case, rubric=rubric, reviewer=reviewer, verdict=humans[case.pk],
                             content_hash=case.content_hash)
    return {"cases": cases, "humans": humans}


def start_run(capture, fake_provider, rule, *, rubric, dataset, lead) -> Run:
    fake_provider.control(rule=rule)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    with capture(execute=True):
        run = services.run_start(config=config, dataset=dataset, repeats=2, concurrency=3, spend_cap_usd=None, by=lead)
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.not_evaluated == 0
    return run


def start_probes(capture, run, kinds, lead) -> list[Run]:
    with capture(execute=True):
        probes = probes_start(run=run, kinds=kinds, by=lead)
    for probe in probes:
        probe.refresh_from_db()
        assert probe.status == Run.Status.FINISHED and probe.not_evaluated == 0
    return probes


def labeled(world) -> list[Case]:
    return [case for case in world["cases"] if case.pk in world["humans"]]


# Each biased judge, and the cases it must move, worked out from the cases (not from any reply).
BIASED = {
    "verbosity": (LENGTH_RULE, lambda case, human: len(case.output.strip()) < LENGTH_RULE["chars"]),
    "sycophancy": (
        {"kind": "any", "rules": [{"kind": "input_contains", "text": "loyal customer"},
                                  {"kind": "answer_contains", "text": KEYWORD}]},
        lambda case, human: KEYWORD not in case.output,
    ),
    "injection": (
        {"kind": "obeys_injection", "rule": {"kind": "answer_contains", "text": KEYWORD}},
        lambda case, human: human == "fail" and KEYWORD not in case.output,
    ),
}


@pytest.mark.parametrize("kind", list(BIASED))
def test_a_biased_judge_moves_exactly_the_cases_its_bias_reaches(
    kind, eager, world, fake_provider, rubric, dataset, lead, django_capture_on_commit_callbacks
):
    rule, moves = BIASED[kind]
    run = start_run(django_capture_on_commit_callbacks, fake_provider, rule, rubric=rubric, dataset=dataset, lead=lead)
    [probe] = start_probes(django_capture_on_commit_callbacks, run, [kind], lead)

    probed = [c for c in labeled(world) if kind != "injection" or world["humans"][c.pk] == "fail"]
    assert probe.parent_id == run.pk and probe.probe == kind and probe.config_id == run.config_id
    assert probe.total == len(probed) * 2 and probe.repeats == 2
    expected = sorted(c.external_id for c in probed if moves(c, world["humans"][c.pk]))
    assert expected  # the world is built so that each bias has something to move
    figures = probe_figures(run=run)["probes"][kind]
    assert [m["external_id"] for m in figures["moved_cases"]] == expected
    assert figures["compared"] == len(probed)
    assert figures["moved"] == len(expected) and figures["moved_share"] == pytest.approx(len(expected) / len(probed))
    assert all(m["parent"] == "fail" and m["probe"] == "pass" for m in figures["moved_cases"])
    if kind == "injection":
        assert figures["moved_to_pass"] == len(expected)
    # The same figures reach the run's calibration figures, and the promotion rule's number.
    assert run_figures(run=run)["probe_moved"] == pytest.approx(len(expected) / len(probed))


def test_an_unbiased_judge_moves_nothing(
    eager, world, fake_provider, rubric, dataset, lead, django_capture_on_commit_callbacks
):
    # The verdict rests on what the answer says, which every variant keeps.
    rule = {"kind": "answer_contains", "text": KEYWORD}
    run = start_run(django_capture_on_commit_callbacks, fake_provider, rule, rubric=rubric, dataset=dataset, lead=lead)
    probes = start_probes(django_capture_on_commit_callbacks, run, ["verbosity", "sycophancy", "injection"], lead)

    assert [p.probe for p in probes] == ["verbosity", "sycophancy", "injection"]
    figures = run_figures(run=run)
    fails = sum(1 for v in world["humans"].values() if v == "fail")
    assert {k: (f["compared"], f["moved"]) for k, f in figures["probes"].items()} == {
        "verbosity": (12, 0), "sycophancy": (12, 0), "injection": (fails, 0),
    }
    assert figures["probe_moved"] == 0


def test_each_judgment_keeps_the_variant_it_judged_and_the_dataset_does_not_change(
    eager, world, fake_provider, rubric, dataset, lead, django_capture_on_commit_callbacks
):
    run = start_run(django_capture_on_commit_callbacks, fake_provider, LENGTH_RULE, rubric=rubric, dataset=dataset,
                    lead=lead)
    before = list(Case.objects.filter(dataset=dataset).order_by("pk").values())
    probes = start_probes(django_capture_on_commit_callbacks, run, ["verbosity", "sycophancy", "injection"], lead)

    assert list(Case.objects.filter(dataset=dataset).order_by("pk").values()) == before  # content_changed_at too
    run.refresh_from_db()
    assert stale_reasons(run=run) == []
    # What the judge was sent is the variant (the fake echoes a hash of the answer it read).
    requests = fake_provider.requests()
    assert any("loyal customer" in r["prompt"] for r in requests)
    for probe in probes:
        for judgment in Judgment.objects.filter(run=probe).select_related("case"):
            human = world["humans"][judgment.case_id]
            assert judgment.variant == make_variant(probe.probe, engine_case(judgment.case), human)
    assert not Judgment.objects.filter(run=run, variant__isnull=False).exists()


def test_a_probe_run_again_is_served_from_the_cache(
    eager, world, fake_provider, rubric, dataset, lead, django_capture_on_commit_callbacks
):
    run = start_run(django_capture_on_commit_callbacks, fake_provider, LENGTH_RULE, rubric=rubric, dataset=dataset,
                    lead=lead)
    [first] = start_probes(django_capture_on_commit_callbacks, run, ["verbosity"], lead)
    [again] = start_probes(django_capture_on_commit_callbacks, run, ["verbosity"], lead)
    assert first.provider_calls == first.total
    assert again.provider_calls == 0 and again.cache_hits == again.total
    assert probe_figures(run=run)["probes"]["verbosity"]["run"] == again.pk  # the newest counts


def test_it_probes_only_cases_the_run_judged_that_have_a_human_verdict(
    eager, world, fake_provider, rubric, dataset, reviewer, lead, django_capture_on_commit_callbacks
):
    run = start_run(django_capture_on_commit_callbacks, fake_provider, LENGTH_RULE, rubric=rubric, dataset=dataset,
                    lead=lead)
    late = Case.objects.create(dataset=dataset, external_id="late", input="q", output="a", split=case_split("late"),
                               content_hash=labeled_content_hash(input="q", output="a", trace={}))
    Label.objects.create(case=late, rubric=rubric, reviewer=reviewer, verdict="fail", content_hash=late.content_hash)
    [probe] = start_probes(django_capture_on_commit_callbacks, run, ["injection"], lead)
    probed = set(Judgment.objects.filter(run=probe).values_list("case_id", flat=True))
    assert probed == {pk for pk, human in world["humans"].items() if human == "fail"}
    # The human verdicts the variants were made from are kept with the chunks.
    assert all(set(chunk.human_verdicts.values()) == {"fail"} for chunk in probe.chunks.all())


def test_what_cannot_start_is_refused_and_nothing_is_written(
    eager, world, fake_provider, rubric, dataset, lead, django_capture_on_commit_callbacks
):
    run = start_run(django_capture_on_commit_callbacks, fake_provider, LENGTH_RULE, rubric=rubric, dataset=dataset,
                    lead=lead)
    with pytest.raises(RunError, match="at least one"):
        probes_start(run=run, kinds=[], by=lead)
    with pytest.raises(RunError, match="Unknown probe"):
        probes_start(run=run, kinds=["verbosity", "length"], by=lead)
    # No human-failed case: the injection probe has nothing to judge, and the verbosity probe asked with
    # it is not started either (all or nothing).
    Label.objects.filter(rubric=rubric, verdict="fail").update(verdict="pass")
    with pytest.raises(RunError, match="no case of run .* has a human verdict of fail"):
        probes_start(run=run, kinds=["verbosity", "injection"], by=lead)
    assert not Run.objects.filter(parent=run).exists()

    [probe] = probes_start(run=run, kinds=["verbosity"], by=lead)  # queued, not run: no on_commit here
    with pytest.raises(RunError, match="still at work"):
        probes_start(run=run, kinds=["verbosity"], by=lead)
    with pytest.raises(RunError, match="itself a probe"):
        probes_start(run=probe, kinds=["sycophancy"], by=lead)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    with pytest.raises(RunError, match="once it has finished"):
        probes_start(run=run, kinds=["sycophancy"], by=lead)
