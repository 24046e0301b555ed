from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

# The split rule, the content hash and the kinds are plain Python, shared with the Django-free reading
# module (and CI).
from labeling.importing.reading import CASE_KINDS
from labeling.importing.reading import case_split as case_split
from labeling.importing.reading import labeled_content_hash as labeled_content_hash
from labeling.importing.redaction import REDACT_KINDS


class LabelingRefused(Exception):
    """A write that the rules forbid; the message is meant for the person who asked."""


# Does a label count? Only while it was given against the case's content as it is now: its content_hash
# equals the case's. The database keeps the answer in Label.stale (stale = the label stopped counting):
# the triggers of migration 0003_queue_triggers (labeling_label_set_stale, labeling_case_content_changed;
# the first redefined by 0004_label_dataset) set it to `label.content_hash <> case.content_hash` whoever
# writes labels or cases, and the raw-SQL queue (labeling/queue/selectors.py) reads the column through
# LABEL_STOPPED_COUNTING_SQL. Python code asks through label_counts / label_stopped_counting (or the
# Label queryset's counting() / stopped_counting()); tests/labeling/queue/test_counting_rule.py keeps the
# Python rule, the column and the hashes equal.
LABEL_STOPPED_COUNTING_SQL = "{label}.stale"


def label_counts(through: str = "") -> models.Q:
    """The labels that count; `through` is the lookup path to the label from another model ("labels__")."""
    return models.Q(**{f"{through}stale": False})


def label_stopped_counting(through: str = "") -> models.Q:
    """The labels that stopped counting ("changed since you labeled"): the case changed under them."""
    return models.Q(**{f"{through}stale": True})


class DatasetQuerySet(models.QuerySet):
    def visible_to(self, user, *, role: str | None) -> "DatasetQuerySet":
        """Of these datasets (a project's), those a user with `role` in that project may see: every one for a
        lead, only their assigned ones for a reviewer, none for a non-member."""
        if role == "lead":
            return self
        return self.filter(reviewers=user) if role == "reviewer" else self.none()


class LabelQuerySet(models.QuerySet):
    def counting(self) -> "LabelQuerySet":
        return self.filter(label_counts())

    def stopped_counting(self) -> "LabelQuerySet":
        return self.filter(label_stopped_counting())


class Verdict(models.TextChoices):
    PASS = "pass", "Pass"
    FAIL = "fail", "Fail"


class Dataset(models.Model):
    project = models.ForeignKey("evalhub.Project", on_delete=models.PROTECT, related_name="datasets")
    slug = models.SlugField(max_length=100)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    class QueueOrder(models.TextChoices):
        FEWEST_LABELS = "fewest", "fewest labels first"
        NEWEST = "newest", "newest ingested first"
        SHARE = "share", "a share of cases first, newest first"

    reviewers = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="assigned_datasets")
    # The queue order: a living dataset fed by production traffic sends its newest cases to the
    # reviewers first, so new traffic gets human verdicts (and the drift check has new cases to read).
    queue_order = models.CharField(
        max_length=8, choices=QueueOrder.choices, default=QueueOrder.FEWEST_LABELS,
        db_default=QueueOrder.FEWEST_LABELS,
        help_text="Which cases needing labels reviewers get first: the fewest labels, or the newest ingested.",
    )
    # Under SHARE, this percentage of cases (a fixed pseudo-random choice by case id) goes first, newest
    # first; the rest follow, fewest labels first.
    queue_share = models.PositiveSmallIntegerField(
        default=20, db_default=20, validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Under “a share of cases first”: the percentage of cases that go first.",
    )
    # The personal data redacted from every case on the way in (docs/security.md, "Redaction"): kinds of
    # REDACT_KINDS, space-separated. Changed only through services.dataset_set_redaction (audited).
    redact = models.CharField(max_length=60, blank=True, default="", db_default="")
    # The slugs of the policy documents its cases are about (each read at its newest version when used):
    # synthetic cases are written from them (docs/cases.md). Changed only through
    # services.dataset_set_policies (audited).
    policies = models.JSONField(default=list, blank=True, db_default=[])
    created_at = models.DateTimeField(default=timezone.now)

    objects = DatasetQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]
        constraints = [models.UniqueConstraint(fields=["project", "slug"], name="dataset_unique_slug_in_project")]

    def __str__(self) -> str:
        return self.name or self.slug

    @property
    def redact_kinds(self) -> tuple[str, ...]:
        return tuple(kind for kind in REDACT_KINDS if kind in self.redact.split())


