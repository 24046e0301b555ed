"""Coverage of every interval evalhub prints, by seeded simulation (docs/estimates.md, "Coverage"). No database.

    python benchmarks/bench_coverage.py [--repetitions 2000] [--seed 45]

1. The run estimate (judges.calibration.estimates.pass_rate, a uniform audit sample): N cases of a
   superpopulation whose true pass rate is `rate`; the judge's three repeats pass a truly passing answer
   85 % of the time and a truly failing one 25 % (so it errs both ways and is too generous); n = share * N
   cases drawn uniformly and labeled with their true verdict. Grid: N in {20, 40, 200}, n/N in
   {0.05, 0.25, 0.5, 1.0}, rate in {0.05, 0.2, 0.5, 0.8, 0.95}.
2. The CI correction (judges.gate.rates.rogan_gladen): n new outputs judged by a judge with a true pass rate of
   0.90 and a true fail rate of 0.85 over cases, corrected with evidence of `evidence` cases, half of them
   truly passing, judged by the same judge. Grid: n in {5, 20, 100}, evidence in {30, 200}, the same rates.

Each point prints the share of repetitions whose interval held the true rate ("abstains" where evalhub says
too few labels or cases instead of a figure) and the mean width. The target is a coverage of at least 93 %
wherever it does not abstain. The figures are printed and written to benchmarks/results/bench_coverage.json.
A small seeded subset of both grids runs as a test (tests/judges/calibration/test_coverage.py).
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from judges.calibration.estimates import Sample, pass_rate  # noqa: E402  (after ROOT is on the path)
from judges.gate.rates import rogan_gladen  # noqa: E402

RATES = (0.05, 0.2, 0.5, 0.8, 0.95)
RUN_GRID = [(big_n, share) for big_n in (20, 40, 200) for share in (0.05, 0.25, 0.5, 1.0)]
CI_GRID = [(n, evidence) for evidence in (30, 200) for n in (5, 20, 100)]
JUDGE_REPEATS, REPEAT_PASS_IF_PASS, REPEAT_PASS_IF_FAIL = 3, 0.85, 0.25
CI_TPR, CI_TFR = 0.90, 0.85


def run_estimate_point(rng: np.random.Generator, *, big_n: int, share: float, rate: float,
                       repetitions: int) -> dict:
    """Coverage and mean width of the run estimate's interval at one grid point."""
    n = max(1, round(share * big_n))
    covered = abstained = 0
    widths = []
    for _ in range(repetitions):
        truth = (rng.random(big_n) < rate).astype(float)
        f = rng.binomial(JUDGE_REPEATS, np.where(truth == 1, REPEAT_PASS_IF_PASS, REPEAT_PASS_IF_FAIL)) / JUDGE_REPEATS
        drawn = rng.choice(big_n, size=n, replace=False)
        draw = np.full(big_n, -1)
        draw[drawn] = 0
        human = np.full(big_n, np.nan)
        human[drawn] = truth[drawn]
        sample = Sample(f=f, category=np.full(big_n, "all", dtype=object), draw=draw, human=human,
                        probabilities=np.full((big_n, 1), n / big_n), uniform=True)
        ci = pass_rate(sample)["ci95"]
        if ci is None:
            abstained += 1
            continue
        covered += ci[0] <= rate <= ci[1]
        widths.append(ci[1] - ci[0])
    return _point(covered, abstained, widths, repetitions) | {"N": big_n, "n": n, "rate": rate}


def ci_correction_point(rng: np.random.Generator, *, n: int, evidence: int, rate: float, repetitions: int) -> dict:
    """Coverage and mean width of the CI correction's interval at one grid point."""
    positives = evidence // 2
    negatives = evidence - positives
    tp = rng.binomial(positives, CI_TPR, repetitions)
    fp = rng.binomial(negatives, 1 - CI_TFR, repetitions)
    truly_pass = rng.binomial(n, rate, repetitions)
    passed = rng.binomial(truly_pass, CI_TPR) + rng.binomial(n - truly_pass, 1 - CI_TFR)
    covered = abstained = 0
    widths = []
    for i in range(repetitions):
        figures = rogan_gladen(passed=int(passed[i]), judged=n, tp=int(tp[i]), fn=int(positives - tp[i]),
                               fp=int(fp[i]), tn=int(negatives - fp[i]))
        if figures["status"] != "ok":
            abstained += 1
            continue
        low, high = figures["ci95"]
        covered += low <= rate <= high
        widths.append(high - low)
    return _point(covered, abstained, widths, repetitions) | {"n": n, "evidence": evidence, "rate": rate}


def _point(covered: int, abstained: int, widths: list[float], repetitions: int) -> dict:
    made = repetitions - abstained
    return {"coverage": covered / made if made else None, "abstained": abstained / repetitions,
            "mean_width": float(np.mean(widths)) if widths else None}


def _cell(point: dict) -> str:
    if point["coverage"] is None:
        return "abstains"
    shown = f"{point['coverage'] * 100:.1f} % / {point['mean_width'] * 100:.0f}"
    return shown + (f" ({point['abstained'] * 100:.1f} % abstain)" if point["abstained"] else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repetitions", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=45)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    header = " | ".join(f"rate {rate}" for rate in RATES)
    print(f"Run estimate: coverage / mean width in points, {args.repetitions} repetitions a point\n"
          f"| N | n | {header} |")
    run_points = []
    for big_n, share in RUN_GRID:
        row = [run_estimate_point(rng, big_n=big_n, share=share, rate=rate, repetitions=args.repetitions)
               for rate in RATES]
        run_points += row
        print(f"| {big_n} | {row[0]['n']} | " + " | ".join(_cell(p) for p in row) + " |")
    print(f"\nCI correction (TPR {CI_TPR}, TFR {CI_TFR}): coverage / mean width in points\n| evidence | n | {header} |")
    ci_points = []
    for n, evidence in CI_GRID:
        row = [ci_correction_point(rng, n=n, evidence=evidence, rate=rate, repetitions=args.repetitions)
               for rate in RATES]
        ci_points += row
        print(f"| {evidence} | {n} | " + " | ".join(_cell(p) for p in row) + " |")
    worst = min(p["coverage"] for p in run_points + ci_points if p["coverage"] is not None)
    print(f"\nLowest coverage where not abstaining: {worst * 100:.1f} % (target: at least 93 %)")
    out = ROOT / "benchmarks" / "results" / "bench_coverage.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"seed": args.seed, "repetitions": args.repetitions, "run_estimate": run_points,
                               "ci_correction": ci_points, "lowest_coverage": worst}, indent=2))


if __name__ == "__main__":
    main()
