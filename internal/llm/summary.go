package llm

// SummarySystem is the system prompt of a request for a summary of a
// conversation's older part, which context compaction sends in its place.
// The request has one user message, the conversation written out, and no
// tools. Providers send it as any other; the offline provider recognises
// it and answers with a summary of its own making.
const SummarySystem = `You compact the context of a coding agent's long session. ` +
	`You are given the older part of its conversation with a person, written out. ` +
	`Write a summary the agent can carry on from without it: the person's requests and preferences, ` +
	`what was decided, what was done (files changed, commands run and what they showed), what failed, ` +
	`and what is still open. Keep names, paths, commands and error messages exact. Leave out pleasantries. ` +
	`Answer with the summary alone.`
