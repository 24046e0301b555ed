"""Which of many patterns occur in a text, found in one pass: the redaction's and the credential scanner's
prefilter (docs/security.md, "Redaction"). No Django.

RE2's `Set` (Google's `google-re2`) runs every pattern at once as one automaton, in time linear in the
text whatever the patterns or the text. It only says which patterns occur, never where: the exact finders
(Python's `re`, the checksums, the scanner's plugins) run afterwards on the texts it lets through. Its
patterns are necessary conditions, so a pattern's absence means its finder would find nothing there.
"""

from collections.abc import Sequence

import re2

# The empty pattern occurs in every text: its absence from an answer means RE2 gave up (its automaton ran
# out of memory, which RE2 reports as "nothing matched"), and every pattern then counts as present.
_ALWAYS = ""


class PatternSet:
    """RE2 patterns (RE2's syntax), told apart by their index in `patterns`."""

    def __init__(self, patterns: Sequence[str]) -> None:
        options = re2.Options()
        options.log_errors = False
        self._set = re2.Set.SearchSet(options)
        for pattern in (_ALWAYS, *patterns):
            self._set.Add(pattern)
        self._set.Compile()
        self.everything = frozenset(range(len(patterns)))

    def found(self, text: str) -> frozenset[int]:
        """The indexes of the patterns that occur in `text` (all of them if RE2 could not finish)."""
        # A lone surrogate (JSON may carry "\ud800") is not UTF-8: kept as bytes RE2 matches no class
        # with, as Python's patterns match none of ours with a surrogate.
        matched = self._set.Match(text.encode("utf-8", "surrogatepass")) or ()
        if 0 not in matched:
            return self.everything
        return frozenset(i - 1 for i in matched if i)
