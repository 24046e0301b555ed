from django.apps import AppConfig


class EvalhubConfig(AppConfig):
    name = "evalhub"
    verbose_name = "Accounts and access"
