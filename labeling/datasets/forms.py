from django import forms
from django.conf import settings
from django.http import QueryDict
from django.template.defaultfilters import filesizeformat

from evalhub.models import Project
from labeling.importing import Format, format_for
from labeling.importing.reading import CASE_KINDS
from labeling.importing.redaction import REDACT_KIND_HELP, REDACT_KINDS
from labeling.models import Case, Dataset, Rubric

# Slugs that would shadow a page's URL (/datasets/new/, /rubrics/new/).
RESERVED_SLUGS = {"new"}


def _clean_slug(slug: str) -> str:
    if slug in RESERVED_SLUGS:
        raise forms.ValidationError(f"“{slug}” is reserved; choose another slug.")
    return slug


class _InProjectForm(forms.ModelForm):
    """A new object of `project`: its slug is unique within the project only, so the form checks that itself
    (the model's constraint names the project, which is no field of the form) and looks nowhere else: another
    project's slug is neither refused nor revealed."""

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.project = self.instance.project = project

    def clean_slug(self) -> str:
        slug = _clean_slug(self.cleaned_data["slug"])
        if self._meta.model.objects.filter(project=self.project, slug=slug).exists():
            noun = self._meta.model._meta.verbose_name
            raise forms.ValidationError(f"This project has a {noun} {slug!r} already: choose another slug.")
        return slug


class RubricCreateForm(_InProjectForm):
    """A new rubric. The slug is chosen here once and never changes (configs and CI name it)."""

    class Meta:
        model = Rubric
        # Stage, thresholds and fail_closed are left out on purpose: only the audited promotion
        # pages change them.
        fields = ["slug", "name", "criteria", "labels_per_case"]
        widgets = {"name": forms.TextInput(), "criteria": forms.Textarea(attrs={"rows": 8})}
        help_texts = {
            "slug": "Letters, digits, - and _. Configs and CI name the rubric by it: it cannot change later.",
        }


class RubricEditForm(forms.ModelForm):
    class Meta:
        model = Rubric
        fields = ["name", "criteria", "labels_per_case"]
        widgets = {"name": forms.TextInput(), "criteria": forms.Textarea(attrs={"rows": 8})}


class DatasetCreateForm(_InProjectForm):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["queue_order"].required = False  # left out: the fewest labels first
        self.fields["queue_share"].required = False

    def clean_queue_order(self) -> str:
        return self.cleaned_data["queue_order"] or Dataset.QueueOrder.FEWEST_LABELS

    def clean_queue_share(self) -> int:
        share = self.cleaned_data["queue_share"]
        return Dataset._meta.get_field("queue_share").default if share is None else share

    class Meta:
        model = Dataset
        fields = ["slug", "name", "description", "queue_order", "queue_share"]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}
        help_texts = {"slug": "Letters, digits, - and _; used in URLs, commands and the API."}


class RedactionForm(forms.Form):
    redact = forms.MultipleChoiceField(
        choices=[(kind, REDACT_KIND_HELP[kind]) for kind in REDACT_KINDS],
        widget=forms.CheckboxSelectMultiple, required=False, label="Redact from cases on the way in",
    )


class PoliciesForm(forms.Form):
    """The policy documents a dataset's cases are about, among the policies of its project."""

    policies = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, required=False,
                                         label="Policy documents of this dataset")

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        slugs = project.policies.order_by("slug").values_list("slug", flat=True).distinct()
        self.fields["policies"].choices = [(slug, slug) for slug in slugs]


FORMAT_CHOICES = [("", "By the file's extension (.jsonl, .csv)"), *((f.value, f.name) for f in Format)]


class _UploadForm(forms.Form):
    file = forms.FileField()
    format = forms.ChoiceField(choices=FORMAT_CHOICES, required=False)

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if "rubric" in self.fields:  # the project's rubrics only: a label pairs a case with its own project's
            self.fields["rubric"].queryset = Rubric.objects.filter(project=project).order_by("slug")

    def clean(self) -> dict:
        data = super().clean()
        upload = data.get("file")
        if upload is None:
            return data
        limit = settings.EVALHUB_IMPORT_MAX_BYTES
        if upload.size > limit:
            self.add_error("file", f"The file is {filesizeformat(upload.size)}; the limit is "
                                   f"{filesizeformat(limit)} (EVALHUB_IMPORT_MAX_BYTES). Split it.")
            return data
        try:
            data["fmt"] = format_for(upload.name, data.get("format") or None)
        except ValueError as exc:
            self.add_error("format", str(exc))
        return data


class CaseImportForm(_UploadForm):
    update = forms.BooleanField(
        required=False, label="Update existing cases",
        help_text="Cases whose external_id exists already are updated; without this they are errors.",
    )
    rubric = forms.ModelChoiceField(
        queryset=Rubric.objects.none(), to_field_name="slug", required=False,
        label="Rubric of the humanVerdict column",
        help_text="Only for a file whose rows carry a humanVerdict (pass or fail): each becomes your label of "
        "this rubric on its case.",
    )


class LabelImportForm(_UploadForm):
    rubric = forms.ModelChoiceField(queryset=Rubric.objects.none(), to_field_name="slug")
    assign_reviewers = forms.BooleanField(
        required=False, label="Assign the reviewers the file names to this dataset",
        help_text="It opens the dataset's cases to them (audited). Without it, a reviewer of the project not "
                  "assigned here is refused.",
    )


# The case list's kind filter value for the cases without a calibration kind (the API says it with kind=).
KIND_UNSET = "unset"


def case_filters(query: QueryDict, *, page: bool) -> tuple[dict, list[tuple[str, str]]]:
    """The category, split and kind filters of a case list from a query string, as dataset_case_rows and
    pipeline_cases take them (a name left out is not filtered), and every problem as (field, message).

    A page's query (`page=True`) leaves out an empty value (its "all" choice) and its kind "unset" selects
    the cases without a kind; the API's keeps an empty value (kind= selects the cases without one). A
    value with a problem is left out of the filters.
    """
    filters: dict = {name: query.get(name) for name in ("category", "split", "kind")
                     if name in query and (query.get(name) or not page)}
    if page and filters.get("kind") == KIND_UNSET:
        filters["kind"] = ""
    errors: list[tuple[str, str]] = []
    if filters.get("split") not in (None, *Case.Split.values):
        errors.append(("split", f"must be {' or '.join(Case.Split.values)}"))
        del filters["split"]
    if filters.get("kind") not in (None, "", *CASE_KINDS):
        errors.append(("kind", f"must be one of {', '.join(CASE_KINDS)}, or empty for cases without a kind"))
        del filters["kind"]
    return filters, errors
