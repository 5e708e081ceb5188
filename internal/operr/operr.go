// Package operr marks the errors written for the operator who runs keygate:
// a configuration that does not hold, a flag that does not parse, a node
// that cannot unseal or reach its store. An [*Error] carries a message that
// is safe and useful to show at the command line and wraps the internal
// cause, which errors.Is and errors.As still reach and the logs still print.
//
// The command line prints an error in full, as a diagnostic, but with the
// [*Error.Message] of the first *Error in its chain in place of that
// error's text: a cause it keeps for the logs is left out, what wrappers
// around it say stays. The model is Tailscale's vizerror, with one
// difference: Error() is the full text (message and hidden cause), because
// keygate's logs are for diagnosis, and only Message is the operator's.
//
// A message is built from what the operator gave or may see (a file name,
// a setting, an address) and never from secret material: no key, token,
// passphrase, client secret or database password, whether as a value or
// inside a cause's text. [Wrap] keeps the cause's text out of the message;
// [Errorf] shows its operands' texts, so give it only causes whose text is
// known to be safe.
package operr

import (
	"errors"
	"fmt"
)

// Error is an error whose Message is for the operator.
type Error struct {
	msg   string
	cause error // what went wrong inside; nil for New
	shown bool  // msg already holds the cause's text (Errorf)
}

// Error is the full text, for logs: the message, then the cause's text when
// the message does not already hold it.
func (e *Error) Error() string {
	if e.cause == nil || e.shown {
		return e.msg
	}
	return e.msg + ": " + e.cause.Error()
}

// Message is the text to show the operator. It never holds the text of a
// cause given to Wrap or Wrapf.
func (e *Error) Message() string { return e.msg }

// Unwrap returns the internal cause, or nil.
func (e *Error) Unwrap() error { return e.cause }

// New returns an error whose message is msg.
func New(msg string) error { return &Error{msg: msg} }

// Errorf returns an error whose message is formatted as fmt.Errorf formats
// it, the texts of %w operands included; those operands stay reachable
// through errors.Is and errors.As.
func Errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	e := &Error{msg: err.Error()}
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }: // a %w
		e.cause, e.shown = err, true
	}
	return e
}

// Wrap returns an error whose message is msg and whose cause is err, or nil
// when err is nil. err's text stays out of the message: it is for the logs
// (a library's detail, or text that might carry a secret).
func Wrap(err error, msg string) error {
	if err == nil {
		return nil
	}
	return &Error{msg: msg, cause: err}
}

// Wrapf is Wrap with a message formatted by fmt.Sprintf; an error among
// args is formatted into the message, so pass err itself only as the first
// argument.
func Wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &Error{msg: fmt.Sprintf(format, args...), cause: err}
}

// As returns the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
