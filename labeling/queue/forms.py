"""The queue's forms: a verdict on the case shown, a skip, an undo."""

from django import forms

from labeling.models import Verdict


class LabelForm(forms.Form):
    """One verdict on the case shown; content_hash is the content the reviewer saw."""

    case = forms.IntegerField(min_value=1)
    content_hash = forms.RegexField(regex=r"^[0-9a-f]{64}$")
    verdict = forms.ChoiceField(choices=Verdict.choices)
    note = forms.CharField(required=False, max_length=5000)
    back = forms.ChoiceField(choices=[("", "queue"), ("history", "history")], required=False)
    # Their own label's verdict as the page showed it ("none": no label); absent from older pages: not checked.
    seen_verdict = forms.ChoiceField(choices=[("", ""), ("none", "none"), *Verdict.choices], required=False)


class CaseIdForm(forms.Form):
    case = forms.IntegerField(min_value=1)


class UndoForm(forms.Form):
    label = forms.IntegerField(min_value=1)
