"""The README's CI lines, and the CI tutorial's that run after them, leave no untracked file in the checkout:
every file their shell blocks write (--out, --output, --junit, --json, a redirect) is one .gitignore covers.
No database."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WRITTEN = re.compile(r"(?:--out|--output|--junit|--json|>)\s+([\w./-]+\.(?:jsonl|json|xml))")


def written_by_readme() -> set[str]:
    text = (ROOT / "README.md").read_text() + (ROOT / "docs" / "ci-tutorial.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)
    return {name for block in blocks for name in WRITTEN.findall(block) if not name.startswith(("/", "$"))}


def test_every_file_the_readmes_ci_lines_write_is_ignored():
    # Before: cases.jsonl, outputs.jsonl, evalhub-junit.xml, ... were left untracked after the CI lines.
    names = written_by_readme()
    assert {"var/ci/cases.jsonl", "var/ci/outputs.jsonl", "var/ci/junit.xml"} <= names
    done = subprocess.run(["git", "check-ignore", "--no-index", *sorted(names)], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert set(done.stdout.split()) == names, names - set(done.stdout.split())
