package plugin

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Sentinels of a lookup in a Set.
var (
	// ErrUnknownCommand is returned for a command no package has.
	ErrUnknownCommand = errors.New("unknown command")
	// ErrAmbiguousCommand is returned for a command name two packages
	// have, typed without its package.
	ErrAmbiguousCommand = errors.New("ambiguous command")
	// ErrUnknownSkill is returned for a skill no package has.
	ErrUnknownSkill = errors.New("unknown skill")
)

// LoadAll loads the packages in dirs, in order. Two packages of one name
// cannot load side by side. The error names the field (field[i]) of the
// package at fault; the packages before it are returned with it.
func LoadAll(field string, dirs []string) ([]*Package, error) {
	out := make([]*Package, 0, len(dirs))
	for i, d := range dirs {
		p, err := Load(d)
		if err != nil {
			return out, fmt.Errorf("field \"%s[%d]\": %w", field, i, err)
		}
		if j := slices.IndexFunc(out, func(o *Package) bool { return o.Name == p.Name }); j >= 0 {
			return out, fmt.Errorf("field \"%s[%d]\": package %q of %s is named as %s is", field, i, p.Name, d, out[j].Dir)
		}
		out = append(out, p)
	}
	return out, nil
}

// Set is packages loaded side by side, for looking their commands and
// skills up by name. It is constant after NewSet.
type Set struct {
	packages []*Package
	// commands and skills count the set's commands and skills by name.
	commands, skills map[string]int
}

// NewSet returns a set of packages, whose names are distinct (LoadAll).
func NewSet(packages []*Package) *Set {
	s := &Set{packages: slices.Clone(packages), commands: map[string]int{}, skills: map[string]int{}}
	for _, p := range packages {
		for _, c := range p.Commands {
			s.commands[c.Name]++
		}
		for _, k := range p.Skills {
			s.skills[k.Name]++
		}
	}
	return s
}

// Packages returns the set's packages, in order.
func (s *Set) Packages() []*Package { return slices.Clone(s.packages) }

// Commands returns every command of the set, package by package.
func (s *Set) Commands() []Command {
	var out []Command
	for _, p := range s.packages {
		out = append(out, p.Commands...)
	}
	return out
}

// Skills returns every skill of the set, package by package.
func (s *Set) Skills() []Skill {
	var out []Skill
	for _, p := range s.packages {
		out = append(out, p.Skills...)
	}
	return out
}

// CommandName is the name a command is typed by: its own when no other
// package of the set has one of that name, else "package:name".
func (s *Set) CommandName(c Command) string {
	if s.commands[c.Name] > 1 {
		return c.Package + ":" + c.Name
	}
	return c.Name
}

// SkillName is the name a skill is loaded by, as CommandName.
func (s *Set) SkillName(k Skill) string {
	if s.skills[k.Name] > 1 {
		return k.Package + ":" + k.Name
	}
	return k.Name
}

// Command returns the command typed as name: "package:name", or a name
// only one package has. The error for none says which there are.
func (s *Set) Command(name string) (Command, error) {
	pkg, cmd, qualified := strings.Cut(name, ":")
	var found []Command
	for _, c := range s.Commands() {
		if qualified && c.Package == pkg && c.Name == cmd || !qualified && c.Name == name {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return Command{}, fmt.Errorf("%w /%s: %s", ErrUnknownCommand, name, s.knownCommands())
	}
	names := make([]string, len(found))
	for i, c := range found {
		names[i] = "/" + c.Package + ":" + c.Name
	}
	return Command{}, fmt.Errorf("%w /%s: packages have one each; type %s", ErrAmbiguousCommand, name, strings.Join(names, " or "))
}

func (s *Set) knownCommands() string {
	var names []string
	for _, c := range s.Commands() {
		names = append(names, "/"+s.CommandName(c))
	}
	if len(names) == 0 {
		return "the session's plugin packages have no commands"
	}
	return "the session's commands are " + strings.Join(names, ", ")
}

// Skill returns the skill of that name: "package:name", or a name only
// one package has.
func (s *Set) Skill(name string) (Skill, error) {
	pkg, sk, qualified := strings.Cut(name, ":")
	var found []Skill
	for _, k := range s.Skills() {
		if qualified && k.Package == pkg && k.Name == sk || !qualified && k.Name == name {
			found = append(found, k)
		}
	}
	if len(found) == 1 {
		return found[0], nil
	}
	var names []string
	for _, k := range s.Skills() {
		names = append(names, s.SkillName(k))
	}
	if len(names) == 0 {
		return Skill{}, fmt.Errorf("%w %q: the session has no skills", ErrUnknownSkill, name)
	}
	return Skill{}, fmt.Errorf("%w %q: the skills are %s", ErrUnknownSkill, name, strings.Join(names, ", "))
}

// Instructions is the system prompt's section that offers the set's
// skills to the model, empty when it has none.
func (s *Set) Instructions(tool string) string {
	skills := s.Skills()
	if len(skills) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n\n# Skills\n\nThese skills hold instructions for particular work. When a task matches one's description, call the %s tool with its name to load it before you start, and follow it.\n\n", tool)
	for _, k := range skills {
		fmt.Fprintf(&b, "- %s: %s\n", s.SkillName(k), k.Description)
	}
	return b.String()
}
