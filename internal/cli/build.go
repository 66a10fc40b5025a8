package cli

// agentd builds two ways from the same command package:
//
//   - the whole executable (the default): every command, and the host and
//     the workers it starts, which run as this executable's `host` and
//     `worker`;
//   - the client build (`-tags agentd_client`), for the commands a person
//     types: it links neither the host nor the worker, the model
//     providers, nor the MCP and ACP SDKs, and starts in about 60% of the
//     whole executable's page faults (docs/process-start.md). Its `host`,
//     `worker`, `mcp` and `acp` run the whole executable, installed beside
//     it as agentd-host (hostExecutableName), which also runs the hosts
//     it starts.
//
// As Tailscale's ts_omit tags trim what a build links, the tag only
// leaves files out: the commands that remain are the same code.

// hostExecutableName is the whole executable's name beside a client
// build.
const hostExecutableName = "agentd-host"

// The short help of the commands a client build runs through the whole
// executable: its own help lists them too.
const (
	shortHost   = "Run the agentd host for this home in the foreground."
	shortWorker = "Run one session's worker; the host starts it, never a person."
	shortMCP    = "List, add, remove and trust the MCP servers whose tools a session's agent gets."
	shortACP    = "Serve agentd's sessions to an editor over the Agent Client Protocol on stdin and stdout."
)
