"""The store-support project's judge runs: a contract-only config and a semantic one, each with a finished run,
made by the real machinery, and the behavioral story after them. The helpers here (a config's run judged in this
process, the scripted stand-in, the CI check) serve the code-review project's demo too (evalhub/demo/code_review.py).

Contract checks need no provider, so a new user sees a real run (real engine, real judgments) without a
key. The semantic run is judged through the scripted stand-in (judges.testing.fake_provider, started
here for the run and stopped after): its embeddings are a hashed bag of words and its judge a rule,
not models, and the config's model names say so. The runs are judged here, synchronously, through the
same services a worker calls.
"""

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from evalhub.demo.labeling import DATASET_SLUG, RETURNS_POLICY_SLUG
from evalhub.demo.projects import ADMIN
from evalhub.demo.synthetic import CASE_WRITER_MODEL, stand_in_case_writer
from evalhub.models import Project
from judges.configs import services as config_services
from judges.configs.cases import engine_case
from judges.estimates.services import audit_sample_draw
from judges.gate.config import parse_gate_config
from judges.gate.judging import judge_all
from judges.gate.posting import CaseSource, chunk_body
from judges.models import CiResult, JudgeConfig, ModelPrice, Run, RunChunk
from judges.probes.services import probes_start
from judges.promotion import services as promotion_services
from judges.promotion.ci_results import ci_results_store
from judges.promotion.gate_config import gate_config
from judges.runs import services, worker
from judges.runs.ci_cases import ci_cases_store
from judges.runs.variants import PROBE_KINDS
from judges.testing.fake_provider import FakeProvider
from labeling.models import Dataset, Rubric

DEMO_NOTE = "demo: contract checks only, no model called"
SEMANTIC_DEMO_NOTE = "demo: semantic layer and judge through the scripted stand-in (not models)"
# The variables the semantic demo config names; set them to a running stand-in to run it again.
DEMO_URL_ENV, DEMO_KEY_ENV = "EVALHUB_JUDGE_DEMO_URL", "EVALHUB_JUDGE_DEMO_KEY"
SEMANTIC_DEMO_SPEC = {
    "layers": ["semantic", "behavioral"],
    "semantic": {
        "provider": "openai-compatible", "model": "stand-in-embeddings", "model_family": "stand-in",
        "base_url_env": DEMO_URL_ENV, "api_key_env": DEMO_KEY_ENV, "pass_at": 0.6, "fail_below": 0.2,
    },
    "provider": "openai-compatible", "model": "stand-in-judge", "model_family": "stand-in",
    "base_url_env": DEMO_URL_ENV, "api_key_env": DEMO_KEY_ENV, "params": {"temperature": 0, "max_tokens": 300},
    "timeout_s": 10, "max_attempts": 2,
}
# The stand-in judge's rule for the cases between the thresholds: most of the golden answer's words present.
SEMANTIC_DEMO_RULE = {"kind": "golden_overlap", "min": 0.5}
# Two repeats, as promotion asks: contract checks are deterministic, so they never flip.
DEMO_REPEATS = 2
DEMO_CHECKS = [
    "answer_present",
    "expected_tool",
    "expected_tool_argument",
    "no_tool_when_none_expected",
    "expected_source",
]


def demo_run(*, rubric: Rubric, dataset: Dataset) -> Run | None:
    return (
        Run.objects.filter(config__rubric=rubric, config__note=DEMO_NOTE, dataset=dataset, parent__isnull=True)
        .order_by("-created_at")
        .first()
    )


def create_demo_run(*, rubric: Rubric, dataset: Dataset, by) -> Run:
    """The demo config of `rubric` and a finished run of it over `dataset`; the existing one if made before."""
    return noted_run(rubric=rubric, dataset=dataset, by=by, note=DEMO_NOTE,
                     spec={"layers": ["contract"], "contract_checks": DEMO_CHECKS})


