//go:build unix

package dl

import "github.com/ebitengine/purego"

// Open loads the shared library at path with RTLD_NOW|RTLD_GLOBAL: a library loaded
// later that looks symbols up globally finds this copy.
func Open(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// Sym returns the address of the symbol name in the library h.
func Sym(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }
