package testpg

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/spawn"
)

// StartPgBouncer runs PgBouncer in transaction mode in front of the server
// at serverURL (a server of the test's own, trusting loopback: see
// StartServer) and returns the pooled URL, as Neon's pooled URL or an RDS
// Proxy would be: consecutive transactions of one client may run on
// different server connections, and no session state survives a
// transaction. PgBouncer stops when the test ends. A missing pgbouncer
// skips the test, or fails it under CI.
func StartPgBouncer(tb testing.TB, serverURL string) string {
	tb.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer"} {
			if _, serr := os.Stat(p); serr == nil {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		missing(tb, "pgbouncer not found (install it: apt-get install -y pgbouncer)")
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		tb.Fatalf("testpg: %v", err)
	}
	var lastErr error
	for range 3 {
		pooled, err := startPgBouncer(tb, bin, u)
		if err == nil {
			return pooled
		}
		lastErr = err
	}
	tb.Fatalf("testpg: %v", lastErr)
	return ""
}

func startPgBouncer(tb testing.TB, bin string, server *url.URL) (string, error) {
	cred, err := credential()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "testpgbouncer")
	if err != nil {
		return "", err
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	port, err := spawn.FreePort()
	if err != nil {
		return "", err
	}
	users := filepath.Join(dir, "users.txt")
	if err := os.WriteFile(users, []byte(`"postgres" ""`+"\n"), 0o644); err != nil {
		return "", err
	}
	ini := filepath.Join(dir, "pgbouncer.ini")
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
server_reset_query =
ignore_startup_parameters = extra_float_digits
`, server.Hostname(), server.Port(), port, users)
	if err := os.WriteFile(ini, []byte(conf), 0o644); err != nil {
		return "", err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return "", err
		}
	}
	cmd := exec.Command(bin, ini)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", err
	}
	cmd.Stdout = cmd.Stderr
	if err := spawn.Start(cmd); err != nil {
		return "", fmt.Errorf("starting pgbouncer: %w", err)
	}
	if err := spawn.WaitFor(stderr, "process up", 10*time.Second); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", fmt.Errorf("pgbouncer: %w", err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pooled := *server
	pooled.Host = fmt.Sprintf("127.0.0.1:%d", port)
	return pooled.String(), nil
}
