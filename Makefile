# AWS SAM builds each function of template.yaml (Metadata: BuildMethod:
# makefile) by running `make build-<FunctionLogicalId>` with ARTIFACTS_DIR
# set; each target leaves ARTIFACTS_DIR/bootstrap, a linux/arm64 binary
# built with -tags lambda.norpc (see scripts/build-lambda). Without
# ARTIFACTS_DIR those targets refuse (they would write /bootstrap).
#
#   sam build && sam deploy --guided
#   make lambda            # all three into bin/<function>/bootstrap

# ARTIFACTS is where a build-<Function> target writes: SAM's ARTIFACTS_DIR.
ARTIFACTS = $(or $(ARTIFACTS_DIR),$(error ARTIFACTS_DIR is not set: `sam build` sets it; to build the bootstraps yourself run `make lambda` (bin/<function>/bootstrap)))

.PHONY: build-McpFunction build-WorkerFunction build-SweepFunction lambda

build-McpFunction:
	scripts/build-lambda ./cmd/lambda/mcp "$(ARTIFACTS)"

build-WorkerFunction:
	scripts/build-lambda ./cmd/lambda/worker "$(ARTIFACTS)"

build-SweepFunction:
	scripts/build-lambda ./cmd/lambda/sweep "$(ARTIFACTS)"

lambda:
	scripts/build-lambda ./cmd/lambda/mcp bin/mcp
	scripts/build-lambda ./cmd/lambda/worker bin/worker
	scripts/build-lambda ./cmd/lambda/sweep bin/sweep
