package jose

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// checkSelfContained walks every field of c, exported or not, and fails if
// a non-empty string or slice, or a pointer, refers outside the n bytes
// from c: the collector does not scan a Clone, so such a reference would
// not keep its target alive.
func checkSelfContained(t *testing.T, c *Token, n int) {
	t.Helper()
	lo := uintptr(unsafe.Pointer(c))
	hi := lo + uintptr(n)
	inside := func(path string, p unsafe.Pointer, size uintptr) {
		if a := uintptr(p); a < lo || a+size > hi {
			t.Fatalf("%s refers outside the clone: %#x+%d not in [%#x, %#x)", path, a, size, lo, hi)
		}
	}
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			if s := v.String(); len(s) > 0 {
				inside(path, unsafe.Pointer(unsafe.StringData(s)), uintptr(len(s)))
			}
		case reflect.Slice:
			if v.Cap() > 0 {
				inside(path, v.UnsafePointer(), uintptr(v.Cap())*v.Type().Elem().Size())
			}
			for i := range v.Len() {
				walk(path+"[]", v.Index(i))
			}
		case reflect.Pointer:
			if !v.IsNil() {
				inside(path, v.UnsafePointer(), v.Type().Elem().Size())
				walk("*"+path, v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(path+"."+v.Type().Field(i).Name, v.Field(i))
			}
		case reflect.Array:
			for i := range v.Len() {
				walk(path+"[]", v.Index(i))
			}
		case reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.UnsafePointer:
			t.Fatalf("%s: a %v in a Token; Clone does not know how to copy it", path, v.Kind())
		}
	}
	walk("Token", reflect.ValueOf(c).Elem())
}

// cloneSeeds are tokens whose parsed forms use every kind of storage: views
// into the buffers, an arena of unescaped strings and names, an audience
// and member list past their inline arrays, a joined scope, a cached
// header.
func cloneSeeds() []string {
	tok := fzHS256Token
	var many strings.Builder
	for i := range 20 {
		many.WriteString(`,"c` + string(rune('a'+i)) + `":` + string(rune('0'+i%10)))
	}
	return append(fzTokenSeeds(),
		tok(`{"alg":"HS256","kid":"k\u0031","typ":"at+jwt","cty":"JWT"}`, `{"iss":"i","sub":"s\u00e9","jti":"j","aud":"one"}`),
		tok(`{"alg":"HS256"}`, `{"aud":["a","b","c","d"],"scope":"x y","scp":["z","w"],"n\u0061me":1,"exp":2000000000}`),
		tok(`{"alg":"HS256"}`, `{"aud":[],"iss":"i"`+many.String()+`}`),
		tok(`{"alg":"HS256"}`, `{"aud":["a","b"],"iat":1,"nbf":2}`),
		tok(`{"alg":"HS256"}`, `{}`),
	)
}

func TestClone(t *testing.T) {
	for _, s := range cloneSeeds() {
		p := NewParser(0)
		tok, err := p.Parse(s)
		if err != nil {
			continue
		}
		p.Verified(tok) // so that the next parse takes its header from the cache
		cached, err := p.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, src := range []*Token{tok, cached} {
			for _, extra := range []int{0, 1, 100} {
				c, spare := src.Clone(extra)
				if len(spare) != extra || uintptr(unsafe.Pointer(unsafe.SliceData(spare)))%8 != 0 {
					t.Fatalf("spare: %d bytes, want %d, 8-aligned", len(spare), extra)
				}
				var size packer
				size.token(src)
				n := (size.off+7)&^7 + cap(spare)
				checkSelfContained(t, c, n)
				fzCheckToken(t, c, s)
				if d := fzSame(src, c); d != "" {
					t.Fatalf("clone of %q reads differently: %s", s, d)
				}
				if !reflect.DeepEqual(src, c) {
					t.Fatalf("clone of %q differs:\n%+v\n%+v", s, *src, *c)
				}
				for i, b := range spare {
					if b != 0 {
						t.Fatalf("spare byte %d is %d", i, b)
					}
				}
			}
		}
	}
}

func TestCloneAllocates(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	seeds := cloneSeeds()
	tok, err := Parse(seeds[len(seeds)-4])
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { tok.Clone(64) }); n != 1 {
		t.Errorf("Clone allocates %v times, want 1", n)
	}
}
