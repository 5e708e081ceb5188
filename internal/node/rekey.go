package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/operr"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
)

// Root-key rotation (keygate operator rekey). A rotation replaces the root
// key, or the passphrase it is derived from, while the fleet serves:
//
//  1. StartRekey stores the rotation's state with each root key sealed
//     under the other and makes the new key current on this node; new
//     records are sealed under it from then on.
//  2. Every other node learns of it within seconds — at once through a
//     notice on RekeyChannel, within RekeyPoll from the store otherwise, or
//     on the first record it cannot open — opens the new key with the old
//     one and makes it current too, keeping the old one to open what is not
//     rewrapped yet. A node that starts or unseals meanwhile with either key
//     gets the other from the state, so there is no moment at which a node
//     cannot open a record.
//  3. One node at a time (a lease in the state) rewraps every signing key
//     and tenant data key under the new root key, without touching the
//     payloads, at most Rate records a second, and counts its progress in
//     the state. A node killed midway leaves the state as it was: the lease
//     runs out and a node carries on where the records say.
//  4. When a pass finds no record under another key, and another does
//     RekeyGrace later (a node that had not heard of the rotation may have
//     sealed one under the old key meanwhile), the state is marked done and
//     both sealed keys are dropped from it; every node then forgets the old
//     key. From then on only the new key opens the store.
//
// The keyring's passphrase header (keyring.json) is replaced on every node
// by the new one when the new key comes from a passphrase, and a dev node's
// generated key file follows the key; a key file or variable the operator
// manages is theirs to replace, before the node's next start.

// RekeyChannel carries root-key rotation notices (the rotation's id):
// every node reads the state from the store on one.
const RekeyChannel = "rekey"

// Timing of rotations.
const (
	RekeyPoll  = 2 * time.Second  // how often a node reads the state, notice or not
	RekeyGrace = 5 * time.Second  // between the last two passes that find nothing to rewrap
	rekeyLease = 10 * time.Second // how long the rewrapping node holds the task without renewing
)

// Errors of StartRekey.
var (
	ErrRekeyRunning = errors.New("a root-key rotation is under way; wait for it to finish (keygate operator rekey --status)")
	ErrRekeySealed  = errors.New("the node is sealed: unseal it before rotating the root key")
)

// RekeyRequest asks for a rotation: exactly one of NewKey (on a node whose
// root key is a file or variable) and NewPassphrase (on a node unsealed by
// passphrase), and the current root key, CurrentKey or CurrentPassphrase.
// The current key is required because the admin token alone must not let
// its holder choose a root key it knows: whoever rotates must already hold
// the root key. Only a dev node, whose key lies in its data directory,
// reads it there when neither is given.
type RekeyRequest struct {
	NewKey            rootkey.Key
	NewPassphrase     []byte
	CurrentKey        rootkey.Key
	CurrentPassphrase []byte
	Rate              int // records rewrapped per second at most; 0: no bound
}

// RekeyStatus is a rotation's state, for operators: the store's, without
// the sealed keys.
type RekeyStatus struct {
	ID, State                        string // State "" when there has been none
	OldKeyID, NewKeyID               string
	Done, Total                      int64
	Rate                             int
	Worker                           string
	Failed                           string
	StartedAt, UpdatedAt, FinishedAt time.Time
	// Holds lists the root key IDs this node holds, current first.
	Holds []string
}

// rekeying is a node's part in rotations.
type rekeying struct {
	self string        // this process's name as a rewrapping worker
	wake chan struct{} // a notice or a start: look at the state now
	mu   sync.Mutex    // one look at the state at a time
	// warned is the rotation this node said it could not follow (under mu).
	warned string
}

func newRekeying() rekeying {
	b := make([]byte, 8)
	rand.Read(b)
	return rekeying{self: "kgw_" + hex.EncodeToString(b), wake: make(chan struct{}, 1)}
}

func (r *rekeying) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func rekeyRefused(reason string) error { return &RefusedError{Reason: reason, Op: "rekey"} }

func rekeyAAD(id, which string) []byte { return []byte("keygate rekey " + id + " " + which) }

