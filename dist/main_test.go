package dist

import (
	"os"
	"testing"

	"github.com/gamp-ml/gamp/internal/testenv"
)

func TestMain(m *testing.M) {
	remove := func() {}
	if !isChild() {
		// mpirun's session directory, apart from other packages' (see PrivateTMPDIR).
		remove = testenv.PrivateTMPDIR()
	}
	code := m.Run()
	remove()
	os.Exit(code)
}
