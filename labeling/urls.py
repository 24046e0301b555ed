from django.urls import path

from labeling import api, policies, views

app_name = "labeling"

urlpatterns = [
    path("datasets/", views.dataset_list, name="dataset_list"),
    path("rubrics/", views.rubric_list, name="rubric_list"),
    # Datasets, cases, rubrics, import and export
    path("datasets/new/", views.dataset_create, name="dataset_create"),
    path("datasets/<slug:slug>/", views.dataset_detail, name="dataset_detail"),
    path("datasets/<slug:slug>/import/", views.dataset_import, name="dataset_import"),
    path("datasets/<slug:slug>/kinds/", views.dataset_kinds, name="dataset_kinds"),
    path("datasets/<slug:slug>/export/<str:kind>/", views.dataset_export, name="dataset_export"),
    path("cases/<int:case_id>/", views.case_detail, name="case_detail"),
    path("rubrics/new/", views.rubric_create, name="rubric_create"),
    path("rubrics/<slug:slug>/edit/", views.rubric_edit, name="rubric_edit"),
    path("api/datasets/<slug:slug>/cases", api.dataset_cases, name="api_cases_ingest"),
    # Labeling: the reviewer's queue and history; leads' overview and disputes
    path("label/", views.queue_start, name="queue_start"),
    path("label/history/", views.history, name="history"),
    path("label/<slug:slug>/<slug:rubric_slug>/", views.queue, name="queue"),
    path("label/<slug:slug>/<slug:rubric_slug>/label/", views.queue_label, name="queue_label"),
    path("label/<slug:slug>/<slug:rubric_slug>/skip/", views.queue_skip, name="queue_skip"),
    path("label/<slug:slug>/<slug:rubric_slug>/undo/", views.queue_undo, name="queue_undo"),
    path("label/<slug:slug>/<slug:rubric_slug>/progress/", views.queue_progress, name="queue_progress"),
    path("datasets/<slug:slug>/rubrics/<slug:rubric_slug>/", views.dataset_rubric, name="dataset_rubric"),
    path("datasets/<slug:slug>/rubrics/<slug:rubric_slug>/disputes/", views.disputes, name="disputes"),
    path("datasets/<slug:slug>/rubrics/<slug:rubric_slug>/cases/<int:case_id>/adjudicate/", views.adjudicate,
         name="adjudicate"),
    path("datasets/<slug:slug>/rubrics/<slug:rubric_slug>/cases/<int:case_id>/request-label/", views.request_label,
         name="request_label"),
    path("disputes/", views.disputes_index, name="disputes_index"),
    # Policy documents: everyone signed in reads, leads write the next version.
    path("policies/", policies.policy_list, name="policy_list"),
    path("policies/new/", policies.policy_create, name="policy_create"),
    path("policies/<slug:slug>/", policies.policy_detail, name="policy_detail"),
    path("policies/<slug:slug>/write/", policies.policy_write, name="policy_write"),
    path("api/policies/<slug:slug>", api.policy_read, name="api_policy"),
]
