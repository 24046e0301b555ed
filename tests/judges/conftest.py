"""The two worlds of the judges' isolation tests (docs/projects.md): the tests' project and another project, each
with its own rubric, dataset, config and finished run under the same slugs."""

import pytest

from tests.judges.helpers import project_world


@pytest.fixture
def our_world(project, lead):
    return project_world(project, lead)


@pytest.fixture
def their_world(other_project, other_lead):
    return project_world(other_project, other_lead)
