"""promptfoo's exec provider for promptfoo-errors.json: echoes the prompt (the case's answer), or fails
when there is none, so promptfoo records a provider error for that test (not a verdict)."""
import sys

prompt = sys.argv[1] if len(sys.argv) > 1 else ""
if not prompt.strip():
    sys.exit("no answer to echo")
print(prompt, end="")
