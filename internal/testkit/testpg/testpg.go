// Package testpg gives tests a real PostgreSQL server.
//
// [Start] initialises a throwaway cluster (initdb) in a temporary
// directory, runs postgres on a free loopback port for the calling test and
// stops it when the test ends. When DATABASE_URL is set it is used instead
// and nothing is started. Tests that share a server keep apart in schemas
// of their own ([Schema]). When the PostgreSQL server binaries are missing
// the test is skipped with a clear message, except under CI (the CI
// environment variable is set), where a missing server is a failure, never
// a silent skip. Every server dies with the test binary, even one that
// ends without running its cleanups.
//
// The binaries are looked up on PATH, then in Debian's
// /usr/lib/postgresql/<version>/bin (the postgresql package puts only
// wrappers on PATH). initdb and postgres refuse to run as root: a test
// running as root runs them as the postgres user (created by the package),
// on a data directory owned by it.
package testpg

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcptasks/mcptasks/internal/testkit/spawn"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
)

// Server is a postgres process of a test's own.
type Server struct {
	// URL is its postgres:// URL (database postgres, user postgres, no
	// password: the cluster trusts loopback connections).
	URL string
	// Process is the server process, for fault injection.
	Process *os.Process
	// Dir is the data directory.
	Dir string
}

// Start returns a postgres:// URL of a running PostgreSQL server that lives
// as long as tb: DATABASE_URL when it is set, else a server of tb's own.
// Tests on a DATABASE_URL share it: keep to a schema of your own (Schema).
func Start(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return StartServer(tb).URL
}

// StartServer starts a postgres process of the test's own, even when
// DATABASE_URL is set, and stops it when the test ends. Missing binaries
// skip the test, or fail it under CI.
func StartServer(tb testing.TB) *Server {
	tb.Helper()
	bin := binDir(tb)
	s, stop, err := launch(bin)
	if err != nil {
		tb.Fatalf("testpg: %v", err)
	}
	tb.Cleanup(stop)
	return s
}

// Launch starts a postgres process outside a test (a benchmark driver's),
// with the extra settings (name=value, as postgres -c takes them): stop
// stops it and removes its data. Missing binaries are an error.
func Launch(settings ...string) (s *Server, stop func(), err error) {
	bin, ok := findBinDir()
	if !ok {
		return nil, nil, errors.New("PostgreSQL server binaries (initdb, postgres) not found on PATH or in /usr/lib/postgresql/*/bin (apt-get install -y postgresql)")
	}
	return launch(bin, settings...)
}

// launch starts a server from bin, trying again on another port when the
// free one was taken meanwhile.
func launch(bin string, settings ...string) (s *Server, stop func(), err error) {
	for range 3 {
		var cleanups []func()
		s, err = start(func(f func()) { cleanups = append(cleanups, f) }, bin, settings...)
		stop = func() {
			for _, f := range slices.Backward(cleanups) {
				f()
			}
		}
		if err == nil {
			return s, stop, nil
		}
		stop()
	}
	return nil, nil, err
}

// missing skips tb with msg, or fails it under CI.
func missing(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// binDir finds the directory holding initdb and postgres, or skips tb
// (fails it under CI).
func binDir(tb testing.TB) string {
	tb.Helper()
	d, ok := findBinDir()
	if !ok {
		missing(tb, "PostgreSQL server binaries (initdb, postgres) not found on PATH or in /usr/lib/postgresql/*/bin (install them: apt-get install -y postgresql, or set DATABASE_URL)")
	}
	return d
}

// findBinDir finds the directory holding initdb and postgres.
func findBinDir() (string, bool) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p), true
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, true
		}
	}
	return "", false
}

