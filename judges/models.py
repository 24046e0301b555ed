from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.functional import cached_property

from evalhub.models import AppendOnlyQuerySet
from labeling.models import Case, Dataset, Rubric


class Outcome(models.TextChoices):
    PASS = "pass", "pass"
    FAIL = "fail", "fail"
    NOT_EVALUATED = "not_evaluated", "not evaluated"


class ModelPrice(models.Model):
    """What a provider charges for a model, per million tokens; leads keep this table."""

    model = models.CharField(max_length=200, unique=True)
    input_per_mtok = models.DecimalField(max_digits=10, decimal_places=4)
    output_per_mtok = models.DecimalField(max_digits=10, decimal_places=4)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["model"]

    def __str__(self) -> str:
        return self.model

    def as_engine_price(self) -> dict:
        return {"input_per_mtok": float(self.input_per_mtok), "output_per_mtok": float(self.output_per_mtok)}


class Tier(models.TextChoices):
    """A judge tier (docs/promotion.md, "Tiers"): the cheap default judge for pull requests, a stronger one
    for releases, each with its own versions and evidence."""

    DEFAULT = "default", "default"
    RELEASE = "release", "release"


class JudgeConfigQuerySet(models.QuerySet):
    def kept(self) -> "JudgeConfigQuerySet":
        """The versions that count as a rubric's "newest": not an imported (external) config, not a judge
        improvement still proposed or discarded (docs/improving.md). The one place that says so
        (docs/promotion.md, "Tiers"): every "newest of a tier" reads it."""
        return self.filter(external=False, proposal="")

    def kept_of_tier(self, tier) -> "JudgeConfigQuerySet":
        """The kept versions of one tier (a value or an OuterRef), newest first: "newest of a tier" is the first."""
        return self.kept().filter(tier=tier).order_by("-version")


class JudgeConfig(models.Model):
    """One immutable version of how a rubric is judged.

    `spec` is the engine's config dict (judges.engine) without its hash; `config_hash` covers what can
    change a verdict. Editing saves the next version; no service updates a saved row.
    """

    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="judge_configs")
    version = models.PositiveIntegerField()
    spec = models.JSONField()
    config_hash = models.CharField(max_length=64, db_index=True)
    # Imported verdicts of another tool: calibrated, never promoted, never the rubric's newest config.
    external = models.BooleanField(default=False)
    # A version an editor proposed (docs/improving.md): "proposed" until the lead keeps it (then "", an ordinary
    # version) or discards it; neither a proposed nor a discarded version is ever newest, promoted or in CI.
    proposal = models.CharField(max_length=9, choices=[("proposed", "proposed"), ("discarded", "discarded")],
                                blank=True, default="", db_default="")
    # Set when the config is created and kept by its edits; not in the spec, so not hashed: the same judge in
    # two tiers judges alike and shares its cache.
    tier = models.CharField(max_length=8, choices=Tier.choices, default=Tier.DEFAULT, db_default=Tier.DEFAULT)
    note = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = JudgeConfigQuerySet.as_manager()

    class Meta:
        ordering = ["rubric", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["rubric", "version"], name="judgeconfig_unique_version"),
        ]

    def __str__(self) -> str:
        return f"{self.rubric.slug} v{self.version}"

    @property
    def deterministic(self) -> bool:
        """Contract checks only (docs/words.md): no model, so it cannot flip and may rightly agree 100 %."""
        return list(self.spec.get("layers") or []) == ["contract"]

    @property
    def candidate_name(self) -> str:
        """"candidate c2 of proposal 3" for a judge improvement's version (proposed or discarded), "" for a
        lead's own: the pages name candidates apart, so a lead tells their versions from a proposal's."""
        if not self.proposal:
            return ""
        found = ProposalCandidate.objects.filter(config_id=self.pk).values_list("index", "proposal_id").first()
        return f"candidate c{found[0]} of proposal {found[1]}" if found else "candidate"

    @cached_property
    def uses_stand_in(self) -> bool:
        """A run of this config was served by the scripted stand-in (judges.testing.fake_provider): one of its
        judgments rests on an answer the stand-in marked as its own (Judgment.stand_in). Told by where the
        answers came from, never by a name (a config may name gpt-4o, or any endpoint variable, and still be
        served by the stand-in); before any run, nothing is said. Its pages say so, so nobody takes its verdicts
        for a model's."""
        return Judgment.objects.filter(run__config_id=self.pk, stand_in=True).exists()


