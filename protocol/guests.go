package protocol

import "time"

// Grant levels: what a guest holding a grant may do to its session.
const (
	// GrantObserve reads the session: operations of AccessRead.
	GrantObserve = "observe"
	// GrantControl also drives it: AccessRead, AccessWrite and
	// AccessControl. No grant gives AccessOwner.
	GrantControl = "control"
)

// Grants reports whether a grant of level allows an operation of access.
func Grants(level string, access Access) bool {
	switch access {
	case AccessRead:
		return level == GrantObserve || level == GrantControl
	case AccessWrite, AccessControl:
		return level == GrantControl
	}
	return false
}

// Grant is what the owner gave one guest: one session, at one level, until
// it is revoked or expires. The guest's principal id is the grant's id.
type Grant struct {
	GrantID   string `json:"grantId"`
	SessionID string `json:"sessionId"`
	Level     string `json:"level"`
	Label     string `json:"label,omitempty"`
	// CreatedAt is when the owner gave it.
	CreatedAt time.Time `json:"createdAt"`
	// ExpiresAt is when it ends by itself; absent, it lasts until revoked.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// LastUsedAt is when the guest last ran an operation with it.
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
}

// GrantCreateInput is the input of grant.create.
type GrantCreateInput struct {
	SessionID string `json:"sessionId"`
	// Level is observe or control.
	Level string `json:"level"`
	Label string `json:"label,omitempty"`
	// ExpiresAt, when set, must be in the future.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// GrantCreateResult is the result of grant.create: the grant, and the
// guest's bearer token, which the host keeps only as a hash and so can
// never tell again.
type GrantCreateResult struct {
	Grant Grant  `json:"grant"`
	Token string `json:"token"`
	// URL is the guest's link on the web listener, when it listens.
	URL string `json:"url,omitempty"`
}

// GrantListInput is the input of grant.list.
type GrantListInput struct{}

// GrantListResult is the result of grant.list: the grants in force,
// oldest first.
type GrantListResult struct {
	Grants []Grant `json:"grants"`
}

// GrantRef names one grant.
type GrantRef struct {
	GrantID string `json:"grantId"`
}

// WebStartInput is the input of host.web.start.
type WebStartInput struct {
	// Listen is the address to listen on; empty is a free port on
	// 127.0.0.1. An address beyond loopback must be given here.
	Listen string `json:"listen,omitempty"`
	// CertFile and KeyFile, given together, serve TLS.
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
}

// WebStopInput is the input of host.web.stop.
type WebStopInput struct{}

// WebStopResult is the result of host.web.stop.
type WebStopResult struct {
	// Address is where the listener listened; empty if none did.
	Address string `json:"address"`
}

// WebListener is the host's web listener.
type WebListener struct {
	// Address is where it listens.
	Address string `json:"address"`
	// URL is its root; WebSocketURL the endpoint carrying the protocol.
	URL          string `json:"url"`
	WebSocketURL string `json:"websocketUrl"`
	// Loopback is false when it listens beyond this machine.
	Loopback bool `json:"loopback"`
	// OwnerToken is a new owner's web login token, from host.web.start:
	// accepted once, it replaces one not yet exchanged.
	OwnerToken string `json:"ownerToken,omitempty"`
}

func (in *GrantCreateInput) SessionRef() *string { return &in.SessionID }