// version is the major version in a /usr/lib/postgresql/<v>/bin path.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// credential is who the server runs as: nil (the test's own user) unless
// the test runs as root, then the postgres user.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and no postgres user to run the server as (the postgresql package creates it): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// start initialises a cluster and runs postgres on a port that was free a
// moment ago; a lost race for the port is reported as an error so that the
// caller can retry.
func start(cleanup func(func()), bin string, settings ...string) (*Server, error) {
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	// Not a test's TempDir: its parent is private to root, and the server may
	// run as another user.
	dir, err := os.MkdirTemp("", "testpg")
	if err != nil {
		return nil, err
	}
	cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		for _, d := range []string{dir, data} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	tmpl, err := template(bin, cred)
	if err != nil {
		return nil, err
	}
	if err := copyTree(tmpl, data, cred); err != nil {
		return nil, fmt.Errorf("copying the template cluster: %w", err)
	}
	port, err := spawn.FreePort()
	if err != nil {
		return nil, err
	}
	// Durability off: a test server's data dies with the test.
	args := []string{"-D", data,
		"-c", "listen_addresses=127.0.0.1", "-c", "port=" + strconv.Itoa(port),
		"-c", "unix_socket_directories=" + dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB"}
	for _, kv := range settings {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := spawn.Start(cmd); err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	if err := spawn.WaitFor(stderr, "database system is ready to accept connections", 30*time.Second); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a test may have left it stopped
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return &Server{URL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), Process: cmd.Process, Dir: data}, nil
}

// template returns the data directory of a cluster that initdb made with
// bin, for servers to start from a copy of (initdb takes seconds; a copy a
// fraction of one). It is made once per machine, user and PostgreSQL
// build, in the system's temporary directory, and reused by every test
// binary after: a directory is only ever renamed into place whole.
func template(bin string, cred *syscall.Credential) (string, error) {
	out, err := exec.Command(filepath.Join(bin, "postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("postgres --version: %w", err)
	}
	sum := sha256.Sum256([]byte(bin + "\x00" + string(out)))
	uid := os.Geteuid()
	if cred != nil {
		uid = int(cred.Uid)
	}
	final := filepath.Join(os.TempDir(), fmt.Sprintf("testpg-template-%d-%x", uid, sum[:6]))
	if _, err := os.Stat(filepath.Join(final, "PG_VERSION")); err == nil {
		return final, nil
	}
	dir, err := os.MkdirTemp("", "testpg-initdb")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		return "", err
	}
	if cred != nil {
		for _, d := range []string{dir, data} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return "", err
			}
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return "", fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if err := os.Rename(data, final); err != nil {
		if _, serr := os.Stat(filepath.Join(final, "PG_VERSION")); serr == nil {
			return final, nil // another test binary made it meanwhile
		}
		return "", fmt.Errorf("keeping the template cluster: %w", err)
	}
	return final, nil
}

// copyTree copies the directory tree src into dst (which exists), giving
// every file and directory to cred's user (nil: the caller's).
func copyTree(src, dst string, cred *syscall.Credential) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case rel == ".":
		case d.IsDir():
			if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
				return err
			}
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, b, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return nil // no links nor special files in a fresh cluster
		}
		if cred != nil {
			return os.Chown(target, int(cred.Uid), int(cred.Gid))
		}
		return nil
	})
}

// Schema returns a schema name private to the calling test (it need not
// exist yet), dropped with everything in it when the test ends when
// databaseURL is a DATABASE_URL shared with other tests.
func Schema(tb testing.TB, databaseURL string) string {
	tb.Helper()
	s := "t" + strings.ToLower(rand.Text()[:12])
	if databaseURL == os.Getenv("DATABASE_URL") {
		tb.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := pgx.Connect(ctx, databaseURL)
			if err != nil {
				tb.Logf("testpg: dropping schema %s: %v", s, err)
				return
			}
			defer c.Close(ctx)
			if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+s+" CASCADE"); err != nil {
				tb.Logf("testpg: dropping schema %s: %v", s, err)
			}
		})
	}
	return s
}

// Pool returns a connection pool of the server at databaseURL, configured
// as the store's (pgstore.PoolConfig), closed when tb ends; configure,
// when given, adjusts the configuration first.
func Pool(tb testing.TB, databaseURL string, configure ...func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgstore.PoolConfig(databaseURL)
	if err != nil {
		tb.Fatalf("testpg: %v", err)
	}
	for _, f := range configure {
		f(cfg)
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("testpg: connecting to %s: %v", redact(databaseURL), err)
	}
	tb.Cleanup(p.Close)
	return p
}

// redact drops the password of a URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// CPU is the CPU time (user and system) the server has used so far: the
// postmaster's, its reaped children's and its live children's (the
// backends of open connections), read from /proc; 0 where /proc is not.
func (s *Server) CPU() time.Duration {
	own, reaped, ok := procCPU(s.Process.Pid)
	if !ok {
		return 0
	}
	total := own + reaped
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == s.Process.Pid {
			continue
		}
		if ppid, ok := procParent(pid); ok && ppid == s.Process.Pid {
			if t, _, ok := procCPU(pid); ok {
				total += t
			}
		}
	}
	return total
}

// procStat returns the fields of /proc/PID/stat after the command's name
// (state is the first).
func procStat(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := strings.LastIndexByte(string(b), ')')
	if err != nil || i < 0 {
		return nil, false
	}
	f := strings.Fields(string(b[i+1:]))
	return f, len(f) >= 15
}

func procParent(pid int) (int, bool) {
	f, ok := procStat(pid)
	if !ok {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// procCPU is a process's own CPU time and its reaped children's.
func procCPU(pid int) (own, reaped time.Duration, ok bool) {
	f, ok := procStat(pid)
	if !ok {
		return 0, 0, false
	}
	var ticks [4]float64 // utime, stime, cutime, cstime: fields 14-17
	for i := range ticks {
		v, err := strconv.ParseFloat(f[11+i], 64)
		if err != nil {
			return 0, 0, false
		}
		ticks[i] = v
	}
	const hz = 100 // USER_HZ, the unit of /proc/PID/stat's times
	sec := func(t float64) time.Duration { return time.Duration(t / hz * float64(time.Second)) }
	return sec(ticks[0] + ticks[1]), sec(ticks[2] + ticks[3]), true
}
