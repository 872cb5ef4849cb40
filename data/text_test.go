package data

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/internal/testenv"
)

func TestTextVocabAndSplit(t *testing.T) {
	s := strings.Repeat("hello, world! ", 10) // 140 characters
	tx, err := NewText("t", s)
	require.NoError(t, err)
	require.Equal(t, []rune(" !,dehlorw"), tx.Vocab())
	require.Len(t, tx.Tokens(false), 126)
	require.Len(t, tx.Tokens(true), 14)
	// The split is the text in order: decoding both halves gives it back.
	all := append(append([]int32(nil), tx.Tokens(false)...), tx.Tokens(true)...)
	ids := make([]int64, len(all))
	for i, v := range all {
		ids[i] = int64(v)
	}
	require.Equal(t, s, tx.Decode(ids))
	enc, err := tx.Encode("hello")
	require.NoError(t, err)
	require.Equal(t, "hello", tx.Decode(enc))
	_, err = tx.Encode("héllo")
	require.ErrorContains(t, err, "not in the")
}

func TestTextRejectsBadInput(t *testing.T) {
	_, err := NewText("short", "abc")
	require.ErrorContains(t, err, "at least 20")
	_, err = NewText("latin1", "caf\xe9 "+strings.Repeat("x", 30))
	require.ErrorContains(t, err, "UTF-8")
	_, err = LoadTextFile(filepath.Join(t.TempDir(), "none.txt"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestBlocksAreDeterministicContiguousShifts(t *testing.T) {
	s := "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	tx, err := NewText("abc", s)
	require.NoError(t, err)
	b1, err := tx.NewBlocks(false, 8, 42)
	require.NoError(t, err)
	b2, _ := tx.NewBlocks(false, 8, 42)
	o1, o2 := b1.Offsets(50), b2.Offsets(50)
	require.Equal(t, o1, o2)
	distinct := map[int]bool{}
	for _, o := range o1 {
		require.True(t, o >= 0 && o+8 < len(tx.Tokens(false)))
		distinct[o] = true
	}
	require.Greater(t, len(distinct), 20, "offsets should spread over the split")
	// Resuming at a draw count continues the same stream.
	b3, _ := tx.NewBlocks(false, 8, 42)
	b3.SetDraws(30)
	require.Equal(t, o1[30:40], b3.Offsets(10))
	require.Equal(t, uint64(40), b3.Draws())
	// A different seed, a different stream.
	b4, _ := tx.NewBlocks(false, 8, 43)
	require.NotEqual(t, o1[:10], b4.Offsets(10))
	x, y := b1.Batch([]int{0, 5})
	require.Equal(t, "abcdefghfghijklm", tx.Decode(x))
	require.Equal(t, "bcdefghighijklmn", tx.Decode(y))
	xt, yt := b1.Next(3)
	defer xt.Release()
	defer yt.Release()
	require.Equal(t, []int{3, 8}, []int(xt.Shape()))
	xs, ys := xt.Int64s(), yt.Int64s()
	for r := 0; r < 3; r++ {
		require.Equal(t, xs[r*8+1:r*8+8], ys[r*8:r*8+7], "targets are the inputs shifted by one")
	}
	_, err = tx.NewBlocks(true, 8, 1) // the validation split has 7 tokens
	require.ErrorContains(t, err, "validation split")
}

func TestLoadFortunesFromDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) { require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644)) }
	write("wisdom", "A penny saved\nis a penny earned.\n%\nLook before you leap.\n%\n")
	write("wisdom.dat", "\x00\x00\x00\x02binary index")
	write("zen", "The way that can be told\nis not the eternal way.\n%\n")
	require.NoError(t, os.Symlink("wisdom", filepath.Join(dir, "wisdom.u8")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "off"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "off", "rude"), []byte("never read\n%\n"), 0o644))
	tx, err := LoadFortunes(dir)
	require.NoError(t, err)
	all := append(append([]int32(nil), tx.Tokens(false)...), tx.Tokens(true)...)
	ids := make([]int64, len(all))
	for i, v := range all {
		ids[i] = int64(v)
	}
	require.Equal(t, "A penny saved\nis a penny earned.\n\nLook before you leap.\n\n"+
		"The way that can be told\nis not the eternal way.\n\n", tx.Decode(ids))

	_, err = LoadFortunes(t.TempDir())
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, "apt-get install fortunes")
}

// The real corpus, when Debian's fortunes package is installed.
func TestLoadFortunesCorpus(t *testing.T) {
	tx, err := LoadFortunes("")
	if errors.Is(err, fs.ErrNotExist) {
		testenv.Skip(t, testenv.Fortunes, "the real-corpus test: %v", err)
	}
	require.NoError(t, err)
	n := len(tx.Tokens(false)) + len(tx.Tokens(true))
	t.Logf("fortunes: %d characters, vocabulary %d", n, tx.VocabSize())
	require.Greater(t, n, 1_000_000)
	require.Less(t, tx.VocabSize(), 300)
	require.InDelta(t, 0.1, float64(len(tx.Tokens(true)))/float64(n), 0.001)
}
