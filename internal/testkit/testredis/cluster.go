package testredis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/slots"
	"github.com/mcptasks/mcptasks/internal/testkit/spawn"
	"github.com/redis/rueidis"
)

// Cluster is a Redis Cluster of redis-server processes on loopback ports,
// created by `redis-cli --cluster create` as an operator would.
type Cluster struct {
	// URL names every node (redis://host:port?addr=host:port&addr=...):
	// rueidis.ParseURL reads it and the client it builds runs in cluster
	// mode, so it is a REDIS_URL for the bundle's processes too.
	URL string
	// Nodes are the servers in the order they were created: the masters
	// first (the i-th serving the i-th of equal slot ranges, as
	// `redis-cli --cluster create` lays them out), then the replicas.
	// Failover changes roles; [Cluster.MasterOf] and [Cluster.ReplicasOf]
	// tell the current ones.
	Nodes []*Node

	shared bool
	// replicas is how many replicas each master was created with.
	replicas int
}

// Node is one redis-server of a [Cluster].
type Node struct {
	// Addr is its host:port.
	Addr string
	// ID is its cluster node id.
	ID string
	// Process is the server process.
	Process *os.Process

	dir     string
	client  rueidis.Client
	exited  chan struct{}
	once    sync.Once
	killed  atomic.Bool
	stopped atomic.Bool
}

// Client returns a client of this node alone (not following redirections),
// for commands about the node itself: INFO, ROLE, CLUSTER INFO, CONFIG.
func (n *Node) Client() rueidis.Client { return n.client }

// Log returns the node's redis-server log, for a failing test to print.
func (n *Node) Log() string {
	b, err := os.ReadFile(filepath.Join(n.dir, "redis.log"))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}

// live reports whether the node can answer: neither killed nor stopped.
func (n *Node) live() bool { return !n.killed.Load() && !n.stopped.Load() }

// clusterNodeTimeout is the cluster-node-timeout of a test's own cluster:
// short, so that a killed master is replaced within a few seconds.
// Three seconds, not less: on a loaded two-core machine (the whole test
// suite in parallel) a master busy for a second must not be taken for
// dead.
const clusterNodeTimeout = 3 * time.Second

// sharedNodeTimeout is the cluster-node-timeout of the shared cluster: it
// has no replicas, and a master that a loaded machine starves for a moment
// must not be marked failed (that would fail the whole cluster).
const sharedNodeTimeout = 20 * time.Second

// StartCluster starts a Redis Cluster of its own for tb, with masters
// masters and replicasPerMaster replicas of each, waits until every node
// serves every slot, and stops it when tb ends. It is for tests that
// inject faults; other tests share [SharedCluster]. A missing redis-server
// or redis-cli skips the test, or fails it under CI.
func StartCluster(tb testing.TB, masters, replicasPerMaster int) *Cluster {
	tb.Helper()
	server, cli := clusterBinaries(tb)
	c, err := newCluster(server, cli, tb.TempDir(), masters, replicasPerMaster, clusterNodeTimeout)
	if err != nil {
		tb.Fatalf("testredis: %v", err)
	}
	tb.Cleanup(c.close)
	return c
}

// sharedCluster is the test binary's shared cluster, started on first use.
// Its processes die with the binary (see spawner); its directory, which
// they write to while they run, is removed by the next binary that starts
// one (removeStaleDirs).
var sharedCluster = sync.OnceValues(func() (*Cluster, error) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, err
	}
	removeStaleDirs()
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", sharedDirPrefix, os.Getpid()))
	if err != nil {
		return nil, err
	}
	c, err := newCluster(server, cli, dir, 3, 0, sharedNodeTimeout)
	if err != nil {
		return nil, err
	}
	c.shared = true
	return c, nil
})

const sharedDirPrefix = "testredis-cluster-"

// removeStaleDirs removes the shared-cluster directories of test binaries
// that are no longer running.
func removeStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), sharedDirPrefix+"*"))
	for _, d := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), sharedDirPrefix), "-")
		n, err := strconv.Atoi(pid)
		if err != nil || n == os.Getpid() {
			continue
		}
		if err := syscall.Kill(n, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}

// SharedCluster returns the test binary's Redis Cluster of three masters
// without replicas, started on the first call (about two seconds) and
// stopped when the binary exits. Tests share it: each keeps to keys of its
// own (a unique prefix, hash-tagged where keys must share a slot), and one
// that scans keys scans every master ([ScanAll]). Fault injection needs a
// cluster of the test's own ([StartCluster]). A missing redis-server or
// redis-cli skips the test, or fails it under CI.
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	clusterBinaries(tb)
	c, err := sharedCluster()
	if err != nil {
		tb.Fatalf("testredis: the shared cluster: %v", err)
	}
	return c
}

