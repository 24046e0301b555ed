import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings")

app = Celery("evalhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
