// Package cuda is gamp's CUDA backend. It binds the driver API, NVRTC, cuBLAS and NVML
// at run time with purego, so a program built with CGO_ENABLED=0 and no CUDA toolkit
// runs on a laptop without a GPU (Available is false, Reason says why) and on an H100.
//
// Importing the package registers it for backend.KindCUDA; tensor imports it, so
// tensor.OpenDevice("cuda:0") and tensor.BestDevice find the GPU when one is present.
//
// Each device has one worker goroutine locked to an OS thread on which the device's
// primary context is current; every driver call for the device runs there, and every
// kernel, copy and GEMM is queued on the device's compute stream in call order. Calls
// that return nothing are handed to the worker without waiting; a driver error in such
// work is re-raised by the next call on the device (CUDA errors are sticky). Side
// streams (Backend.NewStream), events (Backend.NewEvent, Elapsed), pinned host buffers
// (Backend.NewPinned) and asynchronous copies (CopyToDeviceAsync, CopyToHostAsync)
// let copies overlap with compute, ordered by events as in PyTorch.
//
// Memory comes from a caching allocator in the spirit of PyTorch's (512-byte rounding,
// small and large pools, block splitting and coalescing, per-stream reuse, free-and-retry
// once on out of memory) with the statistics every gamp backend keeps: MemoryStats,
// backend.MemorySummary, EmptyCache, SetMemoryLimit, and *backend.OOMError (errors.Is
// backend.ErrOutOfMemory) when the device is full. Utilization and ShowUtilization
// read NVML.
//
// Kernels come from package kernels: header-free .cu sources compiled by NVRTC for the
// device's real architecture into CUBIN and cached on disk (GAMP_KERNEL_CACHE, default
// the user cache directory), keyed by NVRTC version, architecture, options and source.
// GEMMs run on cuBLAS (GemmEx, GemmStridedBatchedEx) with FP32 accumulation for half
// inputs; SetBenchmark turns on per-shape autotuning like cudnn.benchmark.
//
// Environment: GAMP_CUDA_LIBDIR and GAMP_LIBCUDA, GAMP_LIBNVRTC, GAMP_LIBCUBLAS,
// GAMP_LIBCUBLASLT, GAMP_LIBNVML choose the libraries; GAMP_DISABLE_CUDA=1 hides the GPU;
// GAMP_CUDA_BENCHMARK=1 turns on autotuning; GAMP_REQUIRE_GPU=1 makes the GPU tests fail
// instead of skipping.
package cuda
