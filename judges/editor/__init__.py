"""The editor: a model asked for text (proposed judge changes, synthetic cases) instead of verdicts.
Plain Python on the engine's provider clients, no Django; `client.ask_editor` is the one way to call it."""

from .client import (
    EditorAnswer,
    EditorError,
    EditorSpec,
    EditorTimeout,
    EditorUnavailable,
    MalformedEditorAnswer,
    ask_editor,
)

__all__ = [
    "EditorAnswer",
    "EditorError",
    "EditorSpec",
    "EditorTimeout",
    "EditorUnavailable",
    "MalformedEditorAnswer",
    "ask_editor",
]
