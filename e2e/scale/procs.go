package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// proc is a process the driver started.
type proc struct {
	cmd  *exec.Cmd
	url  string // the MCP endpoint, for `serve`
	done chan struct{}
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startProc starts bin with args in env; a `serve` listens on addr and is
// returned once it answers /healthz.
func startProc(bin string, env []string, addr string, args ...string) (*proc, error) {
	if args[0] == "serve" {
		args = append(args, "--addr", addr)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	if args[0] != "serve" {
		return p, nil
	}
	p.url = "http://" + addr + "/mcp"
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			return p, nil
		}
	}
	p.stop()
	return nil, errors.New("mcptasks did not start")
}

func (p *proc) stop() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// rssMiB is the process's resident set.
func (p *proc) rssMiB() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// cpu is the process's user+system CPU seconds so far (/proc/PID/stat).
func (p *proc) cpu() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100 // USER_HZ
}

// redisServer is the run's redis-server and the driver's own client of it.
type redisServer struct {
	*proc
	addr string
	c    rueidis.Client
}

func startRedis(dir string) (*redisServer, error) {
	addr := freeAddr()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server (apt-get install -y redis-server): %w", err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
			if err != nil {
				p.stop()
				return nil, err
			}
			return &redisServer{proc: p, addr: addr, c: c}, nil
		}
	}
	p.stop()
	return nil, errors.New("redis-server did not start")
}

func (r *redisServer) close() {
	r.c.Close()
	r.stop()
}

// info returns the fields of INFO section.
func (r *redisServer) info(section string) map[string]string {
	s, err := r.c.Do(context.Background(), r.c.B().Info().Section(section).Build()).ToString()
	if err != nil {
		log.Fatalf("INFO %s: %v", section, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

func (r *redisServer) intInfo(section, field string) int64 {
	n, _ := strconv.ParseInt(r.info(section)[field], 10, 64)
	return n
}

func (r *redisServer) usedMemory() int64 { return r.intInfo("memory", "used_memory") }

// redisCPU is redis-server's used CPU seconds (INFO cpu).
func (r *redisServer) redisCPU() float64 {
	m := r.info("cpu")
	u, _ := strconv.ParseFloat(m["used_cpu_user"], 64)
	s, _ := strconv.ParseFloat(m["used_cpu_sys"], 64)
	return u + s
}

// commandStats is the calls of each command so far (INFO commandstats).
func (r *redisServer) commandStats() map[string]int64 {
	out := map[string]int64{}
	for k, v := range r.info("commandstats") {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		out[name], _ = strconv.ParseInt(calls, 10, 64)
	}
	return out
}

// commandUsec is the microseconds spent in each command so far (INFO
// commandstats usec; a script's inner commands count in it and in their
// own).
func (r *redisServer) commandUsec() map[string]int64 {
	out := map[string]int64{}
	for k, v := range r.info("commandstats") {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		for f := range strings.SplitSeq(v, ",") {
			if u, ok := strings.CutPrefix(f, "usec="); ok {
				out[name], _ = strconv.ParseInt(u, 10, 64)
			}
		}
	}
	return out
}

// memoryUsage is MEMORY USAGE of key with every element counted (0 for
// a missing key).
func (r *redisServer) memoryUsage(key string) int64 {
	n, _ := r.c.Do(context.Background(), r.c.B().MemoryUsage().Key(key).Samples(0).Build()).AsInt64()
	return n
}

// client is a keep-alive client of the 2026-07-28 wire (or of 2025-11-25
// for tasks/list) for one principal's bearer token.
type client struct {
	url, token string
	hc         *http.Client
	id         int
}

var transport = &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256, IdleConnTimeout: time.Minute}
var httpClient = &http.Client{Transport: transport, Timeout: 60 * time.Second}

func newClient(url, token string) *client { return &client{url: url, token: token, hc: httpClient} }

// call sends one request and decodes its result into out (when non-nil).
func (c *client) call(method string, params map[string]any, name string, out any) error {
	return c.send(method, params, name, "2026-07-28", out)
}

func (c *client) send(method string, params map[string]any, name, version string, out any) error {
	c.id++
	if params == nil {
		params = map[string]any{}
	}
	if version == "2026-07-28" {
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion": version,
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{},
				"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
		}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	req, _ := http.NewRequest("POST", c.url, bytes.NewReader(body))
	c.headers(req, method, name, version)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if i := bytes.Index(raw, []byte("data: ")); i >= 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw = raw[i+6:]
		if j := bytes.IndexByte(raw, '\n'); j >= 0 {
			raw = raw[:j]
		}
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		return fmt.Errorf("HTTP %d: %q", resp.StatusCode, raw)
	}
	if msg.Error != nil {
		return fmt.Errorf("%s: %d %s", method, msg.Error.Code, msg.Error.Message)
	}
	if out != nil {
		return json.Unmarshal(msg.Result, out)
	}
	return nil
}

func (c *client) headers(req *http.Request, method, name, version string) {
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", version)
	req.Header.Set("Authorization", "Bearer "+c.token)
	if version == "2026-07-28" {
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	}
}
