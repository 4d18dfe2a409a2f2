# Mailroom. `make run` serves the API locally (embedded store, outbox of .eml files); `make test`
# is what CI runs (.ci/run); `sam build` calls the build-<LogicalId> targets (BuildMethod:
# makefile in template.yaml) with ARTIFACTS_DIR set.

GO ?= go

# Every Lambda function, as Name:dir (functions/<dir>/main.go, <Name>Function in template.yaml,
# events/<dir>.json): pkg/deploy/functions.mk, written by `make template` from the one list in
# code (lambdafn.Names, lambdafn.Dir).
include pkg/deploy/functions.mk
FUNCTIONS := $(foreach p,$(FUNCTION_DIRS),$(firstword $(subst :, ,$(p))))
kebab = $(patsubst $(1):%,%,$(filter $(1):%,$(FUNCTION_DIRS)))

# Lambda binaries: static, linux/arm64 (provided.al2023 on Graviton), no RPC shim, no symbols.
LAMBDA_ENV   := CGO_ENABLED=0 GOOS=linux GOARCH=arm64
LAMBDA_FLAGS := -trimpath -tags lambda.norpc -ldflags="-s -w"

.PHONY: all run test lint vet fmt-check cfn-lint sdk-test bench bench-coldstart bench-pacing bench-cost bench-local build clean template sam-local

all: build

# run builds the server and runs it in place of the recipe's shell (`go run` would end with an
# error on Ctrl-C). -foreground gives the server the terminal in a process group of its own:
# Ctrl-C reaches it alone, it finishes what is in flight and prints its last line, and make
# ends with its status, 0 (make itself, sent the SIGINT too, would end killed by it).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
run:
	$(GO) build -ldflags "-X github.com/mailroom/mailroom/pkg/server.version=$(VERSION)" -o bin/mailroom ./cmd/mailroom
	exec bin/mailroom -foreground

# test is everything CI checks: vet, gofmt, the race-enabled Go tests (they start their own
# moto_server; the console's browser test needs chromium, which .ci/install-browser installs
# with apt-get when missing), cfn-lint, and the SDK compatibility test (installs the pinned
# usesend-js with npm ci and runs it against the real server binary).
test: vet fmt-check
	.ci/install-browser >/dev/null || [ -z "$$CI" ]
	$(GO) test -race -count=1 -timeout 20m ./...
	cfn-lint template.yaml
	$(MAKE) sdk-test

lint: fmt-check vet cfn-lint

# sam-local runs the API under `sam local start-api` on port 3000 (Docker and the SAM CLI
# needed): moto on the host stands in for DynamoDB, SES and EventBridge Scheduler, so nothing
# reaches an AWS account and no mail is sent (README: Testing with sam local).
sam-local:
	$(GO) run ./cmd/mailroom-deploy sam-local

# template writes template.yaml from pkg/deploy/template.yaml.tmpl and the functions' ports,
# the README's list of functions, and each function's main.go (pkg/deploy's tests fail while
# any differs).
template:
	$(GO) run ./cmd/mailroom-deploy template > template.yaml.new && mv template.yaml.new template.yaml
	$(GO) run ./cmd/mailroom-deploy readme
	$(GO) run ./cmd/mailroom-deploy mains
	$(GO) run ./cmd/mailroom-deploy makefile

vet:
	$(GO) vet ./...

fmt-check:
	@files="$$(gofmt -l .)"; if [ -n "$$files" ]; then echo "gofmt needed:"; echo "$$files"; exit 1; fi

cfn-lint:
	cfn-lint template.yaml

sdk-test:
	test/sdk/run

# bench: first the local server (bench-local: POST /api/v1/emails next to a bare net/http
# handler measured in one run, and a 100,000-contact campaign; first, because the Go benchmarks
# below create and delete many files, which slows the outbox's file creation for minutes on
# ext4); every Lambda function's cold start next to an aws-lambda-go hello-world
# (bench-coldstart); pacing and cost (against moto); the Go benchmarks; the DynamoDB item
# writes and WCU per campaign recipient.
bench: bench-local bench-coldstart bench-pacing bench-cost
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/... ./cmd/...
	$(GO) test -count=1 -v -run '^TestCampaignWritesPerRecipient$$' ./pkg/store/dynamo | grep 'per campaign recipient'

# bench-local loads the local server (cmd/mailroom-bench): POST /api/v1/emails next to a bare
# net/http handler while delivery runs, then a 100,000-contact bulk import and campaign, and
# ends with each figure next to its target (send path >= 50% of the bare handler with p99
# <= 2x, local delivery >= 2,000 emails/s, bulk import >= 10,000 contacts/s, fan-out >= 5,000/s).
bench-local:
	$(GO) run ./cmd/mailroom-bench

# bench-coldstart builds every function as for Lambda (this machine's architecture), spawns
# each 31 times on a stub Runtime API alternately with a hello-world, and prints the table and
# a last line "coldstart: worst ratio <r>x (target <= 1.5x) ...".
bench-coldstart:
	$(GO) test -run '^$$' -bench ColdStart -benchtime 1x ./test/coldstart | grep -v '^\(goos\|goarch\|pkg\|cpu\|PASS\|ok\|Benchmark\)'

# bench-pacing sends 2,000 emails through 8 workers, each pacing on its own, against an SES
# stand-in that admits 20/s (test/pacing), and ends with the line
# "pacing: achieved <x>/s of allowed <n>/s (<p>%), SENT <a>, FAILED <b>" (target p >= 90, b = 0).
bench-pacing:
	$(GO) test -count=1 -v -run '^TestPacingKeepsToTheAccountRate$$' ./test/pacing | grep '^pacing:'

# bench-cost takes 10 KB-html emails through accepted → SENT → DELIVERED → OPENED against moto,
# three ways (single sends with an Idempotency-Key, a batch of 100, a campaign), meters every
# DynamoDB request unit, prices it with the rest (test/cost/prices.go) and ends with the line
# "cost: $<c> per 1,000 emails beyond SES; WRU per email max <w>" (targets c <= 0.01, w <= 16).
bench-cost:
	$(GO) test -run '^$$' -bench EmailCost -benchtime 1x ./test/cost | grep -v '^\(goos\|goarch\|pkg\|cpu\|PASS\|ok\|Benchmark\)'

# build puts every function under bin/<kebab-name>/bootstrap.
build: $(foreach f,$(FUNCTIONS),bin/$(call kebab,$(f))/bootstrap)

clean:
	rm -rf bin .aws-sam

# function_rules defines, for function $(1), the sam build target and the bin/ target.
define function_rules
.PHONY: build-$(1)Function bin/$(call kebab,$(1))/bootstrap

build-$(1)Function:
	@test -n "$$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set (sam build sets it)"; exit 1; }
	$$(LAMBDA_ENV) $$(GO) build $$(LAMBDA_FLAGS) -o $$(ARTIFACTS_DIR)/bootstrap ./functions/$(call kebab,$(1))

bin/$(call kebab,$(1))/bootstrap:
	$$(LAMBDA_ENV) $$(GO) build $$(LAMBDA_FLAGS) -o $$@ ./functions/$(call kebab,$(1))
endef

$(foreach f,$(FUNCTIONS),$(eval $(call function_rules,$(f))))
