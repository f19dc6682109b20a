package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// rate is a load scenario's outcome.
type rate struct {
	Ops    int64   `json:"ops"`
	Errors int64   `json:"errors"`
	PerSec float64 `json:"perSec"`
	P50Ms  float64 `json:"p50Ms"`
	P99Ms  float64 `json:"p99Ms"`
	// P999Ms is the 99.9th percentile (for the probes; not in the table).
	P999Ms float64 `json:"p999Ms,omitempty"`
	// Items is the mean number of tasks in a tasks/list answer.
	Items float64 `json:"items,omitempty"`
}

// load runs clients goroutines, client i as principal i%P, calling
// method for d; gen returns the params and Mcp-Name of a call by
// principal p (nil params: nothing left to do).
func (d *deployment) load(tokens []string, clients int, dur time.Duration, method, version string, gen func(p int) (map[string]any, string), got func(json.RawMessage)) rate {
	var (
		n, errs atomic.Int64
		mu      sync.Mutex
		lat     []time.Duration
		wg      sync.WaitGroup
		first   atomic.Value
	)
	deadline := time.Now().Add(dur)
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			p := i % len(tokens)
			c := newClient(d.api.url, tokens[p])
			var mine []time.Duration
			for time.Now().Before(deadline) {
				params, name := gen(p)
				if params == nil {
					break
				}
				t0 := time.Now()
				var res json.RawMessage
				var out any
				if got != nil {
					out = &res
				}
				err := c.send(method, params, name, version, out)
				mine = append(mine, time.Since(t0))
				if err == nil && got != nil {
					got(res)
				}
				n.Add(1)
				if err != nil {
					errs.Add(1)
					first.CompareAndSwap(nil, err.Error())
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	el := time.Since(start)
	if e := first.Load(); e != nil {
		log.Printf("%s: %d errors, the first: %s", method, errs.Load(), e)
	}
	slices.Sort(lat)
	r := rate{Ops: n.Load(), Errors: errs.Load(), PerSec: float64(n.Load()) / el.Seconds()}
	if len(lat) > 0 {
		r.P50Ms = msOf(lat[len(lat)/2])
		r.P99Ms = msOf(lat[len(lat)*99/100])
		r.P999Ms = msOf(lat[len(lat)*999/1000])
	}
	return r
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// gets measures tasks/get of random live tasks, each client's principal
// reading its own.
func (d *deployment) gets(clients int, dur time.Duration) rate {
	return d.load(d.tokens, clients, dur, "tasks/get", "2026-07-28", func(p int) (map[string]any, string) {
		id := d.fleet.random(p)
		return map[string]any{"taskId": id}, id
	}, nil)
}

// lists measures the first page of tasks/list (2025-11-25; the
// 2026-07-28 extension has none), each client listing its principal's
// tasks.
func (d *deployment) lists(clients int, dur time.Duration) rate {
	var pages, items atomic.Int64
	r := d.load(d.tokens, clients, dur, "tasks/list", "2025-11-25", func(int) (map[string]any, string) {
		return map[string]any{}, ""
	}, func(res json.RawMessage) {
		var page struct {
			Tasks []json.RawMessage `json:"tasks"`
		}
		if json.Unmarshal(res, &page) == nil {
			pages.Add(1)
			items.Add(int64(len(page.Tasks)))
		}
	})
	if n := pages.Load(); n > 0 {
		r.Items = float64(items.Load()) / float64(n)
	}
	return r
}

// creates measures tools/call creating slow_compute tasks (an hour's
// sleep), and records their ids for purging. The creators are principals
// of their own: their tasks never push the fleet's out of its principals'
// list indexes (bounded, the oldest go).
func (d *deployment) creates(clients int, dur time.Duration) rate {
	var mu sync.Mutex
	return d.load(d.creators, clients, dur, "tools/call", "2026-07-28", func(int) (map[string]any, string) {
		return map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 3600, "label": "bench"}}, "slow_compute"
	}, func(res json.RawMessage) {
		var t struct {
			TaskID string `json:"taskId"`
		}
		if json.Unmarshal(res, &t) == nil && t.TaskID != "" {
			mu.Lock()
			d.created = append(d.created, t.TaskID)
			mu.Unlock()
		}
	})
}

// workerSteps creates n 10-step batch_report tasks and measures steps/s
// until all completed, with the worker processes' and redis-server's CPU
// per step.
func (d *deployment) workerSteps(n int) (stepsPerSec, workerCPUUs, redisCPUUs float64) {
	c := newClient(d.api.url, d.creators[0])
	w0, r0 := d.worker.cpu(), d.redis.redisCPU()
	start := time.Now()
	ids := make([]string, 0, n)
	for range n {
		var t struct {
			TaskID string `json:"taskId"`
		}
		if err := c.call("tools/call", map[string]any{"name": "batch_report", "arguments": map[string]any{"steps": 10}}, "batch_report", &t); err != nil {
			log.Fatalf("worker steps: %v", err)
		}
		ids = append(ids, t.TaskID)
	}
	for _, id := range ids {
		d.waitStatus(c, id, "completed")
	}
	el := time.Since(start)
	w1, r1 := d.worker.cpu(), d.redis.redisCPU()
	d.created = append(d.created, ids...)
	steps := float64(10 * n)
	return steps / el.Seconds(), (w1 - w0) * 1e6 / steps, (r1 - r0) * 1e6 / steps
}

// waitStatus polls task id until it has status want.
func (d *deployment) waitStatus(c *client, id, want string) {
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Millisecond) {
		var t struct {
			Status string `json:"status"`
		}
		if err := c.call("tasks/get", map[string]any{"taskId": id}, id, &t); err != nil {
			log.Fatalf("polling %s: %v", id, err)
		}
		if t.Status == want {
			return
		}
		if time.Now().After(deadline) {
			log.Fatalf("task %s is %s after 2 minutes, want %s", id, t.Status, want)
		}
	}
}

