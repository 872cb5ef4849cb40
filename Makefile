# gamp — the two commands a newcomer needs are `make demo` and `make test`.
GO ?= go
export PATH := $(PATH):/usr/local/go/bin
# Packages whose code starts goroutines (worker pool, loaders, CUDA device workers) run
# under the race detector.
RACE_PKGS = ./backend/cpu/ ./tensor/ ./data/ ./autocast/ ./memory/ ./profiler/ ./parallel/ ./dist/ ./cmd/gamprun/ ./cuda/

.PHONY: demo chargpt fitdemo test test-deps test-run check check-fmt check-cross check-vet check-staticcheck check-generated test-short race bench bench-torch gemm-vs-torch lint fmt vet gpu-tests

# The main job: the Fashion-MNIST CNN trained with AMP on the best device present
# (bf16 autocast on the CPU, fp16 on a GPU).
DATA ?= /usr/share/datasets/fashion-mnist
EPOCHS ?= 2
demo:
	@command -v $(GO) >/dev/null || { echo "Go is missing: install Go 1.26 (https://go.dev/dl) and put it on PATH"; exit 1; }
	@scripts/ensure-data.sh $(DATA)
	$(GO) run ./examples/fashion -model cnn -precision auto -epochs $(EPOCHS) -data $(DATA)

# The second main job: a character-level GPT trained with AMP on Debian's fortunes
# corpus, ending with a sample of generated text (CHARGPT_FLAGS adds flags).
FORTUNES ?= /usr/share/games/fortunes
chargpt:
	@command -v $(GO) >/dev/null || { echo "Go is missing: install Go 1.26 (https://go.dev/dl) and put it on PATH"; exit 1; }
	@scripts/ensure-fortunes.sh $(FORTUNES)
	$(GO) run ./examples/chargpt -fortunes $(FORTUNES) $(CHARGPT_FLAGS)

# The end-to-end autograd check from the foundation milestone (no data needed).
fitdemo:
	$(GO) run ./examples/fitdemo

# Every check: installs what the tests need where it can (scripts/test-deps.sh: the
# missing Debian packages, as root with apt-get), runs `make check` and every test, and
# ends — passed or failed — with the list of checks that were skipped and why (tests
# log their skips through internal/testenv into $GAMP_SKIP_LOG). A test that skips
# although its tool is installed fails; GPU tests skip without a GPU, listed as
# expected.
test:
	@log=$$(mktemp "$${TMPDIR:-/tmp}/gamp-skips.XXXXXX"); \
	trap '$(GO) run ./internal/testenv/skipreport "$$log"; rm -f "$$log"' EXIT; \
	scripts/test-deps.sh; \
	GAMP_SKIP_LOG=$$log $(MAKE) --no-print-directory -k check test-run

test-deps:
	@scripts/test-deps.sh

test-run:
	$(GO) build ./...
	CGO_ENABLED=0 $(GO) build ./...
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -tags purego ./half/ ./backend/cpu/
	GODEBUG=cpu.avx512f=off $(GO) test -count=1 ./half/ ./backend/cpu/
	$(GO) test -count=1 -race -short $(RACE_PKGS)

# The static checks CI runs (through make test): gofmt, go vet and staticcheck (pinned,
# installed on first use by scripts/staticcheck.sh), also over the pure-Go twins
# (-tags purego), and every code generator re-run and compared with the committed file.
# `make -k check` reports every failing check, not just the first.
check: check-fmt check-cross check-vet check-staticcheck check-generated

# Every package builds on Windows and macOS too (the CUDA backend and dist load their
# libraries at run time through internal/dl, so nothing links against them).
check-cross:
	GOOS=windows GOARCH=amd64 $(GO) build ./...
	GOOS=darwin GOARCH=arm64 $(GO) build ./...

check-fmt:
	@echo "gofmt -l"; files=$$(gofmt -l $$(find . -name '*.go' -not -path './.*')); \
	  if [ -n "$$files" ]; then echo "gofmt needed (gofmt -w these):"; echo "$$files"; exit 1; fi

check-vet:
	$(GO) vet ./...
	$(GO) vet -tags purego ./half/ ./backend/cpu/...

check-staticcheck:
	scripts/staticcheck.sh ./...
	scripts/staticcheck.sh -tags purego ./half/ ./backend/cpu/...

check-generated:
	scripts/check-generated.sh

test-short:
	$(GO) test -short ./...

race:
	$(GO) test -race ./...

# Conversion (ns/element, 16 M values: assembly, pure Go, x448), GEMM (GFLOP/s, gamp
# vs gonum at 256–2048) and BF16 GEMM (GFLOP/s, next to float32 in the same run)
# benchmarks.
bench:
	$(GO) test -run '^$$' -bench '_16M$$' -benchtime 20x ./half/
	$(GO) test -run '^$$' -bench '^BenchmarkGemm$$' -count 1 ./backend/cpu/
	$(GO) test -run '^$$' -bench '^BenchmarkGemmBF16$$' -count 1 ./backend/cpu/

# GPU checks for a machine with an NVIDIA GPU but no Go: the test binaries of the
# packages with GPU tests and the programs, cross-built into .gpu/ with the data they
# need (stripped and gzipped, about 50 MiB; run.sh unpacks them); run them there with
# .gpu/run.sh (GAMP_REQUIRE_GPU=1: a skip is a failure).
GPU_PKGS = cuda cuda/internal/cu dist
gpu-tests:
	@mkdir -p .gpu/data
	@for p in $(GPU_PKGS); do echo "test binary ./$$p"; CGO_ENABLED=0 $(GO) test -c -ldflags="-s -w" -o .gpu/$$(echo $$p | sed 's|/|__|g').test ./$$p || exit 1; done
	CGO_ENABLED=0 $(GO) build -ldflags="-s -w" -o .gpu/fashion ./examples/fashion
	CGO_ENABLED=0 $(GO) build -ldflags="-s -w" -o .gpu/ampbench ./cmd/ampbench
	gzip -f -9 .gpu/*.test .gpu/fashion .gpu/ampbench
	cp scripts/run-gpu-tests.sh .gpu/run.sh
	@scripts/ensure-data.sh $(DATA) && cp $(DATA)/*-ubyte.gz .gpu/data/
	@du -sh .gpu

# gamp next to PyTorch 1.13 on the CPU: every ampbench model, FP32 and BF16 autocast,
# alternating rounds, medians (the README's CPU table). MODELS=, ROUNDS=, STEPS= narrow it.
bench-torch:
	scripts/bench-torch.sh
	STEPS=$${STEPS:-10} scripts/chargpt-vs-torch.sh timing

# gamp's float32 GEMM against PyTorch's OpenBLAS on the linear layers' shapes.
gemm-vs-torch:
	scripts/gemm-vs-torch.sh

lint: check

vet:
	$(GO) vet ./...
