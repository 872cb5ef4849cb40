package nn

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gamp-ml/gamp/tensor"
)

// SaveState writes every parameter and buffer of m to path as a safetensors file
// keyed by dotted name ("0.weight", "block.1.running_mean"), in the tensors' current
// dtypes, atomically (see SaveFile). The metadata says {"format": "pt"}: the layout
// and names follow PyTorch's state_dict, so Hugging Face and PyTorch tools load it.
// It also holds a checksum of every tensor (see SaveOptions), which LoadState checks.
func SaveState(m Module, path string) error {
	state := State(m)
	ts := make(map[string]*tensor.Tensor, len(state))
	for name, p := range state {
		ts[name] = p.T
	}
	return SaveFileWith(path, ts, map[string]string{"format": "pt"}, SaveOptions{Checksums: true})
}

// StateError reports why LoadState refused a file: keys the model has and the file
// lacks (Missing), keys the file has and the model lacks (Unexpected; both only in
// strict mode), and tensors whose shape or kind of dtype differs (Mismatched, always).
// The model is left untouched.
type StateError struct {
	Path       string
	Missing    []string
	Unexpected []string
	Mismatched []string // one sentence per tensor
}

func (e *StateError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, fmt.Sprintf("missing keys (in the model, not in the file): %s", strings.Join(e.Missing, ", ")))
	}
	if len(e.Unexpected) > 0 {
		parts = append(parts, fmt.Sprintf("unexpected keys (in the file, not in the model): %s", strings.Join(e.Unexpected, ", ")))
	}
	parts = append(parts, e.Mismatched...)
	return fmt.Sprintf("nn: loading %s into the model: %s", e.Path, strings.Join(parts, "; "))
}

// LoadState copies the tensors of the safetensors file at path into m's parameters
// and buffers of the same names, in place (the *Param values and their tensors stay
// the same, so optimizers and gradients are unaffected).
//
// With strict, every key of the model must be in the file and the other way round;
// all missing and unexpected keys are reported together in one *StateError. Without
// strict, keys present on one side only are ignored. A shape difference is always an
// error naming the tensor and both shapes.
//
// A dtype difference within floating types (or within integer types) converts, with
// round to nearest even: loading float32 weights into a model cast to float16 stores
// them as float16, and loading a half checkpoint into a float32 model widens it
// exactly. A floating tensor in the file for an integer or bool one in the model (or
// the other way round) is a mismatch. Tensors are moved to the device of the
// parameter they fill.
//
// Nothing is modified unless every check passes: the header is checked against the
// model, then every tensor's bytes are read once and checked (checksums, when the file
// has them), and only then is each tensor read into its parameter. The data is read
// one tensor at a time, so the load needs about one tensor of memory beyond the model,
// not the file's size.
func LoadState(m Module, path string, strict bool) error {
	f, err := OpenTensorFile(path)
	if err != nil {
		return err
	}
	defer f.Close()
	state := State(m)
	e := &StateError{Path: path}
	for name := range state {
		if _, ok := f.Lookup(name); !ok && strict {
			e.Missing = append(e.Missing, name)
		}
	}
	for _, info := range f.Tensors() {
		if _, ok := state[info.Name]; !ok && strict {
			e.Unexpected = append(e.Unexpected, info.Name)
		}
	}
	names := make([]string, 0, len(state))
	for name := range state {
		if _, ok := f.Lookup(name); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	slices.Sort(e.Missing)
	slices.Sort(e.Unexpected)
	for _, name := range names {
		dst := state[name].T
		src, _ := f.Lookup(name)
		if !dst.Shape().Equal(src.Shape) {
			e.Mismatched = append(e.Mismatched, fmt.Sprintf("tensor %q has shape %v in the file but %v in the model", name, src.Shape, dst.Shape()))
			continue
		}
		if kindOf(dst.DType()) != kindOf(src.DType) {
			e.Mismatched = append(e.Mismatched, fmt.Sprintf("tensor %q is %s in the file but %s in the model; only floating-to-floating and integer-to-integer conversions are done", name, src.DType, dst.DType()))
		}
	}
	if len(e.Missing)+len(e.Unexpected)+len(e.Mismatched) > 0 {
		return e
	}
	if err := f.Verify(nil); err != nil {
		return err
	}
	for _, name := range names {
		if err := f.ReadInto(name, state[name].T); err != nil {
			return fmt.Errorf("nn: loading %s: the model is partly loaded (the file changed or could not be read after it was checked): %w", path, err)
		}
	}
	return nil
}

func kindOf(dt tensor.DType) string {
	switch {
	case dt.IsFloat():
		return "float"
	case dt.IsInt():
		return "int"
	}
	return dt.String()
}