// sweepCost is what a sweep costs.
type sweepCost struct {
	Examined int     `json:"examined"`
	Commands float64 `json:"commands"`
	WallMs   float64 `json:"wallMs"`
}

// idleSweeps is how many idle sweeps one measurement takes: one round trip
// each, about 0.1 ms, which one sample measures no better than the
// machine's scheduling noise.
const idleSweeps = 31

// sweep runs one sweep of the deployment (as the sweeper's cron does),
// after moving the due-index entries of due random live tasks into the
// past, and measures its commands and wall time; with due 0, idleSweeps
// idle sweeps, their median wall time and their commands per sweep.
func (d *deployment) sweep(ctx context.Context, due int) sweepCost {
	if due == 0 {
		walls := make([]float64, idleSweeps)
		var sum sweepCost
		for i := range walls {
			c := d.sweepOnce(ctx, 0)
			walls[i] = c.WallMs
			sum.Examined += c.Examined
			sum.Commands += c.Commands
		}
		slices.Sort(walls)
		return sweepCost{Examined: sum.Examined / idleSweeps, Commands: sum.Commands / idleSweeps, WallMs: walls[idleSweeps/2]}
	}
	return d.sweepOnce(ctx, due)
}

// sweepOnce is one sweep of sweep.
func (d *deployment) sweepOnce(ctx context.Context, due int) sweepCost {
	if due > 0 {
		past := float64(time.Now().Add(-time.Minute).UnixMilli())
		// Distinct tasks that have a due time (sleeping, or awaiting a
		// callback: a task waiting for input without a deadline has none
		// since b78572d), as many as the fleet has if that is fewer.
		seen := map[string]bool{}
		var ids []string
		for len(ids) < min(due, d.fleet.n*(mix[sleeping]+mix[awaiting])/(mix[sleeping]+mix[waiting]+mix[awaiting])) {
			p := randInt(len(d.tokens))
			k := sleeping
			if randInt(mix[sleeping]+mix[awaiting]) >= mix[sleeping] {
				k = awaiting
			}
			if len(d.fleet.ids[p][k]) == 0 {
				continue
			}
			if id := d.fleet.ids[p][k][randInt(len(d.fleet.ids[p][k]))]; !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		cmd := d.redis.c.B().Zadd().Key(d.prefix + "due").Xx().ScoreMember()
		for _, id := range ids {
			cmd = cmd.ScoreMember(past, id)
		}
		if err := d.redis.c.Do(ctx, cmd.Build()).Error(); err != nil {
			log.Fatal(err)
		}
	}
	before := d.redis.commandStats()
	t0 := time.Now()
	res, err := d.bundle.Sweep(ctx)
	wall := time.Since(t0)
	after := d.redis.commandStats()
	if err != nil {
		log.Fatalf("sweep: %v", err)
	}
	var cmds int64
	for name, v := range after {
		if name != "info" {
			cmds += v - before[name]
		}
	}
	return sweepCost{Examined: res.Examined, Commands: float64(cmds), WallMs: msOf(wall)}
}

// streams is what n concurrent task streams cost.
type streams struct {
	N            int     `json:"n"`
	Opened       int     `json:"opened"`
	OpenSeconds  float64 `json:"openSeconds"`
	RSSBeforeMiB float64 `json:"rssBeforeMiB"`
	RSSOpenMiB   float64 `json:"rssOpenMiB"`
	RSSAfterMiB  float64 `json:"rssAfterMiB"`
	// RedisClients is redis-server's connected_clients while the streams
	// are open, less before.
	RedisClients int64 `json:"redisClients"`
	// RedisBytes is used_memory while open, less before.
	RedisBytes int64 `json:"redisBytes"`
	// CPU while the n streams are held open and idle, in ms per second.
	ServerCPUMsPerSec float64 `json:"serverCpuMsPerSec"`
	RedisCPUMsPerSec  float64 `json:"redisCpuMsPerSec"`
	// NotifyMs is the time from a tasks/cancel of a watched task to its
	// stream's notification, with all the streams open.
	NotifyMs float64 `json:"notifyMs"`
}

// listen opens n subscriptions/listen streams at once (each on one live
// task of its principal, principals taking turns), holds them for hold,
// and measures what they cost the endpoint's process and redis-server.
func (d *deployment) listen(n int, hold time.Duration) streams {
	st := streams{N: n}
	runtime.GC()
	st.RSSBeforeMiB = d.api.rssMiB()
	clients0 := d.redis.intInfo("clients", "connected_clients")
	mem0 := d.redis.usedMemory()
	tr := &http.Transport{MaxConnsPerHost: n + 16, MaxIdleConnsPerHost: n + 16}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	ctx, cancel := context.WithCancel(context.Background())
	var opened sync.WaitGroup
	var ok atomic.Int64
	var failed atomic.Value
	notes := make([]chan struct{}, n)
	ids := make([]string, n)
	var done sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		p := i % len(d.tokens)
		ids[i] = d.fleet.random(p)
		notes[i] = make(chan struct{}, 16)
		opened.Add(1)
		done.Go(func() {
			once := sync.OnceFunc(opened.Done)
			defer once()
			c := &client{url: d.api.url, token: d.tokens[p]}
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i, "method": "subscriptions/listen", "params": map[string]any{
				"notifications": map[string]any{"taskIds": []string{ids[i]}},
				"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
					"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}},
			}})
			req, _ := http.NewRequestWithContext(ctx, "POST", d.api.url, bytes.NewReader(body))
			c.headers(req, "subscriptions/listen", "", "2026-07-28")
			resp, err := hc.Do(req)
			if err != nil {
				failed.CompareAndSwap(nil, err.Error())
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				failed.CompareAndSwap(nil, resp.Status)
				return
			}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			seen := 0
			for sc.Scan() {
				if !strings.HasPrefix(sc.Text(), "data: ") {
					continue
				}
				if seen++; seen == 2 { // the acknowledgement, then the task's state
					ok.Add(1)
					once()
				}
				if seen > 2 {
					select {
					case notes[i] <- struct{}{}:
					default:
					}
				}
			}
		})
	}
	opened.Wait()
	st.OpenSeconds = time.Since(t0).Seconds()
	st.Opened = int(ok.Load())
	if e := failed.Load(); e != nil || st.Opened < n {
		log.Printf("listen: %d of %d streams opened; the first failure: %v", st.Opened, n, e)
	}
	time.Sleep(500 * time.Millisecond)
	cpu0, rcpu0, h0 := d.api.cpu(), d.redis.redisCPU(), time.Now()
	time.Sleep(hold)
	cpu1, rcpu1, h1 := d.api.cpu(), d.redis.redisCPU(), time.Now()
	st.ServerCPUMsPerSec = (cpu1 - cpu0) * 1000 / h1.Sub(h0).Seconds()
	st.RedisCPUMsPerSec = (rcpu1 - rcpu0) * 1000 / h1.Sub(h0).Seconds()
	st.RSSOpenMiB = d.api.rssMiB()
	st.RedisClients = d.redis.intInfo("clients", "connected_clients") - clients0
	st.RedisBytes = d.redis.usedMemory() - mem0
	// One watched task changes: how soon does its stream hear of it?
	// (A status message through a commit would need a worker; a cancel is
	// a transition any client makes.) The cancelled task leaves the fleet.
	c := newClient(d.api.url, d.tokens[0])
	tc := time.Now()
	if err := c.call("tasks/cancel", map[string]any{"taskId": ids[0]}, ids[0], nil); err == nil {
		select {
		case <-notes[0]:
			st.NotifyMs = msOf(time.Since(tc))
		case <-time.After(5 * time.Second):
		}
	}
	d.fleet.drop(0, ids[0])
	d.created = append(d.created, ids[0])
	cancel()
	done.Wait()
	time.Sleep(time.Second)
	st.RSSAfterMiB = d.api.rssMiB()
	return st
}

