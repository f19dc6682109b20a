package awslambda

import "testing"

// The bundle is built before asking for an event only when Lambda may
// freeze the sandbox between its initialisation and its first event.
func TestAheadOfEvents(t *testing.T) {
	for initType, want := range map[string]bool{
		"":                         false, // not on Lambda (the emulator, tests)
		"on-demand":                false,
		"provisioned-concurrency":  true,
		"snap-start":               true,
		"lambda-managed-instances": true,
	} {
		if got := aheadOfEvents(initType); got != want {
			t.Errorf("aheadOfEvents(%q) = %v, want %v", initType, got, want)
		}
	}
}
