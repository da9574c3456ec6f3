//go:build tools

// The wrapper module that pins gVisor for tools/runtime/build.sh: its
// go.mod names the gvisor.dev/gvisor pseudo-version (a commit of gVisor's
// `go` branch, the one that builds with the go tool) and go.sum the hashes
// of it and every module it needs, so the build verifies what it compiles.
// The imports below keep `go mod tidy` from dropping the two programs built.
package tools

import (
	_ "gvisor.dev/gvisor/runsc"
	_ "gvisor.dev/gvisor/shim"
)
