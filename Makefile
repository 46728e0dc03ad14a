# searchless: `make run` (set up + run the main job), `make test` (set up, lint, type-check, every test: what CI runs),
# `make test-fast` (lint, the unit tests and the docstring examples: minutes), `make lint` (ruff only).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The main job (searchless/commands/demo.py): annotate -> train -> evaluate -> puzzles -> match -> report.
# Defaults live in the demo config (configs/demo.py). Override, e.g.:
#   make run RUN_DIR=runs/9m CONFIG=9m INPUT='lichess/*.pgn.zst' ANNOTATE_ARGS='--limit time=0.05'
RUN_DIR ?= runs/demo
# Datasets land in data/ (data/README.md): the run's annotated sample in data/<run name>.
DATA_DIR ?= data/$(notdir $(RUN_DIR))
# INPUT and PUZZLES default to the sample games and puzzles shipped in the package (searchless/samples/);
# RUN_ARGS="--puzzles ''" mines puzzles from the input's test games instead.
INPUT ?=
CONFIG ?= demo
PUZZLES ?=
ANNOTATE_ARGS ?=
TRAIN_ARGS ?=
RUN_ARGS ?=
PYTEST_ARGS ?=
# pytest-xdist workers for `make test`, a test file each (--dist loadfile: module fixtures are made once; the long files
# first, tests/conftest.py). Half
# the suite is single-threaded Python (Beam, engines, the processes it starts): with the compilation cache of
# tests/conftest.py, 2 workers on 2 cores took `make test` from 33.6 to 18.3 min in a fresh clone. TEST_WORKERS=0
# runs in one process; TEST_WORKERS=auto uses every core.
TEST_WORKERS ?= 2

.PHONY: run test test-fast lint setup stockfish stockfish-optional stockfish-native chromium-optional clean

run: $(VENV)/.installed stockfish
	$(PY) -m searchless.commands.demo $(if $(INPUT),--input $(INPUT)) --run_dir $(RUN_DIR) --data_dir $(DATA_DIR) \
	  --config $(CONFIG) \
	  $(if $(ANNOTATE_ARGS),--annotate_args '$(ANNOTATE_ARGS)') --train_args '$(TRAIN_ARGS)' \
	  $(if $(PUZZLES),--puzzles '$(PUZZLES)') $(RUN_ARGS)

# mypy (20 s of one core) runs beside the tests, in the gaps the workers leave; either failing fails the target.
test: setup stockfish-optional lint
	$(PY) -m mypy & types=$$!; \
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS); tests=$$?; \
	wait $$types && exit $$tests

# The unit tests (no engine, no Beam job, no process) and the docstring examples of the package, without the
# tests marked slow.
test-fast: setup lint
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m 'not slow' tests/unit searchless $(PYTEST_ARGS)

# ruff (settings in pyproject.toml): the linter, and the formatter in check mode (`ruff format .` applies it).
lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# The environment and the browser of the serve page's test (`make run` needs only the environment).
setup: $(VENV)/.installed chromium-optional

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), f"searchless needs Python >= 3.11, this is {sys.version}"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[all,test]'
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

# chromium, which the serve page's browser test drives (Playwright, tests/integration/test_serve_page.py): found on
# PATH, else installed with apt-get when we are root on Debian/Ubuntu; else that test is skipped with its reason.
CHROMIUM_CHECK = command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	command -v google-chrome >/dev/null 2>&1

chromium-optional:
	@$(CHROMIUM_CHECK) || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing chromium with apt-get (the serve page's browser test) ..."; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	      echo "chromium could not be installed: the serve page's browser test will be skipped."; \
	  else \
	    echo "chromium is missing (Debian/Ubuntu: sudo apt-get install chromium): the serve page's browser test will be skipped."; \
	  fi; }

# Stockfish built for this CPU from Debian's source package (default 17-1, trixie), installed in
# .stockfish/bin/ (tools/build_stockfish.sh says how; use it with searchless-annotate --engine_path).
stockfish-native:
	tools/build_stockfish.sh $(CURDIR)/.stockfish

clean:
	rm -rf $(VENV) runs build *.egg-info
	find data -mindepth 1 -maxdepth 1 ! -name README.md ! -name .gitignore -exec rm -rf {} +
