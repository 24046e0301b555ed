"""What a pipeline installs to get the CI side: evalhub's light client beside the full install and two other tools.

    python benchmarks/bench_install.py            # a warm-up install of each, then one measured install each
    python benchmarks/bench_install.py --rounds 3 # the median of three, the targets taken in turn

Each install is `pip install` into a fresh venv of this Python, in one run, with the machine's pip cache (so
the times compare installs of wheels already downloaded: the warm-up round fills the cache for the others and is
not reported). Targets:
- evalhub: `pip install <repository>` with no extras: evalhub-gate and the pytest plugin (docs/ci.md);
- evalhub[server]: what every pipeline installed before the light client (the dashboard's dependencies too);
- langsmith and deepeval, from the package index.
The repository is copied first (its packages, pyproject and README) so the build leaves nothing in the worktree.
Per target: the install's wall time, the packages installed (pip, setuptools and the target itself left out) and
the size of site-packages in MiB (pip's own left out). Printed as a Markdown table and written to
benchmarks/results/bench_install.json.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEFT_OUT = {"pip", "setuptools"}


def copy_repository(dest: Path) -> Path:
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    for package in ("evalhub", "judges", "labeling"):
        shutil.copytree(ROOT / package, dest / package, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def size_mib(path: Path, skip: set[str]) -> float:
    total = 0
    for entry in path.iterdir():
        if entry.name.split("-")[0].lower() in skip:
            continue
        if entry.is_dir() and not entry.is_symlink():
            total += sum(f.stat().st_size for f in entry.rglob("*") if f.is_file() and not f.is_symlink())
        elif entry.is_file():
            total += entry.stat().st_size
    return total / 2**20


def install(spec: str, own_name: str, work: Path) -> dict:
    venv = Path(tempfile.mkdtemp(dir=work, prefix="venv-"))
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    started = time.monotonic()
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", spec],
                          capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode:
        raise SystemExit(f"pip install {spec} failed:\n{done.stderr[-2000:]}")
    listed = json.loads(subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], capture_output=True,
                                       text=True, check=True).stdout)
    packages = sorted({p["name"].lower() for p in listed} - LEFT_OUT - {own_name})
    [site] = (venv / "lib").glob("python3*/site-packages")
    result = {"seconds": seconds, "packages": len(packages), "mib": size_mib(site, {"pip", "_distutils_hack"}),
              "names": packages}
    shutil.rmtree(venv)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="measured installs per target (the median is shown)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-install-") as tmp:
        work = Path(tmp)
        source = copy_repository(Path(tempfile.mkdtemp(dir=work, prefix="evalhub-")))
        targets = [("evalhub (light client)", str(source), "evalhub"),
                   ("evalhub[server] (before: every pipeline)", f"{source}[server]", "evalhub"),
                   ("langsmith", "langsmith", "langsmith"),
                   ("deepeval", "deepeval", "deepeval")]
        for _, spec, name in targets:  # warm-up: fills the pip cache, not reported
            install(spec, name, work)
        # Round-robin, so a slow moment of the machine (shared cores) falls on every target alike.
        runs: dict[str, list[dict]] = {label: [] for label, _, _ in targets}
        for _ in range(args.rounds):
            for label, spec, name in targets:
                runs[label].append(install(spec, name, work))
        rows = [{"target": label, "seconds": statistics.median(r["seconds"] for r in measured),
                 "packages": measured[-1]["packages"], "mib": measured[-1]["mib"], "names": measured[-1]["names"]}
                for label, measured in runs.items()]
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, pip cache warm, median of {args.rounds}\n")
    print("| install | time | packages | size |\n| --- | ---: | ---: | ---: |")
    for row in rows:
        print(f"| `pip install` {row['target']} | {row['seconds']:.1f} s | {row['packages']} | {row['mib']:.0f} MiB |")
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / "bench_install.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
