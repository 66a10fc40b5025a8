package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/plugin"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/tools"
	"github.com/agentd-dev/agentd/protocol"
)

// SkillTool is the name of the tool that loads a skill.
const SkillTool = "skill"

// packages are the session's plugin packages as this worker loaded them.
// A worker loads each package once, when it starts or when its packages
// are set to a list that adds it; activations counts the loads. Lock
// order: session.mu before packages.mu; packages never calls the session.
type packages struct {
	logger *slog.Logger // constant

	mu          sync.Mutex
	loaded      []loadedPackage // guarded by mu: in the order the session records them
	set         *plugin.Set     // guarded by mu: the packages that loaded
	activations map[string]int  // guarded by mu: loads by directory, in this worker's life
}

// loadedPackage is one package directory and what loading it gave.
type loadedPackage struct {
	dir string
	pkg *plugin.Package // nil when err is set
	err error
}

func newPackages(logger *slog.Logger) *packages {
	return &packages{logger: logger, set: plugin.NewSet(nil), activations: map[string]int{}}
}

// use makes dirs the session's packages: a package the worker has loaded
// already is kept as it is, a new one is loaded. A package that does not
// load is kept with its error and provides nothing; the session goes on
// without it.
func (p *packages) use(dirs []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := make([]loadedPackage, 0, len(dirs))
	for _, dir := range dirs {
		if i := slices.IndexFunc(p.loaded, func(l loadedPackage) bool { return l.dir == dir && l.err == nil }); i >= 0 {
			next = append(next, p.loaded[i])
			continue
		}
		l := loadedPackage{dir: dir}
		l.pkg, l.err = plugin.Load(dir)
		if l.err == nil {
			if j := slices.IndexFunc(next, func(o loadedPackage) bool { return o.pkg != nil && o.pkg.Name == l.pkg.Name }); j >= 0 {
				l.pkg, l.err = nil, fmt.Errorf("package %q is named as %s is", next[j].pkg.Name, next[j].dir)
			}
		}
		if l.err != nil {
			p.logger.Warn("a plugin package of the session did not load; the session goes on without it", "dir", dir, "err", l.err)
		} else {
			p.activations[dir]++
			p.logger.Debug("plugin package loaded", "dir", dir, "name", l.pkg.Name, "commands", len(l.pkg.Commands), "skills", len(l.pkg.Skills))
		}
		next = append(next, l)
	}
	p.loaded = next
	var ok []*plugin.Package
	for _, l := range next {
		if l.pkg != nil {
			ok = append(ok, l.pkg)
		}
	}
	p.set = plugin.NewSet(ok)
}

// current returns the set of the packages that loaded.
func (p *packages) current() *plugin.Set {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.set
}

// describe returns the packages, their commands and skills, as
// session.commands answers.
func (p *packages) describe() protocol.SessionCommandsResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := protocol.SessionCommandsResult{Packages: []protocol.PluginPackage{}, Commands: []protocol.PromptCommand{}, Skills: []protocol.PluginSkill{}}
	for _, l := range p.loaded {
		pp := protocol.PluginPackage{Dir: l.dir, Activations: p.activations[l.dir]}
		if l.err != nil {
			pp.Error = l.err.Error()
		} else {
			pp.Name, pp.Version, pp.Description = l.pkg.Name, l.pkg.Version, l.pkg.Description
		}
		out.Packages = append(out.Packages, pp)
	}
	for _, c := range p.set.Commands() {
		out.Commands = append(out.Commands, protocol.PromptCommand{
			Name: p.set.CommandName(c), Package: c.Package, Description: c.Description, ArgumentHint: c.ArgumentHint,
		})
	}
	for _, k := range p.set.Skills() {
		out.Skills = append(out.Skills, protocol.PluginSkill{Name: p.set.SkillName(k), Package: k.Package, Description: k.Description})
	}
	return out
}

func (s *session) listCommands(_ context.Context, _ *server.Call, in *protocol.SessionRef) (protocol.SessionCommandsResult, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.SessionCommandsResult{}, err
	}
	return s.plugins.describe(), nil
}

func (s *session) expandCommand(_ context.Context, _ *server.Call, in *protocol.CommandExpandInput) (protocol.CommandExpansion, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.CommandExpansion{}, err
	}
	c, err := s.plugins.current().Command(in.Name)
	if err != nil {
		return protocol.CommandExpansion{}, protocol.Errorf(protocol.CodeNotFound, "%v", err)
	}
	return protocol.CommandExpansion{Name: in.Name, Package: c.Package, Prompt: c.Expand(in.Arguments)}, nil
}

// setPlugins makes the session's packages those the host recorded: the
// new ones load now, those the worker had stay as they are.
func (s *session) setPlugins(_ context.Context, _ *server.Call, in *protocol.SessionPluginsSetInput) (protocol.Session, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.Session{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plugins.use(in.Plugins)
	s.header.Plugins = slices.Clone(in.Plugins)
	if len(s.header.Plugins) == 0 {
		s.header.Plugins = nil
	}
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventSessionChanged, Session: ptr(s.sessionLocked())})
	return s.sessionLocked(), nil
}

// turnTools returns the tools of a turn and the system prompt's section
// on skills: the worker's tools, and the skill tool when the session's
// packages have skills.
func (s *session) turnTools() ([]tools.Tool, string) {
	set := s.plugins.current()
	if len(set.Skills()) == 0 {
		return s.tools, ""
	}
	return append(slices.Clip(s.tools), skillTool{set: set}), set.Instructions(SkillTool)
}

// skillTool gives the model a skill's instructions: its SKILL.md.
type skillTool struct {
	set *plugin.Set
}

var skillSpec = llm.ToolSpec{
	Name: SkillTool,
	Description: "Load a skill: instructions for a particular kind of work, from the session's plugin packages. " +
		"The system prompt lists the skills by name with what each is for; call this with one's name before doing that work, then follow what it says.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"The skill's name, as the system prompt lists it.","minLength":1}},"required":["name"],"additionalProperties":false}`),
}

func (skillTool) Spec() llm.ToolSpec {
	spec := skillSpec
	spec.Parameters = slices.Clone(spec.Parameters)
	return spec
}

// ReadOnly is true: reading a skill changes nothing.
func (skillTool) ReadOnly() bool { return true }

func (t skillTool) Run(_ context.Context, _ *tools.Env, raw json.RawMessage) tools.Result {
	var args struct {
		Name string `json:"name"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil || args.Name == "" {
		return tools.Result{Content: `skill: want {"name": "<a skill's name>"}`, IsError: true}
	}
	k, err := t.set.Skill(args.Name)
	if err != nil {
		return tools.Result{Content: "skill: " + err.Error(), IsError: true}
	}
	return tools.Result{Content: fmt.Sprintf("Skill %s of package %s (its files are beside %s):\n\n%s", args.Name, k.Package, k.Path, k.Body)}
}
