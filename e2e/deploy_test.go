package e2e

// Static checks of the deployment descriptors: template.yaml (AWS SAM),
// the Makefile SAM builds with, vercel.json, and the api/ tree against the
// rules of Vercel's Go runtime. None of them needs a cloud account.
//
// template.yaml is parsed with go.yaml.in/yaml/v3, the YAML organisation's
// maintained continuation of gopkg.in/yaml.v3 (archived in 2025), already in
// the module graph through rueidis; it exposes custom tags on its nodes,
// which is what CloudFormation's short forms (!Ref, !GetAtt, !Sub, !If, ...)
// need.

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcptasks/mcptasks/pkg/bundle"
)

// root is the repository root, relative to this package.
const root = ".."

// cfnValue turns a YAML node into plain Go values, with CloudFormation's
// short-form tags expanded to their long form: !Ref x → {"Ref": x},
// !GetAtt a.b → {"Fn::GetAtt": [a, b]}, !Other v → {"Fn::Other": v}.
func cfnValue(t *testing.T, n *yaml.Node) any {
	t.Helper()
	if n.Kind == yaml.DocumentNode {
		return cfnValue(t, n.Content[0])
	}
	if n.Kind == yaml.AliasNode {
		return cfnValue(t, n.Alias)
	}
	var v any
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[n.Content[i].Value] = cfnValue(t, n.Content[i+1])
		}
		v = m
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			s = append(s, cfnValue(t, c))
		}
		v = s
	case yaml.ScalarNode:
		if strings.HasPrefix(n.Tag, "!") {
			v = n.Value
		} else if err := n.Decode(&v); err != nil {
			t.Fatalf("line %d: %v", n.Line, err)
		}
	}
	switch tag := n.Tag; {
	case tag == "!Ref":
		return map[string]any{"Ref": v}
	case tag == "!GetAtt":
		if s, ok := v.(string); ok {
			res, attr, _ := strings.Cut(s, ".")
			return map[string]any{"Fn::GetAtt": []any{res, attr}}
		}
		return map[string]any{"Fn::GetAtt": v}
	case strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!"):
		return map[string]any{"Fn::" + tag[1:]: v}
	}
	return v
}

func loadTemplate(t *testing.T, dir string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("template.yaml does not parse: %v", err)
	}
	return cfnValue(t, &doc).(map[string]any)
}

