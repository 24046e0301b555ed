from io import StringIO

import pytest
from django.core.management import call_command


@pytest.fixture(scope="class")
def demo_loaded_twice(django_db_setup, django_db_blocker):
    """`load_demo` run twice (it loads once however often it runs) and committed for one class's tests, which
    read it inside their own rolled-back transactions: the demo costs a minute to load, not a minute a test.
    The database is emptied after the class."""
    with django_db_blocker.unblock():
        call_command("load_demo", stdout=StringIO())
        call_command("load_demo", stdout=StringIO())
    yield
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)
