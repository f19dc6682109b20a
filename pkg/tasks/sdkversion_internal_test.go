package tasks

import (
	"runtime/debug"
	"strings"
	"testing"
)

// A build whose go-sdk is not the audited version (another version, or a
// replacement) turns the lean path off; the audited one, or a build that
// records no dependencies (a test binary), leaves it on.
func TestSDKDrift(t *testing.T) {
	other := &debug.Module{Path: "example.com/other", Version: "v9.9.9"}
	for _, c := range []struct {
		name string
		deps []*debug.Module
		want string
	}{
		{"audited", []*debug.Module{other, {Path: sdkModule, Version: auditedSDKVersion}}, ""},
		{"none recorded", nil, ""},
		{"newer", []*debug.Module{{Path: sdkModule, Version: "v1.9.0"}}, "v1.9.0"},
		{"replaced", []*debug.Module{{Path: sdkModule, Version: auditedSDKVersion, Replace: &debug.Module{Path: "../go-sdk"}}}, "replaced"},
	} {
		got := drift(c.deps)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: drift = %q, want %q", c.name, got, c.want)
		}
	}
}
