# AWS SAM builds each function of template.yaml (Metadata: BuildMethod:
# makefile) by running `make build-<FunctionLogicalId>` with ARTIFACTS_DIR
# set; each target leaves ARTIFACTS_DIR/bootstrap, a linux/arm64 binary
# built with -tags lambda.norpc (see scripts/build-lambda).
#
#   sam build && sam deploy --guided
#   make lambda            # all three into bin/lambda/<function>/bootstrap

.PHONY: build-McpFunction build-WorkerFunction build-SweepFunction lambda

build-McpFunction:
	scripts/build-lambda ./cmd/lambda/mcp "$(ARTIFACTS_DIR)"

build-WorkerFunction:
	scripts/build-lambda ./cmd/lambda/worker "$(ARTIFACTS_DIR)"

build-SweepFunction:
	scripts/build-lambda ./cmd/lambda/sweep "$(ARTIFACTS_DIR)"

lambda:
	scripts/build-lambda ./cmd/lambda/mcp bin/lambda/mcp
	scripts/build-lambda ./cmd/lambda/worker bin/lambda/worker
	scripts/build-lambda ./cmd/lambda/sweep bin/lambda/sweep
