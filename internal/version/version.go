// Package version says which agentd this is.
package version

import "runtime/debug"

// Version is set at link time (-ldflags "-X …/internal/version.Version=v1.2.3");
// otherwise it comes from the build's module information.
var Version = ""

// String returns the agentd version.
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
