package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The kernel cache: NVRTC output (CUBIN for the device's real architecture) kept on
// disk so a program compiles each kernel source once per machine, not once per run.

// cacheDir is GAMP_KERNEL_CACHE, else <user cache dir>/gamp/kernels, else a temp dir.
func cacheDir() string {
	if d := os.Getenv("GAMP_KERNEL_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "gamp", "kernels")
	}
	return filepath.Join(os.TempDir(), "gamp-kernels")
}

// cacheKey hashes everything that changes the compiled image: the compiler's version,
// the architecture, the options (sorted), the source and every header.
func cacheKey(compiler, arch string, opts []string, name, src string, headers map[string]string) string {
	h := sha256.New()
	o := append([]string(nil), opts...)
	sort.Strings(o)
	fmt.Fprintf(h, "compiler=%s\x00arch=%s\x00opts=%s\x00name=%s\x00", compiler, arch, strings.Join(o, "\x01"), name)
	h.Write([]byte(src))
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(h, "\x00header=%s\x00", k)
		h.Write([]byte(headers[k]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// cacheMagic starts every cache file; the image's SHA-256 follows it, then the image.
// The checksum keeps a torn or corrupted file (a killed write, a disk error, a file
// edited by hand) from ever reaching the driver's module loader, which is not
// written to parse hostile input. Rejected: trusting the loader to refuse bad bytes.
const cacheMagic = "GAMPKC1\n"

// encodeCacheEntry frames img for the cache file.
func encodeCacheEntry(img []byte) []byte {
	sum := sha256.Sum256(img)
	out := make([]byte, 0, len(cacheMagic)+len(sum)+len(img))
	out = append(out, cacheMagic...)
	out = append(out, sum[:]...)
	return append(out, img...)
}

// decodeCacheEntry returns the image framed in b, or false when b is not a whole,
// intact cache entry.
func decodeCacheEntry(b []byte) ([]byte, bool) {
	head := len(cacheMagic) + sha256.Size
	if len(b) <= head || string(b[:len(cacheMagic)]) != cacheMagic {
		return nil, false
	}
	img := b[head:]
	sum := sha256.Sum256(img)
	if string(sum[:]) != string(b[len(cacheMagic):head]) {
		return nil, false
	}
	return img, true
}

// readCacheFile reads a cache entry; anything but a regular file (a FIFO would block
// the read forever) counts as absent.
func readCacheFile(path string) ([]byte, bool) {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	return decodeCacheEntry(b)
}

// cachedCompile returns the image for key from dir, or compiles it and stores it
// atomically (temp file, then rename). A cache entry that is not intact, or that load
// rejects, is deleted and compiled again, so a corrupt file never wedges a program.
func cachedCompile(dir, key string, compile func() ([]byte, error), load func([]byte) error) error {
	path := filepath.Join(dir, key+".cubin")
	if img, ok := readCacheFile(path); ok {
		if err := load(img); err == nil {
			return nil
		}
	}
	if _, err := os.Lstat(path); err == nil {
		_ = os.Remove(path)
	}
	img, err := compile()
	if err != nil {
		return err
	}
	if err := load(img); err != nil {
		return err
	}
	// A cache that cannot be written is not an error: the next run compiles again.
	if err := os.MkdirAll(dir, 0o755); err == nil {
		if f, err := os.CreateTemp(dir, key+".*.tmp"); err == nil {
			_, werr := f.Write(encodeCacheEntry(img))
			cerr := f.Close()
			if werr == nil && cerr == nil {
				if os.Rename(f.Name(), path) != nil {
					_ = os.Remove(f.Name())
				}
			} else {
				_ = os.Remove(f.Name())
			}
		}
	}
	return nil
}
