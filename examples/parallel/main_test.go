package main

import (
	"errors"
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/internal/cli"
)

// Bad command lines are usage errors (exit status 2) that name the flag; good ones parse.
func TestParseArgs(t *testing.T) {
	o, err := parseArgs([]string{"-devices", "cpu:1, cpu:2,cpu:3", "-level", "O2", "-micro", "2"}, io.Discard)
	require.NoError(t, err)
	assert.Len(t, o.devices, 3)
	assert.Equal(t, amp.O2, o.level)
	assert.Equal(t, 2, o.micro)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-devices", "gpu:0"}, "-devices"},
		{[]string{"-devices", "cuda:7"}, "-devices"},
		{[]string{"-level", "O5"}, "-level"},
		{[]string{"-epochs", "0"}, "-epochs"},
		{[]string{"-batch", "-3"}, "-batch"},
		{[]string{"-micro", "0"}, "-micro"},
		{[]string{"-nope"}, "nope"},
		{[]string{"extra"}, "extra"},
	} {
		_, err := parseArgs(c.args, io.Discard)
		require.Error(t, err, "%v", c.args)
		assert.Equal(t, 2, cli.ExitStatus(err), "%v: %v", c.args, err)
		assert.Contains(t, err.Error(), c.want)
	}
	_, err = parseArgs([]string{"-h"}, io.Discard)
	assert.True(t, errors.Is(err, flag.ErrHelp))
}