class DatasetEvent(models.Model):
    """One audited change of what a dataset does to its cases: its redaction set, or applied to the cases
    it already holds; its list of policy documents set. Only created, never changed (the admin shows them
    read-only)."""

    class Kind(models.TextChoices):
        REDACTION_SET = "redaction_set", "redaction set"
        REDACTION_APPLIED = "redaction_applied", "redaction applied to existing cases"
        POLICIES_SET = "policies_set", "policy documents set"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    detail = models.TextField()
    by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.dataset}: {self.get_kind_display()}"


class CaseQuerySet(models.QuerySet):
    def answered(self) -> "CaseQuerySet":
        """Cases with the agent's answer (an empty one included): what runs judge and reviewers label."""
        return self.filter(output__isnull=False)

    def unanswered(self) -> "CaseQuerySet":
        """Cases with no answer yet (a golden-set case): served to pipelines, never judged or labeled."""
        return self.filter(output__isnull=True)


class Case(models.Model):
    class Split(models.TextChoices):
        DEV = "dev", "dev"
        HOLDOUT = "holdout", "holdout"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="cases")
    external_id = models.CharField(max_length=200)
    input = models.TextField()
    # Null: no answer yet (a golden-set case), distinct from an empty answer. Such a case is never served to
    # reviewers, run or drift-checked (docs/cases.md); migration 0011 runs this on SQLite without losing triggers.
    output = models.TextField(null=True, blank=True)  # noqa: DJ001 - null is not "": no answer vs an empty one
    trace = models.JSONField(default=dict, blank=True)
    golden_answer = models.TextField(blank=True)
    expected_behaviour = models.TextField(blank=True)
    expected_tool = models.CharField(max_length=200, null=True, blank=True)
    # SQL NULL means "the argument is not checked"; any JSON value (a JSON null included) is compared.
    expected_tool_argument = models.JSONField(null=True, blank=True)
    expected_source = models.CharField(max_length=500, null=True, blank=True)
    category = models.CharField(max_length=100, blank=True, db_index=True)
    # The calibration kind (docs/cases.md): never shown to reviewers, not judged content.
    # db_default: rows written by raw SQL (benchmarks) need no kind.
    kind = models.CharField(max_length=16, blank=True, default="", db_default="",
                            choices=[(kind, kind) for kind in CASE_KINDS])
    metadata = models.JSONField(default=dict, blank=True)
    split = models.CharField(max_length=8, choices=Split.choices, editable=False)
    # Hash of input, output and trace: labels given against another hash no longer count.
    content_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    # Last time anything a judge sees changed: runs finished before it are stale.
    content_changed_at = models.DateTimeField(default=timezone.now)

    objects = CaseQuerySet.as_manager()

    class Meta:
        ordering = ["dataset", "id"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "external_id"], name="case_unique_external_id"),
        ]
        indexes = [
            models.Index(fields=["dataset", "category"], name="case_dataset_category"),
            models.Index(fields=["dataset", "content_changed_at"], name="case_dataset_changed"),
        ]

    def __str__(self) -> str:
        return self.external_id


