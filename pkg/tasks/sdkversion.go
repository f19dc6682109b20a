package tasks

import (
	"runtime/debug"
	"sync"
)

// auditedSDKVersion is the go-sdk version the lean path was checked
// against: every go-sdk behaviour it mirrors (listed in lean.go) is that
// version's. A build with another go-sdk serves every request through the
// go-sdk, and TestAuditedSDKVersion fails until lean.go is re-audited and
// this constant moved.
const auditedSDKVersion = "v1.8.0"

const sdkModule = "github.com/modelcontextprotocol/go-sdk"

// sdkDrift returns why the go-sdk linked into this binary is not the
// audited one, or "" when it is (or when the build records no
// dependencies, as test binaries do).
var sdkDrift = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return drift(bi.Deps)
})

func drift(deps []*debug.Module) string {
	for _, d := range deps {
		if d.Path != sdkModule {
			continue
		}
		switch {
		case d.Replace != nil:
			return "the go-sdk in this build is replaced (" + d.Replace.Path + " " + d.Replace.Version + "); the lean path was audited against " + sdkModule + " " + auditedSDKVersion
		case d.Version != auditedSDKVersion:
			return "the go-sdk in this build is " + d.Version + "; the lean path was audited against " + auditedSDKVersion
		}
		return ""
	}
	return ""
}
