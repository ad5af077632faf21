.DEFAULT_GOAL := help
.PHONY: help run build test fuzz bench lint

help: ## list the targets
	@grep -hE '^[a-z/-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "%-10s %s\n",$$1,$$2}'

run: ## install what is missing, start buzz-relay on ws://localhost:3000
	@scripts/run.sh

build: ## build buzz-relay, buzz and buzz-bench into bin/
	@mkdir -p bin
	go build -o bin/ ./cmd/...

test: ## the whole suite against a real PostgreSQL, plus a short fuzz run
	@scripts/test.sh

fuzz: ## explore each fuzzer for longer (FUZZTIME=2m)
	@FUZZTIME=$${FUZZTIME:-2m} scripts/test.sh

bench: ## benchmarks only (no tests)
	go test -run='^$$' -bench=. -benchmem ./...

lint: ## gofmt check, go vet, golangci-lint (pinned; installed into .bin/ on first use)
	@scripts/lint.sh
