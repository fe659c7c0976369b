# coordd — build, run, test. `make run` and `make test` are the two commands a
# newcomer needs; everything else is for developers.

GO        ?= go
TAGS      := hashicorpmetrics
GOFLAGS_B := -tags $(TAGS)
BIN       := bin
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.5.1

.PHONY: all build run test test-short bench jepsen proto lint fuzz clean

all: build

build:
	$(GO) build $(GOFLAGS_B) -o $(BIN)/coordd ./cmd/coordd
	$(GO) build $(GOFLAGS_B) -o $(BIN)/coordctl ./cmd/coordctl
	$(GO) build $(GOFLAGS_B) -o $(BIN)/streamingnode ./cmd/streamingnode

# A local three-node cluster on loopback, data under ./data/dev. Ctrl-C stops it.
run: build
	$(BIN)/coordd dev --data-dir ./data/dev

test: build
	$(GO) vet $(GOFLAGS_B) ./...
	$(GO) test $(GOFLAGS_B) -count=1 -timeout 12m ./...

bench: build
	bash bench/run.sh

# Jepsen-style fault tests: the full matrix (several minutes per scenario).
# Replay one run with SEED=... SCENARIO=...; `make test` runs the smoke matrix.
jepsen:
	JEPSEN_FULL=1 JEPSEN_SEED=$(SEED) JEPSEN_SCENARIO=$(SCENARIO) $(GO) test $(GOFLAGS_B) -count=1 -timeout 60m -run TestJepsen -v ./jepsen-style-tests/

proto:
	GOFLAGS= $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOFLAGS= $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc -I commands/proto --go_out=. --go_opt=module=github.com/coordd/coordd commands/proto/log.proto
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc -I api/proto --go_out=. --go_opt=module=github.com/coordd/coordd \
		--go-grpc_out=. --go-grpc_opt=module=github.com/coordd/coordd api/proto/coordd/v1/*.proto

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))" || (gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'); exit 1)
	$(GO) vet $(GOFLAGS_B) ./...

fuzz:
	$(GO) test $(GOFLAGS_B) -run=^$$ -fuzz=FuzzDecode -fuzztime=30s ./commands

clean:
	rm -rf $(BIN) data
