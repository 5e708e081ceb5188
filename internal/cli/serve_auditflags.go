package cli

import (
	"flag"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/config"
)

// auditFlags are serve's flags of the audit section. Like tokenFlags, each
// one given writes its field of config.Audit (write), over the file's, on
// every load of the configuration.
type auditFlags struct {
	dir, node            string
	stdout, store, noLog bool
	given                map[string]bool
}

func (f *auditFlags) register(fs *flagSet) {
	fs.StringVar(&f.dir, "audit-dir", "", "`directory` of the audit log's files (default <data dir>/audit; \"off\": no file sink)")
	fs.StringVar(&f.node, "audit-node", "", "`name` of this node's audit chain (default: the id generated at the first start, kept in\nthe data directory's node.id); two nodes writing to one store need different names")
	fs.BoolVar(&f.stdout, "audit-stdout", false, "also write the audit log to standard output (JSON lines)")
	fs.BoolVar(&f.store, "audit-store", false, "also append the audit log to the store (SQLite or PostgreSQL)")
	fs.BoolVar(&f.noLog, "no-audit", false, "turn the audit log off: no request is recorded (or audit.disabled)")
}

// parsed records which of the flags were given (with a value).
func (f *auditFlags) parsed(fs *flagSet) {
	f.given = map[string]bool{}
	fs.visitGiven(func(fl *flag.Flag) { f.given[fl.Name] = true })
}

// check validates the flags' own values, as usage errors naming them.
func (f *auditFlags) check() error {
	if f.node != "" && !audit.ValidID(f.node) {
		return usageErrorf("keygate serve", "--audit-node %q: 1 to %d printable characters without spaces, quotes or backslashes", f.node, audit.MaxIDLen)
	}
	return nil
}

// write writes the flags given into a.
func (f *auditFlags) write(a *config.Audit) {
	if f.given["audit-dir"] {
		if f.dir == "off" {
			a.File.Disabled = true
		} else {
			a.File.Disabled, a.File.Dir = false, f.dir
		}
	}
	if f.given["audit-node"] {
		a.Node = f.node
	}
	if f.given["audit-stdout"] {
		a.Stdout = f.stdout
	}
	if f.given["audit-store"] {
		a.Store = f.store
	}
	if f.given["no-audit"] {
		a.Disabled = f.noLog
	}
}
