package dashboard

import (
	"context"
	"time"

	"github.com/mcptasks/mcptasks/pkg/bundle"
)

// Start serves the dashboard of b's tasks server on addr (the token, if
// any, from MCPTASKS_DASHBOARD_TOKEN through getenv) until stop is called
// or ctx ends; stop returns once the server has stopped. It refuses an
// address that is not loopback without a token ([ErrNotLoopback]).
func Start(ctx context.Context, b *bundle.Bundle, addr string, getenv func(string) string) (stop func(), err error) {
	token := getenv(EnvToken)
	h, err := New(b.Tasks, &Options{Token: token, Logger: b.Log(), Now: b.Tasks.Options().Now})
	if err != nil {
		return nil, err
	}
	ln, err := Listen(addr, token)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := Serve(ctx, ln, h, b.Log()); err != nil {
			b.Log().Error("dashboard stopped", "err", err)
		}
	}()
	u := "http://" + ln.Addr().String() + "/"
	if token != "" {
		u += "?token=…"
	}
	b.Log().Info("dashboard listening", "url", u, "token", token != "")
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	}, nil
}
