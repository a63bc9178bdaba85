# aiinfra.io_isolation — one entry point for set-up, tests and the demo.
#   make demo   all set-up, then the collection's main job on the built-in lab
#   make test   all set-up, then every test (unit, module, sanity, lint, build/install, docs)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CACHE  := .cache
# ansible-test and ansible-galaxy need the collection inside ansible_collections/<ns>/<name>.
COLL_TREE := $(CACHE)/collections/ansible_collections/aiinfra/io_isolation
APT_PACKAGES := git rsync shellcheck

export ANSIBLE_COLLECTIONS_PATH := $(abspath $(CACHE)/collections):$(abspath $(CACHE)/installed)
export ANSIBLE_NOCOLOR := 1
export LANG := C.UTF-8
# Tools find each other (antsibull-docs runs ansible-doc, ansible-lint runs ansible) through PATH.
# promtool (make promtool) for the Prometheus rule and metric tests.
export PATH := $(abspath $(BIN)):$(abspath $(CACHE))/promtool/usr/bin:$(PATH)

.PHONY: help setup apt venv tree collections promtool check demo-test record-summaries unit sanity lint build docs docs-check changelog-check py39-check ee-check lab-images lab-kernel lab-test $(LAB_STAGES) test test-newest demo demo-local clean constraints bench-calibration bench-isolation bench-isolation-cpu bench-isolation-smoke bench-isolation-containers bench-ceiling bench-rollout bench-vrate-pin bench-fleet lab-fleet-report lab-hot-remove lab-under-load lab-soak

help:
	@echo "make demo   - set up and run the collection's main job on the built-in lab"
	@echo "make test   - set up and run every test (make check: the stages that need no VM)"
	@echo "make unit | sanity | py39-check | ee-check | lint | build | docs-check | docs | changelog-check | test-newest | bench-isolation-smoke"
	@echo "make lab-test (all scenarios) | $(LAB_STAGES) | lab-fleet-report | lab-hot-remove | lab-under-load | lab-soak (SOAK_SECONDS=3600)"
	@echo "make demo-local | lab-kernel | bench-calibration | bench-isolation | bench-isolation-cpu | bench-isolation-containers | bench-ceiling | bench-vrate-pin | bench-rollout | bench-fleet | clean"

# Apt packages the tool chain needs; installed only when missing (root on CI machines).
apt:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing apt packages:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

$(BIN)/.installed: requirements/dev.in requirements/constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements/dev.in -c requirements/constraints.txt
	touch $@

venv: $(BIN)/.installed

# Collections besides this one (requirements/collections.txt: ansible.posix for the rollout benchmark's
# hand-written playbook, which make lint checks too), into .cache/installed.
$(CACHE)/installed/.installed: requirements/collections.txt tests/run-install-collections.sh $(BIN)/.installed
	bash tests/run-install-collections.sh $(abspath $(BIN))
	touch $@

collections: $(CACHE)/installed/.installed

# promtool checks the alert rules, their unit tests and the exporter's output (make unit). It comes out
# of Debian's `prometheus` package unpacked into the cache, not installed: installing it starts a
# Prometheus server on the machine.
$(CACHE)/promtool/usr/bin/promtool:
	rm -rf $(CACHE)/promtool && mkdir -p $(CACHE)/promtool
	cd $(CACHE)/promtool && { apt-get download -qq prometheus 2>/dev/null \
	  || { apt-get update -qq && apt-get download -qq prometheus; }; }
	dpkg-deb -x $(CACHE)/promtool/prometheus_*.deb $(CACHE)/promtool && rm $(CACHE)/promtool/prometheus_*.deb
	$@ --version | head -1

promtool: $(CACHE)/promtool/usr/bin/promtool

setup: apt venv tree collections promtool

# A symlink tree so ansible-core finds the collection as aiinfra.io_isolation. Left alone when it
# is right: make test runs stages side by side, and ln -sfn is not atomic.
tree:
	@mkdir -p $(dir $(COLL_TREE))
	@[ "$$(readlink $(COLL_TREE))" = "$(abspath .)" ] || ln -sfn $(abspath .) $(COLL_TREE)

