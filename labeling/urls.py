from django.urls import path

from labeling import api, views

app_name = "labeling"

urlpatterns = [
    path("datasets/", views.dataset_list, name="dataset_list"),
    path("rubrics/", views.rubric_list, name="rubric_list"),
    # Datasets, cases, rubrics, import and export (issue 2)
    path("datasets/new/", views.dataset_create, name="dataset_create"),
    path("datasets/<slug:slug>/", views.dataset_detail, name="dataset_detail"),
    path("datasets/<slug:slug>/import/", views.dataset_import, name="dataset_import"),
    path("datasets/<slug:slug>/export/<str:kind>/", views.dataset_export, name="dataset_export"),
    path("cases/<int:case_id>/", views.case_detail, name="case_detail"),
    path("rubrics/new/", views.rubric_create, name="rubric_create"),
    path("rubrics/<slug:slug>/edit/", views.rubric_edit, name="rubric_edit"),
    path("api/datasets/<slug:slug>/cases", api.cases_ingest, name="api_cases_ingest"),
]
