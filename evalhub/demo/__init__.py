"""The demo data of both apps, loaded by `manage.py load_demo` (evalhub/management/commands/load_demo.py).

Two projects, judged apart (docs/projects.md):

    projects.py     the two projects, their users and memberships (lena leads store-support, carl code-review,
                    rita reviews in both, ada is the instance admin)
    labeling.py     store-support: the dataset with its cases, rubrics, policy and labels
    judges.py       store-support's judge configs and finished runs: contract-only, semantic, and the behavioral
                    story (a refused and a promoted version, bias probes, promotions, a gate, CI results); with
                    the helpers both projects' judges use (the scripted stand-in, a run judged here, a CI check)
    code_review.py  code-review: a coding agent's dataset, rubrics, policy, labels, a gated contract judge, a
                    behavioral judge at warn and CI results
    ci.py           the demo's CI environment for the README's CI lines (a token of each project)

It sits at the top of the project's stack: it writes through every app's services, and nothing imports it but
the commands, the tests and the benchmarks.
"""
