.DEFAULT_GOAL := help

# -tags=libsecp256k1 where the C library can be built against, else empty:
# the relay then verifies signatures in pure Go (docs/OPERATIONS.md).
SECP256K1_TAGS = $(shell scripts/secp256k1-tags.sh)
.PHONY: help run build test fuzz soak bench bench-1m bench-windows bench-scale bench-req-1m bench-fanout bench-idle bench-abuse bench-move lint

help: ## list the targets
	@grep -hE '^[a-z0-9/-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "%-10s %s\n",$$1,$$2}'

run: ## install what is missing, start buzz-relay on ws://localhost:3000
	@scripts/run.sh

build: ## build buzz-relay, buzz, buzz-bench and buzz-testdb into bin/
	@mkdir -p bin
	go build $(SECP256K1_TAGS) -o bin/ ./cmd/...

test: ## the whole suite against a real PostgreSQL, plus a short fuzz run
	@scripts/test.sh

fuzz: ## explore each fuzzer for longer (FUZZTIME=2m)
	@FUZZTIME=$${FUZZTIME:-2m} scripts/test.sh

soak: ## 10 min, 2 relays, 48 connections, every fault once; one JSON summary ("lost": 0)
	@scripts/soak.sh

# The 1M-event search benchmarks and the thread-window benchmark load their
# dataset first (tens of minutes on a 2-core machine): bench leaves them out,
# bench-1m and bench-windows run them with a timeout that fits.
SEARCH_1M := SearchP4|SearchZipf
LONG_BENCH := $(SEARCH_1M)|ThreadWindow

bench: ## the quick benchmarks (no tests; the 1M-event ones are bench-1m)
	go test $(SECP256K1_TAGS) -run='^$$' -bench=. -skip='$(LONG_BENCH)' -benchmem ./...

bench-1m: ## the 1M-event search benchmarks (P4, Zipf), timeout 120m
	go test $(SECP256K1_TAGS) -run='^$$' -bench='$(SEARCH_1M)' -benchtime=1x -timeout=120m ./internal/search

bench-windows: ## P7 (docs/PERFORMANCE.md): thread windows on 1.1M replies (about 15 min)
	go test $(SECP256K1_TAGS) -run='^$$' -bench=ThreadWindow -benchtime=1x -timeout=90m ./internal/windowbench

bench-scale: ## P1 and P5 on several processes (docs/PERFORMANCE.md): ingest on 1/2/4 processes, fan-out single vs cross-process
	@scripts/bench-scale.sh 3 --events 20000 --subscribers 1000 --rate 100 --fanout-seconds 10 --fanout-drain 30s

bench-req-1m: ## P3: REQ shapes on 1M fixture events, 3 runs (BENCH_1M_CACHE=dir keeps the load)
	@scripts/bench-1m.sh 3

bench-fanout: ## P5: fan-out, 1,000 subscribers x 100 ev/s for 10 s, 3 runs
	@scripts/bench.sh 3 fanout --subscribers 1000 --rate 100 --fanout-seconds 10

bench-idle: ## P6: 10,000 idle authenticated sockets, relay RSS; heap profile in bin/heap-idle.pb.gz
	@mkdir -p bin
	@BENCH_ENV="BUZZ_PPROF_ENABLED=true $(BENCH_ENV)" scripts/bench.sh 1 idle --idle-conns 10000 \
		--pprof http://127.0.0.1:3392/debug/pprof/heap --heap-profile $(CURDIR)/bin/heap-idle.pb.gz

bench-move: ## export and import of one community of 1M events: rates and peak RSS (about 30 min)
	@scripts/bench-move.sh

bench-abuse: ## honest p50/p99 with and without each attack, default quotas (about 20 min)
	@scripts/bench-abuse.sh

lint: ## gofmt check, go vet, golangci-lint (pinned; installed into ~/.cache/buzz-lint/ on first use)
	@scripts/lint.sh
