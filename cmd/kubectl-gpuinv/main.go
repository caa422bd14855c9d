// Command kubectl-gpuinv is the kubectl plugin `kubectl gpuinv`: the GPU inventory of a
// cluster at a glance. On the PATH, kubectl finds it as `kubectl gpuinv`. See package plugin.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := plugin.Run(ctx, os.Args[1:], plugin.Environment{
		Out:      os.Stdout,
		ErrOut:   os.Stderr,
		Terminal: term.IsTerminal(int(os.Stdout.Fd())),
	})
	stop()
	os.Exit(code)
}