class Rubric(models.Model):
    """The question reviewers and judges both answer about a case."""

    class Stage(models.TextChoices):
        DRAFT = "draft", "draft"
        OBSERVE = "observe", "observe"
        WARN = "warn", "warn"
        GATE = "gate", "gate"

    class GateOn(models.TextChoices):
        EVERY_CASE = "every_case", "every case"
        PASS_RATE = "pass_rate", "pass rate"

    # A rubric applies to its own project's datasets only (docs/projects.md).
    project = models.ForeignKey("evalhub.Project", on_delete=models.PROTECT, related_name="rubrics")
    slug = models.SlugField(max_length=100)
    name = models.CharField(max_length=300, help_text="The question, e.g. “Does the answer follow the return policy?”")
    criteria = models.TextField(help_text="Labeling instructions for reviewers; copied into each judge config.")
    labels_per_case = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(10)],
        help_text="How many reviewers should label each case.",
    )
    # Stage, thresholds and fail_closed change only through the audited promotion services.
    stage = models.CharField(max_length=8, choices=Stage.choices, default=Stage.DRAFT)
    fail_closed = models.BooleanField(default=False)
    min_cases = models.PositiveIntegerField(default=30)
    min_repeats = models.PositiveSmallIntegerField(default=2)
    agreement_floor = models.FloatField(default=0.80)
    agreement_ceiling = models.FloatField(default=1.00)
    min_true_pass_rate = models.FloatField(default=0.70)
    min_true_fail_rate = models.FloatField(default=0.70)
    max_flip_rate = models.FloatField(default=0.05)
    min_coverage = models.FloatField(default=0.95)
    # Optional rule: the share of verdicts bias probes may move; null means no such rule.
    max_probe_moved = models.FloatField(null=True, blank=True)
    # A deterministic judge (contract checks only) may be promoted without human labels when a lead
    # turns this off (docs/promotion.md); a judge with a model always needs them.
    require_human_evidence = models.BooleanField(default=True)
    # Optional rule: every calibration kind (Case.kind) with at least this many cases; null means off.
    min_cases_per_kind = models.PositiveIntegerField(null=True, blank=True)
    # Rule: every model of the evidence config (primary, secondary, embeddings) is a dated snapshot, so
    # the gating judge cannot change under the rubric. A lead may turn it off (a local model under a tag).
    require_pinned_models = models.BooleanField(default=True)
    # Rule: a judge that agrees with the reviewers' labels more than they agree with each other (a one-sided
    # test, docs/calibration.md) is refused. A lead may turn it off.
    refuse_judge_above_reviewers = models.BooleanField(default=True)
    # At gate stage CI fails on any failing case, or (a non-deterministic judge only) when the agent's corrected
    # pass rate's upper 95 % bound is below min_agent_pass_rate (docs/gate.md).
    gate_on = models.CharField(max_length=10, choices=GateOn.choices, default=GateOn.EVERY_CASE)
    min_agent_pass_rate = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["slug"]
        constraints = [models.UniqueConstraint(fields=["project", "slug"], name="rubric_unique_slug_in_project")]

    def __str__(self) -> str:
        return self.slug


class Label(models.Model):
    """One reviewer's verdict on one case for one rubric."""

    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="labels")
    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="labels")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="labels")
    verdict = models.CharField(max_length=4, choices=Verdict.choices)
    note = models.TextField(blank=True)
    # The case content this label was given against; it counts only while it equals case.content_hash.
    content_hash = models.CharField(max_length=64)
    # content_hash != case.content_hash, stored so the queue finds "changed since you labeled" by index:
    # the label stopped counting (label_counts above). Database triggers (migration 0003_queue_triggers,
    # redefined in 0004_label_dataset) keep it true whoever writes labels or cases.
    stale = models.BooleanField(default=False, editable=False)
    # What the label was before its last revision ({verdict, note, content_hash, updated_at}): undo restores it.
    previous = models.JSONField(null=True, blank=True, editable=False)
    # The case's dataset, copied by the same triggers (since migration 0004_label_dataset), so a reviewer's
    # counts and last label in one queue come from one index instead of a join over all their labels.
    dataset = models.ForeignKey(
        Dataset, null=True, blank=True, editable=False, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = LabelQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["case", "rubric", "reviewer"], name="label_one_per_reviewer"),
        ]
        indexes = [
            models.Index(fields=["rubric", "case"], name="label_rubric_case"),
            models.Index(fields=["reviewer", "-updated_at"], name="label_reviewer_recent"),
            # A reviewer's labels in one queue, newest first: undo, progress.
            models.Index(fields=["reviewer", "rubric", "dataset", "-updated_at", "-id"], name="label_queue_recent"),
            models.Index(fields=["reviewer", "rubric", "dataset", "case"], condition=models.Q(stale=True),
                         name="label_queue_stale"),
        ]

    def __str__(self) -> str:
        return f"{self.reviewer} {self.verdict} {self.case} ({self.rubric})"

    def revise(self, *, verdict: str, note: str, content_hash: str) -> None:
        """Confirm or change this label against the case content the reviewer saw (undo can restore it)."""
        self.previous = {
            "verdict": self.verdict, "note": self.note, "content_hash": self.content_hash,
            "updated_at": self.updated_at.isoformat(),
        }
        self.verdict = verdict
        self.note = note
        self.content_hash = content_hash
        self.updated_at = timezone.now()
        self.save(update_fields=["verdict", "note", "content_hash", "updated_at", "previous"])