def noted_run(*, rubric: Rubric, dataset: Dataset, by, note: str, spec: dict) -> Run:
    """The first finished run over `dataset` of `rubric`'s config saved with `note`; made now (a new config version
    of `spec`, judged in this process) when there is none. Judging through the stand-in needs `stand_in()`."""
    _refuse_other_project(rubric=rubric, dataset=dataset)  # before a config version is saved for nothing
    existing = _noted_run(rubric=rubric, dataset=dataset, note=note)
    if existing is not None:
        return existing
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=by, note=note)
    return _judge_here(_create_run(config=config, dataset=dataset, by=by))


def _refuse_other_project(*, rubric: Rubric, dataset: Dataset) -> None:
    """What run_start refuses, for the demo's runs too: a rubric judges only its own project's datasets."""
    if rubric.project_id != dataset.project_id:
        raise services.RunError(f"The demo's {rubric.slug} judge cannot run on {dataset.slug}: another project's "
                                "dataset.")


def _judge_here(run: Run) -> Run:
    # What a worker does, in this process, window after window until the run is finished.
    worker.run_work_here(run_id=run.pk)
    run.refresh_from_db()
    return run


# The stand-in's rules, per model name of the demo configs (any other model gets SEMANTIC_DEMO_RULE):
# a lenient judge that passes everything (its evidence is refused: it never fails an answer), a strict
# one close to the reviewers, and a second opinion that disagrees now and then (contested judgments).
LENIENT_MODEL, STRICT_MODEL, SECOND_MODEL = "stand-in-judge-lenient", "stand-in-judge-strict", "stand-in-second-opinion"
_STRICT_RULE = {"kind": "any", "rules": [
    {"kind": "category_in", "categories": ["tools", "shipping"]},  # no return policy at stake
    {"kind": "golden_overlap", "min": 0.6},
]}
# Judge improvement in the demo (docs/improving.md): the scripted editor proposes this guidance among decoys,
# and the lenient judge, given it in its instructions, judges as the strict one does. Both are scripts.
DEMO_EDITOR_MODEL = "stand-in-editor"
DEMO_GUIDANCE = ("Pass an answer about a return only when it states the policy's terms as the golden answer does; "
                 "a friendly answer that leaves them out fails.")
DEMO_EDITOR_SCRIPT = {"proposals": [
    {"name": "be concise", "change": "guidance", "guidance": "Prefer short answers.", "examples": [],
     "why": "scripted decoy", "criteria_note": None},
    {"name": "state the policy's terms", "change": "guidance", "guidance": DEMO_GUIDANCE, "examples": [],
     "why": "scripted: the judge passed answers that leave out the return terms the reviewers failed",
     "criteria_note": "The criteria do not say whether an answer must name every term of the policy."},
    {"name": "reward a friendly tone", "change": "guidance", "guidance": "Reward a friendly tone.", "examples": [],
     "why": "scripted decoy", "criteria_note": None},
]}
# The code-review project's behavioral judge (evalhub/demo/code_review.py): most of the golden answer's words.
CODE_JUDGE_MODEL = "stand-in-code-judge"
STAND_IN_RULES = {
    # Passes everything, unless its instructions hold DEMO_GUIDANCE: then it judges as the strict one.
    LENIENT_MODEL: {"kind": "any", "rules": [
        {"kind": "not", "rule": {"kind": "prompt_contains", "text": DEMO_GUIDANCE}}, _STRICT_RULE,
    ]},
    STRICT_MODEL: _STRICT_RULE,
    SECOND_MODEL: {"kind": "any", "rules": [
        {"kind": "category_in", "categories": ["tools", "shipping"]},
        {"kind": "golden_overlap", "min": 0.5},  # a little more lenient: it contests a few verdicts
    ]},
    CODE_JUDGE_MODEL: {"kind": "golden_overlap", "min": 0.5},
}


# Every model the demo's configs name. The stand-in costs nothing: each is priced at $0 per million tokens,
# a known price (so runs show their cost and `evalhub-gate check --max-cost-usd` can keep its cap).
STAND_IN_MODELS = ("stand-in-embeddings", "stand-in-judge", LENIENT_MODEL, STRICT_MODEL, SECOND_MODEL,
                   DEMO_EDITOR_MODEL, CASE_WRITER_MODEL, CODE_JUDGE_MODEL)


