from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Judges"

    def ready(self) -> None:
        # Register the run tasks in every process, so that services can queue them by name (eagerly in tests).
        from judges.calibration import selectors as calibration_selectors
        from judges.drift.services import drift_check_record
        from judges.export.tasks import export_label_later
        from judges.probes.selectors import run_probe_figures
        from judges.promotion.selectors import label_in_granted_evidence
        from judges.proposals import tasks as proposal_tasks  # noqa: F401 - registers the job's task by name
        from judges.proposals.services import proposal_advance
        from judges.runs import tasks
        from judges.synthetic import tasks as synthetic_tasks  # noqa: F401 - registers the task by its name
        from labeling.queue import services as queue_services

        # A drift run that has just finished stores its figures: drift sits above runs, so it is wired
        # in here rather than imported by the run task.
        if drift_check_record not in tasks.AFTER_RUN_WORK:
            tasks.AFTER_RUN_WORK.append(drift_check_record)
        # A judge improvement moves on as its candidates' runs finish: proposals sit above runs.
        if proposal_advance not in tasks.AFTER_RUN_WORK:
            tasks.AFTER_RUN_WORK.append(proposal_advance)
        # A run's figures carry its bias probes': probes sit above calibration, so they are wired in here.
        if run_probe_figures not in calibration_selectors.RUN_FIGURE_EXTRAS:
            calibration_selectors.RUN_FIGURE_EXTRAS.append(run_probe_figures)
        # An undo is refused once a promotion's evidence counted the label: labeling never imports judges.
        if label_in_granted_evidence not in queue_services.UNDO_REFUSALS:
            queue_services.UNDO_REFUSALS.append(label_in_granted_evidence)
        # A reviewer's verdict goes out beside the judges' where the project exports verdicts (judges/export).
        if export_label_later not in queue_services.LABEL_RECORDED:
            queue_services.LABEL_RECORDED.append(export_label_later)
