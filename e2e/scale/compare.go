package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// compare prints the runs of two variants side by side (-compare
// label=file,label=file,...: the runs of scripts/bench-scale-ab): at each
// size, each metric's median over a variant's runs (each run's value the
// median of its rounds on the growing deployment), every run's value, and
// the second variant's median over the first's.
func compare(spec string) error {
	var labels []string
	runs := map[string][]*Report{}
	for item := range strings.SplitSeq(spec, ",") {
		label, file, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("-compare: want label=file, got %q", item)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		var rep Report
		if err := json.Unmarshal(b, &rep); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if _, ok := runs[label]; !ok {
			labels = append(labels, label)
		}
		runs[label] = append(runs[label], &rep)
	}
	if len(labels) != 2 {
		return fmt.Errorf("-compare: want two variants, got %v", labels)
	}
	a, b := labels[0], labels[1]
	type metric struct {
		name string
		f    func(result) float64
		form string
	}
	rm := func(get func(result) pair[rate], v func(rate) float64) func(result) float64 {
		return func(r result) float64 { return median(get(r).Big, v) }
	}
	perSec := func(r rate) float64 { return r.PerSec }
	p50 := func(r rate) float64 { return r.P50Ms }
	p99 := func(r rate) float64 { return r.P99Ms }
	metrics := []metric{
		{"tasks/get rate (req/s)", rm(func(r result) pair[rate] { return r.Get }, perSec), "%.0f"},
		{"tasks/get p50 (ms)", rm(func(r result) pair[rate] { return r.Get }, p50), "%.2f"},
		{"tasks/get, 1 client: p50 (ms)", rm(func(r result) pair[rate] { return r.Get1 }, p50), "%.2f"},
		{"tools/call rate (req/s)", rm(func(r result) pair[rate] { return r.Create }, perSec), "%.0f"},
		{"tools/call p50 (ms)", rm(func(r result) pair[rate] { return r.Create }, p50), "%.2f"},
		{"tools/call, 1 client: p50 (ms)", rm(func(r result) pair[rate] { return r.Create1 }, p50), "%.2f"},
		{"tasks/list, 1 client: p50 (ms)", rm(func(r result) pair[rate] { return r.List1 }, p50), "%.2f"},
		{"tasks/get p99 (ms)", rm(func(r result) pair[rate] { return r.Get }, p99), "%.2f"},
		{"worker steps/s", func(r result) float64 { return median(r.Steps.Big, func(v [3]float64) float64 { return v[0] }) }, "%.0f"},
		{"redis-server CPU per step (µs)", func(r result) float64 { return median(r.Steps.Big, func(v [3]float64) float64 { return v[2] }) }, "%.0f"},
		{"sweep: wall per due entry (ms)", func(r result) float64 {
			return median(r.SweepDue.Big, func(s sweepCost) float64 { return s.WallMs / float64(max(s.Examined, 1)) })
		}, "%.3f"},
		{"sweep: commands per due entry", func(r result) float64 {
			return median(r.SweepDue.Big, func(s sweepCost) float64 { return s.Commands / float64(max(s.Examined, 1)) })
		}, "%.2f"},
		{"used_memory per live task (B)", func(r result) float64 { return r.Memory.PerTask }, "%.0f"},
	}
	sizes := map[int]int{}
	for _, l := range labels {
		for _, rep := range runs[l] {
			for _, r := range rep.Results {
				sizes[r.Size]++
			}
		}
	}
	var common []int
	for s, n := range sizes {
		if n == len(runs[a])+len(runs[b]) {
			common = append(common, s)
		}
	}
	slices.Sort(common)
	values := func(l string, size int, f func(result) float64) []float64 {
		var out []float64
		for _, rep := range runs[l] {
			for _, r := range rep.Results {
				if r.Size == size {
					out = append(out, f(r))
				}
			}
		}
		return out
	}
	fmt.Printf("\n%s (%d runs) against %s (%d runs), in turns; each value the median over a variant's runs (the runs in brackets)\n\n", b, len(runs[b]), a, len(runs[a]))
	fmt.Printf("| live tasks | metric | %s | %s | %s / %s |\n|---|---|---|---|---|\n", a, b, b, a)
	id := func(v float64) float64 { return v }
	for _, size := range common {
		for _, m := range metrics {
			va, vb := values(a, size, m.f), values(b, size, m.f)
			ma, mb := median(va, id), median(vb, id)
			if ma == 0 && mb == 0 {
				continue // not measured (-memory-only runs measure memory alone)
			}
			show := func(med float64, vs []float64) string {
				var each []string
				for _, v := range vs {
					each = append(each, fmt.Sprintf(m.form, v))
				}
				return fmt.Sprintf(m.form, med) + " (" + strings.Join(each, ", ") + ")"
			}
			fmt.Printf("| %s | %s | %s | %s | %s |\n", humanSize(size), m.name, show(ma, va), show(mb, vb), fmtRatio(mb, ma))
		}
	}
	return nil
}