def load_demo_prices(*, by_username: str = ADMIN) -> int:
    """load_demo's call: the stand-in models' prices, where the price table has none; how many it added. Prices
    are instance-wide, so the instance admin sets them."""
    admin = get_user_model().objects.get(username=by_username)
    added = 0
    for model in STAND_IN_MODELS:
        _, created = ModelPrice.objects.get_or_create(
            model=model, defaults={"input_per_mtok": 0, "output_per_mtok": 0, "updated_by": admin}
        )
        added += created
    return added


def stand_in_configure(fake: FakeProvider) -> None:
    """Give a running stand-in the demo's rules (scripts/start.sh's, or one started for load_demo)."""
    fake.control(rule=SEMANTIC_DEMO_RULE)
    for model, rule in STAND_IN_RULES.items():
        fake.control(model=model, rule=rule)
    fake.control(model=DEMO_EDITOR_MODEL, script=[DEMO_EDITOR_SCRIPT])
    stand_in_case_writer(fake)


@contextmanager
def stand_in() -> Iterator[None]:
    """The scripted stand-in running, with the demo's rules, and the demo configs' variables naming it.

    scripts/start.sh starts one for the whole session and sets the variables (so the worker can run the
    demo configs again); without them, one is started here for the block's length.
    """
    if os.environ.get(DEMO_URL_ENV):
        stand_in_configure(FakeProvider.attach(os.environ[DEMO_URL_ENV].removesuffix("/v1")))
        yield
        return
    saved = {name: os.environ.get(name) for name in (DEMO_URL_ENV, DEMO_KEY_ENV)}
    with FakeProvider() as fake:
        stand_in_configure(fake)
        os.environ[DEMO_URL_ENV], os.environ[DEMO_KEY_ENV] = fake.openai_base_url, "stand-in-needs-no-key"
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def with_policy(spec: dict, *, project: Project, slug: str) -> dict:
    """A judge's spec referencing the newest version of the project's policy document `slug`, so the judge is
    given the very text the agent reads (and a newer version makes its runs stale)."""
    newest = project.policies.filter(slug=slug).order_by("-version").first()
    return {**spec, "policy_ref": {"slug": slug, "version": newest.version}} if newest else spec


def semantic_demo_run(*, rubric: Rubric, dataset: Dataset) -> Run | None:
    return (
        Run.objects.filter(config__rubric=rubric, config__note=SEMANTIC_DEMO_NOTE, dataset=dataset,
                           parent__isnull=True)
        .order_by("-created_at")
        .first()
    )


def create_semantic_demo_run(*, rubric: Rubric, dataset: Dataset, by) -> Run:
    """A semantic config of `rubric` (embeddings, then a judge between the thresholds) and a finished run of
    it over `dataset`, through the stand-in; the existing one if made before. The threshold explorer of
    its report has similarities to replay."""
    existing = semantic_demo_run(rubric=rubric, dataset=dataset)
    if existing is not None:
        return existing
    spec = with_policy(SEMANTIC_DEMO_SPEC, project=rubric.project, slug=RETURNS_POLICY_SLUG)
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=by, note=SEMANTIC_DEMO_NOTE)
    with stand_in():
        return _judge_here(_create_run(config=config, dataset=dataset, by=by))


def _create_run(*, config: JudgeConfig, dataset: Dataset, by) -> Run:
    """The run and its chunks as services.run_start makes them, minus queueing work for a worker.

    run_start queues a task on commit; load_demo may run before any worker or broker is up (and a
    Redis broker that is down would stall it), and this run is judged right here anyway. It refuses what
    run_start refuses for the demo's runs: a rubric judges only its own project's datasets.
    """
    _refuse_other_project(rubric=config.rubric, dataset=dataset)
    with transaction.atomic():
        case_ids = list(dataset.cases.order_by("id").values_list("id", flat=True))
        if not case_ids:
            raise services.RunError(f"The dataset {dataset.slug} has no cases.")
        run = Run.objects.create(
            config=config, dataset=dataset, repeats=DEMO_REPEATS, concurrency=4, created_by=by,
            total=len(case_ids) * DEMO_REPEATS,
        )
        size = settings.EVALHUB_CHUNK_CASES
        RunChunk.objects.bulk_create(
            RunChunk(run=run, index=i, case_ids=case_ids[start : start + size])
            for i, start in enumerate(range(0, len(case_ids), size))
        )
    return run


