// Package dl loads shared libraries and finds their symbols at run time without cgo:
// dlopen/dlsym through purego on Unix, LoadLibrary/GetProcAddress on Windows. The CUDA
// backend (libcuda, NVRTC, cuBLAS, NVML) and dist (MPI, NCCL) bind their C functions
// with it, so every package builds on every OS and a missing library is an error at run
// time, not a link failure.
package dl
