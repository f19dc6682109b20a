package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/cmd/mcptasks/internal/dashboard"
	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/apps"
	"github.com/mcptasks/mcptasks/pkg/platform/local"
)

// lockedBuffer is a bytes.Buffer for a logger and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var dashboardURL = regexp.MustCompile(`msg="dashboard listening" url=(http://\S+/)`)

// waitDashboard waits for the dashboard's address in the log and fetches
// its list page.
func waitDashboard(t *testing.T, logs *lockedBuffer, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := dashboardURL.FindStringSubmatch(logs.String()); m != nil {
			resp, err := http.Get(m[1])
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(body), "tasks dashboard") {
				t.Fatalf("GET %s: %s\n%s", m[1], resp.Status, body)
			}
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the command ended (%v) before its dashboard listened; log:\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no dashboard within 20s; log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// `mcptasks serve --dashboard` serves the dashboard of the server's store
// beside the endpoint, the embedded Redis or the PostgreSQL of
// DATABASE_URL, and refuses a non-loopback dashboard address without a
// token.
func TestServeDashboard(t *testing.T) {
	dbURL := testpg.Start(t)
	for name, env := range map[string]map[string]string{
		"embedded": nil,
		"postgres": {"DATABASE_URL": dbURL, "MCPTASKS_PG_SCHEMA": testpg.Schema(t, dbURL)},
	} {
		t.Run(name, func(t *testing.T) {
			logs := &lockedBuffer{}
			p := &local.Program{Name: "mcptasks", Apps: apps.All(), Dashboard: dashboard.Start, Stdout: io.Discard, Stderr: logs,
				Getenv: func(k string) string { return env[k] }}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- p.Run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--dashboard", "--dashboard-addr", "127.0.0.1:0"})
			}()
			waitDashboard(t, logs, done)
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve --dashboard: %v", err)
			}
		})
	}

	p := &local.Program{Name: "mcptasks", Apps: apps.All(), Dashboard: dashboard.Start, Stdout: io.Discard, Stderr: io.Discard,
		Getenv: func(string) string { return "" }}
	err := p.Run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--dashboard", "--dashboard-addr", "0.0.0.0:0"})
	if !errors.Is(err, dashboard.ErrNotLoopback) {
		t.Errorf("serve --dashboard-addr 0.0.0.0:0 without a token = %v, want ErrNotLoopback", err)
	}
	var help bytes.Buffer
	p.Stdout = &help
	_ = p.Run(t.Context(), []string{"help"})
	for _, want := range []string{"-dashboard", "-dashboard-addr"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("mcptasks help lacks %s:\n%s", want, help.String())
		}
	}
}

// `REDIS_URL=... mcptasks dashboard` serves a deployment's dashboard from
// its Redis, `DATABASE_URL=... mcptasks dashboard` from its PostgreSQL;
// with neither it says where the embedded store's is.
func TestDashboardCommand(t *testing.T) {
	dbURL := testpg.Start(t)
	for name, env := range map[string]map[string]string{
		"redis":    {"REDIS_URL": testredis.Start(t), "MCPTASKS_KEY_PREFIX": "dash-test:"},
		"postgres": {"DATABASE_URL": dbURL, "MCPTASKS_PG_SCHEMA": testpg.Schema(t, dbURL)},
	} {
		t.Run(name, func(t *testing.T) {
			logs := &lockedBuffer{}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- runDashboard(ctx, []string{"--addr", "127.0.0.1:0"}, io.Discard, func(k string) string { return env[k] }, logs)
			}()
			waitDashboard(t, logs, done)
			cancel()
			if err := <-done; err != nil {
				t.Errorf("dashboard: %v", err)
			}
			if strings.Contains(logs.String(), "does not link") {
				t.Errorf("the dashboard warns of a queue it lacks:\n%s", logs.String())
			}
		})
	}
	err := runDashboard(t.Context(), nil, io.Discard, func(string) string { return "" }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "mcptasks serve --dashboard") || !strings.Contains(err.Error(), "DATABASE_URL") {
		t.Errorf("dashboard without REDIS_URL or DATABASE_URL = %v, want it to name both and point at serve --dashboard", err)
	}
}