class Skip(models.Model):
    """A reviewer passed on a case for now: it comes back to them only after the rest."""

    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="skips")
    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="skips")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="skips")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["case", "rubric", "reviewer"], name="skip_one_per_reviewer"),
        ]
        indexes = [models.Index(fields=["reviewer", "rubric", "created_at"], name="skip_reviewer_rubric")]


class Adjudication(models.Model):
    """A lead's decision on a (case, rubric): it is the human verdict, whatever the labels say."""

    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="adjudications")
    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="adjudications")
    verdict = models.CharField(max_length=4, choices=Verdict.choices)
    note = models.TextField(blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    decided_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["case", "rubric"], name="adjudication_one_per_case_rubric"),
        ]


class LabelRequest(models.Model):
    """A lead asked for one more label on a case (contested cases, say)."""

    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="label_requests")
    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="label_requests")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["rubric", "case"], name="labelrequest_rubric_case")]


class QueuePriority(models.IntegerChoices):
    """How far ahead of other needed cases the queue serves a (case, rubric), highest first (docs/words.md,
    queue order). `labeling` never imports `judges`: what judges know about a case reaches the queue as
    one of these levels, written on its tally by `judges`."""

    NONE = 0, "other cases that need labels"
    CONTESTED = 10, "contested judgments"
    AUDIT_SAMPLE = 20, "drawn audit-sample cases"


class CaseTally(models.Model):
    """What the labeling queue knows about one (case, rubric): how many labels and requests it has.

    One row per case and rubric, so the queue picks "the fewest labels first" from an index instead of
    counting 200,000 labels on every request. Database triggers (migration 0003_queue_triggers) create the
    rows when a case or rubric is created and keep the counts exact on every insert and delete of labels
    and label requests — whoever writes them: the labeling services, imports, the admin, bulk writes. A
    label also ends its reviewer's claim in the same trigger (migration 0006_hold_ends_on_label).
    """

    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="tallies")
    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="tallies")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="+")
    labels = models.PositiveIntegerField(default=0, help_text="Labels of this rubric, counting or not.")
    requested = models.PositiveIntegerField(default=0, help_text="A lead's requests for another label.")
    # Served to this reviewer until then: others get another case that needs only one more label, so two
    # people working through a 1-label rubric do not both label the same case (Label Studio's task lock).
    claimed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    claimed_until = models.DateTimeField(null=True, blank=True)
    # Served ahead of the rest while it needs labels: higher priority first, then priority_order (an audit
    # sample's seeded random order). db_default: the triggers insert rows without naming these columns.
    priority = models.PositiveSmallIntegerField(choices=QueuePriority.choices, default=QueuePriority.NONE,
                                                db_default=QueuePriority.NONE)
    priority_order = models.PositiveIntegerField(default=0, db_default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["case", "rubric"], name="casetally_one_per_case_rubric")]
        indexes = [
            # The queue: the fewest labels first, then by case id.
            models.Index(fields=["dataset", "rubric", "labels", "case"], name="casetally_queue"),
            # The queue of a dataset served newest ingested first (Dataset.queue_order).
            models.Index(fields=["dataset", "rubric", "-case"], name="casetally_newest"),
            models.Index(fields=["dataset", "rubric", "labels", "case"], condition=models.Q(requested__gt=0),
                         name="casetally_requested"),
            models.Index(fields=["claimed_by"], condition=models.Q(claimed_by__isnull=False), name="casetally_claimed"),
            # The queue's prioritized branch: only the few rows above NONE.
            models.Index(fields=["dataset", "rubric", "-priority", "priority_order", "case"],
                         condition=models.Q(priority__gt=0), name="casetally_priority"),
        ]

    def __str__(self) -> str:
        return f"{self.case_id}/{self.rubric_id}: {self.labels} labels"


