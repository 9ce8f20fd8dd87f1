package faults

import (
	"strings"
	"testing"
)

func TestVerdict(t *testing.T) {
	ok := &Report{Target: "a", Fault: "cut"}
	unsound := &Report{Target: "b", Fault: "pause", Lost: 2}
	problem := &Report{Target: "c", Fault: "restart", Problems: []string{"a goroutine left"}}
	for _, tc := range []struct {
		reps []*Report
		want string
	}{
		{nil, "no run completed"},
		{[]*Report{ok}, "the run sound"},
		{[]*Report{ok, ok}, "all 2 runs sound"},
		{[]*Report{ok, problem}, "every run sound, but 1 of 2 had problems (listed above): c under restart"},
		{[]*Report{ok, unsound, problem}, "1 of 3 runs UNSOUND (units oversold, lost or duplicated): b under pause"},
	} {
		got := Verdict(tc.reps)
		if !strings.HasPrefix(got, "audit: ") || !strings.Contains(got, tc.want) || strings.Contains(got, "\n") {
			t.Errorf("Verdict = %q, want one line with %q", got, tc.want)
		}
	}
}

func TestVoterDesc_namesTheVoter(t *testing.T) {
	got := VoterDesc("redlock", "Redis", 2, "127.0.0.1:7002")
	if want := "redlock: voter 2 of 3, Redis at 127.0.0.1:7002 (no persistence, not struck)"; got != want {
		t.Errorf("VoterDesc = %q, want %q", got, want)
	}
}
