"""Labels in: reviewers' verdicts of one rubric, from JSONL or CSV, checked, then written all or nothing."""

from dataclasses import dataclass, field, replace
from typing import IO, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction
from django.utils import timezone

from evalhub.models import MemberEvent, Membership, Role
from labeling.importing.cases import BATCH_SIZE
from labeling.importing.reading import (
    ID_ALIASES,
    LOOKUP_CHUNK,
    Format,
    ImportRejected,
    RowError,
    chunks,
    keyed_row,
    read_records,
    text_field,
    validated_rows,
)
from labeling.importing.redaction import Redactor
from labeling.models import Case, Dataset, Label, Rubric, Verdict

LABEL_FIELDS = ("external_id", "reviewer", "verdict", "note")
LABEL_REQUIRED = ("external_id", "reviewer", "verdict")


@dataclass(frozen=True)
class LabelData:
    external_id: str
    reviewer: str
    verdict: str
    note: str


@dataclass(frozen=True)
class LabelImportResult:
    created: int
    revised: int
    unchanged: int
    new_reviewers: list[str]
    rubric_created: bool
    assigned_reviewers: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        text = f"{self.created} created, {self.revised} revised, {self.unchanged} unchanged"
        if self.new_reviewers:
            text += f"; new reviewer accounts: {', '.join(self.new_reviewers)}"
        if self.assigned_reviewers:
            text += f"; reviewers now assigned to the dataset: {', '.join(self.assigned_reviewers)}"
        if self.rubric_created:
            text += "; the rubric was created as a draft"
        return text


_username_validator = get_user_model().username_validator


def validate_label(obj: Any) -> tuple[LabelData | None, list[tuple[str | None, str]]]:
    obj, problems, external_id = keyed_row(obj, LABEL_FIELDS, "label")
    if obj is None:
        return None, problems
    reviewer = (text_field(obj, "reviewer", problems, required=True, max_chars=150) or "").strip()
    if "reviewer" in obj and isinstance(obj["reviewer"], str):
        try:
            _username_validator(reviewer)
        except ValidationError:
            problems.append(("reviewer", f"{reviewer!r} is not a valid username (letters, digits and @.+-_)"))
    verdict = (text_field(obj, "verdict", problems, required=True, max_chars=20) or "").strip().lower()
    if isinstance(obj.get("verdict"), str) and verdict not in Verdict.values:
        problems.append(("verdict", f"must be pass or fail, not {obj['verdict']!r}"))
    note = text_field(obj, "note", problems) or ""
    if problems:
        return None, problems
    return LabelData(external_id=external_id, reviewer=reviewer, verdict=verdict, note=note), []


