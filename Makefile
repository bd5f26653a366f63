# mcpfleet developer tasks. `make run` and `make test` are the README's two commands.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
MCPFLEET := $(VENV)/bin/mcpfleet
NODE_TOOLS := tools/node/node_modules/.package-lock.json
PYTEST_ARGS ?=

.PHONY: venv node-tools system-deps cluster-binaries node-binaries image run test test-realnode bench bench-anchors lint crds clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip uv
	$(VENV)/bin/uv pip install --python $(PY) -e '.[dev]'
	touch $@

node-tools: $(NODE_TOOLS)

$(NODE_TOOLS): tools/node/package.json tools/node/package-lock.json
	cd tools/node && npm ci --no-audit --no-fund
	touch $@

# Debian packages the tests and benchmarks need (PostgreSQL, git for git sources, wrk for load).
system-deps:
	bash scripts/system-deps.sh

# Builds (first time only, cached under ~/.cache/mcpfleet) the Kubernetes control plane binaries and Helm.
cluster-binaries: venv
	$(MCPFLEET) dev-cluster build --helm

# The real node's binaries (kubelet, kube-proxy, CoreDNS, pause), built like the control plane's.
node-binaries: cluster-binaries
	$(MCPFLEET) dev-cluster build --real-node

# The mcpfleet OCI image without a registry or Docker (root: debootstrap + chroot); prints its name.
image: venv node-tools
	$(MCPFLEET) dev-cluster image --repo .

crds: venv
	$(MCPFLEET) crds --output deploy/crds

run: venv node-tools
	$(MCPFLEET) up examples/quickstart

test: venv node-tools system-deps cluster-binaries
	$(PY) -m pytest $(PYTEST_ARGS)

# Real pods on a real node (root): kubelet + containerd beside kwok, the operator installed in-cluster
# from deploy/, every kind called from a client pod. Not yet part of `test` (see docs/dev-cluster.md).
test-realnode: venv node-tools system-deps cluster-binaries node-binaries
	MCPFLEET_REALNODE=1 $(PY) -m pytest tests/realnode $(PYTEST_ARGS)

bench: venv node-tools system-deps
	$(PY) bench/run_all.py

# The anchors the vMCP figures are compared against (bare ASGI, SDK server, fastmcp proxy), from their
# own venv bench/anchors/.venv: fastmcp is not a dependency of mcpfleet.
bench-anchors: venv system-deps
	bench/anchors/anchor-mcp.sh

lint: venv
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) tools/node/node_modules .pytest_cache .mypy_cache .ruff_cache