def load_demo_run(*, project: Project, dataset_slug: str = DATASET_SLUG, rubric_slug: str = "tool-use",
                  by_username: str = "lena") -> Run:
    """load_demo's call: the demo run of the tool-use rubric on the demo dataset, by the demo lead."""
    return create_demo_run(
        rubric=project.rubrics.get(slug=rubric_slug),
        dataset=project.datasets.get(slug=dataset_slug),
        by=get_user_model().objects.get(username=by_username),
    )


def load_semantic_demo_run(*, project: Project, dataset_slug: str = DATASET_SLUG,
                           rubric_slug: str = "return-policy", by_username: str = "lena") -> Run:
    """load_demo's call: the semantic demo run of the return-policy rubric on the demo dataset."""
    return create_semantic_demo_run(
        rubric=project.rubrics.get(slug=rubric_slug),
        dataset=project.datasets.get(slug=dataset_slug),
        by=get_user_model().objects.get(username=by_username),
    )


# ---- the behavioral story: two versions of a judge, promotions, probes, a contested case, CI results -----

LENIENT_NOTE = "demo: behavioral judge by the scripted stand-in (not a model) that passes every answer"
STRICT_NOTE = "demo: behavioral judge by the scripted stand-in (not a model), with a stand-in second opinion"
CI_TOKEN_NAME = "demo: evalhub-gate run by load_demo"
CI_DEMO_CASES = 12  # enough for a few failures to show, few enough to stay quick
# The living dataset the demo's nightly CI posts its judged traffic back into, for the reviewers.
CI_TRAFFIC_DATASET = "ci-traffic"
CI_DEMO_REF = "demo-nightly"
CI_CASE_FIELDS = ("external_id", "input", "output", "trace", "golden_answer", "expected_behaviour", "expected_tool",
                  "expected_tool_argument", "expected_source", "category")


def behavioral_spec(model: str, *, second_opinion: bool) -> dict:
    endpoint = {"provider": "openai-compatible", "model_family": "stand-in", "base_url_env": DEMO_URL_ENV,
                "api_key_env": DEMO_KEY_ENV}
    spec = {"layers": ["behavioral"], "model": model, **endpoint, "params": {"temperature": 0, "max_tokens": 300},
            "timeout_s": 10, "max_attempts": 2}
    if second_opinion:
        # Another family, as a second opinion needs: the stand-in plays a second vendor here.
        spec["secondary"] = {"role": "second_opinion", "model": SECOND_MODEL, **endpoint,
                             "model_family": "stand-in-second", "when": {"mode": "always"}}
    return spec


def _noted_run(*, rubric: Rubric, dataset: Dataset, note: str) -> Run | None:
    return (Run.objects.filter(config__rubric=rubric, config__note=note, dataset=dataset, parent__isnull=True)
            .order_by("-created_at").first())


def _behavioral_run(*, rubric: Rubric, dataset: Dataset, by, model: str, note: str, second_opinion: bool) -> Run:
    spec = with_policy(behavioral_spec(model, second_opinion=second_opinion), project=rubric.project,
                       slug=RETURNS_POLICY_SLUG)
    return noted_run(rubric=rubric, dataset=dataset, by=by, note=note, spec=spec)


def promote_to(*, rubric: Rubric, stage: str, run: Run, by, reason: str) -> None:
    """Promote one stage at a time up to `stage`, as a lead would (each step an audit entry)."""
    order = [s.value for s in Rubric.Stage]
    rubric.refresh_from_db()
    while order.index(rubric.stage) < order.index(stage):
        promotion_services.rubric_promote(
            rubric=rubric, to_stage=promotion_services.next_stage(rubric.stage), run=run, reason=reason, by=by,
        )
        rubric.refresh_from_db()