// StartRekey starts a rotation to req's new key (see the package comment
// above) and returns its status; the rewrapping runs in Run's loop.
func (n *Node) StartRekey(ctx context.Context, req RekeyRequest) (RekeyStatus, error) {
	n.unsealMu.Lock()
	defer n.unsealMu.Unlock()
	if n.keyring.Sealed() {
		return RekeyStatus{}, ErrRekeySealed
	}
	prev, err := n.store.GetRekey(ctx)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return RekeyStatus{}, fmt.Errorf("%w: %w", ErrStore, err)
	case prev.State == store.RekeyRewrapping:
		return RekeyStatus{}, ErrRekeyRunning
	}
	cur, err := n.keyring.Current()
	if err != nil {
		return RekeyStatus{}, err
	}
	if prev.State == store.RekeyDone && prev.NewKeyID != cur.String() {
		// A node that missed the last rotation would start this one from
		// a key the store no longer uses, which no other node could follow.
		return RekeyStatus{}, rekeyRefused(fmt.Sprintf("this node's root key %s is not the store's, %s (rotated at %s): restart it with that key",
			cur, prev.NewKeyID, prev.FinishedAt.Format(time.RFC3339)))
	}
	old, err := n.currentRootKey(req, cur)
	if err != nil {
		return RekeyStatus{}, err
	}
	defer old.Destroy()
	next, header, err := n.newRootKey(req)
	if err != nil {
		return RekeyStatus{}, err
	}
	defer next.Destroy()
	if ids, _ := n.keyring.KeyIDs(); slices.Contains(ids, next.ID()) {
		return RekeyStatus{}, rekeyRefused("the new root key is one this node holds already")
	}
	id := make([]byte, 8)
	rand.Read(id)
	now := n.cfg.Now().UTC()
	r := store.Rekey{ID: hex.EncodeToString(id), State: store.RekeyRewrapping, OldKeyID: cur.String(),
		NewKeyID: next.ID().String(), Header: header, Rate: max(req.Rate, 0), StartedAt: now, UpdatedAt: now}
	if r.NewByOld, err = n.keyring.WrapKey(next, rekeyAAD(r.ID, "new")); err != nil {
		return RekeyStatus{}, err
	}
	under, err := rootkey.New(rootkey.Options{Root: next})
	if err != nil {
		return RekeyStatus{}, err
	}
	r.OldByNew, err = under.WrapKey(old, rekeyAAD(r.ID, "old"))
	under.Seal()
	if err != nil {
		return RekeyStatus{}, err
	}
	if err := n.store.PutRekey(ctx, r, prev.Revision); errors.Is(err, store.ErrConflict) {
		return RekeyStatus{}, ErrRekeyRunning
	} else if err != nil {
		return RekeyStatus{}, fmt.Errorf("%w: %w", ErrStore, err)
	}
	r.Revision = prev.Revision + 1
	n.log.Warn("root key rotation started", "rekey", r.ID, "old", r.OldKeyID, "new", r.NewKeyID, "passphrase", header != nil)
	n.followRekey(r)
	n.Publish(ctx, RekeyChannel, r.ID) //nolint:errcheck // the others also read the state every RekeyPoll
	n.rekey.poke()
	return n.rekeyStatus(r), nil
}

// currentRootKey is the root key now current, as req gives it or as the
// node's key file or variable holds it; it must be the one cur names.
func (n *Node) currentRootKey(req RekeyRequest, cur rootkey.KeyID) (rootkey.Key, error) {
	var k rootkey.Key
	var err error
	switch {
	case !req.CurrentKey.IsZero():
		if id := req.CurrentKey.ID(); id != cur {
			return rootkey.Key{}, rekeyRefused(fmt.Sprintf("the current root key given is %s, not the node's %s", id, cur))
		}
		return cloneKey(req.CurrentKey)
	case len(req.CurrentPassphrase) > 0:
		h, herr := rootkey.ReadHeader(n.keyringFile())
		if herr != nil {
			return rootkey.Key{}, rekeyRefused("no unseal passphrase is set up on this node: give the current root key")
		}
		if k, err = h.Derive(req.CurrentPassphrase); err != nil {
			return rootkey.Key{}, rekeyRefused("wrong current passphrase")
		}
	case n.boot.Dev && n.boot.RootKeyPath != "":
		if k, err = rootkey.LoadKeyFile(n.boot.RootKeyPath); err != nil {
			return rootkey.Key{}, fmt.Errorf("reading the current root key: %w", err)
		}
	default:
		return rootkey.Key{}, rekeyRefused("give the current root key (or passphrase): rotating the root key takes the key it replaces")
	}
	if k.ID() != cur {
		k.Destroy()
		return rootkey.Key{}, rekeyRefused(fmt.Sprintf("the current root key found is %s, not the node's %s", k.ID(), cur))
	}
	return k, nil
}

// cloneKey returns a copy of k that the caller may Destroy.
func cloneKey(k rootkey.Key) (rootkey.Key, error) {
	ring, err := rootkey.New(rootkey.Options{Root: k})
	if err != nil {
		return rootkey.Key{}, err
	}
	defer ring.Seal()
	ct, err := ring.WrapKey(k, nil)
	if err != nil {
		return rootkey.Key{}, err
	}
	return ring.UnwrapKey(ct, nil)
}

