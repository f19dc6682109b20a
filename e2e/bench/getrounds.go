package main

// The tasks/get rounds (-get-rounds N): only the tasks/get polling rows,
// ours on redis-server (the full run's split deployment, a fresh one per
// round) and each -peer's, taking turns N times with the order
// alternating (A B, B A, A B, ...), so that a drift of the machine's load
// falls on both. Each round reports both rates and their ratio. Every
// measurement follows a second of the same load, not counted, so that a
// fresh deployment of ours is as warm as the long-running peer.

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// GetRound is one round: our tasks/get rate and each peer's, and the CPU
// each request cost each process (µs): ours the endpoint process and
// redis-server, a peer its process (when -peer-pid names it), and the
// driver itself in both.
type GetRound struct {
	Round   int                `json:"round"`
	Order   []string           `json:"order"`
	Ours    Row                `json:"ours"`
	Peers   map[string]Row     `json:"peers"`
	Ratio   map[string]float64 `json:"ratio"`
	LoadAvg []string           `json:"loadAverages"`
	// OursCPU: endpoint, redis-server, driver; PeerCPU: peer, driver.
	OursCPU [3]float64 `json:"oursCpuUsPerRequest"`
	// OursWorking polls a working task (as the peer's row does) instead
	// of one waiting for input (-get-working).
	OursWorking    *Row                  `json:"oursWorking,omitempty"`
	OursWorkingCPU [3]float64            `json:"oursWorkingCpuUsPerRequest"`
	PeerCPU        map[string][2]float64 `json:"peerCpuUsPerRequest"`
}

// selfCPU is this process's user and system CPU seconds so far.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// pidCPU is the CPU seconds of process pid so far, or -1.
func pidCPU(pid int) float64 {
	if pid <= 0 {
		return -1
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return -1
	}
	return cpuSeconds(&proc{cmd: &exec.Cmd{Process: p}})
}