unit: setup
	$(BIN)/python -m pytest tests/unit

# ansible-test wants a real (non-symlinked) tree with the collection's git-tracked files.
sanity: setup
	bash tests/run-sanity.sh $(abspath $(BIN))

lint: setup
	$(BIN)/ansible-lint --profile production --offline

build: setup
	bash tests/run-build.sh $(abspath $(BIN))

docs-check: setup
	bash tests/run-docs-check.sh $(abspath $(BIN))

# The docs site (modules, filters, lookup, roles, guides) under .cache/docs-site/, offline,
# every Sphinx warning an error; prints the path of its index.html.
docs: setup
	bash tests/run-docs-site.sh $(abspath $(BIN))

changelog-check: setup
	$(BIN)/antsibull-changelog lint

# Code that runs on managed hosts (modules, module_utils, the helpers they install) needs <= Python 3.9.
py39-check: setup
	bash tests/run-py39-check.sh $(abspath $(BIN))

# The AWX execution environment (ee/): ansible-builder create's build context, checked without an
# image build (the collection and every controller requirement get in), and the AWX project's
# collections/requirements.yml installed from the checkout.
ee-check: setup
	bash tests/run-ee-check.sh $(abspath $(BIN))

# The lab: QEMU VMs built from Debian packages (tests/lab/), cached under ~/.cache.
lab-images: setup
	python3 tests/lab/lab.py build debian12 debian13

# The lab's custom 6.1 kernel with io.latency and io.prio.class (Debian's kernels have neither),
# built from Debian's linux-source-6.1 into the lab cache; about 22 minutes on 2 cores, once.
lab-kernel:
	python3 tests/lab/lab.py kernel

# Molecule scenarios on real kernels, one make stage each (lab-test-<scenario>): calibration
# (Debian 13), colocated (both guests at once), debian12 (6.1) and debian13 (6.12) at once
# (scenario "guests"), custom-kernel (the lab's 6.1 with io.latency and io.prio.class). colocated also
# runs the observability pieces (io_latency against fio, the latency objective and the metrics).
LAB_SCENARIOS := calibration colocated guests custom-kernel
LAB_STAGES := $(addprefix lab-test-,$(LAB_SCENARIOS))
lab-test: lab-images
	bash tests/run-stages.sh $(LAB_STAGES)

$(LAB_STAGES): lab-test-%: lab-images
	$(BIN)/molecule test -s $*

# The custom kernel is built once into the lab cache (lab-kernel is a no-op when it is there).
lab-test-custom-kernel: lab-kernel

# Every stage runs even after one fails; the closing summary lists each stage's result and time.
# "a,b+x,y" runs two lanes side by side (tests/run-stages.sh), a space starts the next phase. Phase 1: the VM-less
# stages and test-newest beside the calibration and custom-kernel scenarios and demo-test (a single serial lane of
# every one-VM stage left one core idle for 30 of its 45 minutes; with demo-test beside test-newest the VM lane ended
# 500 s before the other). Phase 2:
# the benchmark's smoke run alone (its validity checks fail when another VM takes CPU from its guest; its figures
# are not results). Phase 3: the two two-VM scenarios side by side (alone, colocated kept the two cores 63% busy:
# its guests wait on every task's round trip).
CHECK_STAGES := unit sanity py39-check lint build ee-check docs-check docs changelog-check demo-local
comma := ,
empty :=
space := $(empty) $(empty)
TEST_STAGES := $(subst $(space),$(comma),$(CHECK_STAGES) test-newest)+lab-test-calibration,lab-test-custom-kernel,demo-test \
               bench-isolation-smoke lab-test-colocated+lab-test-guests
test: setup
	bash tests/run-stages.sh $(TEST_STAGES)

# The stages that need no VM: the inner loop (README).
check: setup
	bash tests/run-stages.sh $(CHECK_STAGES)

# The newest ansible-core (requirements/newest.txt; it needs Python 3.12+) on Debian 13's Python 3.13
# in a cached mmdebstrap chroot: the unit tests that run ansible-core's code, ansible-test sanity, site.yml twice
# on a Debian 13 VM.
test-newest: tree
	bash tests/run-newest-core.sh

