"""The strength campaign: how this repository makes the models it ships (a tool of the checkout, not of the package).

Run from the repository's root: ``python -m campaign --workdir DIR`` (README.md beside this file).
"""
