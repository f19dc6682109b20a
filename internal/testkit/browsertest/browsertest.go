// Package browsertest drives a real headless Chromium from a Go test over
// the Chrome DevTools Protocol (CDP), with nothing but the standard
// library: it starts Debian's chromium with a fresh profile and
// --remote-debugging-port=0, opens a page target, and speaks CDP over the
// target's WebSocket with the minimal client in websocket.go.
//
// A missing chromium skips the test, except under CI (the CI environment
// variable is set), where it fails it: .ci/run installs the package.
//
// What a test does with a page: Navigate, Eval (a JavaScript expression,
// its value as JSON; promises awaited), WaitFor (until an expression is
// true, with a deadline), Screenshot (a PNG).
package browsertest

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// EnvChromium names the browser binary to run instead of the first of
// chromium, chromium-browser on PATH.
const EnvChromium = "CHROMIUM"

// Browser is a running headless Chromium.
type Browser struct {
	devtools string // http://127.0.0.1:PORT
}

// Start runs a headless Chromium for tb, stopped when tb ends.
func Start(tb testing.TB) *Browser {
	tb.Helper()
	bin := os.Getenv(EnvChromium)
	if bin == "" {
		for _, name := range []string{"chromium", "chromium-browser"} {
			if p, err := exec.LookPath(name); err == nil {
				bin = p
				break
			}
		}
	}
	if bin == "" {
		msg := "chromium not found on PATH (install it: apt-get install -y chromium, or set " + EnvChromium + ")"
		if os.Getenv("CI") != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	// The profile is removed once every process of the browser is gone
	// (tb.TempDir's removal could race a renderer still writing).
	profile, err := os.MkdirTemp("", "browsertest-")
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--disable-default-apps", "--no-first-run", "--no-default-browser-check", "--mute-audio",
		"--user-data-dir="+profile, "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
		"--window-size=1280,900", "about:blank")
	ownGroup(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", bin, err)
	}
	var logMu sync.Mutex
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			if log.Len() < 1<<16 {
				log.WriteString(sc.Text() + "\n")
			}
			logMu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		killGroup(cmd)
		_ = cmd.Wait()
		for i := 0; os.RemoveAll(profile) != nil && i < 50; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	// Chromium writes its port to DevToolsActivePort in the profile.
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(profile, "DevToolsActivePort"))
		if err == nil {
			if port, _, ok := strings.Cut(string(b), "\n"); ok && port != "" {
				return &Browser{devtools: "http://127.0.0.1:" + port}
			}
		}
		if time.Now().After(deadline) {
			logMu.Lock()
			defer logMu.Unlock()
			tb.Fatalf("chromium did not open its DevTools port within 30s; its log:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Page is one browser tab.
type Page struct {
	tb testing.TB
	ws *wsConn

	next    atomic.Int64
	mu      sync.Mutex
	waiting map[int64]chan reply
	closed  chan struct{}
	err     error
}

type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// NewPage opens a tab, closed when tb ends.
func (b *Browser) NewPage(tb testing.TB) *Page {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, b.devtools+"/json/new?about:blank", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("opening a tab: %v", err)
	}
	defer resp.Body.Close()
	var target struct {
		ID    string `json:"id"`
		WSURL string `json:"webSocketDebuggerUrl"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&target); err != nil || target.WSURL == "" {
		tb.Fatalf("opening a tab: %v (status %s)", err, resp.Status)
	}
	ws, err := dialWS(ctx, target.WSURL)
	if err != nil {
		tb.Fatalf("connecting to the tab: %v", err)
	}
	p := &Page{tb: tb, ws: ws, waiting: map[int64]chan reply{}, closed: make(chan struct{})}
	go p.read()
	tb.Cleanup(func() {
		ws.Close()
		<-p.closed
		if r, err := http.Get(b.devtools + "/json/close/" + target.ID); err == nil {
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
	})
	p.Call("Page.enable", nil)
	p.Call("Runtime.enable", nil)
	return p
}

// read dispatches the replies of the tab's WebSocket to their callers;
// events are dropped.
func (p *Page) read() {
	defer close(p.closed)
	for {
		msg, err := p.ws.ReadMessage()
		if err != nil {
			p.mu.Lock()
			p.err = err
			for id, ch := range p.waiting {
				close(ch)
				delete(p.waiting, id)
			}
			p.mu.Unlock()
			return
		}
		var m struct {
			ID *int64 `json:"id"`
			reply
		}
		if json.Unmarshal(msg, &m) != nil || m.ID == nil {
			continue
		}
		p.mu.Lock()
		ch := p.waiting[*m.ID]
		delete(p.waiting, *m.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- m.reply
		}
	}
}

// Call sends the CDP command method with params and returns its result;
// an error answer or a closed tab fails the test. Every call has a 30s
// deadline.
func (p *Page) Call(method string, params any) json.RawMessage {
	p.tb.Helper()
	res, err := p.call(method, params)
	if err != nil {
		p.tb.Fatal(err)
	}
	return res
}

func (p *Page) call(method string, params any) (json.RawMessage, error) {
	id := p.next.Add(1)
	ch := make(chan reply, 1)
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return nil, fmt.Errorf("CDP %s: the tab is gone: %w", method, p.err)
	}
	p.waiting[id] = ch
	p.mu.Unlock()
	msg, _ := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err := p.ws.WriteMessage(msg); err != nil {
		return nil, fmt.Errorf("CDP %s: %w", method, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("CDP %s: the tab closed", method)
		}
		if r.Error != nil {
			return nil, fmt.Errorf("CDP %s: %d %s", method, r.Error.Code, r.Error.Message)
		}
		return r.Result, nil
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("CDP %s: no answer within 30s", method)
	}
}

// Navigate loads url and waits until the document has loaded.
func (p *Page) Navigate(url string) {
	p.tb.Helper()
	res := p.Call("Page.navigate", map[string]any{"url": url})
	var r struct {
		ErrorText string `json:"errorText"`
	}
	_ = json.Unmarshal(res, &r)
	if r.ErrorText != "" {
		p.tb.Fatalf("navigating to %s: %s", url, r.ErrorText)
	}
	p.WaitFor(`document.readyState === "complete" && location.href !== "about:blank"`, 30*time.Second)
}

// Eval evaluates the JavaScript expression js in the page (awaiting a
// promise) and returns its value as JSON; an exception fails the test.
func (p *Page) Eval(js string) json.RawMessage {
	p.tb.Helper()
	v, err := p.eval(js)
	if err != nil {
		p.tb.Fatal(err)
	}
	return v
}

func (p *Page) eval(js string) (json.RawMessage, error) {
	res, err := p.call("Runtime.evaluate", map[string]any{"expression": js, "returnByValue": true, "awaitPromise": true})
	if err != nil {
		return nil, err
	}
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("evaluating %s: %w", js, err)
	}
	if r.Exception != nil {
		return nil, fmt.Errorf("evaluating %s: %s %s", js, r.Exception.Text, r.Exception.Exception.Description)
	}
	return r.Result.Value, nil
}

// String evaluates js to a string.
func (p *Page) String(js string) string {
	p.tb.Helper()
	var s string
	if err := json.Unmarshal(p.Eval(js), &s); err != nil {
		p.tb.Fatalf("evaluating %s: not a string: %v", js, err)
	}
	return s
}

// ErrTimeout is what WaitFor reports when its condition stays false.
var ErrTimeout = errors.New("condition still false")

// WaitFor waits until the JavaScript expression cond is true in the page
// (re-evaluated every 50ms; a navigation in between is ridden out), at
// most timeout; then it fails the test with the page's text.
func (p *Page) WaitFor(cond string, timeout time.Duration) {
	p.tb.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		v, err := p.eval("!!(" + cond + ")")
		if err == nil && string(v) == "true" {
			return
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			text, _ := p.eval("document.body ? document.body.innerText : ''")
			p.tb.Fatalf("waited %s for %s (%v, last error %v); the page shows:\n%s", timeout, cond, ErrTimeout, last, text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Screenshot writes a PNG of the whole page to path.
func (p *Page) Screenshot(path string) {
	p.tb.Helper()
	res := p.Call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true})
	var r struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		p.tb.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		p.tb.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		p.tb.Fatal(err)
	}
}
