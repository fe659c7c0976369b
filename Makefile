# coordd — build, run, test. `make run` and `make test` are the two commands a
# newcomer needs; everything else is for developers.

GO        ?= go
TAGS      := hashicorpmetrics
GOFLAGS_B := -tags $(TAGS)
BIN       := bin
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.5.1
# staticcheck (honnef.co/go/tools), pinned; `make lint` installs it into
# bin/tools on first use, so a fresh machine needs nothing beforehand.
STATICCHECK_VERSION := v0.8.2
STATICCHECK         := $(BIN)/tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck
# versitygw, a real S3 server (Apache-2.0), pinned: the object-store tests
# run against it (testutil/s3server.go finds it at this path). v1.8.0 is
# the first release whose conditional PUTs are atomic per key, which
# objectstore.Create's exclusivity relies on. `make test` installs it.
VERSITYGW_VERSION := v1.8.0
VERSITYGW         := $(BIN)/tools/versitygw-$(VERSITYGW_VERSION)/versitygw

.PHONY: all build run run-secure test test-short bench jepsen proto openapi lint fuzz clean tools

all: build

# `--version` on every binary names the commit and the build time. Go
# stamps the commit (vcs.revision) only where it may run git, and a
# GOFLAGS=-buildvcs=false in the environment or in `go env` turns that off
# (--version then said "(devel)" with no commit); -buildvcs on the command
# line wins over both, so it is set here: true in a git checkout, false
# outside one (a source tarball). The link stamps the build time.
BUILDVCS    := $(shell git rev-parse --is-inside-work-tree >/dev/null 2>&1 && echo true || echo false)
BUILT_AT    := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
BUILD_FLAGS := $(GOFLAGS_B) -buildvcs=$(BUILDVCS) -ldflags "-X github.com/coordd/coordd/cmd/internal/buildinfo.builtAt=$(BUILT_AT)"

build:
	$(GO) build $(BUILD_FLAGS) -o $(BIN)/coordd ./cmd/coordd
	$(GO) build $(BUILD_FLAGS) -o $(BIN)/coordctl ./cmd/coordctl
	$(GO) build $(BUILD_FLAGS) -o $(BIN)/streamingnode ./cmd/streamingnode

# A local three-node cluster on loopback, data under ./data/dev. Ctrl-C stops it.
run: build
	$(BIN)/coordd dev --data-dir ./data/dev

# The same cluster with TLS everywhere, mutual TLS on raft and tokens: a
# throwaway CA, certificates and an admin token under ./data/dev-secure/pki.
run-secure: build
	$(BIN)/coordd dev --secure --data-dir ./data/dev-secure

# COORDD_REQUIRE_REAL_SERVERS=1: a test that needs a real server (versitygw,
# pinned in bin/tools; Debian's prometheus and promtool, which .ci/run
# installs) fails when it is missing instead of skipping.
test: build lint tools
	COORDD_REQUIRE_REAL_SERVERS=1 $(GO) test $(GOFLAGS_B) -count=1 -timeout 12m ./...
	# Milvus 2.6 conformance (docs/milvus.md#conformance-tests), a module of its own.
	cd milvusconformance && $(GO) test -tags test -count=1 -timeout 10m ./...

bench: build
	bash bench/run.sh

# The Milvus-max run (docs/scaling.md#milvus-max): three coordd processes
# seeded with 1M segments, Milvus's rates at 1x and 5x, leader kills, a
# member replaced, bulk DDL; one table at the end. SCALE_FLAGS sizes it,
# e.g. SCALE_FLAGS="-segments 100000 -vchannels 8192 -row 1m -kills 3".
.PHONY: bench-scale
bench-scale: build
	$(GO) build $(GOFLAGS_B) -o $(BIN)/scalebench ./bench/scale
	$(BIN)/scalebench -coordd $(BIN)/coordd $(SCALE_FLAGS)

# Jepsen-style fault tests: the full matrix (several minutes per scenario).
# Replay one run with SEED=... SCENARIO=...; `make test` runs the smoke matrix.
jepsen:
	JEPSEN_FULL=1 JEPSEN_SEED=$(SEED) JEPSEN_SCENARIO=$(SCENARIO) $(GO) test $(GOFLAGS_B) -count=1 -timeout 120m -run TestJepsen -v ./jepsen-style-tests/

proto:
	GOFLAGS= $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOFLAGS= $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc -I commands/proto --go_out=. --go_opt=module=github.com/coordd/coordd commands/proto/log.proto
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc -I api/proto --go_out=. --go_opt=module=github.com/coordd/coordd \
		--go-grpc_out=. --go-grpc_opt=module=github.com/coordd/coordd api/proto/coordd/v1/*.proto
	# Milvus 2.6's StreamingCoord services, in a schema of coordd's own (docs/milvus.md#schema).
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc -I api/proto --go_out=. --go_opt=module=github.com/coordd/coordd \
		--go-grpc_out=. --go-grpc_opt=module=github.com/coordd/coordd api/proto/milvus/*.proto
	$(MAKE) openapi

# The OpenAPI document of the HTTP API, generated from the gateway's route
# table and the proto descriptors; committed, served at /v1/openapi.json.
openapi:
	$(GO) run $(GOFLAGS_B) ./api/httpgateway/genopenapi api/httpgateway/openapi.json

# gofmt (generated code excluded), go vet, staticcheck at the pinned version.
lint: $(STATICCHECK)
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'); exit 1)
	$(GO) vet $(GOFLAGS_B) ./...
	$(STATICCHECK) -tags $(TAGS) ./...

$(STATICCHECK):
	GOFLAGS= GOBIN=$(CURDIR)/$(dir $(STATICCHECK)) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# The pinned servers and tools the tests use, built once into bin/tools.
tools: $(STATICCHECK) $(VERSITYGW)

$(VERSITYGW):
	GOFLAGS= GOBIN=$(CURDIR)/$(dir $(VERSITYGW)) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

fuzz:
	$(GO) test $(GOFLAGS_B) -run=^$$ -fuzz=FuzzDecode -fuzztime=30s ./commands
	$(GO) test $(GOFLAGS_B) -run=^$$ -fuzz=FuzzParseObjectKey -fuzztime=30s ./commands
	$(GO) test $(GOFLAGS_B) -run=^$$ -fuzz=FuzzParseAuthorization -fuzztime=30s ./api/auth
	$(GO) test $(GOFLAGS_B) -run=^$$ -fuzz=FuzzRead -fuzztime=30s ./backup

clean:
	rm -rf $(BIN) data
