//go:build goexperiment.runtimesecret

package rootkey

import (
	"runtime"
	"runtime/secret"
)

// secretDo runs f under runtime/secret.Do: the registers and stack f used
// are erased when it returns, and heap memory it allocated (the AES key
// schedules crypto/aes makes, Argon2id's work area) is erased once the
// garbage collector finds it unreachable.
func secretDo(f func()) { secret.Do(f) }

// afterSeal runs a collection so the dropped key schedules are erased now
// rather than at the next automatic cycle.
func afterSeal() { runtime.GC() }
