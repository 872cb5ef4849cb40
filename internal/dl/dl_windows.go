//go:build windows

package dl

import "syscall"

// Open loads the DLL at path. The libraries' searches list Linux sonames, so on
// Windows only a path given through their GAMP_LIB* variables can load.
func Open(path string) (uintptr, error) {
	h, err := syscall.LoadLibrary(path)
	return uintptr(h), err
}

// Sym returns the address of the procedure name in the DLL h.
func Sym(h uintptr, name string) (uintptr, error) {
	return syscall.GetProcAddress(syscall.Handle(h), name)
}