# The collection's main job on the built-in lab (KEEP_LAB=1 leaves the VM running).
demo: setup
	bash tests/lab/demo.sh $(abspath $(BIN))

# Benchmark (not a test): iocost_calibrate against the reference method on the lab's NVMe disk,
# 3 repeats each, the reference at 120 s per fio run (about an hour under TCG).
bench-calibration: lab-images
	$(BIN)/python benchmarks/calibration/compare.py $(BENCH_ARGS)

# Benchmark (not a test): an inference reader against a training antagonist on one device-bound lab
# NVMe disk, under no isolation, iocost defaults, the roles, and the roles with a calibrated model;
# 3 repeats, then the QoS sweep (trade-off plots). Report: .cache/bench-isolation/report.html
# (docs/isolation.md).
bench-isolation: lab-images
	$(BIN)/python benchmarks/isolation/bench.py $(BENCH_ARGS)

# The CPU-contention pair (issue 39): a rate-bound reader beside a CPU-bound training job on a guest with two NUMA
# nodes, under the roles with and without the cpuset split (inference_cpus/training_cpus auto); 3 repeats, about
# 8 minutes under TCG (451 s measured on 2026-12-07). Report: .cache/bench-isolation-cpu/results.md (docs/isolation.md, "CPU contention").
bench-isolation-cpu: lab-images
	$(BIN)/python benchmarks/isolation/bench.py --cpu-pair --name bench-iso-cpu $(BENCH_ARGS)

# How the lab disk's capacity was chosen: each job alone, unthrottled (the emulator's ceiling) and
# device-bound (docs/isolation.md, "The lab disk").
bench-ceiling: lab-images
	$(BIN)/python benchmarks/isolation/ceiling.py $(BENCH_ARGS)

# Lab check of the vrate alerts (prometheus/alerts.yml, IoIsolationIocostVrateAtMin/AtMax): the io_metrics
# exporter's vrate on the device-bound lab disk under the kernel's class model (twice the disk), the calibrated
# model and the kernel's QoS, with the benchmark's reader and antagonists (about 25 minutes under TCG).
bench-vrate-pin: lab-images
	$(BIN)/python benchmarks/isolation/vrate_pin.py $(BENCH_ARGS)

# Benchmark (not a test): the same co-location settings rolled out by a hand-written playbook
# (ansible.builtin + ansible.posix, a task per file) and by site.yml on one lab VM, converge and two no-op
# re-runs each, interleaved; wall time, ratios and remote module executions per host (counted by a
# callback). Results in benchmarks/rollout/results/ (benchmarks/rollout/README.md).
bench-rollout: lab-images
	$(BIN)/python benchmarks/rollout/bench.py $(BENCH_ARGS)

# Benchmark (not a test), no VM: site.yml and verify.yml over synthetic fleets of 100, 1,000 and 5,000 hosts whose
# two module executions a connection made for the benchmark answers from recorded io_facts; controller CPU and
# memory per host, the growth exponent, and the roles' planning timed apart from ansible-core's work (BENCH_ARGS=
# --profile: our code's part of a run). Results in benchmarks/fleet/results/ (benchmarks/fleet/README.md, docs/fleet.md).
bench-fleet: setup
	$(BIN)/python benchmarks/fleet/bench.py $(BENCH_ARGS)

# The fleet report on real guests (docs/fleet.md; not part of make test): a Debian 12 and a Debian 13 guest and a host
# that does not answer, site.yml, one guest drifted, then verify.yml sliced as AWX slices it (ansible-runner jobs, the
# slices' artifacts merged into playbooks/fleet_report.yml) and unsliced; both reports checked host by host.
# Reports in .cache/lab-fleet-report/ (KEEP_LAB=1 leaves the guests running). About 9 minutes (557 s on 2026-12-07).
lab-fleet-report: lab-images
	$(BIN)/python tests/lab/fleet_report.py $(abspath $(BIN))

