"""MkDocs hooks (mkdocs.yml): the reference pages' tables are made from the code they describe, so they cannot
drift from it. A page holds a marker line; the hook replaces it before the page is rendered:

    <!-- generated: settings -->   every row of evalhub/environment.py, by group
    <!-- generated: commands -->   every management command of evalhub's apps and `evalhub-gate`, from argparse
    <!-- generated: api -->        every URL under /api/, its token scopes and what its view's docstring says
"""

import argparse
import io
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _django() -> None:
    # A throwaway data folder: building the docs must not touch the checkout's var/.
    os.environ.setdefault("EVALHUB_DATA_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "evalhub-docs"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings")
    import django

    django.setup()


def _cell(text: str) -> str:
    """One table cell: one line, its pipes escaped, and `<slug>` shown as text rather than taken for HTML."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def settings_table() -> str:
    from evalhub.environment import SCRIPT_VARIABLES, VARIABLES

    rows = [*VARIABLES.values(), *SCRIPT_VARIABLES.values()]
    out = io.StringIO()
    for group in dict.fromkeys(v.group for v in rows):
        out.write(f"\n### {group}\n\n| variable | default | meaning |\n| --- | --- | --- |\n")
        for v in rows:
            if v.group == group:
                out.write(f"| `{v.name}` | {_cell(v.default)} | {_cell(v.meaning)} |\n")
    return out.getvalue()


def _options(parser: argparse.ArgumentParser, skip: set[str]) -> str:
    out = io.StringIO()
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        names = ", ".join(action.option_strings) or (action.metavar or action.dest)
        if any(o in skip for o in action.option_strings):
            continue
        if action.option_strings and action.nargs != 0:
            names += f" {action.metavar or action.dest.upper()}"
        meaning = action.help or ""
        if action.choices and not isinstance(action.choices, dict):
            meaning += f" (one of: {', '.join(map(str, action.choices))})"
        if action.required:
            meaning += " **required**"
        rows.append(f"| `{_cell(names)}` | {_cell(meaning)} |")
    if rows:
        out.write("| option | meaning |\n| --- | --- |\n" + "\n".join(rows) + "\n")
    return out.getvalue()


# Options every Django command has; listed once on the page, not under each command.
DJANGO_COMMON = {"--version", "-v", "--verbosity", "--settings", "--pythonpath", "--traceback", "--no-color",
                 "--force-color", "--skip-checks"}


def commands_reference() -> str:
    _django()
    from django.core.management import get_commands, load_command_class

    from judges.gate.cli import build_parser

    out = io.StringIO()
    gate = build_parser()
    out.write("## evalhub-gate\n\n" + (gate.description or "") + "\n\n")
    subparsers = next(a for a in gate._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        out.write(f"### evalhub-gate {name}\n\n{sub.description or ''}\n\n{_options(sub, {'--version'})}\n")
    out.write("## manage.py commands\n\nEach also takes Django's common options (`--verbosity`, `--settings`, "
              "`--traceback`, …). A command that fails prints one line naming the problem and exits 1.\n\n")
    for name, app in sorted(get_commands().items()):
        if app not in {"evalhub", "labeling", "judges"}:
            continue
        command = load_command_class(app, name)
        parser = command.create_parser("manage.py", name)
        out.write(f"### {name}\n\n{_cell(command.help)}\n\n{_options(parser, DJANGO_COMMON)}\n")
    return out.getvalue()


def api_reference() -> str:
    _django()
    from django.urls import URLPattern, URLResolver, get_resolver

    rows = []

    def walk(patterns, prefix: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern) and (prefix + str(p.pattern)).startswith("api/"):
                view = p.callback
                scopes = getattr(view, "token_scopes", None)
                one_of = getattr(view, "token_one_of", ())
                if scopes is None:  # a dispatcher: each method's view has its own door
                    needs = "by method (what it does)"
                else:
                    needs = " and ".join(f"`{s}`" for s in scopes)
                    if one_of:
                        needs = (needs + " and " if needs else "") + " or ".join(f"`{s}`" for s in one_of)
                doc = (view.__doc__ or "").strip().split("\n\n")[0]
                rows.append(f"| `/{prefix}{p.pattern}` | {needs or 'any token'} | {_cell(doc)} |")

    walk(get_resolver().url_patterns, "")
    return ("| path | token scopes | what it does |\n| --- | --- | --- |\n" + "\n".join(rows) + "\n")


GENERATORS = {"settings": settings_table, "commands": commands_reference, "api": api_reference}


def on_page_markdown(markdown: str, page, config, files) -> str:
    for name, generate in GENERATORS.items():
        marker = f"<!-- generated: {name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, generate())
    return markdown
