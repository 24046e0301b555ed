"""The demo data of both apps, loaded by `manage.py load_demo` (evalhub/management/commands/load_demo.py).

    labeling.py  users, the store-support dataset with its cases, rubrics and labels
    judges.py    judge configs and finished runs over that dataset: contract-only, semantic, and the behavioral
                 story (a refused and a promoted version, bias probes, promotions, a gate, CI results)

It sits at the top of the project's stack: it writes through every app's services, and nothing imports it but
the command, the tests and the benchmarks.
"""
