# The two commands of the README: `make demo` (the main job) and `make test`
# (every test). Each installs what it needs first (scripts/setup.sh).
GO       ?= go
BENCHDIR ?= .bench
EXAMPLES := examples/arena

.PHONY: all demo test vet bench conformance setup refs xpu

all: test

setup:
	@bash scripts/setup.sh

xpu: setup
	$(GO) build -o bin/xpu ./cmd/xpu

# The main job: what this machine offers, the conformance matrix, and a
# short benchmark on the default CPU backend.
demo: xpu refs
	./bin/xpu info
	./bin/xpu conformance
	./bin/xpu bench --short --ref $(BENCHDIR)

vet: setup
	$(GO) vet ./...

test: setup
	$(GO) vet ./...
	$(GO) test -race -timeout 15m ./...
	@for m in $(EXAMPLES); do \
		echo "== $$m (its own module)"; \
		(cd $$m && $(GO) vet ./... && $(GO) test -race -timeout 5m ./...) || exit 1; \
	done

conformance: xpu
	./bin/xpu conformance

# C references (OpenMP, memcpy) built here so ratios are measured in the
# same run on the same machine.
refs: setup
	@mkdir -p $(BENCHDIR)
	@for src in internal/bench/ref/*.c; do \
		out=$(BENCHDIR)/$$(basename $$src .c); \
		gcc -O3 -march=native -fopenmp -o $$out $$src || exit 1; \
	done

bench: xpu refs
	./bin/xpu bench --ref $(BENCHDIR)