// at walks a path of map keys.
func at(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func asInt(t *testing.T, what string, v any) int {
	t.Helper()
	switch n := v.(type) {
	case int:
		return n
	case string:
		i, err := strconv.Atoi(n)
		if err == nil {
			return i
		}
	}
	t.Fatalf("%s = %#v, want a literal number", what, v)
	return 0
}

// TestSAMTemplate checks template.yaml's invariants: the runtime, handler
// and architecture the bootstrap binaries are built for, one Makefile target
// per function, the SQS timing rules, the dead-letter queue, partial batch
// failures, the Function URL mode lambdaurl needs, the sweeper's schedule,
// the parameters, and that every environment variable it sets is one the
// bundle reads.
func TestSAMTemplate(t *testing.T) {
	t.Parallel()
	checkSAMTemplate(t, root)
	// This repository's template also runs on PostgreSQL (RDS, Aurora):
	// Store selects it, and DATABASE_URL comes from a secret.
	tpl := loadTemplate(t, root)
	params, _ := at(tpl, "Parameters").(map[string]any)
	for _, p := range []string{"Store", "DatabaseUrlSecretArn", "DatabaseDirectUrlSecretArn", "VpcSubnetIds", "VpcSecurityGroupIds"} {
		if params[p] == nil {
			t.Errorf("parameter %s missing", p)
		}
	}
	env, _ := at(tpl, "Globals", "Function", "Environment", "Variables").(map[string]any)
	if got := fmt.Sprint(env["MCPTASKS_STORE"]); got != fmt.Sprint(map[string]any{"Ref": "Store"}) {
		t.Errorf("MCPTASKS_STORE = %v, want !Ref Store", got)
	}
	for v, p := range map[string]string{"DATABASE_URL": "DatabaseUrlSecretArn", "DATABASE_URL_UNPOOLED": "DatabaseDirectUrlSecretArn"} {
		if got := fmt.Sprint(env[v]); !strings.Contains(got, "resolve:secretsmanager:${"+p+"}") {
			t.Errorf("%s = %v, want the secret %s resolved", v, got, p)
		}
	}
}

// checkSAMTemplate checks the template.yaml in dir (see TestSAMTemplate).
func checkSAMTemplate(t *testing.T, dir string) {
	t.Helper()
	tpl := loadTemplate(t, dir)
	if got := at(tpl, "Transform"); got != "AWS::Serverless-2016-10-31" {
		t.Errorf("Transform = %v", got)
	}
	resources, _ := at(tpl, "Resources").(map[string]any)
	if len(resources) == 0 {
		t.Fatal("no Resources")
	}
	globals := at(tpl, "Globals", "Function")
	// prop reads a function property, falling back to Globals.
	prop := func(fn string, name string) any {
		if v := at(resources, fn, "Properties", name); v != nil {
			return v
		}
		return at(globals, name)
	}

	makefile, err := os.ReadFile(filepath.Join(dir, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var functions []string
	for name, r := range resources {
		if at(r, "Type") != "AWS::Serverless::Function" {
			continue
		}
		functions = append(functions, name)
		if got := prop(name, "Runtime"); got != "provided.al2023" {
			t.Errorf("%s: Runtime = %v, want provided.al2023", name, got)
		}
		if got := prop(name, "Handler"); got != "bootstrap" {
			t.Errorf("%s: Handler = %v, want bootstrap", name, got)
		}
		if got := fmt.Sprint(prop(name, "Architectures")); got != "[arm64]" {
			t.Errorf("%s: Architectures = %v, want [arm64] (scripts/build-lambda builds arm64)", name, got)
		}
		if got := prop(name, "CodeUri"); got != "." {
			t.Errorf("%s: CodeUri = %v, want . (the module root, so the build sees go.mod)", name, got)
		}
		if got := at(r, "Metadata", "BuildMethod"); got != "makefile" {
			t.Errorf("%s: Metadata.BuildMethod = %v, want makefile", name, got)
		}
		// This repository's Makefile calls scripts/build-lambda; a
		// generated module's runs go build through $(GOBUILD).
		target := regexp.MustCompile(`(?m)^build-` + name + `:\s*\n\t(?:scripts/build-lambda (\S+) "\$\(ARTIFACTS\)"|\$\(GOBUILD\) -o "\$\(ARTIFACTS\)/bootstrap" (\S+))$`)
		if m := target.FindSubmatch(makefile); m == nil {
			t.Errorf("Makefile has no build-%s target building into $(ARTIFACTS) (SAM's ARTIFACTS_DIR)", name)
		} else if pkg := string(m[1]) + string(m[2]); pkg == "" {
			t.Errorf("build-%s builds no package", name)
		} else if _, err := os.Stat(filepath.Join(dir, pkg, "main.go")); err != nil {
			t.Errorf("build-%s builds %s, which has no main.go", name, pkg)
		}
	}
	// ARTIFACTS is ARTIFACTS_DIR, or an error when it is not set: a
	// target run without it must not write /bootstrap.
	if !regexp.MustCompile(`(?m)^ARTIFACTS = \$\(or \$\(ARTIFACTS_DIR\),\$\(error ARTIFACTS_DIR is not set.*\)\)$`).Match(makefile) {
		t.Error("Makefile's ARTIFACTS is not $(or $(ARTIFACTS_DIR),$(error ...))")
	}
	slices.Sort(functions)
	if fmt.Sprint(functions) != "[McpFunction SweepFunction WorkerFunction]" {
		t.Fatalf("functions = %v", functions)
	}

	// MCP: a Function URL in the mode lambdaurl supports.
	if got := at(resources, "McpFunction", "Properties", "FunctionUrlConfig", "InvokeMode"); got != "RESPONSE_STREAM" {
		t.Errorf("McpFunction FunctionUrlConfig.InvokeMode = %v, want RESPONSE_STREAM", got)
	}

	// Worker: SQS with partial batch failures, on the task queue.
	workerTimeout := asInt(t, "WorkerFunction Timeout", prop("WorkerFunction", "Timeout"))
	var sqsEvent any
	for _, ev := range at(resources, "WorkerFunction", "Properties", "Events").(map[string]any) {
		if at(ev, "Type") == "SQS" {
			sqsEvent = ev
		}
	}
	if sqsEvent == nil {
		t.Fatal("WorkerFunction has no SQS event")
	}
	if got := fmt.Sprint(at(sqsEvent, "Properties", "FunctionResponseTypes")); got != "[ReportBatchItemFailures]" {
		t.Errorf("SQS event FunctionResponseTypes = %v, want [ReportBatchItemFailures]", got)
	}
	queueRef := at(sqsEvent, "Properties", "Queue", "Fn::GetAtt")
	qs, _ := queueRef.([]any)
	if len(qs) != 2 || qs[1] != "Arn" {
		t.Fatalf("SQS event Queue = %v, want !GetAtt <queue>.Arn", at(sqsEvent, "Properties", "Queue"))
	}
	queueName := qs[0].(string)
	q := resources[queueName]
	if at(q, "Type") != "AWS::SQS::Queue" {
		t.Fatalf("the worker's queue %s is not an AWS::SQS::Queue", queueName)
	}
	vis := asInt(t, queueName+" VisibilityTimeout", at(q, "Properties", "VisibilityTimeout"))
	if vis < 6*workerTimeout {
		t.Errorf("%s VisibilityTimeout %d < 6 x worker Timeout %d", queueName, vis, workerTimeout)
	}
	if bs := asInt(t, "BatchSize", at(sqsEvent, "Properties", "BatchSize")); bs > 10 {
		t.Errorf("BatchSize %d > 10 needs a batching window", bs)
	}

	// The dead-letter queue.
	dlqRef, _ := at(q, "Properties", "RedrivePolicy", "deadLetterTargetArn", "Fn::GetAtt").([]any)
	if len(dlqRef) != 2 || dlqRef[1] != "Arn" {
		t.Fatalf("%s has no RedrivePolicy.deadLetterTargetArn !GetAtt <dlq>.Arn", queueName)
	}
	dlq := resources[dlqRef[0].(string)]
	if at(dlq, "Type") != "AWS::SQS::Queue" {
		t.Fatalf("dead-letter target %v is not an AWS::SQS::Queue", dlqRef[0])
	}
	if n := asInt(t, "maxReceiveCount", at(q, "Properties", "RedrivePolicy", "maxReceiveCount")); n < 1 {
		t.Errorf("maxReceiveCount = %d", n)
	}
	if src, dl := asInt(t, "queue retention", at(q, "Properties", "MessageRetentionPeriod")),
		asInt(t, "DLQ retention", at(dlq, "Properties", "MessageRetentionPeriod")); dl <= src {
		t.Errorf("DLQ retention %d must exceed the source queue's %d (redriven messages keep their age)", dl, src)
	}

	// The step budget is the worker's timeout.
	env, _ := at(globals, "Environment", "Variables").(map[string]any)
	if got := env["MCPTASKS_MAX_DURATION"]; got != fmt.Sprintf("%ds", workerTimeout) {
		t.Errorf("MCPTASKS_MAX_DURATION = %v, want the worker Timeout %ds", got, workerTimeout)
	}
	if got := env["MCPTASKS_QUEUE"]; got != "sqs" {
		t.Errorf("MCPTASKS_QUEUE = %v, want sqs", got)
	}
	if got := fmt.Sprint(env["MCPTASKS_SQS_QUEUE_URL"]); got != fmt.Sprint(map[string]any{"Ref": queueName}) {
		t.Errorf("MCPTASKS_SQS_QUEUE_URL = %v, want !Ref %s", got, queueName)
	}

	// Every function may send to the queue (the MCP function creates tasks,
	// the worker enqueues next steps, the sweeper re-enqueues).
	for _, fn := range functions {
		if !strings.Contains(fmt.Sprint(prop(fn, "Policies")), "SQSSendMessagePolicy") {
			t.Errorf("%s lacks SQSSendMessagePolicy", fn)
		}
	}

	// The sweeper runs on a schedule.
	scheduled := false
	for _, ev := range at(resources, "SweepFunction", "Properties", "Events").(map[string]any) {
		if typ := at(ev, "Type"); typ == "Schedule" || typ == "ScheduleV2" {
			scheduled = true
		}
	}
	if !scheduled {
		t.Error("SweepFunction has no schedule")
	}

	// Parameters: the Redis URL secret and the JWT settings.
	params, _ := at(tpl, "Parameters").(map[string]any)
	for _, p := range []string{"RedisUrlSecretArn", "AuthIssuer", "AuthAudience", "AuthJwksUrl"} {
		if params[p] == nil {
			t.Errorf("parameter %s missing", p)
		}
	}
	if got := fmt.Sprint(env["REDIS_URL"]); !strings.Contains(got, "resolve:secretsmanager:${RedisUrlSecretArn}") {
		t.Errorf("REDIS_URL = %v, want the secret resolved", got)
	}

	// Every variable the template sets is one the bundle reads.
	read := map[string]bool{}
	_, _ = bundle.FromEnv(func(k string) string { read[k] = true; return "" })
	// Workers make callback URLs (tasks.Callback), which the MCP
	// function's URL serves.
	wenv, _ := at(resources, "WorkerFunction", "Properties", "Environment", "Variables").(map[string]any)
	if got, want := fmt.Sprint(wenv["MCPTASKS_PUBLIC_URL"]), fmt.Sprint(map[string]any{"Fn::GetAtt": []any{"McpFunctionUrl", "FunctionUrl"}}); got != want {
		t.Errorf("WorkerFunction's MCPTASKS_PUBLIC_URL = %v, want !GetAtt McpFunctionUrl.FunctionUrl", got)
	}
	for k := range maps.Keys(wenv) {
		env[k] = wenv[k]
	}
	for k := range env {
		if !read[k] {
			t.Errorf("template sets %s, which bundle.FromEnv never reads", k)
		}
	}
}

// TestMakeWithoutArtifactsDir runs this repository's Makefile as a user
// might, without SAM: a bare make and a build-<Function> target refuse,
// naming ARTIFACTS_DIR and make lambda, and build nothing.
func TestMakeWithoutArtifactsDir(t *testing.T) {
	t.Parallel()
	checkMakeRefuses(t, root)
}

// checkMakeRefuses runs make (its default goal) and make build-McpFunction
// in dir without ARTIFACTS_DIR: both must fail with the Makefile's
// message before building anything.
func checkMakeRefuses(t *testing.T, dir string) {
	t.Helper()
	for _, goal := range [][]string{nil, {"build-McpFunction"}} {
		cmd := exec.Command("make", append([]string{"--no-print-directory"}, goal...)...)
		cmd.Dir = dir
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "ARTIFACTS_DIR=") })
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "ARTIFACTS_DIR is not set") || !strings.Contains(string(out), "make lambda") {
			t.Errorf("make %v without ARTIFACTS_DIR: err %v, output:\n%s\nwant a refusal naming ARTIFACTS_DIR and make lambda", goal, err, out)
		}
		if strings.Contains(string(out), "go build") {
			t.Errorf("make %v without ARTIFACTS_DIR started a build:\n%s", goal, out)
		}
	}
}

