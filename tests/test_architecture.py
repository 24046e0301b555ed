"""The layout's promises (docs/architecture.md), checked on the source so a new import cannot break them:
the engine, the CI command, the case reader and the pure calibration modules run without Django; labeling
never imports judges; the project's modules import one another without a cycle; the domain packages form a
one-way stack; every package has its __init__.py."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("evalhub", "labeling", "judges")
# Plain Python: the CI command imports these on a machine with no Django settings.
DJANGO_FREE_PACKAGES = ("judges/engine", "judges/gate", "judges/editor")
DJANGO_FREE_MODULES = (
    "labeling.importing.reading",
    # Finding credentials and redacting personal data: the CI command redacts and runs no_secrets too.
    "labeling.importing.credentials",
    "labeling.importing.redaction",
    # Writing result files whole or not at all: the CI command's --json and --junit too.
    "labeling.importing.files",
    # Reading OTLP spans and making a case of a trace: pure, tested without a database.
    "labeling.otlp.traces",
    # The calibration figures, rules and explorer: pure functions on frames, tested without a database.
    "judges.calibration.metrics",
    "judges.calibration.rules",
    "judges.calibration.explorer",
    "judges.calibration.estimates",
    # What the editor is asked for synthetic cases and how its answer becomes cases: tested without a database.
    "judges.synthetic.writing",
)
# The domain packages, bottom first. A package's services, selectors, tasks and other modules that are not
# pages import only packages of its own level or below (a package above wires itself in through
# judges/apps.py), and no two packages import each other both ways, within a level too.
STACK = (
    ("judges.engine", "judges.gate", "judges.editor"),
    ("judges.calibration", "judges.configs", "judges.runs"),
    ("judges.probes", "judges.drift", "judges.traffic", "judges.estimates", "judges.proposals", "judges.synthetic"),
    ("judges.promotion",),
    ("evalhub.demo",),
)
# Pages show what every package knows, so they may read from anywhere: a module of one of these names, or
# any module inside a package of one of these names.
PAGE_NAMES = {"views", "forms", "api", "urls", "templatetags"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _source_files(*folders: str) -> list[Path]:
    return sorted(
        path for folder in folders for path in (ROOT / folder).rglob("*.py")
        if "migrations" not in path.parts
    )


def _imports_in_subprocess(modules: list[str]) -> dict[str, bool]:
    """{module: whether django was loaded once it was imported}, in a fresh interpreter without settings."""
    script = (
        "import importlib, json, sys\n"
        "seen = {}\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "    seen[name] = 'django' in sys.modules\n"
        "print(json.dumps(seen))\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, f"importing them without Django settings failed:\n{done.stderr}"
    return json.loads(done.stdout)


def test_the_engine_the_ci_command_the_case_reader_and_the_pure_calibration_import_without_django():
    modules = [_module_name(path) for path in _source_files(*DJANGO_FREE_PACKAGES)] + list(DJANGO_FREE_MODULES)
    assert "judges.engine.runner" in modules and "labeling.importing.reading" in modules
    assert "judges.calibration.metrics" in modules

    seen = _imports_in_subprocess(modules)

    # The first module after which django is loaded is the one that pulled it in (itself or an import of it).
    culprit = next((name for name in modules if seen[name]), None)
    assert culprit is None, f"{culprit} imports django (directly or through what it imports)"


# --- the import graph, read from the source --------------------------------------------------------


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(path: Path, module: str, known: set[str]) -> set[str]:
    """The project modules that `path` imports, at its top or deferred inside a function.

    A deferred import is still a dependency: moving an import into a function hides a cycle, it does
    not remove it. Imports under `if TYPE_CHECKING:` never run, so they do not count.
    """
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _is_type_checking(node)
               for child in node.body for n in ast.walk(child)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .cache import x, from .. import y
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from package import module` depends on that module; `from module import name` on the module.
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for name in names:
            # `import a.b.c` where only a.b is ours (or a name inside a module): the longest known prefix.
            parts = name.split(".")
            while parts and ".".join(parts) not in known:
                parts.pop()
            if parts and ".".join(parts) != module:
                found.add(".".join(parts))
    return found


def _import_graph() -> dict[str, set[str]]:
    files = _source_files(*APPS)
    known = {_module_name(path) for path in files}
    return {_module_name(path): _imported(path, _module_name(path), known) for path in files}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_labeling_never_imports_judges():
    graph = _import_graph()

    offending = sorted(
        f"{module} imports {target}" for module, targets in graph.items() if module.startswith("labeling")
        for target in targets if target.split(".")[0] == "judges"
    )

    assert not offending, offending


def test_the_projects_modules_import_one_another_without_a_cycle():
    assert not _cycles(_import_graph())


def test_the_cycle_finder_sees_a_cycle_and_the_graph_sees_every_import(tmp_path):
    # Guards the two checks above against passing because they see nothing.
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    source = tmp_path / "services.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from app import tasks\n"
        "from .models import Run\n"
        "if TYPE_CHECKING:\n"
        "    from app.forms import Form\n"
        "def start():\n"
        "    from app.selectors import pick\n"
    )
    known = {"app", "app.tasks", "app.models", "app.forms", "app.selectors", "app.services"}
    assert _imported(source, "app.services", known) == {"app.tasks", "app.models", "app.selectors"}
    graph = _import_graph()
    assert "labeling.models" in graph["labeling.importing.cases"]
    assert "judges.engine.cache" in graph["judges.engine"]  # a relative import, resolved


# --- the stack of domain packages ------------------------------------------------------------------


def _package(module: str) -> str | None:
    """The domain package `module` belongs to (the longest in STACK), or None outside them."""
    found = [p for level in STACK for p in level if module == p or module.startswith(p + ".")]
    return max(found, key=len) if found else None


def _level(package: str) -> int:
    return next(i for i, level in enumerate(STACK) if package in level)


def _is_page(module: str) -> bool:
    return bool(PAGE_NAMES & set(module.split(".")))


def _package_imports(graph: dict[str, set[str]]) -> set[tuple[str, str, str]]:
    """(package, imported package, the module importing it) for every import of one domain package by
    another from a module that is not a page."""
    found = set()
    for module, targets in graph.items():
        mine = _package(module)
        if mine is None or _is_page(module):
            continue
        for target in targets:
            theirs = _package(target)
            if theirs is not None and theirs != mine:
                found.add((mine, theirs, module))
    return found


def _upward(imports: set[tuple[str, str, str]]) -> list[str]:
    return sorted(f"{module} imports {theirs}, above {mine}" for mine, theirs, module in imports
                  if _level(theirs) > _level(mine))


def _both_ways(imports: set[tuple[str, str, str]]) -> list[str]:
    pairs = {(mine, theirs) for mine, theirs, _ in imports}
    return sorted(f"{a} and {b} import each other" for a, b in pairs if (b, a) in pairs and a < b)


def test_no_domain_package_imports_one_above_it_outside_its_pages():
    assert not _upward(_package_imports(_import_graph()))


def test_no_two_domain_packages_import_each_other_both_ways():
    assert not _both_ways(_package_imports(_import_graph()))


def test_the_stack_checks_see_an_upward_and_a_two_way_import():
    # Guards the two checks above against passing because they see nothing.
    graph = {
        "judges.runs.services": {"judges.probes.variants", "judges.configs.services", "judges.models"},
        "judges.configs.services": {"judges.runs.selectors"},
        "judges.runs.views": {"judges.promotion.selectors"},  # a page: allowed
        "judges.calibration.templatetags.tags": {"judges.drift.selectors"},  # inside a page package: allowed
    }
    imports = _package_imports(graph)
    assert _upward(imports) == ["judges.runs.services imports judges.probes, above judges.runs"]
    assert _both_ways(imports) == ["judges.configs and judges.runs import each other"]
    real = _package_imports(_import_graph())
    assert ("judges.probes", "judges.runs", "judges.probes.services") in real
    assert {package for level in STACK for package in level} <= {_package(m) for m in _import_graph()}


def _folders_without_init(root: Path) -> list[str]:
    return sorted(
        str(folder.relative_to(root)) for app in APPS for folder in [root / app, *(root / app).rglob("*")]
        if folder.is_dir() and "__pycache__" not in folder.parts and any(folder.glob("*.py"))
        and not (folder / "__init__.py").exists()
    )


def test_every_package_has_its_init(tmp_path):
    assert not _folders_without_init(ROOT)
    # And the check sees a folder of modules without one (templates and static folders hold no .py).
    (tmp_path / "judges" / "runs").mkdir(parents=True)
    (tmp_path / "judges" / "runs" / "tasks.py").write_text("")
    assert _folders_without_init(tmp_path) == ["judges/runs"]
