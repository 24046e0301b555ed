from django.urls import path

from judges import api, probe_views, promotion_views, report_views, views

app_name = "judges"

urlpatterns = [
    # Judge configs (issue 5)
    path("judges/", views.judge_index, name="judge_index"),
    path("rubrics/<slug:slug>/judges/", views.config_list, name="config_list"),
    path("rubrics/<slug:slug>/judges/new/", views.config_create, name="config_create"),
    path("judges/<int:config_id>/", views.config_detail, name="config_detail"),
    path("judges/<int:config_id>/run/", views.run_create, name="run_create"),
    path("prices/", views.price_list, name="price_list"),
    path("prices/<int:price_id>/edit/", views.price_edit, name="price_edit"),
    # Runs (issue 5)
    path("runs/", views.run_list, name="run_list"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/progress/", views.run_progress, name="run_progress"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/retry/", views.run_retry, name="run_retry"),
    path("runs/<int:run_id>/judgments.<str:fmt>", views.run_export, name="run_export"),
    # Calibration report (issue 6)
    path("runs/<int:run_id>/report/", report_views.run_report, name="run_report"),
    # Second opinions (issue 8): contested cases back to the reviewers
    path("runs/<int:run_id>/report/send-contested/", report_views.run_send_contested, name="run_send_contested"),
    # Bias probes (issue 9): started from a run's report, followed in its panel
    path("runs/<int:run_id>/probes/", probe_views.probes_panel, name="probes_panel"),
    path("runs/<int:run_id>/probes/start/", probe_views.probes_create, name="probes_start"),
    path("runs/compare/", report_views.run_compare, name="run_compare"),
    path("api/runs/<int:run_id>/report", api.run_report, name="api_run_report"),
    # Promotion, the gate config and CI results (issue 7)
    path("promotion/", promotion_views.overview, name="promotion_overview"),
    path("promotion/audit/", promotion_views.audit_log, name="audit_log"),
    path("rubrics/<slug:slug>/promotion/", promotion_views.rubric_page, name="promotion_rubric"),
    path("rubrics/<slug:slug>/promotion/promote/", promotion_views.rubric_promote, name="promotion_promote"),
    path("rubrics/<slug:slug>/promotion/demote/", promotion_views.rubric_demote, name="promotion_demote"),
    path("rubrics/<slug:slug>/promotion/thresholds/", promotion_views.rubric_thresholds, name="promotion_thresholds"),
    path("api/gates", api.gates, name="api_gates"),
    path("api/ci-results", api.ci_results_create, name="api_ci_results"),
]
