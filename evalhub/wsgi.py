import os

from django.core.wsgi import get_wsgi_application

from evalhub.chunked import ChunkedBodies

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings")
# Bodies without a Content-Length read whole under gunicorn and runserver alike (evalhub/chunked.py).
application = ChunkedBodies(get_wsgi_application())
