package profiler

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// traceEvent is one event of the Chrome trace event format (the JSON that
// chrome://tracing and ui.perfetto.dev load).
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

type traceFile struct {
	TraceEvents     []traceEvent `json:"traceEvents"`
	DisplayTimeUnit string       `json:"displayTimeUnit"`
}

// tracePid is the process id every event carries.
const tracePid = 1

// tid numbers the rows: forward lanes are odd, backward lanes even, so the forward
// row sits above the backward row of the same lane.
func tid(pass Pass, lane int) int { return 2*lane + 1 + int(pass) }

// WriteChromeTrace writes the records as a Chrome trace (JSON object format): one
// complete ("X") event per record with ts and dur in microseconds, forward ops on one
// thread row and backward ops on another (more rows when ops overlapped without
// nesting), and the op's device, dtypes, input shapes and bytes in args (and, for a
// product op, its FLOPs: Record.FLOPs).
func (p *Profiler) WriteChromeTrace(w io.Writer) error {
	recs := p.Records()
	f := traceFile{DisplayTimeUnit: "ms"}
	f.TraceEvents = append(f.TraceEvents, traceEvent{Name: "process_name", Ph: "M", Pid: tracePid, Args: map[string]any{"name": "gamp"}})
	rows := map[int]bool{}
	var events []traceEvent
	for i, r := range recs {
		t := tid(r.Pass, r.Lane)
		rows[t] = true
		dur := float64(r.Dur.Nanoseconds()) / 1e3
		shapes := make([][]int, len(r.InShapes))
		dts := make([]string, len(r.InDTypes))
		for k, s := range r.InShapes {
			shapes[k] = append([]int{}, s...)
		}
		for k, d := range r.InDTypes {
			dts[k] = d.String()
		}
		args := map[string]any{
			"index": i, "device": r.Device.String(), "in_dtypes": dts, "in_shapes": shapes,
			"out_dtype": r.OutDType.String(), "bytes": r.Bytes, "self_us": float64(r.Self.Nanoseconds()) / 1e3,
		}
		if r.FLOPs > 0 {
			args["flops"] = r.FLOPs // the product ops', as torch.profiler's trace with with_flops
		}
		if r.Unmatched {
			args["unmatched"] = true
		}
		if r.Pass == Backward {
			args["forward_index"] = r.ForwardIndex
		}
		events = append(events, traceEvent{
			Name: r.Op, Cat: r.Pass.String(), Ph: "X", Ts: float64(r.Start.Nanoseconds()) / 1e3, Dur: &dur,
			Pid: tracePid, Tid: t, Args: args,
		})
	}
	var tids []int
	for t := range rows {
		tids = append(tids, t)
	}
	sort.Ints(tids)
	for _, t := range tids {
		pass, lane := Pass((t-1)%2), (t-1)/2
		name := pass.String()
		if lane > 0 {
			name = fmt.Sprintf("%s #%d", name, lane+1)
		}
		f.TraceEvents = append(f.TraceEvents,
			traceEvent{Name: "thread_name", Ph: "M", Pid: tracePid, Tid: t, Args: map[string]any{"name": name}},
			traceEvent{Name: "thread_sort_index", Ph: "M", Pid: tracePid, Tid: t, Args: map[string]any{"sort_index": t}})
	}
	sort.SliceStable(events, func(i, j int) bool {
		if events[i].Ts != events[j].Ts {
			return events[i].Ts < events[j].Ts
		}
		return *events[i].Dur > *events[j].Dur
	})
	f.TraceEvents = append(f.TraceEvents, events...)
	enc := json.NewEncoder(w)
	return enc.Encode(f)
}

// SaveChromeTrace writes the Chrome trace to path atomically: to a temporary file in
// the same directory, then renamed over path, so a failed save leaves the previous
// file intact.
func (p *Profiler) SaveChromeTrace(path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("profiler: save trace: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("profiler: save trace %s: %w", path, err)
	}
	if err = p.WriteChromeTrace(tmp); err != nil {
		return fmt.Errorf("profiler: save trace %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("profiler: save trace %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("profiler: save trace %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("profiler: save trace %s: %w", path, err)
	}
	return nil
}
