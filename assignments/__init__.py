"""Hidden grading material, one folder per assignment: the pytest suites (`test_*.py`), `rubric.toml` and the
catalogue of known mistakes.  Never installed and never released: importable only from the checkout root.

The `__init__.py` files make each assignment a package, so the catalogue imports as
`assignments.<name>.catalogue` (autograder.authoring.check_suite, the kit's tests) and pytest's importlib mode gives the
suites distinct module names (`assignments.<name>.test_<part>`) when the judge loads them by path.
"""
