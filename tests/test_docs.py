"""The documentation: README within its budget, every page of docs/ in the site's navigation, and the site
building with `mkdocs build --strict` (a broken link, a missing page or a generated table that fails stops it)."""

import os
import subprocess
import sys
from pathlib import Path

import yaml
from django.conf import settings

from evalhub.environment import SCRIPT_VARIABLES, VARIABLES

ROOT = Path(settings.BASE_DIR)
README_BUDGET = 150  # lines: what a newcomer reads in five minutes (the rest is the site's)


def _nav_pages(items) -> list[str]:
    pages = []
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages.extend(_nav_pages(value) if isinstance(value, list) else [value])
    return pages


def test_the_readme_stays_within_its_budget():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_BUDGET, f"README.md has {lines} lines; its budget is {README_BUDGET}: move detail to docs/"


def test_every_docs_page_is_in_the_navigation_and_every_navigation_entry_exists():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python", "#"))
    nav = _nav_pages(config["nav"])
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    assert sorted(set(nav)) == pages, {"not in the nav": sorted(set(pages) - set(nav)),
                                      "in the nav, no page": sorted(set(nav) - set(pages))}
    assert len(nav) == len(set(nav)), "a page is in the navigation twice"


def test_the_site_builds_strictly_with_the_reference_made_from_the_code(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    commands = (tmp_path / "commands" / "index.html").read_text()
    for name in ("evalhub-gate check", "import_cases", "export_gates", "--max-cost-usd", "--project"):
        assert name in commands, name
    settings_page = (tmp_path / "settings" / "index.html").read_text()
    for name in [*VARIABLES, *SCRIPT_VARIABLES]:
        assert name in settings_page, name
    api = (tmp_path / "api" / "index.html").read_text()
    for path, scope in (("/api/gates", "gates:read"), ("/api/ci-results", "results:write"),
                        ("/api/otlp/v1/traces", "cases:write")):
        assert path in api and scope in api, path
