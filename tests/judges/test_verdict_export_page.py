"""The Verdict export page: a lead names the worker's variables for the project's OTLP export; a name outside
OTEL_EXPORTER_OTLP_* / EVALHUB_EXPORT_* is refused on its field, and no value is ever asked for or shown."""

from django.urls import reverse

from judges.models import VerdictExport
from tests.conftest import TEST_PROJECT


def test_a_lead_names_the_variables_and_the_export_is_saved_for_this_project_only(lead_client, project,
                                                                                    other_project, monkeypatch):
    monkeypatch.setenv("EVALHUB_EXPORT_OTLP_ENDPOINT", "https://backend.example.com/v1/logs?secret=do-not-show")
    url = reverse("judges:verdict_export", args=[TEST_PROJECT])
    response = lead_client.post(url, {"endpoint_env": "EVALHUB_EXPORT_OTLP_ENDPOINT",
                                      "headers_env": "EVALHUB_EXPORT_OTLP_HEADERS", "enabled": "on"})
    assert response.status_code == 302
    export = VerdictExport.objects.get()
    assert (export.project, export.endpoint_env, export.enabled) == (project, "EVALHUB_EXPORT_OTLP_ENDPOINT", True)
    page = lead_client.get(url).content.decode()
    assert "EVALHUB_EXPORT_OTLP_ENDPOINT" in page and "do-not-show" not in page
    assert not VerdictExport.objects.filter(project=other_project).exists()


def test_an_app_secret_cannot_be_named(lead_client, project):
    url = reverse("judges:verdict_export", args=[TEST_PROJECT])
    response = lead_client.post(url, {"endpoint_env": "DJANGO_SECRET_KEY", "headers_env": "DATABASE_URL",
                                      "enabled": "on"})
    assert response.status_code == 200
    assert "not an allowed variable" in response.content.decode()
    assert not VerdictExport.objects.exists()


def test_reviewers_may_not_open_it(reviewer_client, project):
    assert reviewer_client.get(reverse("judges:verdict_export", args=[TEST_PROJECT])).status_code == 403
