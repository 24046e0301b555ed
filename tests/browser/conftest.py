"""The `page` fixture of the browser tests; the helpers they share are in tests/browser/helpers.py."""

import os

import pytest

from tests.browser.helpers import VIEWPORT, browser_page

# Playwright's sync API runs an event loop in this thread; the ORM calls in the tests are still plain sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def page():
    """A headless Chromium page, 1400 × 1000; a module that needs another overrides this fixture."""
    with browser_page(viewport=VIEWPORT) as page:
        yield page