class PolicyDocument(models.Model):
    """One version of a named policy text (the return policy, the tool rules): the agent reads it through
    the API and a judge config references it, so both see the very same text. A version never changes:
    writing the policy again makes the next version."""

    project = models.ForeignKey("evalhub.Project", on_delete=models.PROTECT, related_name="policies")
    slug = models.SlugField(max_length=100)
    version = models.PositiveIntegerField()
    text = models.TextField()
    sha256 = models.CharField(max_length=64, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["slug", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["project", "slug", "version"], name="policydocument_unique_version"),
        ]

    def __str__(self) -> str:
        return f"{self.slug} v{self.version}"

    def save(self, *args, **kwargs) -> None:
        # A guard, not a workflow: a saved version is what configs and agents were given; never rewrite it.
        if not self._state.adding:
            raise ValueError("A policy version never changes: write the next version instead.")
        super().save(*args, **kwargs)


class OtlpTrace(models.Model):
    """A trace sent to the OTLP receiver whose root span has not come yet (docs/otlp.md): what a case takes
    from its spans so far, kept until the root span comes (the case is written and this row goes) or the wait
    runs out (EVALHUB_OTLP_TRACE_WAIT_SECONDS: the trace is given up as incomplete; its pieces are dropped and
    the row stays as the record, named once in a later answer of the receiver).

    Written only by labeling.otlp.services, under the dataset's row lock."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="otlp_traces")
    trace_id = models.CharField(max_length=32)
    # labeling.otlp.traces.span_pieces of each span so far, redacted with the dataset's kinds.
    pieces = models.JSONField(default=list)
    # The redaction's value → placeholder map for this trace, keyed by an HMAC of each value (never the value),
    # so a value in a later request gets the placeholder it got before: {"keys": {hmac: placeholder}, "counts"}.
    placeholders = models.JSONField(default=dict)
    first_seen_at = models.DateTimeField()
    gave_up_at = models.DateTimeField(null=True, blank=True)
    problem = models.TextField(blank=True, default="")
    reported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset", "trace_id"], name="otlptrace_unique_trace")]
        indexes = [models.Index(fields=["first_seen_at"], condition=models.Q(gave_up_at__isnull=True),
                                name="otlptrace_waiting")]

    def __str__(self) -> str:
        return f"{self.dataset_id}/{self.trace_id}"


class OtlpRefusal(models.Model):
    """What the OTLP receiver refused of one dataset on one day, for one reason (docs/otlp.md, "Refused traces"):
    the traces and spans, the requests they came in, when first and last, and one trace id as an example. The
    exporters do not print the partial success that names them, so the lead reads them here.

    Written only by labeling.otlp.services (one row a dataset, day and reason: a count, never a row a trace)."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="otlp_refusals")
    day = models.DateField()
    why = models.CharField(max_length=300)  # a few words that do not vary (has no messages, The body is not gzip)
    detail = models.CharField(max_length=300, blank=True, default="")  # the last such refusal's message in full
    status = models.PositiveSmallIntegerField(default=200)  # the HTTP status the request was answered with
    traces = models.PositiveIntegerField(default=0)
    spans = models.PositiveIntegerField(default=0)
    requests = models.PositiveIntegerField(default=0)
    example_trace_id = models.CharField(max_length=32, blank=True, default="")
    first_at = models.DateTimeField()
    last_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset", "day", "why"], name="otlprefusal_unique_day_why")]

    def __str__(self) -> str:
        return f"{self.dataset_id}/{self.day}: {self.why}"
