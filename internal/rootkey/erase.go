//go:build !goexperiment.runtimesecret

package rootkey

// secretDo runs f. Built with GOEXPERIMENT=runtimesecret it runs f under
// runtime/secret.Do instead (see erase_secret.go).
func secretDo(f func()) { f() }

// afterSeal runs once Seal has dropped the keyring's keys.
func afterSeal() {}