// drop removes id from principal p's fleet.
func (fl *fleet) drop(p int, id string) {
	for k := range fl.ids[p] {
		if i := slices.Index(fl.ids[p][k], id); i >= 0 {
			fl.ids[p][k] = slices.Delete(fl.ids[p][k], i, i+1)
			fl.n--
			return
		}
	}
}

// memory is what the live tasks cost redis-server.
type memory struct {
	UsedMemory int64 `json:"usedMemory"`
	// PerTask is used_memory, less the empty deployment's, per live task.
	PerTask float64 `json:"perTask"`
	// ByKey is MEMORY USAGE per live task of each kind of key: a task's
	// own keys (by suffix, averaged over the kinds' mix) and the shared
	// sorted sets (whole, divided by the live tasks).
	ByKey map[string]float64 `json:"byKey"`
	// MainDict and Expires are the keyspace's hash tables (MEMORY STATS
	// overhead.hashtable.main and .expires) per live task.
	MainDict float64 `json:"mainDict"`
	Expires  float64 `json:"expires"`
	Keys     int64   `json:"keys"`
}

// taskSuffixes are the suffixes of a task's keys (see redisstore).
var taskSuffixes = []string{"", ":j", ":p", ":r", ":o", ":x", ":e", ":f1", ":a", ":m"}

