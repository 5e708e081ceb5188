package tlscert

import "crypto/x509"

// Certificate returns the leaf certificate in force (for the tests only).
func (f *Files) Certificate() *x509.Certificate { return f.cur.Load().leaf }
