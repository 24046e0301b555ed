"""evalhub-gate, the CI command (docs/gate.md): plain Python on the engine, no Django.

    config.py    reading and checking the gate config, and the judges' environment
    versions.py  which version of this command knows which gate config field (`requires_cli`)
    outputs.py   reading the outputs file
    judging.py   judging each rubric's cases and applying the stages; the exit code
    report.py    the summary, GitHub annotations and step summary, JUnit XML, the results JSON
    server.py    talking to the evalhub server (fetching, posting results)
    comment.py   the verdict as a pull request or merge request comment (--comment github|gitlab)
    messages.py  the config error and the one function that puts untrusted text on a line
    cli.py       the argument parser and `main` (the `evalhub-gate` console script)
    pytest_plugin.py  the pytest plugin (entry point pytest11): the evalhub_judge fixture, judging as `check` does
"""

# The package's version (pyproject.toml reads it from here): the gate config's `requires_cli` is compared with it.
VERSION = "0.6.0"
