from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Judges"

    def ready(self) -> None:
        # Register the run tasks in every process, so that services can queue them by name (eagerly in tests).
        from judges.drift.services import drift_check_record
        from judges.runs import tasks

        # A drift run that has just finished stores its figures: drift sits above runs, so it is wired
        # in here rather than imported by the run task.
        if drift_check_record not in tasks.AFTER_RUN_WORK:
            tasks.AFTER_RUN_WORK.append(drift_check_record)
