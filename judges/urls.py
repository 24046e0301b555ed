from django.urls import include, path

from judges.calibration import api as calibration_api
from judges.calibration import views as calibration_views
from judges.configs import views as config_views
from judges.drift import views as drift_views
from judges.export import views as export_views
from judges.estimates import api as estimate_api
from judges.estimates import views as estimate_views
from judges.monitoring import views as monitor_views
from judges.probes import views as probe_views
from judges.promotion import api as promotion_api
from judges.promotion import views as promotion_views
from judges.proposals import views as proposal_views
from judges.runs import api as run_api
from judges.runs import views as run_views
from judges.synthetic import views as synthetic_views
from judges.traffic import views as traffic_views

app_name = "judges"

# Pages live under their project (docs/projects.md): /p/<project>/…; every view takes the project through
# evalhub.access.member_required or lead_required, which answer 404 to a non-member.
project_pages = [
    # Judge configs
    path("judges/", config_views.judge_index, name="judge_index"),
    path("rubrics/<slug:slug>/judges/", config_views.config_list, name="config_list"),
    path("rubrics/<slug:slug>/judges/new/", config_views.config_create, name="config_create"),
    path("judges/<int:config_id>/", config_views.config_detail, name="config_detail"),
    path("judges/<int:config_id>/run/", run_views.run_create, name="run_create"),
    # Runs
    path("runs/", run_views.run_list, name="run_list"),
    path("runs/<int:run_id>/", run_views.run_detail, name="run_detail"),
    path("runs/banner/", run_views.run_banner, name="run_banner"),
    path("runs/<int:run_id>/progress/", run_views.run_progress, name="run_progress"),
    path("runs/<int:run_id>/cancel/", run_views.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/retry/", run_views.run_retry, name="run_retry"),
    path("runs/<int:run_id>/judgments.<str:fmt>", run_views.run_export, name="run_export"),
    # Calibration report
    path("runs/<int:run_id>/report/", calibration_views.run_report, name="run_report"),
    path("runs/<int:run_id>/agreement/", calibration_views.run_agreement, name="run_agreement"),
    # Second opinions: contested cases back to the reviewers
    path("runs/<int:run_id>/report/send-contested/", calibration_views.run_send_contested, name="run_send_contested"),
    # Bias probes: started from a run's report, followed in its panel
    path("runs/<int:run_id>/probes/", probe_views.probes_panel, name="probes_panel"),
    path("runs/<int:run_id>/probes/start/", probe_views.probes_create, name="probes_start"),
    path("runs/compare/", calibration_views.run_compare, name="run_compare"),
    # Judge improvement: an editor proposes the judge's next versions from a run's dev disagreements
    path("runs/<int:run_id>/improve/", proposal_views.proposal_create, name="proposal_create"),
    path("proposals/<int:proposal_id>/", proposal_views.proposal_detail, name="proposal_detail"),
    path("proposals/<int:proposal_id>/cancel/", proposal_views.proposal_cancel, name="proposal_cancel"),
    path("proposals/<int:proposal_id>/keep/", proposal_views.proposal_keep, name="proposal_keep"),
    path("proposals/<int:proposal_id>/discard/", proposal_views.proposal_discard, name="proposal_discard"),
    path("runs/<int:run_id>/audit-sample/", estimate_views.audit_sample_create, name="audit_sample_create"),
    # Synthetic cases: written by an editor into a dataset, with no answer yet
    path("datasets/<slug:slug>/synthesize/", synthetic_views.synthesis_create, name="synthesis_create"),
    path("synthesis/<int:job_id>/", synthetic_views.synthesis_detail, name="synthesis_detail"),
    # Promotion, the gate config and CI results
    path("promotion/", promotion_views.overview, name="promotion_overview"),
    path("promotion/audit/", promotion_views.audit_log, name="audit_log"),
    path("rubrics/<slug:slug>/promotion/", promotion_views.rubric_page, name="promotion_rubric"),
    path("rubrics/<slug:slug>/promotion/observe/", promotion_views.rubric_observe, name="promotion_observe"),
    path("rubrics/<slug:slug>/promotion/promote/", promotion_views.rubric_promote, name="promotion_promote"),
    path("rubrics/<slug:slug>/promotion/renew/", promotion_views.rubric_renew, name="promotion_renew"),
    path("rubrics/<slug:slug>/promotion/demote/", promotion_views.rubric_demote, name="promotion_demote"),
    path("rubrics/<slug:slug>/promotion/release/", promotion_views.rubric_release, name="promotion_release"),
    path("rubrics/<slug:slug>/promotion/drift/", drift_views.drift_now, name="promotion_drift"),
    path("rubrics/<slug:slug>/promotion/traffic/", traffic_views.traffic_set, name="traffic_set"),
    path("export/", export_views.verdict_export, name="verdict_export"),
    # Production monitoring
    path("monitors/", monitor_views.monitor_list, name="monitor_list"),
    path("monitors/channels/", monitor_views.channel_list, name="channel_list"),
    path("monitors/channels/<int:channel_id>/delete/", monitor_views.channel_delete, name="channel_delete"),
    path("monitors/<slug:slug>/", monitor_views.monitor_detail, name="monitor_detail"),
    path("monitors/<slug:slug>/settings/", monitor_views.monitor_settings, name="monitor_settings"),
    path("monitors/<slug:slug>/baseline/", monitor_views.monitor_baseline, name="monitor_baseline"),
    path("rubrics/<slug:slug>/promotion/ci-results/<int:result_id>/", promotion_views.ci_result_page,
         name="promotion_ci_result"),
    path("rubrics/<slug:slug>/promotion/thresholds/", promotion_views.rubric_thresholds, name="promotion_thresholds"),
]

urlpatterns = [
    path("p/<slug:project>/", include(project_pages)),
    path("prices/", config_views.price_list, name="price_list"),
    path("prices/<int:price_id>/edit/", config_views.price_edit, name="price_edit"),
    path("api/datasets/<slug:slug>/ci-runs", run_api.ci_runs, name="api_ci_runs"),
    path("api/runs/<int:run_id>/report", calibration_api.run_report, name="api_run_report"),
    path("api/runs/<int:run_id>/pass-rate", estimate_api.run_pass_rate_api, name="api_run_pass_rate"),
    path("api/gates", promotion_api.gates, name="api_gates"),
    path("api/ci-results", promotion_api.ci_results_create, name="api_ci_results"),
]
