"""A project's people and API tokens: members, roles, dataset assignments, invitations, tokens (docs/projects.md)."""
