package cuda

import (
	"fmt"

	"github.com/gamp-ml/gamp/cuda/internal/cu"
	"github.com/gamp-ml/gamp/kernels"
)

// module returns the loaded module of a kernel source file, compiling it with NVRTC for
// the device's architecture (or reading the disk cache) on first use. Runs on the
// worker.
func (d *device) module(file string) (cu.Module, error) {
	d.modMu.Lock()
	defer d.modMu.Unlock()
	if m, ok := d.mods[file]; ok {
		return m, nil
	}
	src, ok := kernels.Sources()[file]
	if !ok {
		return 0, fmt.Errorf("cuda: no kernel source %q", file)
	}
	major, minor, err := cu.NVRTCVersion()
	if err != nil {
		return 0, fmt.Errorf("cuda:%d: NVRTC is needed to compile the kernels (install the CUDA runtime or pip's nvidia-cuda-nvrtc, or set GAMP_LIBNVRTC): %w", d.index, err)
	}
	opts := append(kernels.CompileOptions(), "--gpu-architecture="+d.arch())
	headers := map[string]string{kernels.HeaderName: kernels.Header()}
	key := cacheKey(fmt.Sprintf("nvrtc %d.%d", major, minor), d.arch(), opts, file, src, headers)
	var m cu.Module
	err = cachedCompile(cacheDir(), key,
		func() ([]byte, error) {
			img, log, err := cu.Compile(src, file, headers, opts)
			if err != nil {
				return nil, fmt.Errorf("cuda:%d: compiling %s for %s: %w\n%s", d.index, file, d.arch(), err, log)
			}
			return img, nil
		},
		func(img []byte) (err error) {
			m, err = cu.ModuleLoadData(img)
			return err
		})
	if err != nil {
		return 0, err
	}
	d.mods[file] = m
	return m, nil
}

// function returns the loaded function of kernel k. Runs on the worker.
func (d *device) function(k kernels.Kernel) (cu.Function, error) {
	d.modMu.Lock()
	f, ok := d.funcs[k.Name]
	d.modMu.Unlock()
	if ok {
		return f, nil
	}
	m, err := d.module(k.File)
	if err != nil {
		return 0, err
	}
	f, err = cu.ModuleGetFunction(m, k.Name)
	if err != nil {
		return 0, fmt.Errorf("cuda:%d: kernel %s in %s: %w", d.index, k.Name, k.File, err)
	}
	if err := checkParamInfo(f, k); err != nil {
		return 0, fmt.Errorf("cuda:%d: %w", d.index, err)
	}
	d.modMu.Lock()
	d.funcs[k.Name] = f
	d.modMu.Unlock()
	return f, nil
}

// checkParamInfo compares the Go signature table with the parameter offsets and sizes
// the driver reads from the image (CUDA 12.4+), so a table that drifted from the source
// fails loudly instead of passing garbage.
func checkParamInfo(f cu.Function, k kernels.Kernel) error {
	offs, _ := k.ArgOffsets()
	for i, p := range k.Params {
		off, size, err := cu.FuncGetParamInfo(f, i)
		if err != nil {
			if i == 0 {
				return nil // an older driver cannot tell; the CPU-side checks still ran
			}
			// The driver answered for parameter 0: the image has no parameter i.
			return fmt.Errorf("kernel %s: the image has %d parameters, the Go table %d (%v)", k.Name, i, len(k.Params), err)
		}
		if int(off) != offs[i] || int(size) != p.Size {
			return fmt.Errorf("kernel %s parameter %d (%s %s): the image says offset %d size %d, the Go table offset %d size %d", k.Name, i, p.CType, p.Name, off, size, offs[i], p.Size)
		}
	}
	if len(k.Params) > 0 {
		if _, _, err := cu.FuncGetParamInfo(f, len(k.Params)); err == nil {
			return fmt.Errorf("kernel %s: the image has more parameters than the Go table's %d", k.Name, len(k.Params))
		}
	}
	return nil
}

// kernel looks up a kernel by name; a missing one is a bug in the backend.
func kernel(name string) kernels.Kernel {
	k, ok := kernels.Lookup(name)
	if !ok {
		panic(fmt.Sprintf("cuda: no kernel %s (a dtype the backend does not support here?)", name))
	}
	return k
}

// launch queues kernel name over work items (elements or rows, as the kernel's table
// entry says) on the compute stream. It returns without waiting for the worker (post);
// the kernel runs later.
func (b *Backend) launch(name string, work int64, args ...any) {
	if work <= 0 {
		return
	}
	k := kernel(name)
	b.d.post(func() { b.d.launchNow(k, work, args...) })
}

// launchNow packs args for k and queues it on the compute stream. Runs on the worker.
func (d *device) launchNow(k kernels.Kernel, work int64, args ...any) {
	if err := k.PackInto(&d.args, args...); err != nil {
		panic(fmt.Sprintf("cuda:%d: %v", d.index, err))
	}
	grid, block := k.Grid(work)
	f, err := d.function(k)
	d.must("loading "+k.Name, err)
	d.must("launching "+k.Name, cu.LaunchKernel(f, [3]uint32{grid, 1, 1}, [3]uint32{block, 1, 1}, 0, d.compute, d.args.Pointers()))
}
