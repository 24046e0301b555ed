"""Which mailer the environment sets up (evalhub/settings.py): none unless asked, SMTP with a host."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from evalhub import settings as settings_module

MAIL_VARIABLES = ("EMAIL_BACKEND", "EMAIL_HOST", "EMAIL_PORT", "EMAIL_USE_TLS", "EMAIL_USE_SSL")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    for name in MAIL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(settings_module, "DEBUG", False)


def test_it_sends_no_mail_unless_asked():
    assert settings_module._mailers() == {}


def test_a_host_sets_up_smtp(monkeypatch):
    monkeypatch.setenv("EMAIL_HOST", "mail.example.com")
    monkeypatch.setenv("EMAIL_PORT", "587")
    monkeypatch.setenv("EMAIL_USE_TLS", "1")

    default = settings_module._mailers()["default"]

    assert default["BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"
    assert default["OPTIONS"] | {"host": "mail.example.com", "port": 587, "use_tls": True} == default["OPTIONS"]


def test_debug_or_a_choice_writes_mail_to_the_console(monkeypatch):
    monkeypatch.setattr(settings_module, "DEBUG", True)
    assert settings_module._mailers()["default"]["BACKEND"].endswith("console.EmailBackend")
    monkeypatch.setenv("EMAIL_BACKEND", "none")
    assert settings_module._mailers() == {}


@pytest.mark.parametrize(("env", "message"), [
    ({"EMAIL_BACKEND": "carrier-pigeon"}, "EMAIL_BACKEND"),
    ({"EMAIL_HOST": "mail.example.com", "EMAIL_USE_TLS": "1", "EMAIL_USE_SSL": "1"}, "not both"),
    ({"EMAIL_HOST": "mail.example.com", "EMAIL_PORT": "x"}, "EMAIL_PORT"),
])
def test_a_bad_value_stops_start_up(monkeypatch, env, message):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=message):
        settings_module._mailers()
