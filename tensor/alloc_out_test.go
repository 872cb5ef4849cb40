package tensor

import (
	"os"
	"os/exec"
	"testing"
)

// poisonEnv makes the CPU backend fill the storage allocOut takes (AllocUninit) with
// NaN bytes instead of leaving what its cache held.
const poisonEnv = "GAMP_CPU_POISON_UNINIT"

// TestAllocOutPoisoned reruns this package's tests with poisoned uninitialised storage,
// so an op that uses allocOut but leaves part of its output unwritten fails them.
func TestAllocOutPoisoned(t *testing.T) {
	if testing.Short() || os.Getenv(poisonEnv) != "" {
		t.Skip("runs the package's tests again")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^Test", "-test.skip", "^TestAllocOutPoisoned$")
	cmd.Env = append(os.Environ(), poisonEnv+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tests with %s=1: %v\n%s", poisonEnv, err, out)
	}
}
