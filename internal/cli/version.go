package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is keygate's version, set at build time with
//
//	go build -ldflags "-X github.com/keygate/keygate/internal/cli.Version=v1.2.3"
//
// When empty, the module version or VCS revision recorded in the binary is
// used.
var Version = ""

func (a *app) version(_ context.Context, args []string) error {
	fs := a.flags("keygate version", "", "Prints the version of keygate and of the Go toolchain that built it.")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "keygate %s\n%s %s/%s\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

func version() string {
	if Version != "" {
		return Version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	return vcsVersion(info.Settings)
}

func vcsVersion(settings []debug.BuildSetting) string {
	var rev, dirty string
	for _, s := range settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return "devel-" + rev + dirty
}
