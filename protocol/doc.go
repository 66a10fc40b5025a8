// Package protocol is agentd's wire contract: the frames clients and the host
// exchange over a stream socket, the operation table, the error codes, the
// limits, the registration record a host publishes, and strict decoding.
//
// It owns the names clients rely on and imports nothing else of agentd, so a
// client in any language can be written from it (and docs/protocol.md) alone.
//
// Transport: newline-delimited JSON, one object per line, at most
// MaxMessageBytes per message, the newline excluded.
package protocol
