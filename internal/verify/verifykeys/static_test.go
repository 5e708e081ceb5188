package verifykeys

import (
	"context"
	"testing"

	"github.com/keygate/keygate/jose"
)

func TestNewStatic(t *testing.T) {
	t.Parallel()
	s := NewStatic(nil)
	if set := s.Current(); set == nil || set.Len() != 0 || s.Status().Ready() {
		t.Errorf("nil set: %v, %+v", set, s.Status())
	}
	set := jose.NewKeySet(key("a"))
	if s := NewStatic(set); s.Current() != set || s.Refetch(context.Background()) != set || s.Status().Keys != 1 {
		t.Error("NewStatic does not serve its set")
	}
}
