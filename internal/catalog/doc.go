// Package catalog is the session catalog of one home: session headers on
// disk, id allocation and prefix selection, and the home's model settings.
//
// Each session has a folder, <home>/sessions/<id>, holding its header
// (header.json) beside the transcript (transcript.jsonl). The catalog reads
// every header once, when it is opened, and answers listings and selections
// from memory; every change is written to disk atomically before the call
// that made it returns. A folder whose header cannot be read stays in the
// catalog as a damaged entry: listed, selectable and removable, never
// deleted behind the owner's back. A folder whose header names another
// session (a copy made by hand, or restored from a backup) makes that
// session unselectable until the copy is gone. The home's settings (the default model and
// the model a client selected last) live in <home>/settings.json.
//
// The catalog never reads or writes transcripts, and knows nothing of
// workers, turns or the protocol's transport; it borrows only the wire shape
// of a session (protocol.Session) to describe one. One process owns a home at
// a time (the host, through the home's lock), so one Catalog per home is
// open at a time; a Catalog is safe for use by many goroutines.
package catalog
