import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings")

app = Celery("evalhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The judges app keeps its tasks with the runs they work on (judges/runs/tasks.py) and the drift check's
# and traffic judging's beside it (judges/drift/tasks.py, judges/traffic/tasks.py); the OTLP receiver's
# give-up of traces that waited too long is labeling's (labeling/otlp/tasks.py).
app.autodiscover_tasks(["judges.runs", "judges.drift", "judges.traffic", "judges.proposals", "labeling.otlp",
                        "judges.export", "judges.monitoring"])