# A disk hot-removed mid-run (issue 38; not part of make test): lab-nvme-b behind a hot-pluggable PCIe root port, removed
# (QMP device_del) between site.yml's io_facts and its apply, and during iocost_calibrate; purge.yml then removes its
# rules (tests/lab/hot_remove.py, docs/reliability.md). About 20 minutes under TCG. LAB_GUEST=debian12|debian13.
LAB_GUEST ?= debian12
lab-hot-remove: lab-images
	$(BIN)/python tests/lab/hot_remove.py $(abspath $(BIN)) --guest $(LAB_GUEST) $(LAB_ARGS)

# site.yml and verify.yml under load (issue 38; not part of make test): idle, then with a shuffle saturating the
# device-bound lab disk and a CPU hog on both vCPUs; a rate-bound reader in inference.slice against the isolation
# target before and after the roles (tests/lab/under_load.py, docs/reliability.md). About 30 minutes under TCG.
lab-under-load: lab-images
	$(BIN)/python tests/lab/under_load.py $(abspath $(BIN)) --guest $(LAB_GUEST) $(LAB_ARGS)

# The io_metrics exporter soak (issue 38; not part of make test): a lab guest with the roles and the exporter at a 5 s
# interval with its latency histogram, under a load that changes every SOAK_SECONDS/16, for SOAK_SECONDS (3600) plus
# the boot and site.yml (44 minutes on a host loaded by other lab VMs; not timed on a quiet one). Each run's memory peak and CPU, the textfile checked by promtool at every
# scrape, no process, kprobe or BPF program left; fails past the bounds (tests/lab/exporter_soak.py). Results in
# tests/lab/results/exporter-soak-$(SOAK_GUEST).{json,md} (docs/reliability.md).
SOAK_SECONDS ?= 3600
SOAK_GUEST ?= debian13
lab-soak: lab-images
	$(BIN)/python tests/lab/exporter_soak.py $(abspath $(BIN)) --guest $(SOAK_GUEST) --seconds $(SOAK_SECONDS) $(SOAK_ARGS)

# The same benchmark cut to one configuration and a few seconds, so that it cannot rot (make test). Its
# guest runs under single-threaded TCG: a kprobe attached while the other vCPU runs the probed function
# crashed guests under multi-threaded TCG (docs/kernel-files.md).
bench-isolation-smoke: lab-images
	$(BIN)/python benchmarks/isolation/bench.py --smoke --name bench-smoke --tcg-thread single --out $(CACHE)/bench-isolation-smoke

# The smoke pair through containers (issue 37; NOT in make test, whose 40 minutes it would overrun): per repeat the
# smoke cells as transient units (systemd-run) and in containers (reader: Docker, inference.slice; antagonist: Podman,
# training.slice; the image built in the guest from its Debian packages), 5 repeats, side by side. About 35 minutes
# under TCG, estimated (boot, dockerd and image 5 minutes, roles 4, each repeat 5), not yet timed. Report: .cache/bench-isolation-containers/
# results.md (docs/isolation.md, "Through containers").
bench-isolation-containers: lab-images
	$(BIN)/python benchmarks/isolation/bench.py --containers --name bench-iso-ctr --tcg-thread single --out $(CACHE)/bench-isolation-containers $(BENCH_ARGS)

# make test's demo stage: the README's `KEEP_LAB=1 make demo` on a fresh lab instance, then the kept VM.
demo-test: lab-images
	bash tests/lab/demo_test.sh

# Refresh the unit tests' recorded rollout summaries (tests/unit/playbooks/recorded/) on the VM that
# `KEEP_LAB=1 make demo` left running; not part of make test.
record-summaries: setup
	bash tests/lab/record_summaries.sh $(abspath $(BIN))

# The same playbook against this machine, read-only.
demo-local: setup
	$(BIN)/ansible-playbook -i playbooks/inventory/localhost.yml playbooks/demo.yml

constraints: 
	$(PYTHON) -m venv $(CACHE)/freeze-venv
	$(CACHE)/freeze-venv/bin/pip install -q -r requirements/dev.in
	{ echo "# Exact pins for the controller toolchain (generated from requirements/dev.in with pip freeze)."; \
	  echo "# Regenerate: make constraints"; $(CACHE)/freeze-venv/bin/pip freeze; } > requirements/constraints.txt

clean:
	rm -rf $(CACHE) tests/output .pytest_cache .coverage