// TestVercelConfig checks vercel.json against the api/ tree: every
// function it configures exists and every api/ function is configured;
// rewrites and crons point at functions; /mcp and the protected resource
// metadata paths are routed; the worker may run at least as long as the
// step budget.
func TestVercelConfig(t *testing.T) {
	t.Parallel()
	checkVercelConfig(t, root)
}

// checkVercelConfig checks the vercel.json in dir against dir's api/ tree
// (see TestVercelConfig).
func checkVercelConfig(t *testing.T, dir string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "vercel.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Functions map[string]struct {
			MaxDuration int `json:"maxDuration"`
		} `json:"functions"`
		Rewrites []struct{ Source, Destination string } `json:"rewrites"`
		Crons    []struct{ Path, Schedule string }      `json:"crons"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("vercel.json: %v", err)
	}
	entries := apiEntrypoints(t, dir)
	routes := map[string]bool{} // /api/<dir> of each function
	for _, e := range entries {
		routes["/"+strings.TrimSuffix(filepath.ToSlash(filepath.Dir(e)), "/")] = true
		if _, ok := cfg.Functions[e]; !ok {
			t.Errorf("%s is not configured in vercel.json functions", e)
		}
	}
	def, err := bundle.FromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	for path, f := range cfg.Functions {
		if !slices.Contains(entries, path) {
			t.Errorf("vercel.json configures %s, which does not exist", path)
		}
		if f.MaxDuration < 1 || f.MaxDuration > 800 {
			t.Errorf("%s maxDuration %d outside 1..800", path, f.MaxDuration)
		}
	}
	if w := cfg.Functions["api/worker/index.go"]; time.Duration(w.MaxDuration)*time.Second < def.MaxDuration {
		t.Errorf("api/worker maxDuration %ds is shorter than the default step budget MCPTASKS_MAX_DURATION %v", w.MaxDuration, def.MaxDuration)
	}
	rewrites := map[string]string{}
	for _, r := range cfg.Rewrites {
		rewrites[r.Source] = r.Destination
		if !routes[r.Destination] {
			t.Errorf("rewrite %s → %s: no such function", r.Source, r.Destination)
		}
	}
	for _, src := range []string{"/mcp", "/callbacks/:path*", "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/:path*"} {
		if rewrites[src] != "/api/mcp" {
			t.Errorf("rewrite of %s = %q, want /api/mcp", src, rewrites[src])
		}
	}
	if len(cfg.Crons) != 1 || cfg.Crons[0].Path != "/api/cron" || !routes[cfg.Crons[0].Path] {
		t.Errorf("crons = %+v, want one calling /api/cron", cfg.Crons)
	} else if f := strings.Fields(cfg.Crons[0].Schedule); len(f) != 5 {
		t.Errorf("cron schedule %q is not a 5-field cron expression", cfg.Crons[0].Schedule)
	}
}

// apiEntrypoints lists the .go files under api/ that Vercel builds
// (relative paths such as api/mcp/index.go; tests and testdata excluded).
func apiEntrypoints(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(dir, "api"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	if fmt.Sprint(out) != "[api/cron/index.go api/mcp/index.go api/worker/index.go]" {
		t.Errorf("api/ entry points = %v", out)
	}
	return out
}

// TestVercelGoRuntimeRules enforces what Vercel's Go builder needs of every
// file under api/: package handler (never main), exactly one exported
// function, named Handler, with the signature (http.ResponseWriter,
// *http.Request) and net/http imported under its own name (the builder
// matches it textually), a one-statement body (the builder renames the
// function by text, so entry files stay trivial), and no import of an
// internal/ package (the builder recompiles the entry under another module
// path, from which internal/ is not importable).
func TestVercelGoRuntimeRules(t *testing.T) {
	t.Parallel()
	checkVercelGoRuntimeRules(t, root)
}

// checkVercelGoRuntimeRules checks the module in dir (see
// TestVercelGoRuntimeRules).
func checkVercelGoRuntimeRules(t *testing.T, dir string) {
	t.Helper()
	modRaw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(modRaw)
	if module == nil {
		t.Fatal("no module line in go.mod")
	}
	if !regexp.MustCompile(`(?m)^go \d+\.\d+\.\d+$`).Match(modRaw) {
		t.Error("go.mod's go line must have a patch version (go 1.26.0): Vercel's builder downloads exactly that Go")
	}
	for _, e := range apiEntrypoints(t, dir) {
		for _, msg := range vercelRuleViolations(t, filepath.Join(dir, e), string(module[1])) {
			t.Errorf("%s: %s", e, msg)
		}
	}
}

// TestVercelRuleCheckCatchesViolations makes sure the rule check above is
// not vacuous: each broken entry file is reported.
func TestVercelRuleCheckCatchesViolations(t *testing.T) {
	t.Parallel()
	const mod = "github.com/mcptasks/mcptasks"
	bad := map[string]string{
		"package main": `package main