// clusterBinaries finds redis-server and redis-cli, or skips tb (fails it
// under CI).
func clusterBinaries(tb testing.TB) (server, cli string) {
	tb.Helper()
	server = lookPath(tb, "redis-server", "redis-server not found on PATH (install it: apt-get install -y redis-server)")
	cli = lookPath(tb, "redis-cli", "redis-cli not found on PATH (install it: apt-get install -y redis-tools)")
	return server, cli
}

// Client returns a cluster-mode client of c, closed when tb ends.
func (c *Cluster) Client(tb testing.TB) rueidis.Client {
	tb.Helper()
	rc := Connect(tb, c.URL)
	if rc.Mode() != rueidis.ClientModeCluster {
		tb.Fatalf("testredis: the client of %s is in %s mode, want cluster", c.URL, rc.Mode())
	}
	return rc
}

// newCluster starts the nodes in dir, joins them with redis-cli and waits
// until the cluster is whole.
func newCluster(server, cli, dir string, masters, replicas int, nodeTimeout time.Duration) (_ *Cluster, err error) {
	if masters < 3 {
		return nil, fmt.Errorf("a cluster needs at least 3 masters, not %d", masters)
	}
	c := &Cluster{replicas: replicas}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	for i := range masters * (1 + replicas) {
		n, err := startNode(server, filepath.Join(dir, fmt.Sprintf("node%d", i)), nodeTimeout)
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		args = append(args, n.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("redis-cli %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	u := url.URL{Scheme: "redis", Host: c.Nodes[0].Addr}
	q := url.Values{}
	for _, n := range c.Nodes[1:] {
		q.Add("addr", n.Addr)
	}
	u.RawQuery = q.Encode()
	c.URL = u.String()
	for _, n := range c.Nodes {
		if n.ID, err = n.client.Do(ctx, n.client.B().ClusterMyid().Build()).ToString(); err != nil {
			return nil, fmt.Errorf("CLUSTER MYID on %s: %w", n.Addr, err)
		}
	}
	if err := c.waitHealthy(ctx, true); err != nil {
		return nil, err
	}
	return c, nil
}

// close stops every node.
func (c *Cluster) close() {
	for _, n := range c.Nodes {
		n.stop()
	}
}

// startNode starts one cluster-enabled redis-server in dir on ports that
// were free a moment ago, retrying on a lost race for them.
func startNode(bin, dir string, nodeTimeout time.Duration) (*Node, error) {
	var lastErr error
	for range 5 {
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		port, err := spawn.FreePort()
		if err != nil {
			return nil, err
		}
		bus, err := spawn.FreePort()
		if err != nil {
			return nil, err
		}
		if bus == port {
			continue
		}
		n, err := runNode(bin, dir, port, bus, nodeTimeout)
		if err == nil {
			return n, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func runNode(bin, dir string, port, bus int, nodeTimeout time.Duration) (*Node, error) {
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--cluster-port", strconv.Itoa(bus),
		"--bind", "127.0.0.1",
		"--protected-mode", "yes",
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
		// A replica promotes itself however long it was cut off from its
		// master (a failover test stops one to make it lag).
		"--cluster-replica-validity-factor", "0",
		// A replica's first sync starts at once (the default waits 5s
		// for more replicas to share it).
		"--repl-diskless-sync-delay", "0",
		// CLUSTER SLOTS lists a replica only once its replication offset
		// is past 0, which the master's pings move (10s apart by default).
		"--repl-ping-replica-period", "1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--logfile", "redis.log",
	)
	if err := spawn.Start(cmd); err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	n := &Node{Addr: fmt.Sprintf("127.0.0.1:%d", port), Process: cmd.Process, dir: dir, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(n.exited)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for ping(n.Addr) != nil {
		select {
		case <-n.exited:
			return nil, fmt.Errorf("redis-server on port %d exited before it was ready:\n%s", port, n.Log())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.stop()
			return nil, fmt.Errorf("redis-server on port %d was not ready in 10s:\n%s", port, n.Log())
		}
	}
	// Its keep-alive PINGs are rare, so that a test counting a node's
	// commands counts little of its own (rueidis pings an idle connection
	// every second by default).
	opt := rueidis.ClientOption{InitAddress: []string{n.Addr}, ForceSingleClient: true, DisableCache: true}
	opt.Dialer.KeepAlive = time.Minute
	c, err := rueidis.NewClient(opt)
	if err != nil {
		n.stop()
		return nil, fmt.Errorf("connecting to %s: %w", n.Addr, err)
	}
	n.client = c
	return n, nil
}

// ping sends PING to addr and waits for PONG.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// stop kills the node's process (resuming it first if stopped) and waits
// for it to exit.
func (n *Node) stop() {
	n.once.Do(func() {
		n.killed.Store(true)
		_ = n.Process.Signal(syscall.SIGCONT)
		_ = n.Process.Kill()
		<-n.exited
		if n.client != nil {
			n.client.Close()
		}
	})
}

// slotRange is one range of slots and its nodes, as CLUSTER SLOTS reports.
type slotRange struct {
	first, last int
	master      string
	replicas    []string
}

// clusterSlots asks one node for the slot map, sorted by first slot.
func clusterSlots(ctx context.Context, c rueidis.Client) ([]slotRange, error) {
	entries, err := c.Do(ctx, c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	var rs []slotRange
	for _, e := range entries {
		fields, err := e.ToArray()
		if err != nil || len(fields) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS: malformed entry (%v)", err)
		}
		first, err1 := fields[0].AsInt64()
		last, err2 := fields[1].AsInt64()
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("CLUSTER SLOTS: %w", err)
		}
		r := slotRange{first: int(first), last: int(last)}
		for i, f := range fields[2:] {
			node, err := f.ToArray()
			if err != nil || len(node) < 2 {
				return nil, fmt.Errorf("CLUSTER SLOTS: malformed node (%v)", err)
			}
			host, err1 := node[0].ToString()
			port, err2 := node[1].AsInt64()
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("CLUSTER SLOTS: %w", err)
			}
			addr := net.JoinHostPort(host, strconv.FormatInt(port, 10))
			if i == 0 {
				r.master = addr
			} else {
				r.replicas = append(r.replicas, addr)
			}
		}
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b slotRange) int { return a.first - b.first })
	return rs, nil
}

// healthy reports why the cluster is not whole, or nil: every live node
// says cluster_state:ok and reports the same masters for every slot, all
// 16384 covered; with created, each master also has as many replicas as
// it was created with, each with its replication link up.
func (c *Cluster) healthy(ctx context.Context, created bool) error {
	var want []slotRange
	for _, n := range c.Nodes {
		if !n.live() {
			continue
		}
		info, err := n.client.Do(ctx, n.client.B().ClusterInfo().Build()).ToString()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", n.Addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
			return fmt.Errorf("%s: not ok yet:\n%s", n.Addr, info)
		}
		rs, err := clusterSlots(ctx, n.client)
		if err != nil {
			return fmt.Errorf("%s: %w", n.Addr, err)
		}
		next := 0
		for _, r := range rs {
			if r.first != next {
				return fmt.Errorf("%s: slots %d-%d unserved", n.Addr, next, r.first-1)
			}
			next = r.last + 1
			if created && len(r.replicas) != c.replicas {
				return fmt.Errorf("%s: slots %d-%d have replicas %v, want %d", n.Addr, r.first, r.last, r.replicas, c.replicas)
			}
		}
		if next != slots.Count {
			return fmt.Errorf("%s: slots from %d unserved", n.Addr, next)
		}
		if want == nil {
			want = rs
		} else if !slices.EqualFunc(rs, want, func(a, b slotRange) bool {
			return a.first == b.first && a.last == b.last && a.master == b.master
		}) {
			return fmt.Errorf("%s: slot map %v differs from %v", n.Addr, rs, want)
		}
		if created {
			role, err := n.client.Do(ctx, n.client.B().Info().Section("replication").Build()).ToString()
			if err != nil {
				return fmt.Errorf("%s: INFO replication: %w", n.Addr, err)
			}
			if strings.Contains(role, "role:slave") && !strings.Contains(role, "master_link_status:up") {
				return fmt.Errorf("%s: replica not in sync yet", n.Addr)
			}
		}
	}
	if want == nil {
		return errors.New("no live node")
	}
	return nil
}

// waitHealthy waits until [Cluster.healthy] holds or ctx ends.
func (c *Cluster) waitHealthy(ctx context.Context, created bool) error {
	for {
		err := c.healthy(ctx, created)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cluster did not become whole: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitHealthy waits (up to 30s) until every live node says
// cluster_state:ok and agrees on the master of every slot.
func (c *Cluster) WaitHealthy(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	defer cancel()
	if err := c.waitHealthy(ctx, false); err != nil {
		tb.Fatalf("testredis: %v", err)
	}
}

// slotMap returns the slot map as a live node sees it.
func (c *Cluster) slotMap(tb testing.TB) []slotRange {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, n := range c.Nodes {
		if !n.live() {
			continue
		}
		rs, err := clusterSlots(ctx, n.client)
		if err == nil {
			return rs
		}
		errs = append(errs, fmt.Errorf("%s: %w", n.Addr, err))
	}
	tb.Fatalf("testredis: no node answered CLUSTER SLOTS: %v", errors.Join(errs...))
	return nil
}

// node returns the node listening on addr.
func (c *Cluster) node(tb testing.TB, addr string) *Node {
	tb.Helper()
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	tb.Fatalf("testredis: no node of the cluster listens on %s", addr)
	return nil
}

// MasterOf returns the master that serves key's hash slot now.
func (c *Cluster) MasterOf(tb testing.TB, key string) *Node {
	tb.Helper()
	slot := slots.Slot(key)
	for _, r := range c.slotMap(tb) {
		if r.first <= slot && slot <= r.last {
			return c.node(tb, r.master)
		}
	}
	tb.Fatalf("testredis: no master serves slot %d", slot)
	return nil
}

// Masters returns the masters that serve slots now, by first slot.
func (c *Cluster) Masters(tb testing.TB) []*Node {
	tb.Helper()
	var ms []*Node
	for _, r := range c.slotMap(tb) {
		if n := c.node(tb, r.master); !slices.Contains(ms, n) {
			ms = append(ms, n)
		}
	}
	return ms
}

// ReplicasOf returns the replicas that follow master now.
func (c *Cluster) ReplicasOf(tb testing.TB, master *Node) []*Node {
	tb.Helper()
	var rs []*Node
	for _, r := range c.slotMap(tb) {
		if r.master != master.Addr {
			continue
		}
		for _, a := range r.replicas {
			if n := c.node(tb, a); !slices.Contains(rs, n) {
				rs = append(rs, n)
			}
		}
	}
	return rs
}

// own fails tb when c is the shared cluster: faults are injected only in
// a test's own.
func (c *Cluster) own(tb testing.TB) {
	tb.Helper()
	if c.shared {
		tb.Fatal("testredis: fault injection into the shared cluster; start one with StartCluster")
	}
}

// Kill kills n with SIGKILL (kill -9) and waits for it to exit.
func (c *Cluster) Kill(tb testing.TB, n *Node) {
	tb.Helper()
	c.own(tb)
	n.stop()
}

// Pause stops n with SIGSTOP: it keeps its connections but answers
// nothing until [Cluster.Resume].
func (c *Cluster) Pause(tb testing.TB, n *Node) {
	tb.Helper()
	c.own(tb)
	if err := n.Process.Signal(syscall.SIGSTOP); err != nil {
		tb.Fatalf("testredis: SIGSTOP %s: %v", n.Addr, err)
	}
	n.stopped.Store(true)
}

// Resume continues n after [Cluster.Pause] with SIGCONT.
func (c *Cluster) Resume(tb testing.TB, n *Node) {
	tb.Helper()
	c.own(tb)
	if err := n.Process.Signal(syscall.SIGCONT); err != nil {
		tb.Fatalf("testredis: SIGCONT %s: %v", n.Addr, err)
	}
	n.stopped.Store(false)
}

// WaitPromoted waits (up to 30s) until key's slot is served by a master
// other than old and the live nodes agree the cluster is whole again, and
// returns the new master: after [Cluster.Kill] of old, the replica
// promoted in its place.
func (c *Cluster) WaitPromoted(tb testing.TB, key string, old *Node) *Node {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	defer cancel()
	slot := slots.Slot(key)
	for {
		err := c.healthy(ctx, false)
		if err == nil {
			for _, r := range c.slotMap(tb) {
				if r.first <= slot && slot <= r.last && r.master != old.Addr {
					return c.node(tb, r.master)
				}
			}
			err = fmt.Errorf("slot %d still served by %s", slot, old.Addr)
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("testredis: no master replaced %s for slot %d in 30s: %v", old.Addr, slot, err)
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ScanAll returns the keys matching the glob pattern match, sorted, with
// SCAN on every master c talks to: on a cluster client each master holds
// only its slots' keys (a plain SCAN reaches one node), on any other client
// the one server.
func ScanAll(ctx context.Context, c rueidis.Client, match string) ([]string, error) {
	targets := []rueidis.Client{c}
	if c.Mode() == rueidis.ClientModeCluster {
		rs, err := clusterSlots(ctx, c)
		if err != nil {
			return nil, err
		}
		nodes := c.Nodes()
		targets = targets[:0]
		var seen []string
		for _, r := range rs {
			if slices.Contains(seen, r.master) {
				continue
			}
			seen = append(seen, r.master)
			n, ok := nodes[r.master]
			if !ok {
				return nil, fmt.Errorf("scanning %s: the client has no connection to it", r.master)
			}
			targets = append(targets, n)
		}
	}
	var keys []string
	for _, n := range targets {
		var cursor uint64
		for {
			e, err := n.Do(ctx, n.B().Scan().Cursor(cursor).Match(match).Count(1000).Build()).AsScanEntry()
			if err != nil {
				return nil, fmt.Errorf("SCAN: %w", err)
			}
			keys = append(keys, e.Elements...)
			if e.Cursor == 0 {
				break
			}
			cursor = e.Cursor
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}