class Run(models.Model):
    """A judge config applied to a dataset's cases, each case `repeats` times.

    The counters are kept by the service that writes judgments, in the same transaction, so the
    progress partial reads one row.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        FINISHED = "finished", "finished"
        CANCELLED = "cancelled", "cancelled"

    class Source(models.TextChoices):
        # Who wrote the judgments: the app's worker, CI posting back what it judged (evalhub-gate check
        # --post-cases), or the periodic traffic judging of a (rubric, dataset) pair.
        WORKER = "worker", "worker"
        CI = "ci", "CI"
        TRAFFIC = "traffic", "traffic"
        MONITOR = "monitor", "monitor"  # a monitor's day of judged traffic (judges.monitoring)

    class Probe(models.TextChoices):
        VERBOSITY = "verbosity", "verbosity"
        SYCOPHANCY = "sycophancy", "sycophancy"
        INJECTION = "injection", "injected instruction"

    config = models.ForeignKey(JudgeConfig, on_delete=models.PROTECT, related_name="runs")
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="runs")
    repeats = models.PositiveSmallIntegerField(default=1)
    concurrency = models.PositiveSmallIntegerField(default=4)
    spend_cap_usd = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    total = models.PositiveIntegerField(default=0)
    # Cases of the dataset left out because they have no answer yet (output null): said on the run page.
    unanswered = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    not_evaluated = models.PositiveIntegerField(default=0)
    provider_calls = models.PositiveIntegerField(default=0)
    cache_hits = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    # What the calls of known cost cost. A judgment with a call of unknown cost (a model with no price, or no
    # usage reported) adds nothing here and counts in unknown_cost_judgments, so its run never reads "$0".
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    unknown_cost_judgments = models.PositiveIntegerField(default=0)
    # A bias probe is a run of the same config over variants of the parent run's labeled
    # cases; it is never evidence and stays out of run lists, the versions chart and "newest run".
    parent = models.ForeignKey(
        "self", on_delete=models.CASCADE, null=True, blank=True, related_name="probes",
        help_text="The run this probe measures; empty for an ordinary run.",
    )
    probe = models.CharField(max_length=12, choices=Probe.choices, blank=True, default="")
    # The lease of the one task at work on the run (judges.runs.worker): one holder at a time keeps the
    # run's concurrency cap across workers; a killed worker's lease runs out and another takes the run.
    lease_token = models.CharField(max_length=32, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)
    # What provider_calls will read once the lease holder records every call it had started at its last
    # heartbeat; when a lease runs out unreleased (its worker was killed), the shortfall is added to
    # calls_not_recorded: calls made whose judgments, and so whose cost, were never recorded. A lower bound (calls
    # started after that heartbeat are unknown), shown with the cost as "≥ N calls not recorded".
    calls_expected = models.PositiveIntegerField(default=0, db_default=0)
    calls_not_recorded = models.PositiveIntegerField(default=0, db_default=0)
    # The start form's idempotency token: a double click or a resubmitted form starts one run.
    start_token = models.UUIDField(null=True, blank=True, unique=True)
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.WORKER, db_default="worker")
    # A CI run's commit (or any ref the pipeline names): one CI run per (config, dataset, ref).
    ref = models.CharField(max_length=100, blank=True, default="", db_default="")
    # Judged anew (docs/judging.md, "Fresh repeats"): its cache keys carry the run as a salt, so it reuses and
    # overwrites no cached verdict; its repeats are numbered from 1 like any run's.
    fresh = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["config", "-created_at"], name="run_config_recent")]
        constraints = [
            models.UniqueConstraint(
                fields=["config", "dataset", "ref"], condition=models.Q(source="ci"), name="run_one_ci_run_per_ref"
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk}"

    @cached_property
    def served_by_stand_in(self) -> bool:
        """One of its judgments rests on an answer the scripted stand-in marked as its own (Judgment.stand_in):
        the run, report and promotion pages say so, whatever its config's model or variables are named."""
        return self.judgments.filter(stand_in=True).exists()


