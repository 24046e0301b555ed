"""A run's judgments out, in the format judges.runs.importing reads (an export imports again unchanged).

A generator of text pieces over `QuerySet.iterator()`, so the run page streams it and the command writes
it to a file without holding a large run in memory.
"""

import json
from collections.abc import Iterator
from itertools import chain

from judges.models import Judgment, Run
from judges.runs.importing import EXTERNAL, JUDGMENT_FIELDS
from labeling.datasets.exporting import csv_lines
from labeling.importing import Format

CHUNK = 2_000


def _judge_names(run: Run) -> dict[str, str]:
    """Judgment.judge (primary/fallback) → the model that answered, and the embeddings model of the semantic
    layer's verdicts; a config without a model is 'contract'."""
    spec = run.config.spec
    primary = spec.get("model") or "contract"
    fallback = (spec.get("secondary") or spec.get("fallback") or {}).get("model") or primary
    semantic = (spec.get("semantic") or {}).get("model") or primary
    adjudicator = (spec.get("adjudicator") or {}).get("model") or primary
    return {"primary": primary, "fallback": fallback, "semantic": semantic, "adjudicator": adjudicator}


def _records(run: Run) -> Iterator[dict]:
    external = run.config.external
    names = _judge_names(run)
    fields = ["case__external_id", "repeat", "outcome", "scores", "similarity", "reason", "judge", "layer"]
    if external:
        fields.append("raw_output")  # an imported row keeps its judge's name there
    rows = Judgment.objects.filter(run=run).order_by("case_id", "repeat").values_list(*fields)
    for external_id, repeat, outcome, scores, similarity, reason, judge, layer, *raw in rows.iterator(
        chunk_size=CHUNK
    ):
        if layer == EXTERNAL:
            name = json.loads(raw[0]).get("judge", "") if raw and raw[0] else ""
        elif layer == "semantic":
            name = names["semantic"]
        else:
            name = names.get(judge, names["primary"])
        yield {
            "external_id": external_id, "repeat": repeat, "verdict": outcome, "scores": scores or None,
            "similarity": similarity, "reason": reason, "judge": name,
        }


def judgments_export(*, run: Run, fmt: Format, neutralise_formulas: bool = True) -> Iterator[str]:
    """The run's judgments, one per (case, repeat), as JSONL or CSV (scores as JSON text in its cell).

    A CSV's formulas are neutralised unless asked not to, and it imports unchanged either way (see
    labeling.datasets.exporting).
    """
    if fmt == Format.JSONL:
        for record in _records(run):
            yield json.dumps(record, ensure_ascii=False) + "\n"
        return
    rows = (
        [record["external_id"], record["repeat"], record["verdict"],
         "" if record["scores"] is None else json.dumps(record["scores"], ensure_ascii=False),
         "" if record["similarity"] is None else repr(record["similarity"]),
         record["reason"], record["judge"]]
        for record in _records(run)
    )
    yield from csv_lines(chain([JUDGMENT_FIELDS], rows), neutralise_formulas=neutralise_formulas)
