package kernels_test

import "os/exec"

func lookTool(name string) (string, error) { return exec.LookPath(name) }
