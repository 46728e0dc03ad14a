"""Measuring a model: metrics, puzzles, test suites, openings, Elo and tournaments."""
