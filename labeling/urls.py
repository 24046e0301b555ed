from django.urls import include, path

from labeling.datasets import api as datasets_api
from labeling.datasets import views as datasets
from labeling.disputes import views as disputes
from labeling.otlp import api as otlp_api
from labeling.otlp import logs_api as otlp_logs_api
from labeling.otlp import views as otlp_views
from labeling.policies import api as policies_api
from labeling.policies import views as policies
from labeling.queue import views as queue

app_name = "labeling"

# Pages live under their project (docs/projects.md): /p/<project>/…; every view takes the project through
# evalhub.access.member_required or lead_required, which answer 404 to a non-member.
project_pages = [
    path("datasets/", datasets.dataset_list, name="dataset_list"),
    path("rubrics/", datasets.rubric_list, name="rubric_list"),
    # Datasets, cases, rubrics, import and export
    path("datasets/new/", datasets.dataset_create, name="dataset_create"),
    path("datasets/<slug:slug>/", datasets.dataset_detail, name="dataset_detail"),
    path("datasets/<slug:slug>/import/", datasets.dataset_import, name="dataset_import"),
    path("datasets/<slug:slug>/kinds/", datasets.dataset_kinds, name="dataset_kinds"),
    path("datasets/<slug:slug>/redaction/", datasets.dataset_redaction, name="dataset_redaction"),
    path("datasets/<slug:slug>/policies/", datasets.dataset_policies, name="dataset_policies"),
    path("datasets/<slug:slug>/export/<str:kind>/", datasets.dataset_export, name="dataset_export"),
    path("datasets/<slug:slug>/otlp-refused/", otlp_views.otlp_refused, name="dataset_otlp_refused"),
    path("cases/<int:case_id>/", datasets.case_detail, name="case_detail"),
    path("rubrics/new/", datasets.rubric_create, name="rubric_create"),
    path("rubrics/<slug:slug>/edit/", datasets.rubric_edit, name="rubric_edit"),
    # Labeling: the reviewer's queue and history; leads' overview and disputes
    path("label/", queue.queue_start, name="queue_start"),
    path("label/history/", queue.history, name="history"),
    path("label/<slug:slug>/<slug:rubric_slug>/", queue.queue, name="queue"),
    path("label/<slug:slug>/<slug:rubric_slug>/label/", queue.queue_label, name="queue_label"),
    path("label/<slug:slug>/<slug:rubric_slug>/skip/", queue.queue_skip, name="queue_skip"),
    path("label/<slug:slug>/<slug:rubric_slug>/undo/", queue.queue_undo, name="queue_undo"),
    path("label/<slug:slug>/<slug:rubric_slug>/progress/", queue.queue_progress, name="queue_progress"),
    path("datasets/<slug:slug>/rubrics/<slug:rubric_slug>/", disputes.dataset_rubric, name="dataset_rubric"),
    path("datasets/<slug:slug>/rubrics/<slug:rubric_slug>/disputes/", disputes.disputes, name="disputes"),
    path("datasets/<slug:slug>/rubrics/<slug:rubric_slug>/cases/<int:case_id>/adjudicate/", disputes.adjudicate,
         name="adjudicate"),
    path("datasets/<slug:slug>/rubrics/<slug:rubric_slug>/cases/<int:case_id>/request-label/", disputes.request_label,
         name="request_label"),
    path("disputes/", disputes.disputes_index, name="disputes_index"),
    # Policy documents: everyone signed in reads, leads write the next version.
    path("policies/", policies.policy_list, name="policy_list"),
    path("policies/new/", policies.policy_create, name="policy_create"),
    path("policies/<slug:slug>/", policies.policy_detail, name="policy_detail"),
    path("policies/<slug:slug>/write/", policies.policy_write, name="policy_write"),
]

urlpatterns = [
    path("p/<slug:project>/", include(project_pages)),
    path("api/datasets/<slug:slug>", datasets_api.dataset_read, name="api_dataset"),
    path("api/datasets/<slug:slug>/cases", datasets_api.dataset_cases, name="api_cases_ingest"),
    path("api/otlp/v1/traces", otlp_api.otlp_traces, name="api_otlp_traces"),
    path("api/otlp/v1/logs", otlp_logs_api.otlp_logs, name="api_otlp_logs"),
    path("api/policies/<slug:slug>", policies_api.policy_read, name="api_policy"),
]
