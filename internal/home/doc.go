// Package home owns the host's files: the home directory lock, the runtime
// directory, the socket, the registration record, and the registrations
// of the workers that outlive their host (workers.go).
//
// It places and guards files by the conventions of protocol's layout
// (SocketPath, RegistrationPath) and knows nothing of the protocol's
// operations, of sessions, or of connections beyond their peer's uid.
package home
