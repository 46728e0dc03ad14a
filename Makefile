# searchless: `make run` (set up + run the main job), `make test` (set up + run the tests).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The main job's output directory and settings (override: make run RUN_DIR=... ANNOTATE_ARGS='--limit time=0.05').
RUN_DIR ?= runs/demo
INPUT ?= data/sample_games.pgn
# One MultiPV search of 50k nodes per board scores every move: ~5 minutes for the sample on 2 cores.
ANNOTATE_ARGS ?= --mode multipv --limit nodes=50000 --state_value best_move
PYTEST_ARGS ?=

.PHONY: run test setup stockfish stockfish-optional clean

run: setup stockfish
	$(PY) -m pipelines.annotate --input $(INPUT) --output_dir $(RUN_DIR)/data $(ANNOTATE_ARGS)

test: setup stockfish-optional
	$(PY) -m pytest $(PYTEST_ARGS)

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), f"searchless needs Python >= 3.10, this is {sys.version}"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $@

# Stockfish: found on PATH, in /usr/games, or at $SEARCHLESS_STOCKFISH; else installed with
# apt-get when we are root on Debian/Ubuntu; else a message saying what to install.
STOCKFISH_CHECK = command -v stockfish >/dev/null 2>&1 || [ -x /usr/games/stockfish ] || [ -x "$$SEARCHLESS_STOCKFISH" ]
STOCKFISH_INSTALL = if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "Installing Stockfish with apt-get ..."; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stockfish >/dev/null; \
	else \
	  echo "Stockfish is missing. Install it (Debian/Ubuntu: sudo apt-get install stockfish)"; \
	  echo "or point SEARCHLESS_STOCKFISH at a Stockfish binary (Stockfish 16 for paper fidelity)."; \
	  false; \
	fi

stockfish:
	@$(STOCKFISH_CHECK) || { $(STOCKFISH_INSTALL); }

stockfish-optional:
	@$(STOCKFISH_CHECK) || { $(STOCKFISH_INSTALL); } || echo "Tests that need Stockfish will be skipped."

clean:
	rm -rf $(VENV) runs build *.egg-info