// newRootKey is req's new root key, with the header that derives it from
// its passphrase (nil for a key). A passphrase node takes a new
// passphrase, a key node a new key: the node's next start reads the same
// kind of source as this one.
func (n *Node) newRootKey(req RekeyRequest) (rootkey.Key, []byte, error) {
	passNode := n.keyring.HasHeader()
	switch {
	case req.NewKey.IsZero() == (len(req.NewPassphrase) == 0):
		return rootkey.Key{}, nil, rekeyRefused("give exactly one of a new root key and a new passphrase")
	case len(req.NewPassphrase) > 0 && !passNode:
		return rootkey.Key{}, nil, rekeyRefused("this node's root key is not derived from a passphrase: give a new root key")
	case !req.NewKey.IsZero() && passNode:
		return rootkey.Key{}, nil, rekeyRefused("this node is unsealed by passphrase: give a new passphrase")
	case len(req.NewPassphrase) > 0:
		k, header, err := rootkey.NewHeader(req.NewPassphrase, n.cfg.Rand)
		if errors.Is(err, rootkey.ErrWeakPassphrase) {
			return rootkey.Key{}, nil, rekeyRefused(err.Error())
		}
		return k, header, err
	}
	k, err := cloneKey(req.NewKey)
	return k, nil, err
}

// RekeyStatus reports the rotation's state from the store.
func (n *Node) RekeyStatus(ctx context.Context) (RekeyStatus, error) {
	r, err := n.store.GetRekey(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return n.rekeyStatus(store.Rekey{}), nil
	} else if err != nil {
		return RekeyStatus{}, fmt.Errorf("%w: %w", ErrStore, err)
	}
	return n.rekeyStatus(r), nil
}

func (n *Node) rekeyStatus(r store.Rekey) RekeyStatus {
	st := RekeyStatus{ID: r.ID, State: r.State, OldKeyID: r.OldKeyID, NewKeyID: r.NewKeyID, Done: r.Done, Total: r.Total,
		Rate: r.Rate, Worker: r.Worker, Failed: r.Failed, StartedAt: r.StartedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt}
	ids, _ := n.keyring.KeyIDs()
	for _, id := range ids {
		st.Holds = append(st.Holds, id.String())
	}
	return st
}

// syncRekey reads the rotation's state and follows it (followRekey).
func (n *Node) syncRekey(ctx context.Context) (store.Rekey, error) {
	r, err := n.store.GetRekey(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return store.Rekey{}, nil
	} else if err != nil {
		return store.Rekey{}, err
	}
	n.followRekey(r)
	return r, nil
}

// followRekey brings the keyring to r: during a rotation it holds both
// keys with the new one current; once it is done, the new key only. It
// also replaces the passphrase header and a dev key file. It runs under
// rekey.mu, which Seal also holds, so that the audit keys it derives never
// outlive a seal.
func (n *Node) followRekey(r store.Rekey) {
	if n.keyring.Sealed() || r.ID == "" {
		return
	}
	n.rekey.mu.Lock()
	defer n.rekey.mu.Unlock()
	ids, _ := n.keyring.KeyIDs()
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = id.String()
	}
	switch r.State {
	case store.RekeyRewrapping:
		if err := n.holdBoth(r, names); err != nil {
			n.log.Error("root key rotation: this node cannot follow it", "rekey", r.ID, "err", err)
			return
		}
		n.afterSwitch(r)
	case store.RekeyDone:
		if names[0] != r.NewKeyID {
			if slices.Contains(names, r.OldKeyID) && !slices.Contains(names, r.NewKeyID) && n.rekey.warned != r.ID {
				n.rekey.warned = r.ID // once, not at every look
				n.log.Error("root key rotation finished, but this node never learned the new key: restart it with the new root key", "rekey", r.ID, "new", r.NewKeyID)
			}
			return
		}
		for _, id := range ids[1:] {
			if id.String() == r.OldKeyID {
				n.keyring.Retire(id) //nolint:errcheck // not current, held: cannot fail
				n.log.Warn("root key rotation finished: the old root key is forgotten", "rekey", r.ID, "old", r.OldKeyID, "new", r.NewKeyID)
			}
		}
		n.afterSwitch(r)
	}
}

