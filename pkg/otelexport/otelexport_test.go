package otelexport

import (
	"context"
	"testing"

	"github.com/mcptasks/mcptasks/pkg/tasks"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Off unless asked for; each variable turns on its own signal; a value
// autoexport does not know is an error, not silence.
func TestFromEnv(t *testing.T) {
	ctx := context.Background()
	for _, vars := range []map[string]string{
		{},
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"},
		{"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"},
	} {
		tel, err := fromEnv(ctx, env(vars))
		if tel != nil || err != nil {
			t.Errorf("%v: %+v, %v; want no telemetry", vars, tel, err)
		}
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	tel, err := fromEnv(ctx, env(map[string]string{"OTEL_TRACES_EXPORTER": "console"}))
	if err != nil || tel == nil || tel.TracerProvider == nil || tel.MeterProvider != nil || tel.ForceFlush == nil || tel.Shutdown == nil {
		t.Fatalf("traces on: %+v, %v", tel, err)
	}
	if err := tel.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
	if tel, err := fromEnv(ctx, env(map[string]string{"OTEL_TRACES_EXPORTER": "carrier-pigeon"})); err == nil {
		t.Errorf("an unknown exporter: %+v, want an error", tel)
	}
}

// Apps copies: the apps given keep their own Telemetry.
func TestApps(t *testing.T) {
	a := &tasks.App{Name: "a"}
	got := Apps(a)
	if len(got) != 1 || got[0] == a || got[0].Name != "a" || got[0].Telemetry == nil || a.Telemetry != nil {
		t.Errorf("Apps: %+v (original %+v)", got, a)
	}
}
