package cpu_test

import (
	"testing"

	"github.com/gamp-ml/gamp/backend/backendtest"
	"github.com/gamp-ml/gamp/backend/cpu"
)

func TestConformance(t *testing.T) { b, _ := cpu.New(0); backendtest.Run(t, b) }
