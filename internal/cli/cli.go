// Package cli holds what gamp's commands (examples/fashion, examples/chargpt,
// examples/parallel, cmd/ampbench, cmd/overflowcheck) share so that they behave alike:
// one exit status for usage errors, output paths checked before the work starts,
// progress redrawn only on a terminal.
//
//	if err := cli.CheckWritable(path); err != nil { return cli.Usagef("-save %s: %v", path, err) }
//	os.Exit(cli.ExitStatus(run(o)))
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// UsageError is a bad command line: a flag value, a missing or extra argument.
// Commands exit with status 2 for it, as the flag package does.
type UsageError struct{ Msg string }

// Error returns the message.
func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// ExitStatus is the exit status for err: 0 for nil, 2 when err is (or wraps) a
// *UsageError, 1 otherwise.
func ExitStatus(err error) int {
	if err == nil {
		return 0
	}
	var u *UsageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// Report writes err to w, each line prefixed with the command's name, and returns the
// exit status for it: 0 for nil or flag.ErrHelp (the usage was printed), 2 for a usage
// error, 1 otherwise.
func Report(w io.Writer, name string, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(w, "%s: %s\n", name, line)
	}
	return ExitStatus(err)
}

// CheckWritable reports whether a file can be created at path (replacing what is
// there) by creating and removing a temporary file in its directory — what an atomic
// save (temp file, then rename) will do. Commands call it before a long run, so a bad
// output path fails in a second rather than after the work.
func CheckWritable(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return errors.New("is a directory; give a file name")
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".gamp-write-check-*")
	if err != nil {
		return fmt.Errorf("cannot write there: %w", err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// CheckReadableFile reports whether path names a regular file: a FIFO or a device
// would block or stream forever when read as a state file.
func CheckReadableFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	return nil
}

// IsTerminal reports whether f is a character device (a terminal): the only place a
// progress line redrawn with \r reads well. Files and pipes get plain lines.
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
