// Command sweep is the AWS Lambda function for the scheduled sweeper,
// built as bootstrap for provided.al2023 with -tags lambda.norpc (see
// Makefile and template.yaml). It serves this repository's apps (MCPTASKS_APP
// selects one) through pkg/platform/awslambda.
package main

import (
	"github.com/mcptasks/mcptasks/pkg/apps"
	"github.com/mcptasks/mcptasks/pkg/platform/awslambda"
)

func main() { awslambda.StartSweep(apps.All()...) }
