package protocol

// Version numbers negotiated in the handshake.
const (
	// ProtocolVersion is the only protocol version this package speaks.
	ProtocolVersion = 1
	// CompatibilityEpoch changes when hosts and clients of the same
	// protocol version must still refuse one another (a storage change).
	CompatibilityEpoch = 1
	// CompositionInteractive is the composition a host normally serves.
	CompositionInteractive = "agentd.interactive"
	// CompositionWorker is what a session's worker serves to its host.
	CompositionWorker = "agentd.worker"
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
)
