# The two entry points of the README. Each creates the virtual environment it needs, so a fresh
# clone works with nothing installed by hand (Go 1.26+ and Python 3.11+ must be on the machine).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-unit test-integration lint docs build-plane proto image lock release clean

# The image's pins first (image/requirements.txt, with their hashes): the development cluster runs this
# venv's Python, so it runs the versions the image contains (tests/integration/test_image.py checks each
# of the image's distributions here; the tools only this venv has, the docs' among them, move none of them).
$(STAMP): pyproject.toml devtools/pyproject.toml image/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes -r image/requirements.txt
	$(BIN)/pip install --quiet -e '.[test,docs]' -e ./devtools
	touch $(STAMP)

# Builds the control planes (1.37 and 1.35, about 10 min each cold) and the other tools if they are not
# cached yet, then waits for them.
build-plane: $(STAMP)
	$(BIN)/vk-provider dev build

# The main job: the development cluster with the whole demo (home node, burst node, router, controller,
# example service), then the example flipped out to the burst node and back under load.
demo: build-plane
	$(BIN)/vk-provider dev up
	$(BIN)/vk-provider dev demo

# mypy's cache outlives the clone, as the plane's build does: a fresh clone on this machine checks in a
# second what takes 25 s from nothing (mypy compares each file's hash, so another tree's cache is safe).
MYPY_CACHE ?= $(or $(VK_PROVIDER_CACHE_DIR),$(HOME)/.cache/vk-provider)/mypy

lint: $(STAMP)
	$(BIN)/ruff check vk_provider providers devtools tests bench
	$(BIN)/ruff format --check vk_provider providers devtools tests bench
	$(BIN)/mypy --cache-dir=$(MYPY_CACHE)/project
	# The benchmarks are scripts beside their helper module, not a package: checked as files.
	MYPYPATH=bench $(BIN)/mypy --cache-dir=$(MYPY_CACHE)/bench bench/*.py
	$(BIN)/lint-imports --no-cache

# The documentation site (mkdocs.yml) into build/site, strict: a broken link, a missing anchor or a page
# no menu reaches fails it. Not --quiet: MkDocs 1.6 then drops warnings before --strict counts them, and
# passes a broken site. Material's notice of its end of life (May 2027) is not a warning of ours.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

test-unit: lint
	$(BIN)/pytest -m unit

test-integration: build-plane
	$(BIN)/pytest -m integration

# Three workers share one plane (tests/conftest.py): most integration tests wait on the plane, not the
# CPU, so even 2 cores run three at once; tests that share something cluster-wide form xdist groups.
TEST_WORKERS ?= 3

test: lint docs build-plane
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup

# The plugin API's Python messages (and their type stubs) and the Go example's code from the .proto;
# tests/unit/plugin checks that the committed files are what this writes.
proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I . --python_out=. --pyi_out=. vk_provider/plugin/v1/provider.proto
	PYTHON=$(BIN)/python examples/plugin-go/generate.sh

# The container image: the Containerfile, with the first builder that works here (podman, buildah, or
# docker with a daemon); without one, the same image from Debian's packages, as an OCI layout in
# build/image (`vk-provider dev image`, which needs root).
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' vk_provider/__init__.py)
IMAGE ?= vk-provider:$(VERSION)
image: $(STAMP)
	@if command -v podman >/dev/null && podman info >/dev/null 2>&1; then builder=podman; \
	elif command -v buildah >/dev/null; then builder=buildah; \
	elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then builder=docker; fi; \
	if [ -n "$$builder" ]; then \
		$$builder build -f Containerfile -t $(IMAGE) --build-arg VERSION=$(VERSION) \
			--build-arg REVISION=$$(git rev-parse HEAD) .; \
	else \
		echo "no container builder works here: the same image from Debian's packages, in build/image"; \
		$(BIN)/vk-provider dev image --output build/image --tag $(VERSION); \
	fi

# The image's Python distributions (vk-provider[router] and everything it needs), pinned with hashes.
# Rerun after changing pyproject.toml's dependencies; `--upgrade` moves every pin to the newest release.
LOCK_FLAGS ?=
lock: $(STAMP)
	$(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-find-links \
		--extra router $(LOCK_FLAGS) --output-file image/requirements.txt pyproject.toml

# Everything a platform team installs from, in dist/: the wheel and sdist, the image as an OCI archive
# and its digest, the Helm chart and install.yaml (both pinning the image by that digest), SHA256SUMS.
# IMAGE_REPOSITORY is where the image will be pushed (`skopeo copy --preserve-digests oci-archive:...`).
# The image is built from Debian's packages, which needs root.
IMAGE_REPOSITORY ?= vk-provider
release: $(STAMP)
	$(BIN)/vk-provider dev release --output dist --image-repository $(IMAGE_REPOSITORY)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
