# Herald's developer commands. `make help` lists them.
GO        ?= go
BIN       ?= bin/herald
LINT_VER  ?= v2.6.2
# The protobuf generators, pinned to the versions in go.mod: the generated
# files record them, so another version shows as drift in CI.
PROTOC_GEN_GO_VER      ?= v1.36.12
PROTOC_GEN_GO_GRPC_VER ?= v1.6.2

# Nested test modules: tests whose heavy dependencies (a browser driver, a
# third-party WeCom client, the Kubernetes API types and BuildKit's
# Dockerfile parser) stay out of the product's go.mod. Each builds against
# this repository's Herald module through a replace directive, or reads its
# files (cmd/herald/deploy/check).
TEST_MODULES ?= engine/api/browsertest plugins/wecomfake/fidelity cmd/herald/deploy/check

.PHONY: help build test test-short lint generate generate-check bench tidy deploy-check fuzz-short

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## build bin/herald
	$(GO) build -o $(BIN) ./cmd/herald

test: ## run every test with the race detector, nested test modules included (what CI runs)
	$(GO) vet ./...
	$(GO) test -race -timeout 20m ./...
	@set -e; for m in $(TEST_MODULES); do \
		echo "== $$m"; \
		(cd $$m && $(GO) vet ./... && $(GO) test -race -timeout 10m ./...); \
	done

# Fuzz targets as package:FuzzName. go test -fuzz takes one target per
# package run, so fuzz-short runs them one after another. Their seed corpora
# (f.Add and testdata/fuzz/FuzzName) also run as plain tests under make test.
FUZZ_TARGETS := \
	./engine/api:FuzzWriteBodies \
	./rules:FuzzCompileRule \
	./rules:FuzzPeopleFile \
	./engine/schedule:FuzzCron \
	./engine:FuzzRestore \
	./cluster:FuzzInspectBackup \
	./cluster:FuzzPeerProof
# A count of executions, not a duration: with a duration, Go 1.26's fuzz
# coordinator may report its own deadline as the target failing ("context
# deadline exceeded", no input written: golang/go#75804, fixed in Go 1.27);
# CI saw it on FuzzCompileRule. 10000 inputs take 1-40 s per target here.
FUZZ_TIME ?= 10000x
# A new input is minimised for up to 60 s by default, with the fuzzing
# stopped meanwhile: in a short run that is most of the run.
FUZZ_MINIMIZE ?= 1s

fuzz-short: ## run each fuzz target for FUZZ_TIME (10000 inputs) on new inputs (CI runs it after make test)
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; echo "== $$name ($$pkg)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZ_TIME) -fuzzminimizetime $(FUZZ_MINIMIZE) $$pkg; \
	done

test-short: ## the quick tests only (no multi-process cluster tests)
	$(GO) test -short ./...
	@set -e; for m in $(TEST_MODULES); do (cd $$m && $(GO) test -short ./...); done

# systemd-analyze verify needs ExecStart's binary to exist: it checks a
# copy of the unit whose paths point at a fresh build, and fails on any
# warning (an unknown or misspelt key is only a warning to it).
DEPLOY := cmd/herald/deploy
deploy-check: ## verify the systemd unit and the Prometheus alerts (systemd-analyze, promtool)
	@set -e; d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	$(GO) build -o "$$d/herald" ./cmd/herald; \
	sed "s#/usr/local/bin/herald#$$d/herald#g" $(DEPLOY)/herald.service > "$$d/herald.service"; \
	out=$$(systemd-analyze verify "$$d/herald.service" 2>&1) || { echo "$$out"; exit 1; }; \
	if [ -n "$$out" ]; then echo "$$out"; echo "systemd-analyze verify: $(DEPLOY)/herald.service has warnings"; exit 1; fi; \
	echo "systemd-analyze verify $(DEPLOY)/herald.service: ok"
	promtool check rules $(DEPLOY)/prometheus/alerts.yml
	cd $(DEPLOY)/prometheus && promtool test rules alerts_test.yml

tidy: ## go mod tidy the product module and every nested test module
	$(GO) mod tidy
	@set -e; for m in $(TEST_MODULES); do (cd $$m && $(GO) mod tidy); done

# Tools `go install` puts in GOPATH/bin, which need not be on PATH.
GOBIN_DIR := $(shell $(GO) env GOPATH)/bin
LINTER    := $(or $(shell command -v golangci-lint 2>/dev/null),$(GOBIN_DIR)/golangci-lint)

lint: ## golangci-lint with the repo's .golangci.yml
	@test -x $(LINTER) || $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(LINT_VER)
	$(LINTER) run --timeout 10m ./...
	@set -e; for m in $(TEST_MODULES); do (cd $$m && $(LINTER) run --timeout 10m ./...); done

generate: ## regenerate the channel protocol's Go code from its .proto (needs protoc)
	@command -v protoc-gen-go >/dev/null 2>&1 || $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VER)
	@command -v protoc-gen-go-grpc >/dev/null 2>&1 || $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VER)
	bash plugins/proto/generate.sh

generate-check: generate ## fail if the committed generated code differs from a fresh generation
	@git diff --exit-code -- plugins/proto || (echo "generated code is stale: run make generate and commit" && exit 1)

bench: ## the benchmarks whose figures the issues report
	$(GO) test -run '^$$' -bench . -benchmem ./...
