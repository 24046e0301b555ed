from django.apps import AppConfig


class EvalhubConfig(AppConfig):
    name = "evalhub"
    verbose_name = "Accounts and access"

    def ready(self) -> None:
        from evalhub import lookups  # noqa: F401  (registers `__among` on every field)