func runGetRounds(rounds, clients int, duration time.Duration, peers []Peer, peerPIDs map[string]int, working bool, jsonOut string) error {
	if len(peers) == 0 {
		return fmt.Errorf("-get-rounds needs at least one -peer")
	}
	dir, err := os.MkdirTemp("", "mcptasks-bench-get")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "mcptasks")
	if err := buildMCPTasks(bin); err != nil {
		return err
	}
	// Each peer's polled task, created once (a working task that stays so).
	peerTask := map[string]string{}
	for _, p := range peers {
		c := &client{url: p.URL}
		var task struct {
			TaskID string `json:"taskId"`
		}
		if err := c.call("tools/call", map[string]any{"name": p.TaskTool, "arguments": p.TaskArgs}, p.TaskTool, &task); err != nil || task.TaskID == "" {
			return fmt.Errorf("peer %s: creating the polled task: %v", p.Name, err)
		}
		peerTask[p.Name] = task.TaskID
	}
	// ours polls, on a fresh deployment, a task waiting for input
	// (confirm_delete, the full run's row) or, working, a task that
	// sleeps an hour (slow_compute, what the peer's row polls).
	ours := func(working bool) (Row, [3]float64, error) {
		var cpu [3]float64
		rs, err := startRedis(dir)
		if err != nil {
			return Row{}, cpu, err
		}
		defer rs.stop()
		var procs []*proc
		defer func() {
			for _, p := range slices.Backward(procs) {
				p.stop()
			}
		}()
		api, _, err := deploy(bin, []string{"REDIS_URL=" + rs.url}, 1, func(bin string, env []string, args ...string) (*proc, error) {
			p, err := startProc(bin, env, args...)
			if err == nil {
				procs = append(procs, p)
			}
			return p, err
		})
		if err != nil {
			return Row{}, cpu, err
		}
		c := &client{url: api.url}
		var parked struct {
			TaskID string `json:"taskId"`
		}
		if working {
			if err := c.call("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 3600}}, "slow_compute", &parked); err != nil {
				return Row{}, cpu, fmt.Errorf("creating the polled task: %w", err)
			}
			// Past its first step: sleeping, and working.
			for {
				var t struct {
					StatusMessage string `json:"statusMessage"`
				}
				if err := c.call("tasks/get", map[string]any{"taskId": parked.TaskID}, parked.TaskID, &t); err != nil {
					return Row{}, cpu, err
				}
				if strings.HasPrefix(t.StatusMessage, "computing") {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		} else {
			if err := c.call("tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "x"}}, "confirm_delete", &parked); err != nil {
				return Row{}, cpu, fmt.Errorf("creating the polled task: %w", err)
			}
			ids := make(chan string, 1)
			ids <- parked.TaskID
			waitParked(c, ids)
		}
		// Warm up as the long-running peer is: a second of the same load,
		// not counted (connections, buffers, the runtime's heap).
		load(api.url, clients, time.Second, "tasks/get", func(int64) (map[string]any, string) {
			return map[string]any{"taskId": parked.TaskID}, parked.TaskID
		})
		a0, r0, d0 := cpuSeconds(api), rs.cpu(), selfCPU()
		r := load(api.url, clients, duration, "tasks/get", func(int64) (map[string]any, string) {
			return map[string]any{"taskId": parked.TaskID}, parked.TaskID
		})
		a1, r1, d1 := cpuSeconds(api), rs.cpu(), selfCPU()
		perReq := func(a, b float64) float64 { return (b - a) * 1e6 / float64(max(r.Ops, 1)) }
		cpu = [3]float64{perReq(a0, a1), perReq(r0, r1), perReq(d0, d1)}
		r.Scenario, r.Store, r.RSSMiB = "tasks/get polling", "redis-server", api.rssMiB()
		return r, cpu, nil
	}
	peer := func(p Peer) (Row, [2]float64) {
		id := peerTask[p.Name]
		load(p.URL, clients, time.Second, "tasks/get", func(int64) (map[string]any, string) {
			return map[string]any{"taskId": id}, id
		})
		p0, d0 := pidCPU(peerPIDs[p.Name]), selfCPU()
		r := load(p.URL, clients, duration, "tasks/get", func(int64) (map[string]any, string) {
			return map[string]any{"taskId": id}, id
		})
		p1, d1 := pidCPU(peerPIDs[p.Name]), selfCPU()
		cpu := [2]float64{-1, (d1 - d0) * 1e6 / float64(max(r.Ops, 1))}
		if p0 >= 0 && p1 >= 0 {
			cpu[0] = (p1 - p0) * 1e6 / float64(max(r.Ops, 1))
		}
		r.Scenario, r.Store = "tasks/get polling", "peer: "+p.Name
		return r, cpu
	}
	var out []GetRound
	for i := range rounds {
		g := GetRound{Round: i + 1, Peers: map[string]Row{}, Ratio: map[string]float64{}, PeerCPU: map[string][2]float64{}}
		steps := []string{"ours"}
		if working {
			steps = append(steps, "ours-working")
		}
		for _, p := range peers {
			steps = append(steps, p.Name)
		}
		if i%2 == 1 {
			slices.Reverse(steps)
		}
		g.Order = steps
		for _, step := range steps {
			g.LoadAvg = append(g.LoadAvg, step+": "+loadAverage())
			if step == "ours" || step == "ours-working" {
				r, cpu, err := ours(step == "ours-working")
				if err != nil {
					return err
				}
				if step == "ours" {
					g.Ours, g.OursCPU = r, cpu
				} else {
					g.OursWorking, g.OursWorkingCPU = &r, cpu
				}
				continue
			}
			for _, p := range peers {
				if p.Name == step {
					g.Peers[p.Name], g.PeerCPU[p.Name] = peer(p)
				}
			}
		}
		for name, r := range g.Peers {
			if r.PerSec > 0 {
				g.Ratio[name] = g.Ours.PerSec / r.PerSec
				if g.OursWorking != nil {
					g.Ratio[name+" (working)"] = g.OursWorking.PerSec / r.PerSec
				}
			}
		}
		log.Printf("tasks/get round %d (%s): ours %.0f req/s%s", g.Round, strings.Join(g.Order, " → "), g.Ours.PerSec, peerSummary(g))
		out = append(out, g)
	}
	fmt.Printf("\ntasks/get rounds: %s, %s, %d CPUs, %d clients, %s per measurement, order alternating\n\n", time.Now().UTC().Format(time.RFC3339), runtime.Version(), runtime.NumCPU(), clients, duration)
	fmt.Print("| round | order | ours (redis-server, input_required task): req/s, p50 / p99 ms, errors |")
	if working {
		fmt.Print(" ours (working task): req/s, p50 / p99 ms |")
	}
	for _, p := range peers {
		fmt.Printf(" %s (working task): req/s, p50 / p99 ms, errors | ours / %s |", p.Name, p.Name)
		if working {
			fmt.Printf(" ours (working) / %s |", p.Name)
		}
	}
	fmt.Print(" CPU µs per request: ours endpoint + redis-server, driver |")
	if working {
		fmt.Print(" same, working task |")
	}
	for _, p := range peers {
		fmt.Printf(" CPU µs per request: %s, driver |", p.Name)
	}
	fmt.Print(" load average at each start |\n|---|---|---|")
	if working {
		fmt.Print("---|---|")
	}
	for range peers {
		fmt.Print("---|---|---|")
		if working {
			fmt.Print("---|")
		}
	}
	fmt.Println("---|---|")
	for _, g := range out {
		fmt.Printf("| %d | %s | %.0f, %.2f / %.2f, %d |", g.Round, strings.Join(g.Order, " → "), g.Ours.PerSec, g.Ours.P50Ms, g.Ours.P99Ms, g.Ours.Errors)
		if g.OursWorking != nil {
			fmt.Printf(" %.0f, %.2f / %.2f |", g.OursWorking.PerSec, g.OursWorking.P50Ms, g.OursWorking.P99Ms)
		}
		for _, p := range peers {
			r := g.Peers[p.Name]
			fmt.Printf(" %.0f, %.2f / %.2f, %d | **%.2f×** |", r.PerSec, r.P50Ms, r.P99Ms, r.Errors, g.Ratio[p.Name])
			if g.OursWorking != nil {
				fmt.Printf(" **%.2f×** |", g.Ratio[p.Name+" (working)"])
			}
		}
		fmt.Printf(" %.0f + %.0f, %.0f |", g.OursCPU[0], g.OursCPU[1], g.OursCPU[2])
		if g.OursWorking != nil {
			fmt.Printf(" %.0f + %.0f, %.0f |", g.OursWorkingCPU[0], g.OursWorkingCPU[1], g.OursWorkingCPU[2])
		}
		for _, p := range peers {
			c := g.PeerCPU[p.Name]
			if c[0] < 0 {
				fmt.Printf(" –, %.0f |", c[1])
			} else {
				fmt.Printf(" %.0f, %.0f |", c[0], c[1])
			}
		}
		fmt.Printf(" %s |\n", strings.Join(g.LoadAvg, "; "))
	}
	if err := os.MkdirAll(filepath.Dir(jsonOut), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	return os.WriteFile(jsonOut, b, 0o644)
}

func peerSummary(g GetRound) string {
	var s []string
	for name, r := range g.Peers {
		s = append(s, fmt.Sprintf(", %s %.0f req/s (%.2f×)", name, r.PerSec, g.Ratio[name]))
	}
	slices.Sort(s)
	return strings.Join(s, "")
}
