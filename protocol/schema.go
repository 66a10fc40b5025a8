package protocol

import "embed"

// SchemaFS holds the JSON Schemas (draft 2020-12) of the protocol, for
// clients in other languages and for tests:
//
//	schema/<frame>.json                       hello, accepted, incompatible, refused, request, response,
//	                                          session_projection, session_delta,
//	                                          runtime_resource_update, runtime_resource_pty_data,
//	                                          closed
//	schema/registration.json                  the registration record
//	schema/operations/<operation>.input.json  each operation's input
//	schema/operations/<operation>.result.json each operation's result
//	schema/records/<type>.json                the data of the transcript records of long sessions:
//	                                          compaction, compaction_setting, file_change, forked
//
// Schemas of what the host decodes strictly (hello, request, inputs) forbid
// additional properties; schemas of what the host sends allow them, so a
// newer host may add fields.
//
//go:embed schema
var SchemaFS embed.FS