def post_ci_results(*, dataset: Dataset) -> int:
    """Run `evalhub-gate check` on some cases of `dataset` against its project's gate config (a file) and store
    what it would post, as the CI results API does: the promotion pages then show a real check's results. Once a
    project: nothing when it holds CI results already."""
    project = dataset.project
    if CiResult.objects.filter(rubric__project=project).exists():
        return 0
    cases = [engine_case(case) for case in dataset.cases.order_by("external_id")[:CI_DEMO_CASES]]
    fields = CI_CASE_FIELDS
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "gates.json").write_text(json.dumps(gate_config(project=project)))
        (work / "outputs.jsonl").write_text(
            "".join(json.dumps({k: case[k] for k in fields if k in case}) + "\n" for case in cases)
        )
        gate = Path(sys.executable).with_name("evalhub-gate")
        command = [str(gate)] if gate.exists() else [sys.executable, "-m", "judges.gate.cli"]
        done = subprocess.run(
            [*command, "check", "--config", str(work / "gates.json"), "--outputs", str(work / "outputs.jsonl"),
             "--json", str(work / "results.json"), "--cache-dir", str(work / "cache")],
            capture_output=True, text=True, timeout=300,
        )
        if not (work / "results.json").exists():  # exits 1 (a gate failed) and 3 still write their results
            raise services.RunError(f"evalhub-gate exited {done.returncode}: {done.stderr.strip()[-500:]}")
        payload = json.loads((work / "results.json").read_text())
    return len(ci_results_store(project=project, payload=payload, token_name=CI_TOKEN_NAME))


OBSERVED_SLUG = "grounded-answer"
OBSERVED_NOTE = "demo: observed from day one, through the scripted stand-in (not a model): no labels, no run yet"


def _observe_from_day_one(*, project: Project, by) -> Rubric:
    """A new rubric in CI from its first day: at observe with a config version and no evidence, so the gate
    config carries it with `calibration: null` and CI records its verdicts for reviewers to label."""
    rubric, _ = project.rubrics.get_or_create(
        slug=OBSERVED_SLUG,
        defaults={"name": "Is the answer grounded in the policy it cites?",
                  "criteria": "Pass when every rule the answer states is in the store's policy (returns within 30 "
                              "days, free shipping over $50); fail when it invents or changes one."},
    )
    if rubric.stage == Rubric.Stage.DRAFT:
        config = (JudgeConfig.objects.filter(rubric=rubric, note=OBSERVED_NOTE).first()
                  or config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(STRICT_MODEL,
                                                                                           second_opinion=False),
                                                       by=by, note=OBSERVED_NOTE))
        promotion_services.rubric_promote(
            rubric=rubric, to_stage=Rubric.Stage.OBSERVE, config=config, by=by,
            reason="demo: observe from day one: CI records this judge's verdicts so reviewers can label them "
                   "and calibrate it before it may warn",
        )
    return rubric


def _post_ci_cases(*, dataset: Dataset, by) -> Run | None:
    """The loop: the nightly check's judged cases posted back into the living dataset ci-traffic, as
    `evalhub-gate check --post-cases` does (the same request body, stored by the same service, without the
    HTTP): its cases in the demo reviewers' queue, its verdicts the CI run of tool-use's gated judge."""
    traffic, _ = dataset.project.datasets.get_or_create(
        slug=CI_TRAFFIC_DATASET, defaults={"name": "CI traffic", "description": "What the nightly CI judged, "
                                           "posted back by evalhub-gate check --post-cases for the reviewers."},
    )
    if Run.objects.filter(source=Run.Source.CI, dataset=traffic).exists():
        return None
    traffic.reviewers.add(*dataset.reviewers.all())
    [rubric] = [r for r in parse_gate_config(gate_config(project=dataset.project)) if r.slug == "tool-use"]
    cases = [{k: v for k, v in engine_case(case).items() if k in CI_CASE_FIELDS}
             for case in dataset.cases.order_by("-external_id")[:CI_DEMO_CASES]]
    for case in cases:  # the newest agent's answers: the same, this time
        case["metadata"] = {"agent_model": "demo-agent-nightly"}
    [result] = judge_all([rubric], cases, repeats=1, concurrency=4, cache=None, env={})
    body = chunk_body(result, {c["external_id"]: c for c in cases},
                      CaseSource(ref=CI_DEMO_REF, branch="main", run_url=None), 1, 0, len(cases))
    return ci_cases_store(dataset=traffic, payload=body, by=by).run


