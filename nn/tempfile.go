package nn

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Saves write to ".<name>.tmp-<random>" next to the target and rename it into place. A
// save killed before the rename leaves that file behind; the next save of the same
// target removes such leftovers, recognised by their name and by nobody holding them:
// a save holds an exclusive lock on its temporary file while writing (flock on Unix;
// elsewhere a file untouched for staleAfterNoLock counts as abandoned).

// tempPrefix is the name prefix of the temporary files of saves to base.
func tempPrefix(base string) string { return "." + base + ".tmp-" }

// minStaleAge protects a temporary file in the instant between its creation and its
// lock: a younger one is never removed.
const minStaleAge = 10 * time.Second

// removeStaleTemps removes the abandoned temporary files of saves to dir/base. Errors
// are ignored: cleaning is a courtesy, never a reason for a save to fail.
func removeStaleTemps(dir, base string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := tempPrefix(base)
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < minStaleAge {
			continue
		}
		removeIfAbandoned(filepath.Join(dir, e.Name()), info.ModTime())
	}
}
