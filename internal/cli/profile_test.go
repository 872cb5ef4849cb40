package cli

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestProfiled checks that Profiled returns run's results, writes a non-empty profile
// where asked, none otherwise, and reports a profile it cannot create without running.
func TestProfiled(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cpu.prof")
	v, err := Profiled(file, func() (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Fatalf("Profiled = %d, %v; want 7, nil", v, err)
	}
	if st, err := os.Stat(file); err != nil || st.Size() == 0 {
		t.Fatalf("profile %s: %v (size %v)", file, err, st)
	}
	boom := errors.New("boom")
	if _, err := Profiled("", func() (int, error) { return 0, boom }); err != boom {
		t.Fatalf("without a file: err %v, want run's", err)
	}
	ran := false
	if _, err := Profiled(filepath.Join(dir, "missing", "cpu.prof"), func() (int, error) { ran = true; return 1, nil }); err == nil || ran {
		t.Fatalf("uncreatable profile: err %v, ran %v; want an error before running", err, ran)
	}
}
