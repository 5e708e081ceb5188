// Command gentrace writes internal/node/storetrace.go, the node's tracing
// wrapper of its store: one method per method of store.Store, read with
// go/types from the store package's source, each giving a call made under
// a recording span a child span named keygate.store.<method in snake case>.
// The node's go:generate directive runs it:
//
//	go generate ./internal/node
//
// It lives under node/internal because the file it writes is node's and
// no other package needs it. A test in this package fails when the
// committed file is not what gentrace writes today, so the wrapper cannot
// drift from the interface.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("o", "storetrace.go", "the file to write")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gentrace:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	src, err := generate(storeTrace)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}
