package gateway

import "testing"

func TestTraceID(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"", ""},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""}, // all-zero trace id
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""}, // version ff
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ""}, // upper case
		{"00-4bf92f3577b34da6a3ce929d0e0e473\"-00f067aa0ba902b7-01", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", ""},
		{"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
	} {
		if got := traceID(c.in); got != c.want {
			t.Errorf("traceID(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A nil access log reads no clock and writes nothing.
func TestNilAccessLog(t *testing.T) {
	var l *AccessLog
	if !l.start().IsZero() {
		t.Error("a nil access log read the clock")
	}
	l.write("forward_auth", "GET", "h", "/", nil, &Decision{Status: 200}, l.start()) // must not panic
}
