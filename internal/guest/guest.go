// Package guest owns the host's guests: the grants the owner gives, each
// for one session at one level, kept in the home, and the bearer tokens
// that prove them. It stores a token only as its hash and compares hashes
// in constant time. It knows nothing of connections or operations: the
// session service decides access from the grants it reports.
package guest

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/internal/atomicfile"
	"github.com/agentd-dev/agentd/protocol"
)

// FileName is the file of the home that holds the grants, mode 0600.
const FileName = "grants.json"

// TokenBytes is how many random bytes a token carries: 256 bits.
const TokenBytes = 32

// tokenPrefix marks agentd's tokens, so that a scanner of leaked secrets
// can tell one.
const tokenPrefix = "agentd_"

// Errors of the store.
var (
	// ErrNoGrant is returned for a grant id the store does not hold in
	// force: never given, revoked or expired.
	ErrNoGrant = errors.New("no such grant")
	// ErrBadToken is returned by Authenticate for a token that proves no
	// grant in force.
	ErrBadToken = errors.New("the token proves no grant")
)

// lastUsePersist is how stale the stored last use of a grant may be: a
// guest's use is written to the home at most this often.
const lastUsePersist = time.Minute

// record is one stored grant.
type record struct {
	protocol.Grant
	// TokenHash is the hex SHA-256 of the grant's token.
	TokenHash string `json:"tokenHash"`
}

// Store is the grants of one home. It is safe for concurrent use.
type Store struct {
	path string           // constant
	now  func() time.Time // constant

	mu     sync.Mutex
	grants map[string]*record   // guarded by mu: by grant id
	stored map[string]time.Time // guarded by mu: the last use written for each grant
}

// Open reads the grants stored in home; a home without any has none.
func Open(home string) (*Store, error) {
	s := &Store{path: filepath.Join(home, FileName), now: time.Now, grants: map[string]*record{}, stored: map[string]time.Time{}}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the grants: %w", err)
	}
	var file struct {
		Grants []*record `json:"grants"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		return nil, fmt.Errorf("reading the grants: %s: %w", s.path, err)
	}
	for _, r := range file.Grants {
		if r.GrantID == "" || r.SessionID == "" || len(r.TokenHash) != 2*sha256.Size {
			return nil, fmt.Errorf("reading the grants: %s: a grant lacks its id, session or token hash", s.path)
		}
		s.grants[r.GrantID] = r
		if r.LastUsedAt != nil {
			s.stored[r.GrantID] = *r.LastUsedAt
		}
	}
	return s, nil
}

// NewToken returns a new bearer token of TokenBytes random bytes and its
// hash, the only form of it a store keeps.
func NewToken() (token, hash string) {
	b := make([]byte, TokenBytes)
	rand.Read(b) // never fails: crypto/rand panics rather than return short
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token)
}

// HashToken returns the hex SHA-256 of token.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// SameHash compares two hashes in constant time.
func SameHash(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Create gives a new grant on session id at level, and returns it with its
// token.
func (s *Store) Create(sessionID, level, label string, expires *time.Time) (protocol.Grant, string, error) {
	switch {
	case level != protocol.GrantObserve && level != protocol.GrantControl:
		return protocol.Grant{}, "", fmt.Errorf(`field "level": %q is neither %q nor %q`, level, protocol.GrantObserve, protocol.GrantControl)
	case sessionID == "":
		return protocol.Grant{}, "", errors.New(`field "sessionId": empty`)
	case len(label) > 200 || strings.ContainsAny(label, "\n\r\x00"):
		return protocol.Grant{}, "", errors.New(`field "label": at most 200 bytes, on one line`)
	case expires != nil && !expires.After(s.now()):
		return protocol.Grant{}, "", fmt.Errorf(`field "expiresAt": %s is not in the future`, expires.Format(time.RFC3339))
	}
	token, hash := NewToken()
	id := make([]byte, 6)
	rand.Read(id)
	g := protocol.Grant{
		GrantID: "g-" + hex.EncodeToString(id), SessionID: sessionID, Level: level, Label: label,
		CreatedAt: s.now().UTC().Truncate(time.Second), ExpiresAt: expires,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grants[g.GrantID] = &record{Grant: g, TokenHash: hash}
	if err := s.writeLocked(); err != nil {
		delete(s.grants, g.GrantID)
		return protocol.Grant{}, "", err
	}
	return g, token, nil
}

// List returns the grants in force, oldest first.
func (s *Store) List() []protocol.Grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := make([]protocol.Grant, 0, len(s.grants))
	for _, r := range s.grants {
		if inForce(&r.Grant, now) {
			out = append(out, r.Grant)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].GrantID < out[j].GrantID
	})
	return out
}

// Revoke ends grant id, and the grants of a session of which it is one,
// at once.
func (s *Store) Revoke(id string) (protocol.Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.grants[id]
	if !ok || !inForce(&r.Grant, s.now()) {
		return protocol.Grant{}, fmt.Errorf("%w: %q", ErrNoGrant, id)
	}
	delete(s.grants, id)
	delete(s.stored, id)
	if err := s.writeLocked(); err != nil {
		// The grant is revoked in this host whatever the home says: a
		// revocation must never wait for a disk.
		return r.Grant, fmt.Errorf("grant %s revoked, but not written to the home: %w", id, err)
	}
	return r.Grant, nil
}

// RevokeSession revokes every grant on session id (the session was
// removed), returning them.
func (s *Store) RevokeSession(id string) []protocol.Grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []protocol.Grant
	for gid, r := range s.grants {
		if r.SessionID == id {
			gone = append(gone, r.Grant)
			delete(s.grants, gid)
			delete(s.stored, gid)
		}
	}
	if len(gone) > 0 {
		s.writeLocked()
	}
	return gone
}

// Authenticate returns the grant in force token proves. Every stored hash
// is compared, in constant time, so the time it takes tells nothing of
// which came close.
func (s *Store) Authenticate(token string) (protocol.Grant, error) {
	hash := HashToken(token)
	s.mu.Lock()
	defer s.mu.Unlock()
	var found *record
	for _, r := range s.grants {
		if SameHash(r.TokenHash, hash) {
			found = r
		}
	}
	if found == nil || !inForce(&found.Grant, s.now()) {
		return protocol.Grant{}, ErrBadToken
	}
	return found.Grant, nil
}

// Get returns grant id while it is in force.
func (s *Store) Get(id string) (protocol.Grant, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.grants[id]
	if !ok || !inForce(&r.Grant, s.now()) {
		return protocol.Grant{}, false
	}
	return r.Grant, true
}

// Use records that grant id's guest ran an operation now; it is written
// to the home at most once a minute.
func (s *Store) Use(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.grants[id]
	if !ok {
		return
	}
	now := s.now().UTC().Truncate(time.Second)
	r.LastUsedAt = &now
	if now.Sub(s.stored[id]) >= lastUsePersist {
		s.stored[id] = now
		s.writeLocked()
	}
}

func inForce(g *protocol.Grant, now time.Time) bool {
	return g.ExpiresAt == nil || now.Before(*g.ExpiresAt)
}

// writeLocked writes the grants to the home, mode 0600, durably: a
// revocation must hold after a crash. Call with mu held.
func (s *Store) writeLocked() error {
	file := struct {
		Grants []*record `json:"grants"`
	}{Grants: make([]*record, 0, len(s.grants))}
	for _, r := range s.grants {
		file.Grants = append(file.Grants, r)
	}
	sort.Slice(file.Grants, func(i, j int) bool { return file.Grants[i].GrantID < file.Grants[j].GrantID })
	b, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteDurable(s.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing the grants: %w", err)
	}
	return nil
}
