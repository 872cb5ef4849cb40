// Command skipreport prints, at the end of make test, every check the run skipped and
// why, from the skip log the tests wrote through internal/testenv:
//
//	go run ./internal/testenv/skipreport "$GAMP_SKIP_LOG"
package main

import (
	"fmt"
	"os"

	"github.com/gamp-ml/gamp/internal/testenv"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: skipreport SKIP_LOG")
		os.Exit(2)
	}
	entries, err := testenv.ReadLog(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "skipreport:", err)
		os.Exit(1)
	}
	testenv.Report(os.Stdout, entries)
}