class RunChunk(models.Model):
    """A slice of a run's cases: the unit a run's task reads ahead and marks done once all is recorded.

    The lease is the run's (Run.lease_until): a worker killed mid-chunk leaves the chunk not done, and the
    next holder of the run takes it again and judges only the (case, repeat) pairs with no judgment yet.
    `attempts` counts how many times a task took the chunk up.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    case_ids = models.JSONField()
    # A probe's chunk: {case_id: human verdict} as it stood when the probe started, so the variant
    # each case gets (the injected instruction goes only into human-failed cases) never shifts under it.
    human_verdicts = models.JSONField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="runchunk_unique_index")]
        indexes = [models.Index(fields=["run", "done_at"], name="runchunk_pending")]


class Judgment(models.Model):
    """One (run, case, repeat) result. The unique constraint makes a redelivered chunk harmless."""

    # No index of its own: run leads the unique (run, case, repeat) index, which serves every run_id lookup;
    # one index fewer to write for each of a run's rows.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="judgments", db_index=False)
    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="judgments")
    repeat = models.PositiveSmallIntegerField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    scores = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)
    raw_output = models.TextField(blank=True)
    error = models.CharField(max_length=100, blank=True)
    layer = models.CharField(max_length=16, blank=True)
    judge = models.CharField(max_length=16, blank=True)
    checks = models.JSONField(default=list, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    cached = models.BooleanField(default=False)
    contested = models.BooleanField(default=False)
    secondary_outcome = models.CharField(max_length=16, blank=True)
    # Each judge's verdict, reason and model once a second opinion was asked (engine Judgment.opinions), so an
    # adjudicated judgment keeps all three; and the provider calls and cost by judge (primary, fallback, …).
    opinions = models.JSONField(null=True, blank=True)
    calls_by_judge = models.JSONField(default=dict, blank=True)
    cost_by_judge = models.JSONField(default=dict, blank=True)
    # The semantic layer's highest cosine similarity of the answer to a reference; null where it did not run.
    similarity = models.FloatField(null=True, blank=True)
    # A probe's judgment: the exact case variant judged (judges.runs.variants.make_variant), stored here and
    # never in the dataset, so a probe changes no case and makes no run stale.
    variant = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # An answer this verdict rests on came from the scripted stand-in: its response said so (the engine reads
    # judges.engine.providers.STAND_IN_HEADER), whatever the config's model or variables are named.
    stand_in = models.BooleanField(default=False, db_default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "case", "repeat"], name="judgment_one_per_case_repeat"),
        ]
        indexes = [
            models.Index(fields=["run", "outcome"], name="judgment_run_outcome"),
            # Few rows (the stand-in's): "was this run, or any run of this config, served by it?" reads only them.
            models.Index(fields=["run"], condition=models.Q(stand_in=True), name="judgment_stand_in"),
        ]


class RunCaseTally(models.Model):
    """One (run, case): its judgments counted, kept beside them by judges.runs.tallies whenever they are
    written or removed, so the run page and the agent's pass rate read one small row a case instead of
    grouping every judgment of the run (docs/estimates.md, "Reading a large run")."""

    # As Judgment.run: run leads the unique (run, case) index.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="case_tallies", db_index=False)
    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="+")
    judged = models.PositiveIntegerField(default=0)
    passes = models.PositiveIntegerField(default=0)
    fails = models.PositiveIntegerField(default=0)
    not_evaluated = models.PositiveIntegerField(default=0)
    lowest_similarity = models.FloatField(null=True, blank=True)
    slowest_ms = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "case"], name="runcasetally_one_per_case")]

    def __str__(self) -> str:
        return f"case {self.case_id} in run {self.run_id}: {self.passes} of {self.judged} pass"


class CachedJudgment(models.Model):
    """The app's engine cache: identical work (case content, config_hash, repeat) is never re-asked. Kept per
    project, so a hit never tells one project what another's judge said (docs/projects.md)."""

    project = models.ForeignKey("evalhub.Project", on_delete=models.CASCADE, related_name="+", db_index=False)
    key = models.CharField(max_length=64)
    judgment = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # A constraint rather than unique=True, which on PostgreSQL adds a second index for LIKE on the key
        # (never searched so): one index fewer to write for each cached judgment.
        constraints = [models.UniqueConstraint(fields=["project", "key"], name="cachedjudgment_unique_project_key")]


class CachedEmbedding(models.Model):
    """The semantic layer's cache: one text's embedding under (provider, model, dimensions, text hash).

    Only the vector is kept, never the text: `key` is judges.engine.embedding_key's digest. The vector is
    its numbers as little-endian float64 bytes (judges.runs.embeddings.vector_bytes): as exact as the
    numbers that came, read and written with no text to format or parse (a JSON list of 256 numbers
    costs more to write and read back than the rest of a judgment's row).
    """

    project = models.ForeignKey("evalhub.Project", on_delete=models.CASCADE, related_name="+", db_index=False)
    key = models.CharField(max_length=64)
    vector = models.BinaryField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # As CachedJudgment: per project, project leading the unique index that serves every lookup.
        constraints = [models.UniqueConstraint(fields=["project", "key"], name="cachedembedding_unique_project_key")]

    def __str__(self) -> str:
        return f"embedding {self.key[:12]}"


class RubricEventQuerySet(AppendOnlyQuerySet):
    log_name = "rubric audit log"


