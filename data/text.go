package data

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gamp-ml/gamp/tensor"
)

// FortunesDir is where Debian's fortunes package installs its text files.
const FortunesDir = "/usr/share/games/fortunes"

// Text is a character-level corpus: the vocabulary (every distinct character, sorted)
// and the text as token ids, split into the first 90 % for training and the last 10 %
// for validation, as nanoGPT splits tiny-Shakespeare. The split is a pure function of
// the text, so two programs reading the same files see the same split.
type Text struct {
	Name       string
	vocab      []rune
	index      map[rune]int32
	train, val []int32
}

// NewText builds the vocabulary of s and splits it 90/10. It fails on text that is not
// valid UTF-8 or too short to hold a validation split.
func NewText(name, s string) (*Text, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("data: text %s is not valid UTF-8; convert it (iconv -t UTF-8) first", name)
	}
	runes := []rune(s)
	if len(runes) < 20 {
		return nil, fmt.Errorf("data: text %s has %d characters; a 90/10 split needs at least 20", name, len(runes))
	}
	seen := map[rune]bool{}
	for _, r := range runes {
		seen[r] = true
	}
	vocab := make([]rune, 0, len(seen))
	for r := range seen {
		vocab = append(vocab, r)
	}
	slices.Sort(vocab)
	t := &Text{Name: name, vocab: vocab, index: make(map[rune]int32, len(vocab))}
	for i, r := range vocab {
		t.index[r] = int32(i)
	}
	ids := make([]int32, len(runes))
	for i, r := range runes {
		ids[i] = t.index[r]
	}
	cut := len(ids) * 9 / 10
	t.train, t.val = ids[:cut], ids[cut:]
	return t, nil
}

// LoadTextFile reads a UTF-8 text file into a Text.
func LoadTextFile(path string) (*Text, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("data: reading text: %w", err)
	}
	return NewText(filepath.Base(path), string(b))
}

// LoadFortunes reads the fortune files of dir (FortunesDir if ""): every regular file,
// in name order, except the binary .dat indexes, the .u8 links and subdirectories (the
// offensive off/ collection is never read). Each file is a list of fortunes separated
// by lines holding a single %; the text keeps each fortune followed by a blank line.
// When the files are missing the error says how to install them and matches
// errors.Is(err, fs.ErrNotExist).
func LoadFortunes(dir string) (*Text, error) {
	if dir == "" {
		dir = FortunesDir
	}
	entries, err := os.ReadDir(dir)
	var names []string
	if err == nil {
		for _, e := range entries {
			n := e.Name()
			if !e.Type().IsRegular() || strings.HasSuffix(n, ".dat") || strings.HasSuffix(n, ".u8") || strings.HasPrefix(n, ".") {
				continue
			}
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, &notFoundError{fmt.Sprintf(
			"data: no fortune files in %s; install them with `apt-get install fortunes` "+
				"(scripts/ensure-fortunes.sh does it when run as root), or pass -text FILE naming any UTF-8 text file", dir)}
	}
	slices.Sort(names)
	var out strings.Builder
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("data: reading fortunes: %w", err)
		}
		if !utf8.Valid(b) {
			b = bytes.ToValidUTF8(b, []byte("?"))
		}
		appendFortunes(&out, b)
	}
	return NewText("fortunes", out.String())
}

// appendFortunes writes the fortunes of one file, each followed by a blank line, with
// the % separator lines dropped.
func appendFortunes(out *strings.Builder, b []byte) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out.WriteString(strings.Join(cur, "\n"))
			out.WriteString("\n\n")
		}
		cur = cur[:0]
	}
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "%" {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
}

// VocabSize is the number of distinct characters.
func (t *Text) VocabSize() int { return len(t.vocab) }

// Vocab returns the characters in id order.
func (t *Text) Vocab() []rune { return slices.Clone(t.vocab) }

// Tokens returns the token ids of the training (val false) or validation split. The
// slice is shared: do not modify it.
func (t *Text) Tokens(val bool) []int32 {
	if val {
		return t.val
	}
	return t.train
}

