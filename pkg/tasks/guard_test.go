package tasks_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// servedLean reports whether the lean path answered a successful request
// of an SSE endpoint: it answers application/json where the go-sdk
// streams.
func servedLean(a exchangeAnswer) bool {
	return a.status == 200 && a.ctype == "application/json"
}

// The seeds the lean path is for (a tasks/get, tasks/update, tasks/cancel
// and task-creating tools/call by a client that declares the extension)
// are answered on the lean path, not handed to the go-sdk.
func TestLeanPathServes(t *testing.T) {
	d := newDiffServer(t, nil, tasks.Options{})
	for _, x := range []exchange{
		fuzzEnvelope("tasks/get", 1, map[string]any{"taskId": idWorking}, withExt),
		fuzzEnvelope("tasks/cancel", 1, map[string]any{"taskId": idWorking}, withExt),
		fuzzEnvelope("tasks/update", 1, map[string]any{"taskId": idInput, "inputResponses": map[string]any{}}, withExt),
		fuzzEnvelope("tools/call", 1, map[string]any{"name": "job", "arguments": map[string]any{}}, withExt),
	} {
		if a := x.send(d.lean[0]); !servedLean(a) {
			t.Errorf("%s: not answered on the lean path: %s", x.hdr.Get("Mcp-Method"), a)
		}
		if a := x.send(d.sdk[0]); servedLean(a) {
			t.Errorf("%s: the go-sdk endpoint answered JSON: %s", x.hdr.Get("Mcp-Method"), a)
		}
	}
}