class RubricEvent(models.Model):
    """One audited change of a rubric: a promotion, a renewal, a switch of CI's config at observe, a demotion, a
    thresholds or fail_closed change.

    Append-only (docs/promotion.md, "The audit log": every change is kept): the promotion services only create rows,
    the admin shows them read-only, and the foreign keys protect what they point at. The rubric's
    evidence lives here too, rather than as a field on the rubric (labeling must not depend on
    judges): it is the run of the rubric's newest promotion or renewal, unless a demotion to draft
    came after.
    """

    class Kind(models.TextChoices):
        PROMOTE = "promote", "promotion"
        RENEW = "renew", "renewal"  # new evidence at the same stage
        SWITCH = "switch", "CI config switch"  # at observe, CI runs another kept config version; no evidence
        DEMOTE = "demote", "demotion"
        THRESHOLDS = "thresholds", "thresholds change"
        FAIL_CLOSED = "fail_closed", "fail_closed change"
        TRAFFIC = "traffic", "traffic judging change"  # on or off for a dataset, in `changes`
        # Judge improvement (docs/improving.md): a proposal job's end, and the lead's choice; the source run, the
        # editor model, the cost and the versions are in `changes` (`run` stays for evidence only).
        PROPOSAL = "proposal", "judge improvement proposed"
        KEEP = "keep", "proposal kept"
        DISCARD = "discard", "proposals discarded"

    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="events")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    # Which judge the entry is about: the default tier (the stage, CI's pull-request judge) or the release
    # tier (its own evidence, at the rubric's stage; a release demotion withdraws it).
    tier = models.CharField(max_length=8, choices=Tier.choices, default=Tier.DEFAULT, db_default=Tier.DEFAULT)
    from_stage = models.CharField(max_length=8, choices=Rubric.Stage.choices, blank=True)
    to_stage = models.CharField(max_length=8, choices=Rubric.Stage.choices, blank=True)
    # A promotion's or renewal's evidence; null for every other kind.
    run = models.ForeignKey(Run, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    # The config CI runs from an entry that names a config and no run (entering observe without evidence, a
    # switch at observe); null for every other entry (an evidence entry's config is its run's).
    config = models.ForeignKey(JudgeConfig, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    # The figures the promotion was granted on (what the gate config ships as `calibration`), and
    # every rule as it was checked.
    figures = models.JSONField(null=True, blank=True)
    rules = models.JSONField(default=list, blank=True)
    # {field: [old, new]} of a thresholds or fail_closed change.
    changes = models.JSONField(default=dict, blank=True)
    reason = models.TextField()
    by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    at = models.DateTimeField(default=timezone.now)

    objects = RubricEventQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["rubric", "kind", "-id"], name="rubricevent_rubric_kind")]

    def __str__(self) -> str:
        return f"{self.rubric} {self.kind} {self.from_stage}→{self.to_stage}".strip()

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None and not self._state.adding:
            raise PermissionError("The rubric audit log is append-only: its entries are never changed.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise PermissionError("The rubric audit log is append-only: its entries are never deleted.")

    @property
    def ci_config(self) -> JudgeConfig | None:
        """The judge config CI runs from this entry: its evidence run's, or the one it names; None for the rest."""
        return self.run.config if self.run is not None else self.config

    @property
    def change_rows(self) -> list[tuple[str, Any, Any, bool]]:
        """(field, old, new, is a change) per entry of `changes`: a thresholds or fail_closed change keeps
        [old, new]; a proposal's entries (judge improvement proposed, kept, discarded) keep plain values, shown
        whole: a list of candidate versions is a value, not an old and a new one."""
        plain = self.kind in (self.Kind.PROPOSAL, self.Kind.KEEP, self.Kind.DISCARD)
        rows = []
        for name, value in self.changes.items():
            if not plain and isinstance(value, list) and len(value) == 2:
                rows.append((name, value[0], value[1], True))
            else:
                shown = ", ".join(str(v) for v in value) if isinstance(value, list) else value
                rows.append((name, None, "—" if shown in (None, "") else shown, False))
        return rows


class CiResult(models.Model):
    """What one CI run of `evalhub-gate` found for one rubric, as it posted back (results:write).

    Stored apart from datasets and runs: CI results never change a dataset
    or make a run stale.
    """

    class Outcome(models.TextChoices):
        PASS = "pass", "pass"
        FAIL = "fail", "fail"
        NOT_EVALUATED = "not_evaluated", "not evaluated"
        WARNING = "warning", "warning"
        RECORDED = "recorded", "recorded"

    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="ci_results")
    config_hash = models.CharField(max_length=64)
    stage = models.CharField(max_length=8, choices=Rubric.Stage.choices)
    fail_closed = models.BooleanField(default=False)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    passed = models.PositiveIntegerField()
    failed = models.PositiveIntegerField()
    not_evaluated = models.PositiveIntegerField()
    total = models.PositiveIntegerField()
    exit_code = models.PositiveSmallIntegerField()
    repeats = models.PositiveSmallIntegerField(default=1)
    failed_cases = models.JSONField(default=list, blank=True)
    not_evaluated_cases = models.JSONField(default=list, blank=True)
    # Every case as `--json` writes it (verdict, flipped, repeats); empty when an older command sent counts only.
    cases = models.JSONField(default=list, blank=True)
    commit = models.CharField(max_length=100, blank=True)
    ref = models.CharField(max_length=255, blank=True)
    run_url = models.URLField(max_length=500, blank=True)
    # Where the budget went (docs/gate.md); null when an older command did not send it, and
    # cost_usd also when a model it used had no price.
    calls = models.PositiveIntegerField(null=True, blank=True)
    cache_hits = models.PositiveIntegerField(null=True, blank=True)
    input_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    output_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    contested = models.PositiveIntegerField(null=True, blank=True)
    latency_ms_p50 = models.PositiveIntegerField(null=True, blank=True)
    latency_ms_p95 = models.PositiveIntegerField(null=True, blank=True)
    token_name = models.CharField(max_length=100)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-received_at", "-id"]
        indexes = [models.Index(fields=["rubric", "-received_at"], name="ciresult_rubric_recent")]

    def __str__(self) -> str:
        return f"{self.rubric} {self.outcome} ({self.received_at:%Y-%m-%d %H:%M})"


