package protocol

import "time"

// Version numbers negotiated in the handshake.
const (
	// ProtocolVersion is the only protocol version this package speaks.
	ProtocolVersion = 1
	// CompatibilityEpoch changes when hosts and clients of the same
	// protocol version must still refuse one another (a storage change).
	CompatibilityEpoch = 1
	// CompositionInteractive is the composition a host normally serves.
	CompositionInteractive = "agentd.interactive"
)

// Limits every peer enforces.
const (
	// MaxMessageBytes bounds one message, the newline excluded.
	MaxMessageBytes = 768 << 10
	// MaxInFlightDomainRequests bounds the domain requests (every operation
	// but host.status) a connection may have in flight. host.status has one
	// reserved slot beyond it.
	MaxInFlightDomainRequests = 64
	// ClientInFlightDomainRequests is what a well-behaved client keeps in
	// flight at most, leaving the host one slot of headroom.
	ClientInFlightDomainRequests = MaxInFlightDomainRequests - 1
	// MaxOutboundQueueBytes bounds the bytes queued towards one connection.
	MaxOutboundQueueBytes = 2 << 20
	// MaxOutboundQueueFrames bounds the frames queued towards one connection.
	// The byte bound is checked first.
	MaxOutboundQueueFrames = 4096
	// MaxRequestIDBytes bounds a request id.
	MaxRequestIDBytes = 128
	// MaxConnections is the default bound of the connections a host
	// serves at once, those still in their handshake included; one more
	// is answered Refused and closed.
	MaxConnections = 1024
	// MaxReadBytes is the default bound of the bytes a host holds at
	// once, across all its connections, for messages that outgrow a
	// connection's small read buffer (4 KiB). A connection whose next
	// message would take the total past it is closed.
	MaxReadBytes = 64 << 20
)

// Time limits every host enforces.
const (
	// HandshakeTimeout bounds the time from a connection to its hello.
	HandshakeTimeout = 10 * time.Second
	// MessageTimeout bounds the time one message may take to arrive, from
	// its first byte to its newline, once the handshake is done; an idle
	// connection has no bound. A full message of MaxMessageBytes meets it
	// at 13 KiB/s (about 105 kbit/s, a poor mobile link), so a slow but
	// live client is never cut off, while a client that stalls mid-message
	// lets go of what it holds of the host within the minute.
	MessageTimeout = 60 * time.Second
)
