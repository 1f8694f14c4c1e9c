# Backprop from Scratch — every command a learner, an instructor or CI needs.
# The first target that needs Python creates .venv and installs the pinned requirements; later runs reuse it.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NB     ?=

# Keep Jupyter/IPython state out of $HOME when the caller has not chosen a place.
export JUPYTER_CONFIG_DIR ?= $(CURDIR)/build/jupyter/config
export JUPYTER_DATA_DIR   ?= $(CURDIR)/build/jupyter/data
export JUPYTER_RUNTIME_DIR ?= $(CURDIR)/build/jupyter/runtime
export IPYTHONDIR         ?= $(CURDIR)/build/ipython
$(shell mkdir -p "$(JUPYTER_CONFIG_DIR)" "$(JUPYTER_DATA_DIR)" "$(JUPYTER_RUNTIME_DIR)" "$(IPYTHONDIR)")
export PYDEVD_DISABLE_FILE_VALIDATION = 1
# nbgrader runs `alembic` and Jupyter runs `python`: both must be the virtual environment's.
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: help setup demo test test-quick check lint lab pair instructor hub hub-remove release solutions grade autograde report progress bench bench-grading bench-checks data clean

help:
	@echo "make demo        regenerate notebooks, execute solutions, autograde a demo class (the main job)"
	@echo "make test        the whole test suite (about 20 minutes on 2 cores)"
	@echo "make test-quick  the fast subset: no Jupyter kernel started (about 3 minutes)"
	@echo "make lint        ruff, with the rules in pyproject.toml (make test runs it first)"
	@echo "make lab         JupyterLab on notebooks/, for a learner"
	@echo "make pair [IP=0.0.0.0]  the same with real-time collaboration: driver and navigator open the printed URL"
	@echo "make instructor  JupyterLab at the course root, opening Formgrader"
	@echo "make hub [HUB_IP=0.0.0.0] [HUB_PORT=8000]   (root) a JupyterHub for an instructor and two students, each a"
	@echo "                 Unix account, sharing nbgrader's exchange; make hub-remove removes the accounts and all"
	@echo "make grade NB=notebooks/01_nudging/01_nudging.ipynb   grade one notebook against the hidden tests"
	@echo "make setup       check the system's prerequisites (one line per missing piece), create .venv"
	@echo "make autograde ASSIGNMENT=01_nudging [WORKERS=N] [SCHEDULER=tcp://host:8786] [STUDENT=id...] [FORCE=1]"
	@echo "                 grade every submission under submitted/ in parallel (Dask) into gradebook.db;"
	@echo "                 refused without a usable bubblewrap unless WITHOUT_SANDBOX=1"
	@echo "make report [ASSIGNMENT='01_nudging 02_scalar_engine']   what the class got wrong, after make autograde:"
	@echo "                 autograde-logs/report/report.html (and CSV/JSON); default: every graded assignment"
	@echo "make progress    your five notebooks graded: each exercise done or open, with the cause of each open one"
	@echo "make check EX=unbroadcast   one exercise's tests and its notebook's consistency tests (under a minute)"
	@echo "make release [NB=03_backward_functions]   regenerate notebooks/ from source/ (nbgrader generate_assignment)"
	@echo "make solutions [NB=03_backward_functions] regenerate solutions/ from source/ (executed, hidden tests removed)"
	@echo "make bench       time one MNIST-sized epoch: course engine vs hand-written numpy vs torch"
	@echo "make bench-grading  grade a synthetic class serially (nbgrader) and in parallel (Dask); about 15 minutes"
	@echo "make bench-checks   time every test cell in a kernel, solution and wrong answer, medians of 3; about 10 minutes"
	@echo "make data        download full MNIST into data/mnist/ (needs a network; the course works offline without)"
	@echo "make clean       remove runtime folders (keeps .venv)"

# make setup always checks the system's pieces (autograder/prerequisites.py: one line per missing one, with the
# command that installs it; it fails only for a learner's); the first install, whatever target starts it, does too.
setup:
	@$(PYTHON) -m autograder.prerequisites
	@$(MAKE) --no-print-directory $(STAMP) CHECKED=1

