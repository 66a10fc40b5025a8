package protocol

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// Frame kinds. A request or response frame has no kind.
const (
	KindHello                  = "hello"
	KindAccepted               = "accepted"
	KindIncompatible           = "incompatible"
	KindRefused                = "refused"
	KindSessionProjection      = "subscription.session_projection"
	KindSessionDelta           = "subscription.session_delta"
	KindRuntimeResourceUpdate  = "subscription.runtime_resource_update"
	KindRuntimeResourcePtyData = "subscription.runtime_resource_pty_data"
	KindSubscriptionClosed     = "subscription.closed"
	KindSessionListUpdate      = "subscription.session_list_update"
)

// PushedKinds lists the kinds of frames a host pushes to a subscriber.
var PushedKinds = []string{
	KindSessionProjection, KindSessionDelta, KindRuntimeResourceUpdate,
	KindRuntimeResourcePtyData, KindSubscriptionClosed, KindSessionListUpdate,
}

// Surfaces a client may name in its hello.
const (
	SurfaceCLI = "cli"
	SurfaceTUI = "tui"
	SurfaceWeb = "web"
	SurfaceACP = "acp"
	SurfaceSDK = "sdk"
)

// Hello is a client's first frame.
type Hello struct {
	Kind               string `json:"kind"`
	ClientInstanceID   string `json:"clientInstanceId"`
	ProtocolMin        int    `json:"protocolMin"`
	ProtocolMax        int    `json:"protocolMax"`
	CompatibilityEpoch int    `json:"compatibilityEpoch"`
	CompositionID      string `json:"compositionId"`
	Surface            string `json:"surface,omitempty"`
}

// Principal is who a connection acts for.
type Principal struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Label is a guest's grant's label, as the owner gave it; empty for
	// the owner and for a grant without one.
	Label string `json:"label,omitempty"`
}

// Principal kinds.
const (
	PrincipalLocalOwner = "local_owner"
	PrincipalGuest      = "guest"
)

// LocalOwner is the principal of a local connection from the host's own uid.
var LocalOwner = Principal{ID: "local_os_user", Kind: PrincipalLocalOwner}

// Accepted answers a compatible hello.
type Accepted struct {
	Kind         string    `json:"kind"`
	HostEpoch    string    `json:"hostEpoch"`
	ConnectionID string    `json:"connectionId"`
	Protocol     int       `json:"protocol"`
	Principal    Principal `json:"principal"`
}

// Incompatible answers a hello the host cannot serve; the host then closes.
type Incompatible struct {
	Kind                   string `json:"kind"`
	Reason                 string `json:"reason"`
	HostProtocolMin        int    `json:"hostProtocolMin"`
	HostProtocolMax        int    `json:"hostProtocolMax"`
	HostCompatibilityEpoch int    `json:"hostCompatibilityEpoch"`
}

// Refused is the host's first and only frame on a connection it will not
// serve because it serves MaxConnections already. It is sent without
// waiting for the hello; the host then closes the connection.
type Refused struct {
	Kind string `json:"kind"`
	// Reason says why, for people.
	Reason string `json:"reason"`
	// MaxConnections is the host's limit of connections.
	MaxConnections int `json:"maxConnections"`
}

// Request asks the host to run one operation. Input is a JSON object.
type Request struct {
	RequestID string          `json:"requestId"`
	Operation string          `json:"operation"`
	Input     json.RawMessage `json:"input,omitempty"`
	// Caller is the client a host forwards a session operation for. Only
	// a worker accepts it, from its host; a host closes the connection of
	// a client that sends it.
	Caller *Caller `json:"caller,omitempty"`
}

// Caller is who an operation is run for: the end client's connection,
// as its host admitted it.
type Caller struct {
	ConnectionID     string    `json:"connectionId"`
	ClientInstanceID string    `json:"clientInstanceId"`
	Surface          string    `json:"surface,omitempty"`
	Principal        Principal `json:"principal"`
}