DEMO_AUDIT_SIZE, DEMO_AUDIT_SEED = 30, 31


def load_behavioral_demo(*, project: Project, dataset_slug: str = DATASET_SLUG, by_username: str = "lena") -> dict:
    """load_demo's call, after the two runs above: the story a lead's day starts from.

    return-policy gets a behavioral judge in two versions through the stand-in (v-lenient refused for
    its true fail rate, v-strict promoted to warn, with bias probes, a second opinion that contests some
    verdicts and an audit sample for the agent's pass rate); tool-use's contract judge is gated, its true fail
    rate threshold relaxed (audited, and shown as relaxed); grounded-answer enters observe from day one with a
    config and no evidence; then one `evalhub-gate check` posts CI results. Each step is skipped once done.
    """
    dataset = project.datasets.get(slug=dataset_slug)
    lena = get_user_model().objects.get(username=by_username)
    return_policy, tool_use = project.rubrics.get(slug="return-policy"), project.rubrics.get(slug="tool-use")
    with stand_in():
        lenient = _behavioral_run(rubric=return_policy, dataset=dataset, by=lena, model=LENIENT_MODEL,
                                  note=LENIENT_NOTE, second_opinion=False)
        strict = _behavioral_run(rubric=return_policy, dataset=dataset, by=lena, model=STRICT_MODEL,
                                 note=STRICT_NOTE, second_opinion=True)
        if not strict.audit_draws.exists():
            # How good is the agent? An audit sample of the strict run: its drawn cases already labeled count at
            # once, the rest go first in the return-policy queue.
            audit_sample_draw(run=strict, size=DEMO_AUDIT_SIZE, method="uniform", seed=DEMO_AUDIT_SEED, by=lena)
        if not Run.objects.filter(parent=strict).exists():
            for probe in probes_start(run=strict, kinds=PROBE_KINDS, by=lena):
                _judge_here(probe)
        if return_policy.stage == Rubric.Stage.DRAFT and return_policy.require_pinned_models:
            promotion_services.rubric_thresholds_change(
                rubric=return_policy, by=lena, require_pinned_models=False,
                reason="demo: the scripted stand-in's models have no dated snapshots (like a local model under a tag)",
            )
        promote_to(rubric=return_policy, stage=Rubric.Stage.WARN, run=strict, by=lena,
                    reason="demo: the strict stand-in judge agrees with the reviewers; warn before gating")
        contract = demo_run(rubric=tool_use, dataset=dataset)
        if tool_use.stage == Rubric.Stage.DRAFT and tool_use.min_true_fail_rate > 0.55:
            promotion_services.rubric_thresholds_change(
                rubric=tool_use, by=lena, min_true_fail_rate=0.55,
                reason="demo: the contract checks miss answers that misread the tool's result; relaxed until "
                       "a behavioral layer covers them",
            )
        promote_to(rubric=tool_use, stage=Rubric.Stage.GATE, run=contract, by=lena,
                    reason="demo: the order tool contract is deterministic and agrees with the reviewers")
        _observe_from_day_one(project=project, by=lena)
        posted = post_ci_results(dataset=dataset)
        ci_run = _post_ci_cases(dataset=dataset, by=lena)
    return {"lenient": lenient, "strict": strict, "ci_results": posted, "ci_run": ci_run}