class DriftCheck(models.Model):
    """One scheduled re-check of a promoted rubric's evidence (docs/promotion.md, "Drift on new cases").

    `run` is the drift run: the evidence run's config over the dataset's current cases, a Run with the
    evidence run as `parent` and no `probe` (kept out of run lists, compare menus and evidence like a
    probe). Its figures are filled in when it finishes: over every case with a human verdict, and over
    the "new" cases only, those whose human verdict appeared after the evidence run finished.
    """

    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="drift_checks")
    evidence_run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="drift_check")
    started_at = models.DateTimeField(default=timezone.now)
    checked_at = models.DateTimeField(null=True, blank=True)
    new_n = models.PositiveIntegerField(null=True, blank=True)
    new_agreement = models.FloatField(null=True, blank=True)
    new_ci95 = models.JSONField(null=True, blank=True)
    all_n = models.PositiveIntegerField(null=True, blank=True)
    all_agreement = models.FloatField(null=True, blank=True)
    all_ci95 = models.JSONField(null=True, blank=True)
    # The full calibration figures of both sets: {"new": {...}, "all": {...}}.
    figures = models.JSONField(null=True, blank=True)
    # The fresh sample (docs/promotion.md, "Fresh drift sample"): a fresh run of the evidence config over a
    # rotating sample of unchanged cases, each case's fresh majority compared with its cached one. Null when
    # the check had none (EVALHUB_DRIFT_FRESH_SHARE=0, or no unchanged case).
    fresh_run = models.OneToOneField(Run, on_delete=models.CASCADE, null=True, blank=True,
                                     related_name="fresh_drift_check")
    fresh_n = models.PositiveIntegerField(null=True, blank=True)  # cases with a majority both ways
    fresh_changed = models.PositiveIntegerField(null=True, blank=True)  # of those, with another verdict
    fresh_ci95 = models.JSONField(null=True, blank=True)  # Wilson interval of fresh_changed / fresh_n

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["evidence_run", "-checked_at"], name="driftcheck_evidence_recent")]

    def __str__(self) -> str:
        return f"drift check of {self.rubric} on run {self.evidence_run_id}"


class TrafficJudging(models.Model):
    """A lead's switch that has the periodic task judge a dataset's new cases for a rubric (docs/gate.md,
    "Traffic without CI"): each traffic run covers the cases created since the pair's last one, with the
    config the gate config gives the rubric. Turning it on or off is audited (a RubricEvent)."""

    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="traffic_judging")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="traffic_judging")
    enabled = models.BooleanField(default=True)
    # The highest case id a traffic run of this pair has taken: the next run takes the cases above it.
    last_case_id = models.BigIntegerField(default=0)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["rubric", "dataset"], name="trafficjudging_one_per_pair"),
        ]

    def __str__(self) -> str:
        return f"traffic judging of {self.rubric} on {self.dataset}"


