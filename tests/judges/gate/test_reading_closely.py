"""Reading CI closely: a not-evaluated gate-stage case is a warning annotation, the summary counts passes per
category, and the step summary's Markdown keeps hostile text inert (in-process, on the scripted stand-in)."""

import json

from judges.gate import cli as gate_cli
from judges.gate.report import markdown_text
from tests.judges.gate.test_cli import BAD, GOOD, case, gate_rubric, judge, workdir, write_config, write_outputs

__all__ = ["judge", "workdir"]  # fixtures

HOSTILE = "evil%0A::error::pwned | <img src=x> [click](https://e.vil) @octocat"


def check(workdir, cases, *extra) -> int:
    config = write_config(workdir / "gates.json", gate_rubric())
    outputs = write_outputs(workdir / "outputs.jsonl", cases)
    return gate_cli.main(["check", "--config", config, "--outputs", outputs, "--no-cache", *extra])


def test_a_gate_case_not_evaluated_is_a_warning_annotation_that_never_starts_a_line_with_its_text(
    workdir, judge, capsys, monkeypatch
):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    judge.control(fault="500")
    assert check(workdir, [case(HOSTILE, "Within 30 days.")]) == 3
    out = capsys.readouterr().out.splitlines()
    warnings = [line for line in out if line.startswith("::warning")]
    assert len(warnings) == 1
    # GitHub's data escaping: % (and CR, LF) are escaped, so "%0A" stays text and never ends the command.
    assert warnings[0].startswith("::warning title=evalhub gate return-policy::evil%250A")
    assert "not_evaluated: server error" in warnings[0]
    assert not [line for line in out if line.startswith("::error")]


def test_the_summary_counts_passes_per_category_and_the_step_summary_is_inert(workdir, judge, capsys, monkeypatch):
    summary = workdir / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    tools = dict(case("tool-1", "Within 30 days."), category="tools")
    assert check(workdir, [*GOOD, dict(BAD, external_id=HOSTILE), tools], "--json", "r.json") == 1
    assert "pass by category, return-policy: policy 3/4, tools 1/1" in capsys.readouterr().out
    markdown = summary.read_text()
    assert "#### gate" in markdown and "#### failures" in markdown
    failure = next(line for line in markdown.splitlines() if "evil" in line)
    assert failure.count("|") == 5  # four cells: the hostile id broke no column
    for raw in ("<img", "](", "@octocat", "::error"):
        assert raw not in markdown
    rubric = json.loads((workdir / "r.json").read_text())["rubrics"][0]
    assert rubric["categories"] == {"policy": {"passed": 3, "failed": 1, "not_evaluated": 0},
                                    "tools": {"passed": 1, "failed": 0, "not_evaluated": 0}}


def test_markdown_text_escapes_every_markup_character():
    text = markdown_text("a|b <i>x</i> *y* _z_ `c` [l](u) www.e.vil @me #1 ~s~ \\")
    assert set(text) & set("|<>*_`[]()@#~\\") <= {"#"}  # "#" only inside the &#…; references
    assert text.startswith("a&#124;b &#60;i&#62;x")
    assert "&#64;\u200bme" in text
