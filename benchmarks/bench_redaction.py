"""What a dataset's redaction adds to importing cases: 10,000 cases through `manage.py import_cases`, into a
dataset that redacts nothing, one that redacts the personal-data kinds, and one that adds `secret`.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub python benchmarks/bench_redaction.py [--cases N]

It uses a database of its own on DATABASE_URL's server (`evalhub_bench_redaction` unless --database says
otherwise): created, migrated, and dropped at the end. The cases are support conversations: each carries
an e-mail address and an order number, and every few a phone number, a card, an IBAN, an address or a key,
beside near-misses (a 16-digit order number that fails the Luhn check). The imports alternate, three times
each, into fresh datasets; the medians are compared, of the wall time and of this process's CPU time (the
machine is shared: the CPU time is the steadier figure, and redaction runs all in this process). Target:
redaction adds under 20 % to the import.
"""

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._benchdb import bench_database, bench_project  # noqa: E402  (after ROOT is on the path)

# What is compared: no redaction, the personal-data kinds, and those with `secret` (the credential scanner's
# rules, the costliest kind by far: some of its patterns have no literal to search for).
MODES = {"no redaction": [], "email phone card iban ip": ["email", "phone", "card", "iban", "ip"],
         "every kind (with secret)": ["email", "phone", "card", "iban", "ip", "secret"]}


def write_cases(path: Path, n: int) -> int:
    rng = random.Random(11)
    extras = [
        "You can reach me on +44 20 7946 {:04d}.",
        "Please refund card 4111 1111 1111 1111 (order {}).",
        "My IBAN is DE89 3704 0044 0532 0130 00, ref {}.",
        "I was on 192.0.2.{} when it failed.",
        "Support pasted the key ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 by mistake ({}).",
        "Order 4111111111111{:03d} is not a card.",
    ]
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            order = rng.randint(1000, 99999)
            extra = extras[i % len(extras)].format(rng.randint(0, 250))
            email = f"customer{i}@example.com"
            case = {
                "external_id": f"case-{i:06d}",
                "input": f"Hi, I'm {email}. I bought shoes (order {order}) {rng.randint(1, 90)} days ago. "
                         f"Can I return them? {extra}",
                "output": f"Thanks {email}. Your order {order} is within our 30-day return window; I have started "
                          "the return and sent the label by e-mail.",
                "trace": {
                    "toolCalls": [{"name": "lookup_order", "argument": {"order_id": order, "email": email},
                                   "result": {"status": "delivered", "days_since_delivery": rng.randint(1, 90)}}],
                    "retrievedSources": ["policy-returns", f"faq-{rng.randint(1, 40)}"],
                    "context": f"Customer {email}. Returns are accepted within 30 days of delivery, unworn.",
                },
                "golden_answer": "Returns are accepted within 30 days of delivery.",
                "expected_behaviour": "Check the order's delivery date before promising a return.",
                "expected_tool": "lookup_order",
                "expected_tool_argument": {"order_id": order, "email": email},
                "category": "policy",
                "metadata": {"agent_model": "gpt-4o-mini-2024-07-18", "ticket": i},
            }
            out.write(json.dumps(case) + "\n")
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database", default="evalhub_bench_redaction", help="the benchmark's own database name")
    args = parser.parse_args()

    with bench_database(args.database, keep=False):
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from labeling.datasets.services import dataset_set_redaction
        from labeling.models import Case, Dataset

        lead = get_user_model().objects.create_user("bench-lead")
        project = bench_project("bench-redaction", leads=[lead])
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "cases.jsonl"
            size = write_cases(path, args.cases)
            print(f"{args.cases:,} cases, {size / 1e6:.1f} MB of JSONL, database {args.database}")
            times: dict[str, list[float]] = {mode: [] for mode in MODES}
            cpu: dict[str, list[float]] = {mode: [] for mode in MODES}  # this process's: redaction is all here
            for round_ in range(args.rounds):
                for i, (mode, kinds) in enumerate(MODES.items()):
                    dataset = Dataset.objects.create(project=project, slug=f"mode-{i}-{round_}", name=mode)
                    dataset_set_redaction(dataset=dataset, kinds=kinds, by=lead)
                    started, cpu_started = time.perf_counter(), time.process_time()
                    call_command("import_cases", dataset.slug, str(path), project=project.slug,
                                 stdout=open(os.devnull, "w"))
                    times[mode].append(time.perf_counter() - started)
                    cpu[mode].append(time.process_time() - cpu_started)
            redacted = Case.objects.filter(dataset__slug="mode-1-0")
            assert redacted.count() == args.cases
            assert not redacted.filter(input__contains="@example.com").exists()
            assert redacted.filter(input__contains="is not a card").count() == args.cases // 6 + (args.cases % 6 > 5)
        print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; medians of {args.rounds}")
        for label, measured in (("wall", times), ("CPU of this process", cpu)):
            plain = statistics.median(measured["no redaction"])
            print(f"  {label}:")
            for mode, runs in measured.items():
                median = statistics.median(runs)
                added = (median - plain) / plain
                verdict = "" if not MODES[mode] else (
                    f"  x{median / plain:.2f}, adds {added:+.0%} ({(median - plain) / args.cases * 1e6:,.0f} µs a case): "
                    f"{'under' if added < 0.20 else 'OVER'} the 20 % target")
                print(f"    {mode:<26} {median:6.2f} s (runs {', '.join(f'{t:.2f}' for t in runs)}){verdict}")

if __name__ == "__main__":
    main()