// Response answers one request: Result when OK, Error otherwise.
type Response struct {
	RequestID string          `json:"requestId"`
	Operation string          `json:"operation"`
	OK        bool            `json:"ok"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *Error          `json:"error,omitempty"`
}

// Pushed is the header every host-pushed subscription frame carries.
// Sequence counts per subscription from 1.
type Pushed struct {
	Kind           string `json:"kind"`
	HostEpoch      string `json:"hostEpoch"`
	SubscriptionID string `json:"subscriptionId"`
	Sequence       uint64 `json:"sequence"`
}

// SessionProjectionFrame carries a subscriber's full session snapshot.
type SessionProjectionFrame struct {
	Pushed
	Snapshot json.RawMessage `json:"snapshot"`
}

// SessionDeltaFrame carries one ordered change to the projection.
type SessionDeltaFrame struct {
	Pushed
	Delta json.RawMessage `json:"delta"`
}

// RuntimeResourceUpdateFrame carries a runtime resource's changed state.
type RuntimeResourceUpdateFrame struct {
	Pushed
	RuntimeResourceUpdate
}

// RuntimeResourceUpdate is what a runtime_resource_update frame says.
type RuntimeResourceUpdate struct {
	SessionID string          `json:"sessionId"`
	Ref       string          `json:"ref"`
	Resource  json.RawMessage `json:"resource"`
}

// SessionListUpdateFrame tells a subscriber of the session list
// (session.list.watch) a session's entry as it stands now: created,
// changed (its title, state, settings, last activity, archived), or
// removed.
type SessionListUpdateFrame struct {
	Pushed
	SessionID string `json:"sessionId"`
	// Session is the session's header as session.list gives it; absent
	// when the session was removed.
	Session *Session `json:"session,omitempty"`
	// Removed is set when the session no longer exists.
	Removed bool `json:"removed,omitempty"`
}

// RuntimeResourcePtyDataFrame carries PTY output, in order per resource.
type RuntimeResourcePtyDataFrame struct {
	Pushed
	RuntimeResourcePtyData
}

// RuntimeResourcePtyData is what a runtime_resource_pty_data frame says.
type RuntimeResourcePtyData struct {
	SessionID string `json:"sessionId"`
	Ref       string `json:"ref"`
	// PtySequence is the sequence of the last piece of the PTY's output
	// the frame carries: increasing, with gaps where pieces were merged.
	PtySequence uint64 `json:"ptySequence"`
	Data        string `json:"data"`
	// Screen marks data that redraws the PTY's whole screen as it is:
	// the first frame of a PTY a subscription chooses. Output frames
	// follow it, none missing.
	Screen bool `json:"screen,omitempty"`
}

// PtyDataFields are a runtime_resource_pty_data frame's fields with its
// data left as the JSON string it arrived as: a relay passes a PTY's
// output on, and joins consecutive pieces of it, without decoding it.
type PtyDataFields struct {
	SessionID   string          `json:"sessionId"`
	Ref         string          `json:"ref"`
	PtySequence uint64          `json:"ptySequence"`
	Data        json.RawMessage `json:"data"`
	Screen      bool            `json:"screen,omitempty"`
}

// DecodePtyDataFields decodes a runtime_resource_pty_data frame, or its
// fields alone, keeping its data encoded: Data may share b's memory.
func DecodePtyDataFields(b []byte) (PtyDataFields, error) {
	var f PtyDataFields
	if !f.scan(b) {
		f = PtyDataFields{}
		if err := json.Unmarshal(b, &f); err != nil {
			return PtyDataFields{}, translate(err, "")
		}
	}
	if len(f.Data) < 2 || f.Data[0] != '"' {
		return PtyDataFields{}, FieldError("data", "must be a string")
	}
	if f.Ref == "" {
		return PtyDataFields{}, FieldError("ref", "is required")
	}
	return f, nil
}

// AppendData appends the output that f.Data encodes, as
// json.Unmarshal would decode it, to b. f is one DecodePtyDataFields
// returned.
func (f *PtyDataFields) AppendData(b []byte) []byte {
	return appendUnquoted(b, f.Data[1:len(f.Data)-1])
}

// scan decodes the fields as json.Unmarshal would, in one pass that
// checks the data but does not decode it; false: decode them with
// json.Unmarshal, which also says what is wrong.
func (f *PtyDataFields) scan(b []byte) bool {
	return scanObject(b, func(key, val []byte) bool {
		_, ok := f.scanMember(key, val)
		return ok
	})
}

// scanMember decodes one member of the fields' object, when it is one of
// theirs (known), as json.Unmarshal would; ok is false for a value it
// would refuse.
func (f *PtyDataFields) scanMember(key, val []byte) (known, ok bool) {
	switch {
	case keyIs(key, "sessionId"):
		return true, scanStringField(val, &f.SessionID)
	case keyIs(key, "ref"):
		return true, scanStringField(val, &f.Ref)
	case keyIs(key, "ptySequence"):
		return true, scanUintField(val, &f.PtySequence)
	case keyIs(key, "data"):
		f.Data = val
		return true, true
	case keyIs(key, "screen"):
		return true, scanBoolField(val, &f.Screen)
	}
	return false, true
}

// scanMember decodes one member of a pushed frame's head, as
// PtyDataFields.scanMember does.
func (p *Pushed) scanMember(key, val []byte) (known, ok bool) {
	switch {
	case keyIs(key, "kind"):
		return true, scanStringField(val, &p.Kind)
	case keyIs(key, "hostEpoch"):
		return true, scanStringField(val, &p.HostEpoch)
	case keyIs(key, "subscriptionId"):
		return true, scanStringField(val, &p.SubscriptionID)
	case keyIs(key, "sequence"):
		return true, scanUintField(val, &p.Sequence)
	}
	return false, true
}

// DecodePtyDataFrame decodes a runtime_resource_pty_data frame into f,
// which it overwrites, as json.Unmarshal would, its errors included, but
// in one pass over the output: a PTY's output is most of what a client
// that watches one reads.
func DecodePtyDataFrame(b []byte, f *RuntimeResourcePtyDataFrame) error {
	var head Pushed
	var fields PtyDataFields
	var data string
	scanned := scanObject(b, func(key, val []byte) bool {
		if keyIs(key, "data") {
			return scanStringField(val, &data)
		}
		if known, ok := head.scanMember(key, val); known {
			return ok
		}
		_, ok := fields.scanMember(key, val)
		return ok
	})
	if !scanned {
		*f = RuntimeResourcePtyDataFrame{}
		return json.Unmarshal(b, f)
	}
	*f = RuntimeResourcePtyDataFrame{Pushed: head, RuntimeResourcePtyData: RuntimeResourcePtyData{
		SessionID: fields.SessionID, Ref: fields.Ref, PtySequence: fields.PtySequence, Data: data, Screen: fields.Screen,
	}}
	return nil
}

func (f *PtyDataFields) appendMembers(b []byte) []byte {
	b = slices.Grow(b, 64+len(f.SessionID)+len(f.Ref)+len(f.Data))
	b = append(b, `"sessionId":`...)
	b = AppendJSONString(b, f.SessionID)
	b = append(b, `,"ref":`...)
	b = AppendJSONString(b, f.Ref)
	b = append(b, `,"ptySequence":`...)
	b = strconv.AppendUint(b, f.PtySequence, 10)
	b = append(b, `,"data":`...)
	b = append(b, f.Data...)
	if f.Screen {
		b = append(b, `,"screen":true`...)
	}
	return b
}

// AppendPtyDataFrame appends to b the runtime_resource_pty_data frame of
// head (its kind aside) and f, f's data as it is.
func AppendPtyDataFrame(b []byte, head Pushed, f *PtyDataFields) []byte {
	b = appendPushedHead(b, KindRuntimeResourcePtyData, head.HostEpoch, head.SubscriptionID, head.Sequence)
	b = append(b, ',')
	b = f.appendMembers(b)
	return append(b, '}')
}

// JoinJSONStrings appends the JSON string b's characters to the JSON
// string a, which it reuses: a's closing quote is dropped and b's opening
// one. An escape never spans a quote, so the result is the JSON string of
// both texts.
func JoinJSONStrings(a, b []byte) []byte {
	return append(a[:len(a)-1], b[1:]...)
}

// Reasons a subscription is closed.
const (
	ClosedClientClosed   = "client_closed"
	ClosedSessionRemoved = "session_removed"
	ClosedSlowConsumer   = "slow_consumer"
	ClosedAccessRevoked  = "access_revoked"
	// ClosedHostDraining ends the subscriptions of a host that is shut
	// down: it stops the sessions' workers, and a client ends rather than
	// reconnects, which would start another host.
	ClosedHostDraining = "host_draining"
	// ClosedWorkerExited ends the subscriptions of a session whose worker
	// exited unexpectedly; the next attach starts a new worker.
	ClosedWorkerExited = "worker_exited"
	// ClosedHostReplaced ends the subscriptions of a host handing its home
	// to a newer host: the client reconnects and resumes there.
	ClosedHostReplaced = "host_replaced"
)

// SubscriptionClosedFrame is the last frame of a subscription.
type SubscriptionClosedFrame struct {
	Pushed
	Reason string `json:"reason"`
}

// AppendDeltaFrame appends to b the session delta frame of one encoded
// delta: a fan-out wraps the same delta bytes for each subscriber without
// encoding them again.
func AppendDeltaFrame(b []byte, hostEpoch, subscriptionID string, sequence uint64, delta []byte) []byte {
	b = appendPushedHead(b, KindSessionDelta, hostEpoch, subscriptionID, sequence)
	b = append(b, `,"delta":`...)
	b = append(b, delta...)
	return append(b, '}')
}

// AppendPushedFrame appends to b the pushed frame of kind whose fields
// beside its kind, epoch, subscription and sequence are those of the JSON
// object fields: a fan-out encodes the rest of a frame once and wraps it
// for each subscriber.
func AppendPushedFrame(b []byte, kind, hostEpoch, subscriptionID string, sequence uint64, fields []byte) []byte {
	b = appendPushedHead(b, kind, hostEpoch, subscriptionID, sequence)
	if inner := bytes.TrimSpace(fields); len(inner) > 2 {
		b = append(b, ',')
		b = append(b, inner[1:]...) // the fields and the closing brace
		return b
	}
	return append(b, '}')
}

// appendPushedHead appends a pushed frame's opening brace and head.
func appendPushedHead(b []byte, kind, hostEpoch, subscriptionID string, sequence uint64) []byte {
	b = append(b, `{"kind":`...)
	b = AppendJSONString(b, kind)
	b = append(b, `,"hostEpoch":`...)
	b = AppendJSONString(b, hostEpoch)
	b = append(b, `,"subscriptionId":`...)
	b = AppendJSONString(b, subscriptionID)
	b = append(b, `,"sequence":`...)
	return strconv.AppendUint(b, sequence, 10)
}
