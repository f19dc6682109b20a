package testredis_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/slots"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
)

// The shared cluster serves every slot from three masters laid out as
// `redis-cli --cluster create` does; its URL gives a cluster-mode client
// that spreads keys over them, and ScanAll finds the keys of every master
// (a plain SCAN reaches one).
func TestSharedCluster(t *testing.T) {
	c := testredis.SharedCluster(t)
	if again := testredis.SharedCluster(t); again != c {
		t.Fatal("SharedCluster started a second cluster")
	}
	rc := testredis.Client(t, "cluster")
	ctx := t.Context()
	masters := c.Masters(t)
	if len(masters) != 3 {
		t.Fatalf("%d masters, want 3", len(masters))
	}
	prefix := "scan" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	var want []string
	on := map[*testredis.Node]int{}
	for i := range 60 {
		k := fmt.Sprintf("%sk%d", prefix, i)
		if err := rc.Do(ctx, rc.B().Set().Key(k).Value("v").Px(time.Minute).Build()).Error(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		want = append(want, k)
		on[c.MasterOf(t, k)]++
	}
	slices.Sort(want)
	if len(on) != 3 {
		t.Errorf("60 keys landed on %d masters, want all 3", len(on))
	}
	// The slot ranges are redis-cli's: 0-5460, 5461-10922, 10923-16383.
	for _, b := range []struct {
		slot   int
		master int
	}{{0, 0}, {5460, 0}, {5461, 1}, {10922, 1}, {10923, 2}, {16383, 2}} {
		k := keyInSlot(b.slot)
		if got := c.MasterOf(t, k); got != c.Nodes[b.master] {
			t.Errorf("slot %d served by %s, want the %d-th master %s", b.slot, got.Addr, b.master, c.Nodes[b.master].Addr)
		}
	}
	got, err := testredis.ScanAll(ctx, rc, prefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("ScanAll found %d keys, want %d", len(got), len(want))
	}
	one, err := rc.Do(ctx, rc.B().Scan().Cursor(0).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Elements) >= len(want) {
		t.Errorf("a plain SCAN found %d of %d keys: the cluster does not spread them", len(one.Elements), len(want))
	}
	// On one server, ScanAll is a SCAN.
	single := testredis.Client(t, "embedded")
	if err := single.Do(ctx, single.B().Set().Key(prefix+"x").Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if got, err := testredis.ScanAll(ctx, single, prefix+"*"); err != nil || !slices.Equal(got, []string{prefix + "x"}) {
		t.Errorf("ScanAll on one server = %v, %v", got, err)
	}
}

// keyInSlot returns a key whose hash slot is slot.
func keyInSlot(slot int) string {
	for i := 0; ; i++ {
		k := "{" + strconv.Itoa(i) + "}"
		if slots.Slot(k) == slot {
			return k
		}
	}
}

// A cluster of its own with a replica per master: after kill -9 of the
// master of a key, its replica is promoted and serves the key's writes; a
// paused replica answers nothing until resumed.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := testredis.StartCluster(t, 3, 1)
	t.Logf("3 masters + 3 replicas whole in %v", time.Since(start))
	if len(c.Nodes) != 6 {
		t.Fatalf("%d nodes, want 6", len(c.Nodes))
	}
	rc := c.Client(t)
	ctx := t.Context()
	const key = "failover{x}"
	if err := rc.Do(ctx, rc.B().Set().Key(key).Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	old := c.MasterOf(t, key)
	reps := c.ReplicasOf(t, old)
	if len(reps) != 1 || reps[0] == old {
		t.Fatalf("replicas of %s: %v, want one other node", old.Addr, reps)
	}
	// The write reached the replica (WAIT acknowledges it).
	if n, err := old.Client().Do(ctx, old.Client().B().Wait().Numreplicas(1).Timeout(5000).Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}

	// A paused replica answers nothing; resumed, it does again.
	rep := reps[0]
	c.Pause(t, rep)
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := rep.Client().Do(pctx, rep.Client().B().Ping().Build()).Error()
	cancel()
	if err == nil {
		t.Error("a paused replica answered PING")
	}
	c.Resume(t, rep)
	if err := rep.Client().Do(ctx, rep.Client().B().Ping().Build()).Error(); err != nil {
		t.Errorf("PING after resume: %v", err)
	}

	start = time.Now()
	c.Kill(t, old)
	promoted := c.WaitPromoted(t, key, old)
	t.Logf("replica %s promoted %v after the kill", promoted.Addr, time.Since(start))
	if promoted != rep {
		t.Errorf("promoted %s, want the old master's replica %s", promoted.Addr, rep.Addr)
	}
	if v, err := rc.Do(ctx, rc.B().Get().Key(key).Build()).ToString(); err != nil || v != "1" {
		t.Errorf("GET after failover = %q, %v; want the acknowledged write", v, err)
	}
	if err := rc.Do(ctx, rc.B().Set().Key(key).Value("2").Build()).Error(); err != nil {
		t.Errorf("SET after failover: %v", err)
	}
	if slices.Contains(c.Masters(t), old) {
		t.Error("the killed master still serves slots")
	}
	if err := old.Process.Signal(syscall.Signal(0)); err == nil {
		t.Error("the killed master's process is still running")
	}
}

// Servers die with the test binary that started them even when it exits
// without running its cleanups (here os.Exit in the middle of a test; a
// panic or the -timeout alarm end the same way).
func TestServersDieWithBinary(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	if os.Getenv("TESTREDIS_CHILD") == "1" {
		s := testredis.StartServer(t)
		c := testredis.StartCluster(t, 3, 0)
		fmt.Println("pid", s.Process.Pid)
		for _, n := range c.Nodes {
			fmt.Println("pid", n.Process.Pid)
		}
		os.Exit(3)
	}
	testredis.StartServer(t) // skips (or fails under CI) without redis-server
	cmd := exec.Command(os.Args[0], "-test.run=^TestServersDieWithBinary$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TESTREDIS_CHILD=1")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("child test binary: %v\n%s", err, out)
	}
	var pids []int
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if f, ok := strings.CutPrefix(sc.Text(), "pid "); ok {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			pids = append(pids, pid)
		}
	}
	if len(pids) != 4 {
		t.Fatalf("child reported %d servers, want 4:\n%s", len(pids), out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for running(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("redis-server %d outlived its test binary", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// running reports whether process pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
