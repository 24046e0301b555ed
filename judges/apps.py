from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Judges"

    def ready(self) -> None:
        # Register the run tasks in every process, so that services can queue them by name (eagerly in tests).
        from judges.runs import tasks  # noqa: F401
