//go:build !unix

package nn

import (
	"os"
	"time"
)

// staleAfterNoLock is how long a temporary file must lie untouched to count as
// abandoned where there is no flock.
const staleAfterNoLock = time.Hour

func lockTemp(*os.File) {}

// removeIfAbandoned removes path when it was not written for staleAfterNoLock.
func removeIfAbandoned(path string, mod time.Time) {
	if time.Since(mod) >= staleAfterNoLock {
		os.Remove(path)
	}
}