class AuditDraw(models.Model):
    """One draw of a run's audit sample (docs/estimates.md): cases drawn at random for human labels, so
    the judge's verdicts on every case can be corrected into the agent's pass rate.

    A draw is over the run's cases not drawn before. Case i's probability of being drawn in it is
    min(1, scale * ((1 - uniform_share) * u_i + uniform_share)), u_i the judge's uncertainty on the case;
    a uniform draw has uniform_share 1 (every case scale = size / eligible). Kept so the estimate can
    combine several draws, and so a draw can be replayed from its seed.
    """

    class Method(models.TextChoices):
        UNIFORM = "uniform", "uniform"
        ACTIVE = "active", "active"

    class Uncertainty(models.TextChoices):
        NONE = "", "none (uniform)"
        REPEATS = "repeats", "split repeats"
        SCORES = "scores", "scores near the pass score"
        SIMILARITY = "similarity", "similarity near pass_at"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="audit_draws")
    method = models.CharField(max_length=8, choices=Method.choices)
    uncertainty = models.CharField(max_length=10, choices=Uncertainty.choices, blank=True, default="")
    size = models.PositiveIntegerField(help_text="The budget: how many cases the draw asked for.")
    eligible = models.PositiveIntegerField(help_text="The run's cases with an output not drawn before.")
    scale = models.FloatField()
    uniform_share = models.FloatField()
    seed = models.BigIntegerField()
    # Empty when drawn from the command line (manage.py audit_sample).
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "created_at", "id"]

    def __str__(self) -> str:
        return f"{self.method} draw of {self.size} on run {self.run_id}"


class AuditSampleCase(models.Model):
    """A case drawn into a run's audit sample: its inclusion probability when drawn and its place in the
    sample's seeded random order (the order the labeling queue serves it in)."""

    draw = models.ForeignKey(AuditDraw, on_delete=models.CASCADE, related_name="cases")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="+")
    inclusion_probability = models.FloatField()
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["run", "position"]
        constraints = [models.UniqueConstraint(fields=["run", "case"], name="auditsamplecase_once_per_run")]

    def __str__(self) -> str:
        return f"case {self.case_id} in run {self.run_id}'s audit sample"