// A server whose go-sdk options leave out 2026-07-28 answers tasks/get and
// a task-creating tools/call with -32022 (unsupported protocol version),
// as the go-sdk does, and creates no task: the lean path is off. (Before,
// the lean path answered tasks/get and created a durable task.)
func TestLeanPathOffWhenProtocolExcluded(t *testing.T) {
	rc := testredis.Client(t, "redis-server")
	store := redisstore.New(rc, &redisstore.Options{Prefix: "excluded:"})
	srv := tasks.New(&mcp.Implementation{Name: "old", Version: "1"},
		&mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}}, store, redisqueue.New(rc, &redisqueue.Options{Key: "excluded:{queue}"}),
		&tasks.Options{Anonymous: true})
	registerFuzzTools(srv)
	if why := srv.LeanPathDisabled(); !strings.Contains(why, "SupportedProtocolVersions") {
		t.Errorf("LeanPathDisabled() = %q, want the protocol versions named", why)
	}
	h := tasks.NewHandler(srv, nil)
	for _, x := range []exchange{
		fuzzEnvelope("tasks/get", 1, map[string]any{"taskId": idWorking}, withExt),
		fuzzEnvelope("tools/call", 2, map[string]any{"name": "job", "arguments": map[string]any{}}, withExt),
	} {
		a := x.send(h)
		var msg struct {
			Error *struct {
				Code int64 `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(a.msg, &msg); err != nil || a.status != 400 || msg.Error == nil || msg.Error.Code != mcp.CodeUnsupportedProtocolVersion {
			t.Errorf("%s: %s, want HTTP 400 error -32022", x.hdr.Get("Mcp-Method"), a)
		}
	}
	due, err := store.Due(context.Background(), time.Now().Add(24*time.Hour), 10)
	if err != nil || len(due) != 0 {
		t.Errorf("tasks created: %v (%v)", due, err)
	}
}

// Receiving middleware added on the go-sdk server after tasks.New sees
// tasks/get and task-creating tools/call: the endpoint notices it and
// leaves the lean path out. Without it, the lean path serves them.
func TestLeanPathOffWithSDKMiddleware(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	for _, add := range []bool{false, true} {
		d := newDiffServer(t, nil, tasks.Options{})
		if add {
			d.srv.MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
				return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
					mu.Lock()
					seen[method]++
					mu.Unlock()
					return next(ctx, method, req)
				}
			})
		}
		why := d.srv.LeanPathDisabled()
		if add != strings.Contains(why, "middleware") {
			t.Errorf("middleware added: %v; LeanPathDisabled() = %q", add, why)
		}
		h := tasks.NewHandler(d.srv, nil)
		for _, x := range []exchange{
			fuzzEnvelope("tasks/get", 1, map[string]any{"taskId": idWorking}, withExt),
			fuzzEnvelope("tools/call", 2, map[string]any{"name": "job", "arguments": map[string]any{}}, withExt),
		} {
			if a := x.send(h); servedLean(a) == add {
				t.Errorf("middleware added: %v; %s answered %s", add, x.hdr.Get("Mcp-Method"), a)
			}
		}
	}
	if seen["tasks/get"] != 1 || seen["tools/call"] != 1 {
		t.Errorf("the middleware saw %v, want tasks/get and tools/call once each", seen)
	}
}

// DisableLeanPath, in tasks.Options (every endpoint of the server) or in
// tasks.Options (this endpoint), sends every request through the go-sdk;
// the answers stay the same.
func TestDisableLeanPath(t *testing.T) {
	x := fuzzEnvelope("tasks/get", 1, map[string]any{"taskId": idWorking}, withExt)
	d := newDiffServer(t, nil, tasks.Options{DisableLeanPath: true})
	if why := d.srv.LeanPathDisabled(); !strings.Contains(why, "DisableLeanPath") {
		t.Errorf("LeanPathDisabled() = %q", why)
	}
	viaOption := x.send(tasks.NewHandler(d.srv, nil))
	plain := newDiffServer(t, nil, tasks.Options{})
	viaEndpoint := x.send(tasks.NewHandler(plain.srv, &tasks.HandlerOptions{DisableLeanPath: true}))
	lean := x.send(tasks.NewHandler(plain.srv, nil))
	if servedLean(viaOption) || servedLean(viaEndpoint) || !servedLean(lean) {
		t.Errorf("tasks.Options: %s\nHandlerOptions: %s\nneither: %s", viaOption, viaEndpoint, lean)
	}
	if string(viaOption.msg) != string(lean.msg) || string(viaEndpoint.msg) != string(lean.msg) {
		t.Errorf("answers differ:\n%s\n%s\n%s", viaOption.msg, viaEndpoint.msg, lean.msg)
	}
}

// MCPGODEBUG changes go-sdk behaviours the lean path mirrors: set, it
// turns the lean path off.
func TestLeanPathOffWithMCPGODEBUG(t *testing.T) {
	t.Setenv("MCPGODEBUG", "nowrapinvalidparams=1")
	d := newDiffServer(t, nil, tasks.Options{})
	if why := d.srv.LeanPathDisabled(); !strings.Contains(why, "MCPGODEBUG") {
		t.Errorf("LeanPathDisabled() = %q", why)
	}
}

// mirrored is what lean.go mirrors of the go-sdk, to re-audit on an
// upgrade.
const mirrored = `POST and Content-Type checks, Accept parsing, the loopback (DNS-rebinding) check, Last-Event-ID on POST,
the protocol version header and _meta checks, nesting depth (1000), batch/notification/method/Mcp-Method/Mcp-Name/Mcp-Param
checks, exact (case-sensitive) member names, id normalisation (MakeID: numbers as float64 -> int64, string re-encoding),
_meta decoding (clientCapabilitiesV2, clientInfo as Implementation), serverInfo in _meta, resultType, error -> HTTP status,
the response encoding (no HTML escaping, member order), and the receiving-middleware field read by tasks.chainOf`

// The go-sdk in the build is the one the lean path was audited against.
// If this fails after a go-sdk upgrade: re-audit every behaviour lean.go
// lists against the new version's source, run FuzzLeanPath for a while,
// then move tasks.AuditedSDKVersion.
func TestAuditedSDKVersion(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-json", "github.com/modelcontextprotocol/go-sdk").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	var m struct {
		Version string
		Replace *struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != tasks.AuditedSDKVersion || m.Replace != nil {
		t.Errorf("the build uses go-sdk %s (replace: %+v); the lean path (pkg/tasks/lean.go) was audited against %s.\n"+
			"Until it is re-audited, every endpoint built with this go-sdk serves tasks/* through the go-sdk (slower).\n"+
			"Re-audit against the new go-sdk source: %s.\n"+
			"Then run `go test -run '^$' -fuzz FuzzLeanPath -fuzztime 10m ./pkg/tasks` and move tasks.AuditedSDKVersion.",
			m.Version, m.Replace, tasks.AuditedSDKVersion, mirrored)
	}
}
