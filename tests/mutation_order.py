"""A pytest plugin for mutation runs only: scripts/mutation.sh loads it (`-p tests.mutation_order`, in
[tool.mutmut] of pyproject.toml).

mutmut runs the tests that reach a mutant and stops at the first failure, so their order decides how
long a caught mutant takes. The example tests (milliseconds) go first and the property tests
(hypothesis, seconds each) last: those then run in full only for the mutants no example test catches.
Nothing is skipped or weakened.
"""


def pytest_collection_modifyitems(items) -> None:
    items.sort(key=lambda item: getattr(getattr(item, "obj", None), "is_hypothesis_test", False))