class Proposal(models.Model):
    """One "propose improvements" job on a finished run (docs/improving.md): the editor's call, then its
    candidates judged on the dev split, the best few on the holdout split.

    Progress lives here and in the candidates' runs, so the page polls one row; the job's spend (the
    editor and every candidate run) is held under `max_cost_usd`.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        PROPOSING = "proposing", "asking the editor"
        DEV = "dev", "judging candidates on dev"
        HOLDOUT = "holdout", "judging the best on holdout"
        FINISHED = "finished", "finished"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    class Decision(models.TextChoices):
        NONE = "", "undecided"
        KEPT = "kept", "one kept"
        DISCARDED = "discarded", "all discarded"

    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="proposals")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="proposals")
    editor = models.JSONField()  # the editor's spec (judges.editor.EditorSpec.to_dict): names, never values
    candidates_asked = models.PositiveSmallIntegerField(default=3)
    seed = models.IntegerField(default=0)
    max_cost_usd = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    estimate_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    error = models.TextField(blank=True)
    editor_calls = models.PositiveIntegerField(default=0)
    editor_input_tokens = models.PositiveIntegerField(default=0)
    editor_output_tokens = models.PositiveIntegerField(default=0)
    editor_cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    # Proposals of the editor's answer that were reported and not applied: [{"name", "why"}].
    rejected = models.JSONField(default=list, blank=True)
    # The dev disagreements the editor read, and how many were left out to keep its prompt bounded.
    disagreements_shown = models.PositiveIntegerField(default=0)
    disagreements_left_out = models.PositiveIntegerField(default=0)
    decision = models.CharField(max_length=9, choices=Decision.choices, blank=True, default="")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)  # when a worker claimed it and asked the editor
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"proposal {self.pk} on run {self.run_id}"


class ProposalCandidate(models.Model):
    """One proposed change, saved as a `proposed` config version, and the runs that measured it."""

    proposal = models.ForeignKey(Proposal, on_delete=models.CASCADE, related_name="candidates")
    index = models.PositiveSmallIntegerField()
    name = models.CharField(max_length=200)
    change = models.CharField(max_length=9)  # guidance | examples
    why = models.TextField(blank=True)
    criteria_note = models.TextField(blank=True)  # a suggestion to the lead, never applied
    config = models.ForeignKey(JudgeConfig, on_delete=models.PROTECT, related_name="+")
    added_tokens = models.PositiveIntegerField(default=0)
    dev_run = models.ForeignKey(Run, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    holdout_run = models.ForeignKey(Run, on_delete=models.PROTECT, null=True, blank=True, related_name="+")

    class Meta:
        ordering = ["proposal", "index"]
        constraints = [models.UniqueConstraint(fields=["proposal", "index"], name="proposalcandidate_unique_index")]

    def __str__(self) -> str:
        return f"{self.proposal} candidate {self.index}"
class SynthesisJob(models.Model):
    """One request for synthetic cases (docs/cases.md, "Synthetic cases"): an editor model writes up to `n`
    inputs a customer could send, from the policy documents (and, when asked, the dataset's failed dev cases),
    stored as cases with no answer yet. The work is one editor call, in a Celery task; what it wrote, dropped
    and cost is kept here, so the page shows it after the broker forgets the task."""

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        FINISHED = "finished", "finished"
        FAILED = "failed", "failed"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="synthesis_jobs")
    n = models.PositiveSmallIntegerField()
    types = models.JSONField(help_text="The kinds of input asked for: adversarial, near_miss, ordinary.")
    # [{slug, version, sha256}]: the policy versions the editor read.
    policies = models.JSONField(default=list)
    from_failed_dev = models.BooleanField(default=False)
    seed = models.BigIntegerField()
    prompt_version = models.CharField(max_length=20)
    # The editor's spec (provider, model, the NAMES of its variables: never a value).
    editor = models.JSONField()
    estimate_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    # The one task at work on the job holds it until then; a killed worker's job is taken again after.
    lease_until = models.DateTimeField(null=True, blank=True)
    failed_cases_shown = models.PositiveIntegerField(default=0)
    written = models.PositiveIntegerField(default=0)
    duplicates = models.PositiveIntegerField(default=0)
    # Cases the editor wrote beyond the n asked for: left out.
    beyond_n = models.PositiveIntegerField(default=0)
    external_ids = models.JSONField(default=list)
    calls = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    # Null: the editor's model has no price, so the cost is unknown (never shown as $0).
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    error = models.TextField(blank=True)
    # Empty when started from the command line (manage.py synthesize_cases).
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["dataset", "-created_at"], name="synthesisjob_dataset_recent")]

    def __str__(self) -> str:
        return f"synthesis {self.pk} of {self.dataset}"

    @property
    def done(self) -> bool:
        return self.status in (self.Status.FINISHED, self.Status.FAILED)


class VerdictExport(models.Model):
    """Where a project's verdicts go as OpenTelemetry `gen_ai.evaluation.result` events (judges/export/otlp.py,
    docs/otlp.md "Verdicts out"): the *names* of the environment variables holding the OTLP logs endpoint and
    its headers, as judge configs name their keys, never the values (which may hold a backend's key)."""

    project = models.OneToOneField("evalhub.Project", on_delete=models.CASCADE, related_name="verdict_export")
    endpoint_env = models.CharField(max_length=100)
    headers_env = models.CharField(max_length=100, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"verdict export of {self.project}"

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from judges.export.otlp import env_name_problem

        problems = {field: problem for field in ("endpoint_env", "headers_env")
                    if getattr(self, field) and (problem := env_name_problem(getattr(self, field)))}
        if problems:
            raise ValidationError(problems)


# Production monitoring (judges.monitoring, docs/monitoring.md) ---------------------------------------------


class Monitor(models.Model):
    """One rubric's gate-config judge on a `sample` share of a dataset's new cases, with windows of figures."""

    class Window(models.TextChoices):
        DAY = "day", "day"
        WEEK = "week", "week"

    project = models.ForeignKey("evalhub.Project", on_delete=models.CASCADE, related_name="monitors")
    slug = models.SlugField(max_length=60)
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="monitors")
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="monitors")
    sample = models.FloatField(default=1.0, help_text="The share of new cases judged, each drawn independently.")
    window = models.CharField(max_length=4, choices=Window.choices, default=Window.DAY)
    spend_cap_usd = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True,
                                        help_text="Per day (UTC); none: no cap.")
    concurrency = models.PositiveSmallIntegerField(default=4)
    labels_per_window = models.PositiveIntegerField(default=150)
    # The traffic the first window expects; later windows expect what the window before them received.
    expected_cases = models.PositiveIntegerField(default=1000)
    # Starts (ISO dates) of the windows the lead pinned as the baseline; empty: compared with the window before only.
    baseline = models.JSONField(default=list, blank=True)
    digest = models.BooleanField(default=False, help_text="A weekly digest to the project's channels.")
    enabled = models.BooleanField(default=True)
    seed = models.BigIntegerField()
    # The newest case id looked at: cases after it are new.
    last_case_id = models.BigIntegerField(default=0)
    paused_reason = models.CharField(max_length=200, blank=True)
    paused_since = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "slug"], name="monitor_slug_per_project")]

    def __str__(self) -> str:
        return f"monitor {self.slug}"