def labels_import(*, dataset: Dataset, rubric_slug: str, stream: IO[bytes], fmt: Format,
                  max_bytes: int | None = None, by=None, assign_reviewers: bool = False) -> LabelImportResult:
    """Import reviewers' labels of one rubric of the dataset's project for cases of `dataset`, all or nothing.

    Must succeed or fail together: creating the rubric (as a draft, in the dataset's project) if missing,
    creating reviewer accounts named in the file (no usable password) as reviewers of the dataset's project
    (audited, as done `by` the importing person) and assigning them to the dataset, creating new labels and
    revising existing ones against each case's current content. A reviewer named in the file must be a member
    of the project, or a new account: an account of someone who is not a member is refused, never added (they
    join a project by invitation). A reviewer of the project not assigned to the dataset is refused too, since
    assigning them opens its cases to them, unless `assign_reviewers` says to assign them (audited, and said in
    the result). Leads and the admin label every dataset of the project and are never assigned.
    """
    errors: list[RowError] = []
    try:
        validate_slug(rubric_slug)
    except ValidationError:
        errors.append(RowError(None, "rubric", f"{rubric_slug!r} is not a valid slug"))
    records = read_records(
        stream, fmt, errors, known=LABEL_FIELDS, required=LABEL_REQUIRED, aliases=ID_ALIASES,
        max_bytes=settings.EVALHUB_IMPORT_MAX_BYTES if max_bytes is None else max_bytes,
    )
    rows: list[tuple[int, LabelData]] = validated_rows(
        records, errors, validate=validate_label, key=lambda data: (data.external_id, data.reviewer),
        duplicate=lambda data, first: (
            "reviewer", f"{data.reviewer!r} labels {data.external_id!r} twice in this import (first at line {first})"
        ),
    )
    if not rows and not errors:
        errors.append(RowError(None, None, "the file has no labels"))

    with transaction.atomic():
        cases: dict[str, tuple[int, str]] = {}
        case_texts: dict[str, tuple[str, str]] = {}
        ids = sorted({data.external_id for _, data in rows})
        for chunk in chunks(ids, LOOKUP_CHUNK):
            found = Case.objects.filter(dataset=dataset, external_id__in=chunk)
            for pk, external_id, content_hash, input_, output in found.values_list(
                    "pk", "external_id", "content_hash", "input", "output"):
                cases[external_id] = (pk, content_hash)
                case_texts[external_id] = (input_, output or "")
        errors.extend(
            RowError(row, "external_id", f"{data.external_id!r} is not a case of the dataset {dataset.slug}")
            for row, data in rows if data.external_id not in cases
        )
        names = sorted({data.reviewer for _, data in rows})
        strangers = _not_members(dataset=dataset, usernames=names)
        first_row = {}
        for row, data in rows:
            first_row.setdefault(data.reviewer, row)
        errors.extend(
            RowError(first_row[name], "reviewer", f"{name!r} is not a member of this project: invite them to it "
                                                  "first (a name new to evalhub gets a reviewer account here)")
            for name in sorted(strangers, key=first_row.get)
        )
        unassigned = _unassigned_reviewers(dataset=dataset, usernames=names)
        if not assign_reviewers:
            errors.extend(
                RowError(first_row[name], "reviewer", f"{name!r} is a reviewer of this project not assigned to the "
                                                      f"dataset {dataset.slug}: assign them first (the members "
                                                      "page), or import with the reviewers assigned (it opens the "
                                                      "dataset's cases to them)")
                for name in sorted(unassigned, key=first_row.get)
            )
        # A reviewer's note may quote the case, an error a row: the dataset's redaction applies to them as to
        # the case (docs/security.md, "Redaction"), so a note is stored, shown and exported redacted.
        redactor = Redactor(Dataset.objects.only("redact").get(pk=dataset.pk).redact_kinds)
        if errors:
            raise ImportRejected([e.redacted(redactor.text_alone) for e in errors] if redactor else errors)
        if redactor:
            rows = [(row, replace(data, note=redactor.about_case(data.note, case_texts[data.external_id])))
                    for row, data in rows]

        rubric, rubric_created = Rubric.objects.get_or_create(
            project_id=dataset.project_id, slug=rubric_slug, defaults={"name": rubric_slug, "criteria": ""}
        )
        users = _reviewer_accounts(dataset=dataset, usernames=names, by=by)
        new_reviewers = sorted(name for name, (_, created) in users.items() if created)
        assigned = sorted(unassigned)
        dataset.reviewers.add(*(user for name, (user, _) in users.items() if name in new_reviewers or name in assigned))
        MemberEvent.objects.bulk_create([
            MemberEvent(project_id=dataset.project_id, kind=MemberEvent.Kind.ASSIGNMENTS_SET, subject=name, by=by,
                        detail=f"assigned to {dataset.slug} by a labels import that named them")
            for name in assigned
        ])

        current: dict[tuple[int, int], Label] = {}
        for chunk in chunks([pk for pk, _ in cases.values()], LOOKUP_CHUNK):
            for label in Label.objects.filter(rubric=rubric, case_id__in=chunk,
                                              reviewer__in=[user for user, _ in users.values()]):
                current[(label.case_id, label.reviewer_id)] = label
        now = timezone.now()
        new, revised, unchanged = [], 0, 0
        for _, data in rows:
            case_id, content_hash = cases[data.external_id]
            reviewer = users[data.reviewer][0]
            label = current.get((case_id, reviewer.pk))
            if label is None:
                new.append(Label(case_id=case_id, rubric=rubric, reviewer=reviewer, verdict=data.verdict,
                                 note=data.note, content_hash=content_hash, created_at=now, updated_at=now))
            elif (label.verdict, label.note, label.content_hash) == (data.verdict, data.note, content_hash):
                unchanged += 1
            else:
                label.revise(verdict=data.verdict, note=data.note, content_hash=content_hash)
                revised += 1
        Label.objects.bulk_create(new, batch_size=BATCH_SIZE)
    return LabelImportResult(created=len(new), revised=revised, unchanged=unchanged,
                             new_reviewers=new_reviewers, rubric_created=rubric_created, assigned_reviewers=assigned)


def _not_members(*, dataset: Dataset, usernames: list[str]) -> set[str]:
    """The names among `usernames` of existing accounts that are not members of the dataset's project (the
    instance admin leads every project)."""
    accounts = get_user_model().objects.filter(username__in=usernames, is_superuser=False)
    members = Membership.objects.filter(project_id=dataset.project_id, user__username__in=usernames)
    return set(accounts.values_list("username", flat=True)) - set(members.values_list("user__username", flat=True))


def _unassigned_reviewers(*, dataset: Dataset, usernames: list[str]) -> set[str]:
    """The names among `usernames` of reviewers of the dataset's project (the only role assignments are for) who
    are not assigned to the dataset."""
    reviewers = Membership.objects.filter(project_id=dataset.project_id, role=Role.REVIEWER,
                                          user__username__in=usernames, user__is_superuser=False)
    assigned = dataset.reviewers.filter(username__in=usernames)
    return set(reviewers.values_list("user__username", flat=True)) - set(assigned.values_list("username", flat=True))


def _reviewer_accounts(*, dataset: Dataset, usernames: list[str], by) -> dict[str, tuple[Any, bool]]:
    """The users named in a labels file (members of the dataset's project, checked before), creating missing
    ones as reviewers of that project who cannot log in yet; each membership made is audited."""
    User = get_user_model()
    found = {user.username: (user, False) for user in User.objects.filter(username__in=usernames)}
    for name in usernames:
        if name not in found:
            user = User(username=name)
            user.set_unusable_password()  # an admin sets a password or the user resets it
            user.save()
            found[name] = (user, True)
    made = [user for user, created in found.values() if created]
    Membership.objects.bulk_create(
        [Membership(project_id=dataset.project_id, user=user, role=Role.REVIEWER) for user in made]
    )
    MemberEvent.objects.bulk_create([
        MemberEvent(project_id=dataset.project_id, kind=MemberEvent.Kind.ADDED, subject=user.username, by=by,
                    detail=f"as a reviewer: a new account named in a labels import into {dataset.slug}")
        for user in made
    ])
    return found
