package cli

import (
	"os"
	"runtime/pprof"
)

// Profiled returns run's results, with a Go CPU profile of it written to file (a
// command's -cpuprofile) when file is not empty. An error creating or writing the
// profile is returned when run itself succeeded.
func Profiled[T any](file string, run func() (T, error)) (T, error) {
	if file == "" {
		return run()
	}
	f, err := os.Create(file)
	if err != nil {
		var zero T
		return zero, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		var zero T
		return zero, err
	}
	v, err := run()
	pprof.StopCPUProfile()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return v, err
}
