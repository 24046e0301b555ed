from django import forms

from judges.export.otlp import env_name_problem
from judges.models import VerdictExport


class VerdictExportForm(forms.ModelForm):
    """The names of the worker's variables that hold the OTLP endpoint and its headers (never the values)."""

    class Meta:
        model = VerdictExport
        fields = ["endpoint_env", "headers_env", "enabled"]
        labels = {"endpoint_env": "Endpoint variable", "headers_env": "Headers variable (optional)",
                  "enabled": "Send verdicts"}
        help_texts = {
            "endpoint_env": "The variable of the worker's environment holding the OTLP/HTTP logs endpoint, e.g. "
                            "EVALHUB_EXPORT_OTLP_ENDPOINT.",
            "headers_env": "The variable holding its headers as key=value,… (URL-encoded), e.g. "
                           "EVALHUB_EXPORT_OTLP_HEADERS.",
        }

    def _name(self, field: str) -> str:
        name = self.cleaned_data[field].strip()
        if name and (problem := env_name_problem(name)):
            raise forms.ValidationError(problem)
        return name

    def clean_endpoint_env(self) -> str:
        return self._name("endpoint_env")

    def clean_headers_env(self) -> str:
        return self._name("headers_env")
