package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCacheKeyCoversEveryInput(t *testing.T) {
	base := cacheKey("nvrtc 13.0", "sm_90", []string{"-a", "-b"}, "k.cu", "src", map[string]string{"h.cuh": "x"})
	if base != cacheKey("nvrtc 13.0", "sm_90", []string{"-b", "-a"}, "k.cu", "src", map[string]string{"h.cuh": "x"}) {
		t.Fatal("option order changed the key")
	}
	for name, k := range map[string]string{
		"compiler": cacheKey("nvrtc 12.8", "sm_90", []string{"-a", "-b"}, "k.cu", "src", map[string]string{"h.cuh": "x"}),
		"arch":     cacheKey("nvrtc 13.0", "sm_80", []string{"-a", "-b"}, "k.cu", "src", map[string]string{"h.cuh": "x"}),
		"opts":     cacheKey("nvrtc 13.0", "sm_90", []string{"-a"}, "k.cu", "src", map[string]string{"h.cuh": "x"}),
		"name":     cacheKey("nvrtc 13.0", "sm_90", []string{"-a", "-b"}, "j.cu", "src", map[string]string{"h.cuh": "x"}),
		"source":   cacheKey("nvrtc 13.0", "sm_90", []string{"-a", "-b"}, "k.cu", "src2", map[string]string{"h.cuh": "x"}),
		"header":   cacheKey("nvrtc 13.0", "sm_90", []string{"-a", "-b"}, "k.cu", "src", map[string]string{"h.cuh": "y"}),
		"hdrname":  cacheKey("nvrtc 13.0", "sm_90", []string{"-a", "-b"}, "k.cu", "src", map[string]string{"g.cuh": "x"}),
	} {
		if k == base {
			t.Errorf("changing the %s did not change the key", name)
		}
	}
}

func TestCachedCompile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	compiles := 0
	compile := func() ([]byte, error) { compiles++; return []byte("IMAGE"), nil }
	var loaded []string
	load := func(img []byte) error {
		loaded = append(loaded, string(img))
		if string(img) != "IMAGE" {
			return errors.New("bad image")
		}
		return nil
	}
	if err := cachedCompile(dir, "k1", compile, load); err != nil {
		t.Fatal(err)
	}
	if err := cachedCompile(dir, "k1", compile, load); err != nil {
		t.Fatal(err)
	}
	if compiles != 1 {
		t.Fatalf("compiled %d times, want 1 (second call should hit the cache)", compiles)
	}
	// A corrupt entry is deleted and recompiled.
	if err := os.WriteFile(filepath.Join(dir, "k1.cubin"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cachedCompile(dir, "k1", compile, load); err != nil {
		t.Fatal(err)
	}
	if compiles != 2 {
		t.Fatalf("corrupt entry: compiled %d times, want 2", compiles)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "k1.cubin"))
	if img, ok := decodeCacheEntry(raw); !ok || string(img) != "IMAGE" {
		t.Fatalf("cache holds %q after recompiling", raw)
	}
	// A compile error is returned and nothing is cached.
	bad := func() ([]byte, error) { return nil, errors.New("nvrtc: syntax error") }
	if err := cachedCompile(dir, "k2", bad, load); err == nil {
		t.Fatal("compile error not returned")
	}
	if _, err := os.Stat(filepath.Join(dir, "k2.cubin")); !os.IsNotExist(err) {
		t.Fatal("failed compile left a cache entry")
	}
	// No temp files left behind.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".tmp" {
			t.Fatalf("temp file %s left in the cache", e.Name())
		}
	}
	// An unwritable cache directory is not an error.
	ro := filepath.Join(t.TempDir(), "file")
	os.WriteFile(ro, nil, 0o644)
	if err := cachedCompile(filepath.Join(ro, "sub"), "k3", compile, load); err != nil {
		t.Fatalf("unwritable cache: %v", err)
	}
}
