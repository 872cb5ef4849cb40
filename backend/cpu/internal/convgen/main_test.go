package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestVDPBF16PS checks vdpbf16ps against encodings GNU as (binutils 2.40) gave for
// the same operands, registers below and above 8 and 16 in every position.
func TestVDPBF16PS(t *testing.T) {
	for _, c := range []struct {
		src2, src1, dst int
		enc             string
	}{
		{26, 24, 0, "62 92 3e 40 52 c2"},
		{30, 24, 8, "62 12 3e 40 52 c6"},
		{20, 16, 1, "62 b2 7e 40 52 cc"},
		{3, 5, 7, "62 f2 56 48 52 fb"},
		{17, 9, 31, "62 22 36 48 52 f9"},
		{8, 15, 16, "62 c2 06 48 52 c0"},
		{22, 17, 13, "62 32 76 40 52 ee"},
		{0, 0, 0, "62 f2 7e 48 52 c0"},
	} {
		var bs []string
		for _, h := range strings.Fields(c.enc) {
			bs = append(bs, "BYTE $0x"+h)
		}
		want := fmt.Sprintf("%s // vdpbf16ps %%zmm%d, %%zmm%d, %%zmm%d", strings.Join(bs, "; "), c.src2, c.src1, c.dst)
		if got := vdpbf16ps(c.src2, c.src1, c.dst); got != want {
			t.Errorf("vdpbf16ps(%d, %d, %d) = %q, want %q", c.src2, c.src1, c.dst, got, want)
		}
	}
}

// TestVCVTNEPS2BF16 checks vcvtneps2bf16 against encodings GNU as (binutils 2.40)
// gave for the same operands, registers below and above 8 and 16 in both
// positions, and the constant vcvtneps2bf16Z0Y3 against it.
func TestVCVTNEPS2BF16(t *testing.T) {
	for _, c := range []struct {
		src, dst int
		enc      string
	}{
		{0, 24, "62 62 7e 48 72 c0"},
		{1, 24, "62 62 7e 48 72 c1"},
		{15, 24, "62 42 7e 48 72 c7"},
		{23, 24, "62 22 7e 48 72 c7"},
		{0, 3, "62 f2 7e 48 72 d8"},
		{9, 8, "62 52 7e 48 72 c1"},
	} {
		var bs []string
		for _, h := range strings.Fields(c.enc) {
			bs = append(bs, "BYTE $0x"+h)
		}
		want := fmt.Sprintf("%s // vcvtneps2bf16 %%zmm%d, %%ymm%d", strings.Join(bs, "; "), c.src, c.dst)
		if got := vcvtneps2bf16(c.src, c.dst); got != want {
			t.Errorf("vcvtneps2bf16(%d, %d) = %q, want %q", c.src, c.dst, got, want)
		}
	}
	if got := vcvtneps2bf16(0, 3); got != vcvtneps2bf16Z0Y3 {
		t.Errorf("vcvtneps2bf16(0, 3) = %q, want vcvtneps2bf16Z0Y3 %q", got, vcvtneps2bf16Z0Y3)
	}
}