// holdBoth makes the keyring hold r's two keys, the new one current,
// opening the one it lacks with the one it has.
func (n *Node) holdBoth(r store.Rekey, names []string) error {
	hasOld, hasNew := slices.Contains(names, r.OldKeyID), slices.Contains(names, r.NewKeyID)
	switch {
	case hasOld && hasNew && names[0] == r.NewKeyID:
		return nil
	case hasOld && !hasNew:
		next, err := n.keyring.UnwrapKey(r.NewByOld, rekeyAAD(r.ID, "new"))
		if err != nil {
			return fmt.Errorf("opening the new root key: %w", err)
		}
		defer next.Destroy()
		if next.ID().String() != r.NewKeyID {
			return fmt.Errorf("the new root key is %s, not the state's %s", next.ID(), r.NewKeyID)
		}
		if err := n.keyring.Rotate(next); err != nil {
			return err
		}
		n.log.Warn("root key rotation: the new root key is current", "rekey", r.ID, "new", r.NewKeyID)
		n.setAuditKeys()
		return nil
	case hasNew && !hasOld:
		old, err := n.keyring.UnwrapKey(r.OldByNew, rekeyAAD(r.ID, "old"))
		if err != nil {
			return fmt.Errorf("opening the old root key: %w", err)
		}
		defer old.Destroy()
		if old.ID().String() != r.OldKeyID {
			return fmt.Errorf("the old root key is %s, not the state's %s", old.ID(), r.OldKeyID)
		}
		return n.keyring.Accept(old)
	case hasOld && hasNew:
		return errors.New("the keyring holds both keys with the old one current")
	}
	return fmt.Errorf("this node's root keys %v are neither %s nor %s", names, r.OldKeyID, r.NewKeyID)
}

// afterSwitch replaces what the node keeps on disk of the old key: the
// passphrase header with the new one, and a dev key file with the new key.
func (n *Node) afterSwitch(r store.Rekey) {
	if r.Header != nil && n.keyring.HasHeader() {
		path := n.keyringFile()
		if cur, err := os.ReadFile(path); err != nil || !bytes.Equal(cur, r.Header) {
			// Only a header that unseals the key now current replaces the
			// node's: the state is the store's, which is not trusted with
			// the node's next unseal.
			if err := n.keyring.CheckHeader(r.Header); err != nil {
				n.log.Error("root key rotation: the new passphrase header does not match the new root key; the node keeps its own", "path", path, "err", err)
			} else if err := rootkey.ReplaceHeader(path, r.Header); err != nil {
				n.log.Error("root key rotation: replacing the passphrase header failed; the old passphrase still unseals this node until the rotation ends", "path", path, "err", err)
			} else {
				n.log.Warn("root key rotation: the passphrase header is replaced; unseal with the new passphrase from now on", "path", path)
			}
		}
	}
	if n.boot.Dev && n.boot.RootKeyPath == filepath.Join(n.cfg.DataDir, RootKeyFile) && r.State == store.RekeyRewrapping {
		if k, err := rootkey.LoadKeyFile(n.boot.RootKeyPath); err == nil && k.ID().String() == r.NewKeyID {
			k.Destroy()
			return
		}
		next, err := n.keyring.UnwrapKey(r.NewByOld, rekeyAAD(r.ID, "new"))
		if err == nil {
			err = rootkey.ReplaceKeyFile(n.boot.RootKeyPath, next)
			next.Destroy()
		}
		if err != nil {
			n.log.Error("root key rotation: replacing the dev root key file failed", "path", n.boot.RootKeyPath, "err", err)
		}
	}
}

// rekeyCandidate is the unseal verifier's part: during a rotation, a
// candidate holding either key gets the other, the new one current.
func rekeyCandidate(candidate *rootkey.Keyring, r store.Rekey) error {
	if r.State != store.RekeyRewrapping {
		return nil
	}
	cur, err := candidate.Current()
	if err != nil {
		return err
	}
	switch cur.String() {
	case r.OldKeyID:
		next, err := candidate.UnwrapKey(r.NewByOld, rekeyAAD(r.ID, "new"))
		if err != nil {
			return err
		}
		defer next.Destroy()
		return candidate.Rotate(next)
	case r.NewKeyID:
		old, err := candidate.UnwrapKey(r.OldByNew, rekeyAAD(r.ID, "old"))
		if err != nil {
			return err
		}
		defer old.Destroy()
		return candidate.Accept(old)
	}
	return nil
}

// openRekey follows a rotation at start, before the signing keys are
// loaded: a node started with either key of a rotation under way gets the
// other; one started with a key a finished rotation replaced is refused
// with the reason.
func (n *Node) openRekey(ctx context.Context) error {
	r, err := n.store.GetRekey(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("root key rotation: %w", err)
	}
	if n.keyring.Sealed() {
		return nil
	}
	cur, _ := n.keyring.Current()
	if r.State == store.RekeyDone && cur.String() == r.OldKeyID {
		return operr.Errorf("the root key given (%s) was replaced by %s at %s (keygate operator rekey): start with the new root key",
			cur, r.NewKeyID, r.FinishedAt.Format(time.RFC3339))
	}
	n.followRekey(r)
	return nil
}