$(STAMP): requirements.txt pyproject.toml package-lock.json
	$(if $(CHECKED),,@$(PYTHON) -m autograder.prerequisites)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@# The hub's proxy (make hub), pinned in package-lock.json (it needs node 20 or later). Without it only make hub
	@# is missing, and its test skips, so a failure here is said, not fatal.
	if command -v npm >/dev/null; then npm ci --silent --no-audit --no-fund || echo "npm ci failed: make hub \
	has no proxy (configurable-http-proxy needs node 20 or later)"; \
	else echo "no npm: make hub needs it for configurable-http-proxy (apt install npm)"; fi
	touch $@

demo: $(STAMP)
	$(BIN)/python -m autograder demo

# The linter (ruff, pinned in requirements.txt, rules in pyproject.toml) runs first: a lint error fails the run at once.
lint: $(STAMP)
	$(BIN)/ruff check

# Both cores for everything but the browser tests, then the browser tests a file to a core (a file's tests share its
# servers: test_browser.py on one, the hub's and the report's on the other), and no other test loads the machine (a loaded
# machine slows the page, not a verdict: grading limits are in CPU seconds). The slowest tests are listed at the end
# of the first run. loadgroup hands each worker one test, or one group (tests/conftest.py), at a time: no queue of
# long tests waits behind one worker while the other is idle.
test: lint
	$(BIN)/python -m pytest -m "not browser" -n 2 --dist loadgroup --durations=15
	$(BIN)/python -m pytest -m browser -n 2 --dist loadfile

# Both cores: nothing here starts a kernel, and the checks' tests are CPU-bound.
test-quick: lint
	$(BIN)/python -m pytest -m "not slow" -n 2

# One exercise's tests and its notebook's consistency tests: the loop for working on one check.
check: $(STAMP)
	@test -n "$(EX)" || { echo "usage: make check EX=<exercise id>, e.g. make check EX=unbroadcast"; exit 2; }
	$(BIN)/python -m autograder.tools.exercise_tests $(EX)

# The three kinds of JupyterLab server are described in autograder/tools/lab.py. IP=0.0.0.0 lets a remote partner in.
IP ?= localhost

lab: $(STAMP)
	$(BIN)/python -m autograder lab learner

pair: $(STAMP)
	$(BIN)/python -m autograder lab pair --ServerApp.ip=$(IP)

instructor: $(STAMP)
	$(BIN)/python -m autograder lab instructor

# NB=<NN_name> (or a notebook's path) rebuilds one notebook; without it, all five.
release: $(STAMP)
	$(BIN)/python -m autograder release $(basename $(notdir $(NB)))

solutions: $(STAMP)
	$(BIN)/python -m autograder solutions $(basename $(notdir $(NB)))

grade: $(STAMP)
	@test -n "$(NB)" || { echo "usage: make grade NB=notebooks/<NN_name>/<NN_name>.ipynb"; exit 2; }
	$(BIN)/python -m autograder grade "$(NB)"

autograde: $(STAMP)
	@test -n "$(ASSIGNMENT)" || { echo "usage: make autograde ASSIGNMENT=<NN_name> [WORKERS=N] [SCHEDULER=address] [STUDENT='id id'] [FORCE=1]"; exit 2; }
	$(BIN)/python -m autograder autograde $(ASSIGNMENT) $(if $(WORKERS),--workers $(WORKERS)) \
		$(if $(SCHEDULER),--scheduler $(SCHEDULER)) $(foreach s,$(STUDENT),--student $(s)) $(if $(FORCE),--force) \
		$(if $(WITHOUT_SANDBOX),--without-sandbox)

report: $(STAMP)
	$(BIN)/python -m autograder report $(ASSIGNMENT)

progress: $(STAMP)
	$(BIN)/python -m autograder progress

# As root: the accounts are real Unix users (autograder/tools/hub.py). The hub runs until Ctrl-C.
hub: $(STAMP)
	$(BIN)/python -m autograder hub start

hub-remove: $(STAMP)
	$(BIN)/python -m autograder hub remove

bench-grading: $(STAMP)
	$(BIN)/python -m autograder bench-grading

bench: $(STAMP)
	$(BIN)/python -m autograder bench

bench-checks: $(STAMP)
	$(BIN)/python -m autograder bench-checks

data: $(STAMP)
	$(BIN)/python -m labtools.datasets download

clean:
	rm -rf build submitted autograded feedback autograde-logs gradebook.db .pytest_cache .hypothesis