// memoryOf measures the deployment's memory per live task, sampling
// samples tasks of each kind for the per-key figures.
func (d *deployment) memoryOf(ctx context.Context, samples int) memory {
	m := memory{UsedMemory: d.redis.usedMemory(), ByKey: map[string]float64{}}
	n := float64(d.fleet.n)
	m.PerTask = float64(m.UsedMemory-d.baseMemory) / n
	// A task's own keys: MEMORY USAGE by suffix, averaged per kind, then
	// weighted by the mix.
	total := 0
	for _, w := range mix {
		total += w
	}
	for k := range nKinds {
		if mix[k] == 0 {
			continue
		}
		weight := float64(mix[k]) / float64(total)
		sums := map[string]int64{}
		for i := range samples {
			p := i % len(d.tokens)
			ids := d.fleet.ids[p][k]
			id := ids[randInt(len(ids))]
			for _, suffix := range taskSuffixes {
				if b := d.redis.memoryUsage(d.prefix + "{" + id + "}" + suffix); b > 0 {
					sums["task"+suffix] += b
				}
			}
		}
		for s, v := range sums {
			m.ByKey[s] += weight * float64(v) / float64(samples)
		}
	}
	ix := d.indexes()
	for _, z := range ix.all() {
		m.ByKey[ix.name(d.prefix, z)] += float64(d.redis.memoryUsage(z)) / n
	}
	// MEMORY STATS is a map on RESP3 (rueidis's protocol).
	if stats, err := d.redis.c.Do(ctx, d.redis.c.B().MemoryStats().Build()).AsMap(); err == nil {
		if v, ok := stats["db.0"]; ok {
			db, _ := v.AsIntMap()
			m.MainDict = float64(db["overhead.hashtable.main"]) / n
			m.Expires = float64(db["overhead.hashtable.expires"]) / n
		}
	}
	m.Keys, _ = d.redis.c.Do(ctx, d.redis.c.B().Dbsize().Build()).AsInt64()
	return m
}

// drainWait bounds drained.
var drainWait = 10 * time.Second

// drained waits until the deployment's queue has nothing due and no task
// is leased (the worker parked or finished everything it was given).
func (d *deployment) drained(ctx context.Context) {
	for deadline := time.Now().Add(drainWait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		n, err := d.redis.c.Do(ctx, d.redis.c.B().Zcount().Key(d.prefix+"{queue}").Min("-inf").Max(strconv.FormatInt(time.Now().UnixMilli(), 10)).Build()).AsInt64()
		if err == nil && n == 0 {
			return
		}
	}
	due, _ := d.redis.c.Do(ctx, d.redis.c.B().Zrange().Key(d.prefix+"{queue}").Min("-inf").Max(strconv.FormatInt(time.Now().UnixMilli(), 10)).Byscore().Limit(0, 5).Withscores().Build()).AsZScores()
	log.Printf("the queue did not drain within 3 minutes: %v", due)
}

func fmtRatio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
