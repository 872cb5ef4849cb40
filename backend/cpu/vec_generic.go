//go:build !amd64 || purego

package cpu

// vecImpls is empty: the pure-Go twins do all the work.
var vecImpls []*vecImpl
