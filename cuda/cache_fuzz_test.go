package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzKernelCacheReader puts arbitrary bytes where a cache entry belongs. Whatever they
// are, the loader only ever sees the image the compiler produced (or an intact entry
// framing exactly it), cachedCompile succeeds, and the cache then holds a valid entry.
func FuzzKernelCacheReader(f *testing.F) {
	good := []byte("\x7fELF-IMAGE")
	f.Add([]byte{})
	f.Add([]byte("garbage"))
	f.Add(good)
	f.Add(encodeCacheEntry(good))
	f.Add(encodeCacheEntry([]byte("\x7fELF-OTHER")))
	f.Add(encodeCacheEntry(good)[:len(cacheMagic)+10])
	torn := encodeCacheEntry(good)
	f.Add(torn[:len(torn)-1])
	f.Fuzz(func(t *testing.T, content []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "k.cubin"), content, 0o644); err != nil {
			t.Fatal(err)
		}
		compile := func() ([]byte, error) { return good, nil }
		load := func(img []byte) error {
			if string(img) == string(good) {
				return nil
			}
			if img2, ok := decodeCacheEntry(content); ok && string(img2) == string(img) {
				return errors.New("a well-framed entry of another image: the loader refuses it")
			}
			t.Fatalf("the loader was handed %q, which no compile produced", img)
			return nil
		}
		if err := cachedCompile(dir, "k", compile, load); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "k.cubin"))
		if err != nil {
			t.Fatal(err)
		}
		if img, ok := decodeCacheEntry(raw); !ok || string(img) != string(good) {
			t.Fatalf("cache holds %q after the call", raw)
		}
	})
}
