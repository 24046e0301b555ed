"""Traces from other tools as cases (docs/otlp.md): the OTLP receiver (`api`), the OTLP/JSON file import and
the wait for a trace's root span (`services`, `tasks`); `traces` reads spans and makes a case of a trace, with
no Django."""
