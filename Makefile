# Everything a new machine needs, from bare Python, git and npm. README's two commands:
#   make demo   sets up and runs the main job on a local folder
#   make test   sets up and runs the whole test suite (what .ci/run calls)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PLUGINS := $(sort $(patsubst %/pyproject.toml,%,$(wildcard plugins/*/pyproject.toml)))
PLUGIN_PACKAGES := $(sort $(filter-out %.egg-info,$(wildcard plugins/*/fdcore_*)))
# contrib/plugin-template is type-checked but not installed: installed, its example names
# (one_at_a_time, monthly, jsonl, monthly-slots) would be offered to every agent and command of
# the dev environment, and would clash with a copy of the template under development. Its tests
# install it on their own, alone with the core (contrib/plugin-template/tests/conftest.py).
TEMPLATE_PACKAGE := contrib/plugin-template/fdcore_plugin_template
# contrib/webhook (fdcore-webhook) likewise: type-checked, tested from its folder, not installed.
CONTRIB_PACKAGES := contrib/webhook/fdcore_webhook
STAMP := $(VENV)/.installed
AZURITE_STAMP := tools/azurite/node_modules/.installed
CHROMIUM_STAMP := $(VENV)/.chromium
PYTEST_ARGS ?=
# The versions every install takes (`make lock` writes it; docs/development.md). make test-latest
# installs without it, upgrading to the newest instead.
CONSTRAINTS := requirements/constraints.txt
PINS := -c $(CONSTRAINTS)
# The interpreters `make lock` resolves on, each on its own (docs/development.md).
LOCK_PYTHONS ?= $(PYTHON)
LATEST_VENV := .venv-latest
# Commits after this one have subjects of at most 72 characters (make lint checks them).
SUBJECTS_SINCE := f2ea389

.PHONY: setup azurite chromium hooks demo test lint typecheck pytest lock test-latest soak bench bench-report bench-history bench-fleet bench-peers guard-mutants clean

setup: $(STAMP) azurite hooks

# Every distribution builds with setuptools alone: installed once into the venv first, it spares
# pip an isolated build environment per distribution (11 of them).
$(STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(PLUGINS)) Makefile $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check $(PINS) 'setuptools>=70.1'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check $(PINS) --no-build-isolation \
		-e '.[test]' $(foreach p,$(PLUGINS),-e '$(p)[test]')
	touch $@

# The Azure Storage emulator the fdcore-onelake tests start, pinned by tools/azurite/package-lock.json.
azurite: $(AZURITE_STAMP)

$(AZURITE_STAMP): tools/azurite/package.json tools/azurite/package-lock.json
	npm ci --prefix tools/azurite --no-audit --no-fund --loglevel=error
	touch $@

# The browser the fdcore-monitor page tests drive through Playwright: Debian's chromium
# (Playwright's own browser downloads are not used). Installed where we may (root on Debian, as
# CI runs); elsewhere the browser tests skip, saying why.
chromium: $(CHROMIUM_STAMP)

$(CHROMIUM_STAMP): | $(STAMP)
	@if [ -x /usr/bin/chromium ]; then echo "chromium: /usr/bin/chromium"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else echo "chromium: not installed (needs root and apt-get); the browser tests will skip"; fi
	touch $@

# The repository's git hooks (tools/git-hooks: commit subjects of at most 72 characters): in a
# git checkout only, and not over hooks of the developer's own choosing.
hooks:
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1 && \
		[ -z "$$(git config core.hooksPath)" ]; then git config core.hooksPath tools/git-hooks; fi

# The demo needs the core, the four plugins its agents use and the monitor it offers (`fdcore
# demo --monitor`), nothing of the tests' (no Azurite, no browser, no test extras); a venv that
# `make setup` made has them already.
DEMO_STAMP := $(VENV)/.demo-installed
DEMO_PLUGINS := plugins/localfs plugins/claim plugins/takeover plugins/slots plugins/monitor
$(DEMO_STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(DEMO_PLUGINS)) Makefile $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -f $(STAMP) || $(BIN)/python -m pip install --quiet --disable-pip-version-check \
		$(PINS) 'setuptools>=70.1'
	test -f $(STAMP) || $(BIN)/python -m pip install --quiet --disable-pip-version-check \
		$(PINS) --no-build-isolation -e . $(foreach p,$(DEMO_PLUGINS),-e $(p))
	touch $@

demo: $(DEMO_STAMP)
	$(BIN)/fdcore demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tools/commit_subjects.py since $(SUBJECTS_SINCE)

typecheck: setup
	$(BIN)/mypy fdcore $(PLUGIN_PACKAGES) $(TEMPLATE_PACKAGE) $(CONTRIB_PACKAGES) tools/*.py

# Two workers: the tests that start real processes run one after the other on one of them
# (the tests marked processes: conftest.py groups them), the in-process tests on the other.
# PYTEST_WORKERS=0: one process.
PYTEST_WORKERS ?= 2
pytest: setup chromium  # the browser only the tests need (the demo does not)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

test: lint typecheck pytest

# Refresh the constraints to the newest versions (a fresh resolution in throwaway venvs, on each
# of LOCK_PYTHONS), then run everything on them. Commit the new file only when this passes.
lock: | $(STAMP)
	$(BIN)/python tools/lock.py $(CONSTRAINTS) $(LOCK_PYTHONS)
	$(MAKE) test

# Everything make test runs, in a venv of its own upgraded to the newest versions (no
# constraints): a release that breaks us shows here first, not in a fresh clone's make test.
test-latest:
	rm -f $(LATEST_VENV)/.installed
	$(MAKE) test VENV=$(LATEST_VENV) PINS='--upgrade --upgrade-strategy eager'

# The long forms of what make test runs short: the fault suite in full, ten minutes of kills,
# pauses, deleted leases, a full disk, a read-only mailbox and a skewed clock on real agents
# (make test: 15 s, until each kind of fault came once); a minute of retention runs racing two
# agents (make test leaves that to the fault suite's short form); 45 SIGKILLs among three real
# agents sharing a schedule (make test: 6); the simulator's 10,000 seeded runs
# (make test: 1,000), its 10,000 requests on uneven tables (make test: 2,000) and its 1,000
# hourly slots of a shared schedule (make test: 250).
SOAK_SECONDS ?= 600
soak: setup
	FDCORE_SOAK_SECONDS=$(SOAK_SECONDS) $(BIN)/pytest -s tests/test_fault_suite.py
	FDCORE_RETENTION_RACE_SECONDS=60 $(BIN)/pytest -s tests/test_processes_retention.py
	FDCORE_SCHEDULE_KILLS=45 $(BIN)/pytest tests/test_processes_schedules.py
	FDCORE_SIMULATOR_SEEDS=5000 FDCORE_SIMULATOR_REQUESTS=10000 $(BIN)/pytest \
		tests/test_simulator.py -k "10000_seeded_runs or 10000_requests"
	FDCORE_SCHEDULE_HOURS=1000 $(BIN)/pytest tests/test_simulator_schedules.py -k 1000_slots
	FDCORE_SIMULATOR_STARVE_SEEDS=1000 $(BIN)/pytest tests/test_simulator_starvation.py -k many_seeds

bench: setup
	$(BIN)/pytest benchmarks --benchmark-only --benchmark-columns=median,iqr,ops

# docs/benchmarks.md's generated tables and the plots under docs/ (docs/benchmarks.md says how
# long it takes); matplotlib comes from the bench extra, never the default install.
BENCH_STAMP := $(VENV)/.bench-installed
BENCH_REPORT_ARGS ?=
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet --disable-pip-version-check $(PINS) -e '.[test,bench]'
	touch $@

bench-report: setup $(BENCH_STAMP)
	nice $(BIN)/python benchmarks/docs_report.py $(BENCH_REPORT_ARGS)

# Poll cost against history (docs/benchmarks.md, docs/retention.md): one idle agent's poll over
# N finished requests, retention on and off; 100,000 on a local folder, 10,000 on Azurite
# (writing and archiving 100,000 there takes the better part of an hour).
bench-history: setup
	$(BIN)/python benchmarks/poll_history.py --finished 0 100000
	$(BIN)/python benchmarks/poll_history.py --azurite --finished 0 1000 10000 --polls 12

# Real fleets at size (docs/benchmarks.md, "Real fleets at size"): 20 agent processes on a local
# folder and 8 on Azurite drain 1,000 requests (checked: none twice, no two writers), then an
# idle poll's store calls at that size and at 3 (the rest stopped); locally in a fleet of 3 too.
# Under a shared machine's load the Azurite run takes the better part of an hour.
bench-fleet: setup
	nice $(BIN)/python benchmarks/bench_fleet.py size --agents 20 3 --shrink-to 3 --requests 1000
	nice $(BIN)/python benchmarks/bench_fleet.py size --azurite --agents 8 --shrink-to 3 \
		--requests 1000

# fdcore beside huey and APScheduler 4 (SQLite; PostgreSQL from Debian's binaries where
# installed), the same workloads interleaved (docs/benchmarks.md, "Beside its peers"); the
# defaults take a few minutes, PEERS_ARGS scales them (benchmarks/peers/peers.py --help).
PEERS_STAMP := $(VENV)/.peers-installed
PEERS_ARGS ?=
$(PEERS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet --disable-pip-version-check $(PINS) -e '.[test,peers]'
	touch $@

bench-peers: setup $(PEERS_STAMP)
	nice $(BIN)/python benchmarks/peers/peers.py $(PEERS_ARGS)

# Each guard of fdcore-hostslots and fdcore-admission removed in turn, in a temporary copy of
# the package: a test must fail for each (docs/host.md, "Measured"). A few minutes.
guard-mutants: setup
	$(BIN)/python tools/guard_mutants.py

clean:
	rm -rf $(VENV) $(LATEST_VENV) tools/azurite/node_modules