import "net/http"
func Handler(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }`,
		"internal import": `package handler
import ("net/http"; "github.com/mcptasks/mcptasks/internal/testkit/testredis")
func Handler(w http.ResponseWriter, r *http.Request) { _ = testredis.Start }`,
		"two exported": `package handler
import "net/http"
func Handler(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }
func Other(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }`,
		"aliased net/http": `package handler
import h "net/http"
func Handler(w h.ResponseWriter, r *h.Request) { w.WriteHeader(200) }`,
		"wrong signature": `package handler
import "net/http"
func Handler(r *http.Request) { _ = r }`,
		"long body": `package handler
import "net/http"
func Handler(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200); w.WriteHeader(201) }`,
	}
	dir := t.TempDir()
	for name, src := range bad {
		p := filepath.Join(dir, strings.NewReplacer(" ", "_", "/", "_").Replace(name)+".go")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if v := vercelRuleViolations(t, p, mod); len(v) == 0 {
			t.Errorf("%s: not reported", name)
		}
	}
}

func vercelRuleViolations(t *testing.T, path, module string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return []string{err.Error()}
	}
	var bad []string
	if f.Name.Name != "handler" {
		bad = append(bad, fmt.Sprintf("package %s, want package handler", f.Name.Name))
	}
	httpName := ""
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if p == "net/http" {
			httpName = "http"
			if imp.Name != nil {
				httpName = imp.Name.Name
				bad = append(bad, "net/http imported as "+imp.Name.Name+"; import it unaliased")
			}
		}
		if p == module+"/internal" || strings.HasPrefix(p, module+"/internal/") || strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal") {
			bad = append(bad, "imports "+p+": internal packages are not importable from the rebuilt entry point; use pkg/")
		}
	}
	var exported []*ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.IsExported() {
			exported = append(exported, fd)
		}
		if gd, ok := d.(*ast.GenDecl); ok && gd.Tok != token.IMPORT {
			bad = append(bad, "declares "+gd.Tok.String()+"s; keep entry files to the Handler")
		}
	}
	if len(exported) != 1 {
		return append(bad, fmt.Sprintf("%d exported functions, want exactly one (Handler)", len(exported)))
	}
	fd := exported[0]
	if fd.Name.Name != "Handler" || fd.Recv != nil {
		bad = append(bad, "the exported function is "+fd.Name.Name+", want func Handler")
	}
	typ := func(e ast.Expr) string {
		star := ""
		if s, ok := e.(*ast.StarExpr); ok {
			star, e = "*", s.X
		}
		if sel, ok := e.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				return star + id.Name + "." + sel.Sel.Name
			}
		}
		return "?"
	}
	var params []string
	for _, p := range fd.Type.Params.List {
		for range max(len(p.Names), 1) {
			params = append(params, typ(p.Type))
		}
	}
	if httpName == "" || fmt.Sprint(params) != "[http.ResponseWriter *http.Request]" || fd.Type.Results != nil {
		bad = append(bad, fmt.Sprintf("Handler takes %v, want (http.ResponseWriter, *http.Request) and returns nothing", params))
	}
	if fd.Body == nil || len(fd.Body.List) != 1 {
		bad = append(bad, "Handler's body must be one statement calling pkg/")
	}
	return bad
}
