"""A scripted stand-in for your agent (not an agent, and no model): answers each case of a cases file.

    python scripts/run_agent.py cases.jsonl > outputs.jsonl

It reads the JSONL that `evalhub-gate cases` writes and prints one outputs line per case, the way
`evalhub-gate check --cases` reads them: `external_id`, `output` and `trace`. Each answer is the case's
golden answer (else its expected behaviour), with the expected tool call (the recorded call of that tool
with the expected argument, or a new one) and the expected source: a well-behaved agent, so the demo's
CI lines show a passing gate. Your pipeline runs its own agent here instead. Plain Python, no evalhub import.
"""

import json
import sys


def answer(case: dict) -> dict:
    recorded = case.get("trace") or {}
    trace = {key: value for key, value in recorded.items() if key not in ("toolCalls", "retrievedSources")}
    tool = case.get("expected_tool")
    if tool:
        calls = [call for call in recorded.get("toolCalls") or [] if call.get("name") == tool][:1]
        call = dict(calls[0]) if calls else {"name": tool, "result": None}
        if case.get("expected_tool_argument") is not None:
            call["argument"] = case["expected_tool_argument"]
        trace["toolCalls"] = [call]
    if case.get("expected_source"):
        trace["retrievedSources"] = [case["expected_source"]]
    return {"external_id": case["external_id"],
            "output": case.get("golden_answer") or case.get("expected_behaviour") or "",
            "trace": trace}


def main(path: str) -> None:
    with open(path, encoding="utf-8") as cases:
        for line in cases:
            if line.strip():
                print(json.dumps(answer(json.loads(line))))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/run_agent.py cases.jsonl > outputs.jsonl")
    main(sys.argv[1])
