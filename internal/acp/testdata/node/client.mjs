// An ACP client on the reference TypeScript SDK: it starts the command
// its arguments name (agentd acp), runs a turn that needs a permission in
// a new session of the directory AGENTD_ACP_CWD, loads the session again
// giving it the MCP servers of AGENTD_ACP_MCP (a JSON list), and prints
// what it saw as one JSON object. A Go test runs it.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const [cmd, ...args] = process.argv.slice(2);
const cwd = process.env.AGENTD_ACP_CWD;
const mcpServers = JSON.parse(process.env.AGENTD_ACP_MCP ?? "[]");
const agent = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"] });

const updates = [];
const asked = [];
const app = client({ name: "agentd-node-test" })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    asked.push(params.toolCall.title);
    return { outcome: { outcome: "selected", optionId: "allow" } };
  })
  .onNotification(methods.client.session.update, ({ params }) => {
    updates.push(params.update);
  });

const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const result = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  const created = await ctx.request(methods.agent.session.new, { cwd, mcpServers: [] });
  const prompt = await ctx.request(methods.agent.session.prompt, {
    sessionId: created.sessionId,
    prompt: [{ type: "text", text: "run `echo from-node`" }],
  });
  const live = updates.splice(0);
  await ctx.request(methods.agent.session.load, { sessionId: created.sessionId, cwd, mcpServers });
  const replayed = updates.splice(0);
  const listed = await ctx.request(methods.agent.session.list, { cwd });
  let unknown = null;
  try {
    await ctx.request("no/such", {});
  } catch (err) {
    unknown = err.code ?? String(err);
  }
  return {
    loadSession: init.agentCapabilities?.loadSession ?? false,
    mcpCapabilities: init.agentCapabilities?.mcpCapabilities ?? {},
    stopReason: prompt.stopReason,
    asked,
    live: live.map((u) => u.sessionUpdate),
    // The session's title may come as the load starts: the host names
    // the session after its first prompt on its own time.
    replayed: replayed.map((u) => u.sessionUpdate).filter((k) => k !== "session_info_update"),
    replayedText: replayed
      .filter((u) => u.sessionUpdate === "agent_message_chunk")
      .map((u) => u.content.text)
      .join(""),
    listed: listed.sessions.map((s) => s.sessionId),
    sessionId: created.sessionId,
    unknown,
  };
});
agent.stdin.end();
process.stdout.write(JSON.stringify(result) + "\n");
