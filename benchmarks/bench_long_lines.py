"""Reading one long line against the same bytes in short lines, through the case reader every import and
the CI command use (`labeling.importing.reading._text_lines`: lines, the byte-order mark, UTF-8).

    python benchmarks/bench_long_lines.py                 # one line of 8, 16, 32, 64 MB; 64 MB in short lines
    python benchmarks/bench_long_lines.py --repeat 5

Each file is read from memory (io.BytesIO, so the disk is not timed), best of --repeat. The ratio is the
long line's time per MB over the short lines' time per MB: reading in linear time keeps it flat as the
line grows; a reader that copies or scans the unfinished line once per chunk makes it double with the
line's length. Plain Python, no Django, no database. Figures are printed and written to
benchmarks/results/bench_long_lines.json.
"""

import argparse
import io
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labeling.importing.reading import READ_CHUNK, RowError, _text_lines  # noqa: E402

MB = 1 << 20
# About the size of a case line of bench_import.py (a question, an answer, a trace, metadata).
SHORT_LINE = b'{"external_id": "case", "input": "Can I return these shoes?", "output": "%s"}' % (b"Yes. " * 190)


def read_seconds(content: bytes, repeat: int) -> tuple[float, int]:
    """The best time of `repeat` reads of content through the reader, and the lines it gave."""
    best, lines = float("inf"), 0
    for _ in range(repeat):
        errors: list[RowError] = []
        start = time.perf_counter()
        lines = sum(1 for _ in _text_lines(io.BytesIO(content), len(content), errors, set()))
        best = min(best, time.perf_counter() - start)
        assert not errors, errors
    return best, lines


def short_lines(size: int) -> bytes:
    line = SHORT_LINE + b"\n"
    return (line * (size // len(line) + 1))[:size - 1] + b"\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32, 64], help="long lines, in MB")
    parser.add_argument("--short-mb", type=int, default=64, help="the short-lines file, in MB")
    parser.add_argument("--repeat", type=int, default=3, help="reads of each file; the best counts")
    args = parser.parse_args()

    short_s, short_count = read_seconds(short_lines(args.short_mb * MB), args.repeat)
    short_per_mb = short_s / args.short_mb
    print(f"read chunk {READ_CHUNK:,} bytes; best of {args.repeat}")
    print(f"{args.short_mb} MB in {short_count:,} short lines: {short_s:.3f} s ({short_per_mb * 1000:.2f} ms/MB)")
    print()
    print("| one line | seconds | ms per MB | ratio to short lines |")
    print("| --- | --- | --- | --- |")
    rows = []
    for size in args.sizes:
        seconds, count = read_seconds(b"x" * (size * MB), args.repeat)
        assert count == 1
        ratio = (seconds / size) / short_per_mb
        rows.append({"mb": size, "seconds": seconds, "ratio": ratio})
        print(f"| {size} MB | {seconds:.3f} | {seconds / size * 1000:.2f} | {ratio:.2f} |")

    results = ROOT / "benchmarks" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "bench_long_lines.json").write_text(json.dumps({
        "read_chunk": READ_CHUNK, "repeat": args.repeat,
        "short": {"mb": args.short_mb, "lines": short_count, "seconds": short_s}, "long": rows,
    }, indent=2))


if __name__ == "__main__":
    main()
