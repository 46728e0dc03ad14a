"""Experiment configs, loadable by name (`--config tiny`) or by path: each file's `get_config()` docstring says how to run it."""