// Encode returns the ids of s; a character outside the vocabulary is an error.
func (t *Text) Encode(s string) ([]int64, error) {
	ids := make([]int64, 0, len(s))
	for i, r := range s {
		id, ok := t.index[r]
		if !ok {
			return nil, fmt.Errorf("data: character %q at byte %d of the prompt is not in the %d-character vocabulary of %s", r, i, len(t.vocab), t.Name)
		}
		ids = append(ids, int64(id))
	}
	return ids, nil
}

// Decode returns the text of ids; an id outside the vocabulary panics (misuse).
func (t *Text) Decode(ids []int64) string {
	var b strings.Builder
	for _, id := range ids {
		if id < 0 || id >= int64(len(t.vocab)) {
			panic(fmt.Sprintf("data: token id %d is outside the vocabulary [0, %d)", id, len(t.vocab)))
		}
		b.WriteRune(t.vocab[id])
	}
	return b.String()
}

// Blocks draws random contiguous blocks of a token sequence for language-model
// batches: the input is Block tokens from a random start, the target the same tokens
// shifted by one. Draw n's start is a function of (Seed, n) alone — SplitMix64 of
// Seed + n·0x9E3779B97F4A7C15, modulo the number of starts — so a batch can be
// regenerated anywhere (the PyTorch comparison script does) and resuming at a draw
// count continues the same stream.
type Blocks struct {
	tokens []int32
	block  int
	seed   uint64
	draws  uint64
}

// NewBlocks returns a block sampler over the training (val false) or validation split.
func (t *Text) NewBlocks(val bool, block int, seed uint64) (*Blocks, error) {
	toks := t.Tokens(val)
	if block < 1 || len(toks) < block+1 {
		which := "training"
		if val {
			which = "validation"
		}
		return nil, fmt.Errorf("data: the %s split of %s has %d tokens; blocks of %d need at least %d (use a shorter context or a longer text)", which, t.Name, len(toks), block, block+1)
	}
	return &Blocks{tokens: toks, block: block, seed: seed}, nil
}

// splitMix64 is the SplitMix64 finaliser of x + γ (the generator tensor's random ops use).
func splitMix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// Offsets returns the start positions of the next n blocks and advances the stream.
func (b *Blocks) Offsets(n int) []int {
	starts := uint64(len(b.tokens) - b.block)
	out := make([]int, n)
	for i := range out {
		out[i] = int(splitMix64(b.seed+b.draws*0x9E3779B97F4A7C15) % starts)
		b.draws++
	}
	return out
}

// Draws is the number of blocks drawn so far (the state to save for a resume).
func (b *Blocks) Draws() uint64 { return b.draws }

// SetDraws moves the stream to draw n (0 restarts it).
func (b *Blocks) SetDraws(n uint64) { b.draws = n }

// Next returns the next batch: inputs and targets, Int64 [n, Block] tensors created
// with opts (device, Context).
func (b *Blocks) Next(n int, opts ...tensor.Option) (x, y *tensor.Tensor) {
	xs, ys := b.Batch(b.Offsets(n))
	shape := tensor.Shape{n, b.block}
	return tensor.FromSlice(xs, shape, opts...), tensor.FromSlice(ys, shape, opts...)
}

// Batch returns the input and target ids of the blocks starting at offsets, row-major
// [len(offsets), Block].
func (b *Blocks) Batch(offsets []int) (x, y []int64) {
	x = make([]int64, 0, len(offsets)*b.block)
	y = make([]int64, 0, len(offsets)*b.block)
	for _, o := range offsets {
		if o < 0 || o+b.block >= len(b.tokens) {
			panic(fmt.Sprintf("data: block offset %d is outside [0, %d)", o, len(b.tokens)-b.block))
		}
		for _, id := range b.tokens[o : o+b.block] {
			x = append(x, int64(id))
		}
		for _, id := range b.tokens[o+1 : o+b.block+1] {
			y = append(y, int64(id))
		}
	}
	return x, y
}
