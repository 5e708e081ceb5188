package jose

import (
	"slices"
	"unsafe"
)

// Clone returns a deep copy of t in one allocation that the garbage
// collector marks but never scans: every string and slice of the copy,
// including the compact token, refers into that allocation, and nothing in
// it refers out of it. A cache that keeps many verified tokens pays the
// collector one mark per token rather than a walk over a dozen pointers
// and the objects behind them.
//
// The copy reads exactly as t does. Like any Token it must not be
// modified: a pointer stored into it is invisible to the collector.
//
// spare is extra zero bytes of the same allocation, aligned to 8 bytes,
// for the caller to keep data that lives exactly as long as the copy; its
// capacity runs to the end of the allocation. The caller must not store
// there a pointer to memory outside the allocation either.
func (t *Token) Clone(extra int) (clone *Token, spare []byte) {
	var size packer
	size.token(t)
	at := (size.off + 7) &^ 7
	// slices.Grow rounds the capacity up to the allocator's size class, so
	// the spare bytes' capacity, which runs to the end of the allocation,
	// tells the caller what the copy costs.
	mem := slices.Grow([]byte(nil), at+max(extra, 0))
	mem = mem[:cap(mem)]
	fill := packer{mem: mem}
	return fill.token(t), mem[at : at+max(extra, 0) : len(mem)]
}

// packer lays out a Clone. It runs twice over the same calls: with mem nil
// it only counts the bytes, then it copies into mem. Strings that lie
// within the token's own buffers (the compact token, the decoded header,
// payload and signature) move with their buffer, so views keep sharing;
// any other string (one unescaped into an arena, or a cached header's) is
// copied on its own. Which case applies depends only on the source, so
// both runs lay out the same bytes.
type packer struct {
	mem   []byte
	off   int
	regs  [4]region
	nregs int
}

type region struct {
	from uintptr // the source buffer's address, only compared
	n    int
	to   unsafe.Pointer // nil when sizing
}

// take reserves n bytes aligned to align and returns them, or nil when
// sizing or when n is 0.
func (p *packer) take(n, align int) unsafe.Pointer {
	p.off = (p.off + align - 1) &^ (align - 1)
	at := p.off
	p.off += n
	if p.mem == nil || n == 0 {
		return nil
	}
	return unsafe.Pointer(&p.mem[at])
}

// region copies one of the token's buffers and records where it went.
func (p *packer) region(b []byte) []byte {
	if len(b) == 0 {
		return emptyOrNil(b)
	}
	to := p.take(len(b), 1)
	p.regs[p.nregs] = region{from: uintptr(unsafe.Pointer(unsafe.SliceData(b))), n: len(b), to: to}
	p.nregs++
	if to == nil {
		return nil
	}
	dst := unsafe.Slice((*byte)(to), len(b))
	copy(dst, b)
	return dst
}

// bytes moves b with the region that holds it, or copies it.
func (p *packer) bytes(b []byte) []byte {
	if len(b) == 0 {
		return emptyOrNil(b)
	}
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for _, r := range p.regs[:p.nregs] {
		if off := addr - r.from; addr >= r.from && off < uintptr(r.n) && uintptr(len(b)) <= uintptr(r.n)-off {
			if r.to == nil {
				return nil
			}
			return unsafe.Slice((*byte)(unsafe.Add(r.to, addr-r.from)), len(b))
		}
	}
	to := p.take(len(b), 1)
	if to == nil {
		return nil
	}
	dst := unsafe.Slice((*byte)(to), len(b))
	copy(dst, b)
	return dst
}

func (p *packer) str(s string) string {
	if b := p.bytes(bytesOf(s)); len(b) > 0 {
		return stringOf(b)
	}
	return ""
}

// strs copies a slice of strings into an array of the copy.
func (p *packer) strs(src []string) []string {
	if src == nil {
		return nil
	}
	arr := (*string)(p.take(len(src)*int(unsafe.Sizeof("")), 8))
	var dst []string
	if arr != nil {
		dst = unsafe.Slice(arr, len(src))
	} else if p.mem != nil {
		dst = []string{}
	}
	for i, s := range src {
		s = p.str(s)
		if dst != nil {
			dst[i] = s
		}
	}
	return dst
}

func emptyOrNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	return []byte{}
}

// token lays out the copy of t and returns it (nil when sizing).
func (p *packer) token(t *Token) *Token {
	c := (*Token)(p.take(int(tokenSize), 8))
	// The buffers first, so that the views into them are found.
	raw := p.region(bytesOf(t.raw))
	hraw := p.region(bytesOf(t.Header.raw))
	payload := p.region(t.payload)
	sig := p.region(t.sig)
	h := t.Header
	h.KeyID, h.Type, h.ContentType = p.str(h.KeyID), p.str(h.Type), p.str(h.ContentType)
	cl := &t.Claims
	var cc Claims
	cc.payload = p.bytes(cl.payload)
	cc.Issuer, cc.Subject, cc.ID, cc.Scope = p.str(cl.Issuer), p.str(cl.Subject), p.str(cl.ID), p.str(cl.Scope)
	for i := range cl.audBuf {
		cc.audBuf[i] = p.str(cl.audBuf[i])
	}
	ownAud := cl.Audience != nil && cap(cl.Audience) > 0 && unsafe.SliceData(cl.Audience) == &cl.audBuf[0]
	if !ownAud {
		cc.Audience = p.strs(cl.Audience)
	}
	ownMembers := cap(cl.members) > 0 && unsafe.SliceData(cl.members) == &cl.memBuf[0]
	var members []member
	if !ownMembers && cl.members != nil {
		arr := (*member)(p.take(len(cl.members)*int(unsafe.Sizeof(member{})), 4))
		if arr != nil {
			members = unsafe.Slice(arr, len(cl.members))
			copy(members, cl.members)
		} else if p.mem != nil {
			members = []member{}
		}
	}
	var escNames *[]string
	if cl.escNames != nil {
		escNames = (*[]string)(p.take(int(unsafe.Sizeof([]string(nil))), 8))
		names := p.strs(*cl.escNames)
		if escNames != nil {
			*escNames = names
		}
	}
	if c == nil {
		return nil
	}
	// Copy every field, then replace each that refers to memory: the
	// self-containment test walks the copy to check none is missed.
	*c = *t
	c.raw = stringOf(raw)
	c.payload, c.sig = payload, sig
	h.raw = ""
	if len(hraw) > 0 {
		h.raw = stringOf(hraw)
	}
	c.Header = h
	cl, nc := &t.Claims, &c.Claims
	nc.Issuer, nc.Subject, nc.ID, nc.Scope = cc.Issuer, cc.Subject, cc.ID, cc.Scope
	nc.payload, nc.audBuf, nc.escNames = cc.payload, cc.audBuf, escNames
	nc.Audience = cc.Audience
	if ownAud {
		nc.Audience = nc.audBuf[:len(cl.Audience):cap(cl.Audience)]
	}
	nc.members = members
	if ownMembers {
		nc.members = nc.memBuf[:len(cl.members):cap(cl.members)]
	}
	return c
}