class MonitorWindow(models.Model):
    """One window of a monitor: its audit sample's inclusion probability, fixed when it opened, and the time a
    spend cap stopped its judging (its figures then cover start .. capped_at only)."""

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="windows")
    start = models.DateTimeField()
    end = models.DateTimeField()
    expected_cases = models.PositiveIntegerField()
    audit_probability = models.FloatField()
    capped_at = models.DateTimeField(null=True, blank=True)
    traffic = models.PositiveIntegerField(default=0)  # cases that arrived, judged or not (kept by monitor_tick)

    class Meta:
        ordering = ["start"]
        constraints = [models.UniqueConstraint(fields=["monitor", "start"], name="monitorwindow_one_per_start")]


class MonitorDay(models.Model):
    """The run that judges one UTC day of a monitor's sampled cases: the daily spend cap is its spend cap."""

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="days")
    day = models.DateField()
    run = models.OneToOneField(Run, on_delete=models.PROTECT, related_name="monitor_day")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["monitor", "day"], name="monitorday_one_per_day")]


class MonitorCase(models.Model):
    """One new case as the monitor saw it: the draw that decided whether it is judged (kept, so the judged cases
    are shown to be a random sample), and whether the audit sample drew it, with its probability."""

    class Skipped(models.TextChoices):
        NO = "", "judged"
        CAP = "cap", "after the spend cap"

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="cases", db_index=False)
    window = models.ForeignKey(MonitorWindow, on_delete=models.CASCADE, related_name="cases")
    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="+")
    arrived_at = models.DateTimeField()
    draw = models.FloatField()  # uniform in [0, 1): judged when below the monitor's sample at arrival
    sample = models.FloatField()
    sampled = models.BooleanField()
    audited = models.BooleanField(default=False)
    audit_probability = models.FloatField(default=0.0)
    skipped = models.CharField(max_length=3, choices=Skipped.choices, blank=True, default="")
    # The day's run it was handed to; null while waiting (judging paused) or never judged.
    day = models.ForeignKey(MonitorDay, on_delete=models.CASCADE, null=True, blank=True, related_name="cases")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["monitor", "case"], name="monitorcase_one_per_case")]
        indexes = [models.Index(fields=["monitor", "sampled", "day"], name="monitorcase_waiting",
                                condition=models.Q(sampled=True, day__isnull=True, skipped=""))]


class Channel(models.Model):
    """Where a project's monitor messages go. Holds no secret: a webhook's address and signing secret live in
    environment variables on the server, named here (EVALHUB_CHANNEL_*), like a judge config names its key."""

    class Kind(models.TextChoices):
        EMAIL = "email", "e-mail"
        SLACK = "slack", "Slack-compatible incoming webhook"
        WEBHOOK = "webhook", "signed webhook"

    project = models.ForeignKey("evalhub.Project", on_delete=models.CASCADE, related_name="channels")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    addresses = models.TextField(blank=True, help_text="E-mail: the addresses, comma-separated.")
    url_env = models.CharField(max_length=100, blank=True)
    secret_env = models.CharField(max_length=100, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.kind} channel {self.name}"


class MonitorMessage(models.Model):
    """A message a monitor sends (a drop, drift, a pause or cap, the digest); `key` makes each one once."""

    class Kind(models.TextChoices):
        DROP = "drop", "drop"
        DRIFT = "drift", "judge drift"
        PAUSE = "pause", "judging paused"
        RESUME = "resume", "judging resumed"
        CAP = "cap", "spend cap reached"
        DIGEST = "digest", "weekly digest"

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="messages")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    key = models.CharField(max_length=100)
    subject = models.CharField(max_length=300)
    body = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["monitor", "key"], name="monitormessage_once")]


class Delivery(models.Model):
    """One message to one channel: retried with backoff until it is delivered or a day has passed."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        SENT = "sent", "sent"
        FAILED = "failed", "failed"

    message = models.ForeignKey(MonitorMessage, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_at = models.DateTimeField(default=timezone.now)
    lease_until = models.DateTimeField(null=True, blank=True)
    # Every attempt: {at, status, answer} (the receiver's answer, never the secret or the address's value).
    log = models.JSONField(default=list)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["message", "channel"], name="delivery_once")]
        indexes = [models.Index(fields=["next_at"], condition=models.Q(status="pending"), name="delivery_due")]
