from django.conf import settings
from django.db import models
from django.utils import timezone

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
    note = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["rubric", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["rubric", "version"], name="judgeconfig_unique_version"),
        ]

    def __str__(self) -> str:
        return f"{self.rubric.slug} v{self.version}"


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
    done = models.PositiveIntegerField(default=0)
    not_evaluated = models.PositiveIntegerField(default=0)
    provider_calls = models.PositiveIntegerField(default=0)
    cache_hits = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["config", "-created_at"], name="run_config_recent")]

    def __str__(self) -> str:
        return f"run {self.pk}"


class RunChunk(models.Model):
    """A slice of a run's work, claimed by a worker with a lease that expires.

    A worker killed mid-chunk leaves `claimed_until` in the past; the next claim takes the chunk
    again and judges only the (case, repeat) pairs that have no judgment yet.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    case_ids = models.JSONField()
    claimed_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="runchunk_unique_index")]
        indexes = [models.Index(fields=["run", "done_at"], name="runchunk_pending")]


class Judgment(models.Model):
    """One (run, case, repeat) result. The unique constraint makes a redelivered chunk harmless."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="judgments")
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
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "case", "repeat"], name="judgment_one_per_case_repeat"),
        ]
        indexes = [models.Index(fields=["run", "outcome"], name="judgment_run_outcome")]


class CachedJudgment(models.Model):
    """The app's engine cache: identical work (case content, config_hash, repeat) is never re-asked."""

    key = models.CharField(max_length=64, unique=True)
    judgment = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)
