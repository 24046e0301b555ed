from django import forms
from django.conf import settings
from django.template.defaultfilters import filesizeformat

from labeling.importing import Format, format_for
from labeling.models import Dataset, Rubric

# Slugs that would shadow a page's URL (/datasets/new/, /rubrics/new/).
RESERVED_SLUGS = {"new"}


def _clean_slug(slug: str) -> str:
    if slug in RESERVED_SLUGS:
        raise forms.ValidationError(f"“{slug}” is reserved; choose another slug.")
    return slug


class RubricCreateForm(forms.ModelForm):
    """A new rubric. The slug is chosen here once and never changes (configs and CI name it)."""

    def clean_slug(self) -> str:
        return _clean_slug(self.cleaned_data["slug"])

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


class DatasetCreateForm(forms.ModelForm):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["queue_order"].required = False  # left out: the fewest labels first
        self.fields["queue_share"].required = False

    def clean_slug(self) -> str:
        return _clean_slug(self.cleaned_data["slug"])

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


FORMAT_CHOICES = [("", "By the file's extension (.jsonl, .csv)"), *((f.value, f.name) for f in Format)]


class _UploadForm(forms.Form):
    file = forms.FileField()
    format = forms.ChoiceField(choices=FORMAT_CHOICES, required=False)

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


class LabelImportForm(_UploadForm):
    rubric = forms.ModelChoiceField(queryset=Rubric.objects.order_by("slug"), to_field_name="slug")
