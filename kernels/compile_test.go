package kernels_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gamp-ml/gamp/kernels"
)

func sourceNames() []string {
	var names []string
	for n := range kernels.Sources() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var (
	declRE  = regexp.MustCompile(`extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)`)
	spaceRE = regexp.MustCompile(`\s+`)
	identRE = regexp.MustCompile(`^(.*?)\s*\b(\w+)$`)
)

// parseDecls returns the extern "C" __global__ declarations of preprocessed C++ source,
// as (name, [][2]string{ctype, param name}).
func parseDecls(text string) (map[string][][2]string, []string) {
	out := map[string][][2]string{}
	var order []string
	for _, m := range declRE.FindAllStringSubmatch(text, -1) {
		var ps [][2]string
		for _, p := range strings.Split(m[2], ",") {
			p = strings.TrimSpace(spaceRE.ReplaceAllString(p, " "))
			if p == "" || p == "void" {
				continue
			}
			pm := identRE.FindStringSubmatch(p)
			if pm == nil {
				ps = append(ps, [2]string{p, ""})
				continue
			}
			ct := strings.ReplaceAll(pm[1], " *", "*")
			ps = append(ps, [2]string{strings.TrimSpace(ct), pm[2]})
		}
		out[m[1]] = ps
		order = append(order, m[1])
	}
	return out, order
}

// TestSignatures preprocesses every source (macros expanded) and checks each extern "C"
// __global__ declaration against the table: same set of names, same parameter names and
// C types, each kernel in the file the table names.
func TestSignatures(t *testing.T) {
	gxx := needTool(t, "g++")
	declared := map[string]bool{}
	for _, file := range sourceNames() {
		out, err := exec.Command(gxx, "-E", "-P", "-x", "c++", "-std=c++17", "-D__global__=__global__", file).CombinedOutput()
		if err != nil {
			t.Fatalf("g++ -E %s: %v\n%s", file, err, out)
		}
		decls, order := parseDecls(string(out))
		for _, name := range order {
			if declared[name] {
				t.Errorf("%s: %s declared twice", file, name)
			}
			declared[name] = true
			k, ok := kernels.Lookup(name)
			if !ok {
				t.Errorf("%s: kernel %s is not in the Go table", file, name)
				continue
			}
			if k.File != file {
				t.Errorf("%s: the table puts it in %s, the source is %s", name, k.File, file)
			}
			ps := decls[name]
			if len(ps) != len(k.Params) {
				t.Errorf("%s: %d parameters in the source, %d in the table\n  source: %v\n  table:  %s", name, len(ps), len(k.Params), ps, k)
				continue
			}
			for i, p := range k.Params {
				if ps[i][0] != p.CType || ps[i][1] != p.Name {
					t.Errorf("%s: parameter %d is %q %q in the source, %q %q in the table", name, i, ps[i][0], ps[i][1], p.CType, p.Name)
				}
			}
		}
	}
	for _, k := range kernels.Kernels() {
		if !declared[k.Name] {
			t.Errorf("%s is in the table but no source declares it", k.Name)
		}
	}
	t.Logf("%d kernels declared, %d in the table", len(declared), len(kernels.Kernels()))
}

var (
	entryRE  = regexp.MustCompile(`(?m)^\.visible \.entry (\w+)\(\s*([^)]*)\)`)
	paramRE  = regexp.MustCompile(`\.param\s+(?:\.align\s+(\d+)\s+)?\.([a-z]+)(\d+)\s+\w+(?:\[(\d+)\])?`)
	externRE = regexp.MustCompile(`(?m)^\.extern \.func\s+(?:\([^)]*\)\s*)?(\w+)`)
)

// TestPTX compiles every source to PTX for sm_80 and sm_90 with clang-16 (no CUDA
// headers: testdata/clang_prelude.h stands in for what NVRTC provides) and checks
// that every table kernel is an .entry with the table's parameter sizes and alignment,
// that the only external functions are libdevice's (__nv_*), and that grid-stride
// kernels use neither shared memory nor barriers.
func TestPTX(t *testing.T) {
	clang := needTool(t, "clang-16")
	dir := t.TempDir()
	type job struct{ file, arch string }
	var jobs []job
	for _, f := range sourceNames() {
		for _, arch := range []string{"sm_80", "sm_90"} {
			jobs = append(jobs, job{f, arch})
		}
	}
	ptx := make([]string, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out := filepath.Join(dir, j.file+"."+j.arch+".ptx")
			cmd := exec.Command(clang, "-x", "cuda", "--cuda-device-only", "--cuda-gpu-arch="+j.arch,
				"-nocudainc", "-nocudalib", "-std=c++17", "-O2", "-ffp-contract=off", "-Werror",
				"-include", filepath.Join("testdata", "clang_prelude.h"), "-S", "-o", out, j.file)
			if b, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("clang-16 %s for %s: %v\n%s", j.file, j.arch, err, b)
				return
			}
			b, err := os.ReadFile(out)
			ptx[i], errs[i] = string(b), err
		}()
	}
	wg.Wait()
	for i, j := range jobs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		entries := map[string]string{}
		for _, m := range entryRE.FindAllStringSubmatch(ptx[i], -1) {
			entries[m[1]] = m[2]
		}
		for _, m := range externRE.FindAllStringSubmatch(ptx[i], -1) {
			if !strings.HasPrefix(m[1], "__nv_") {
				t.Errorf("%s/%s: external function %s (NVRTC links only libdevice)", j.file, j.arch, m[1])
			}
		}
		bodies := entryBodies(ptx[i])
		n := 0
		for _, k := range kernels.Kernels() {
			if k.File != j.file {
				continue
			}
			n++
			params, ok := entries[k.Name]
			if !ok {
				t.Errorf("%s/%s: no .entry %s", j.file, j.arch, k.Name)
				continue
			}
			got := paramRE.FindAllStringSubmatch(params, -1)
			if len(got) != len(k.Params) {
				t.Errorf("%s: %d PTX parameters, %d in the table", k.Name, len(got), len(k.Params))
				continue
			}
			for pi, m := range got {
				size, _ := strconv.Atoi(m[3])
				size /= 8
				align := size
				if m[4] != "" { // .align A .b8 name[N]
					size, _ = strconv.Atoi(m[4])
					align, _ = strconv.Atoi(m[1])
				}
				if p := k.Params[pi]; size != p.Size || align != p.Align {
					t.Errorf("%s: parameter %s is %d bytes aligned %d in the PTX, %d aligned %d in the table", k.Name, p.Name, size, align, p.Size, p.Align)
				}
			}
			if k.Launch == kernels.GridStride {
				body := bodies[k.Name]
				if strings.Contains(body, "bar.sync") || strings.Contains(body, "barrier") || strings.Contains(body, ".shared") {
					t.Errorf("%s: a grid-stride kernel uses shared memory or a barrier", k.Name)
				}
			}
		}
		if len(entries) != n {
			t.Errorf("%s/%s: %d entries, %d kernels in the table", j.file, j.arch, len(entries), n)
		}
	}
}

// entryBodies splits PTX into the text of each .entry.
func entryBodies(ptx string) map[string]string {
	out := map[string]string{}
	locs := entryRE.FindAllStringSubmatchIndex(ptx, -1)
	for i, l := range locs {
		end := len(ptx)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		out[ptx[l[2]:l[3]]] = ptx[l[0]:end]
	}
	return out
}
