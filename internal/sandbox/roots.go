package sandbox

import (
	"os"
	"path/filepath"
	"strings"
)

// A grant is a path a rule is granted beneath, and its kind when the
// listing it came from said it.
type grant struct {
	path string
	kind kind
}

// What a grant's path is.
type kind int

const (
	unknown   kind = iota // not listed (a root), or a symbolic link: byKind looks
	directory             // a directory, as its parent's listing said
	file                  // anything else, as its parent's listing said
)

// cover returns the paths beneath which a rule must be granted so that it
// covers everything beneath root but the hidden paths. Landlock grants
// beneath a hierarchy and takes nothing back, so a directory on the way
// down to a hidden path is not granted itself: each of its entries is,
// but the one leading on, which is split in turn. Hidden paths are
// absolute, clean and free of symbolic links; a symbolic link whose
// target leads to or lies beneath one is left out (its target is covered
// where it lives). It also returns the directories it split: an entry
// added to one later is not covered until cover runs again. An entry of a
// listing keeps the kind the listing gave it, so that the rules need not
// look at each again.
func cover(root string, hidden []string) (grants []grant, split []string, err error) {
	switch relation(root, hidden) {
	case beneathHidden:
		return nil, nil, nil
	case free:
		return []grant{{path: root}}, nil, nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, nil, err
	}
	out, split := []grant{}, []string{root}
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			target, err := filepath.EvalSymlinks(p)
			if err != nil || relation(target, hidden) != free {
				continue // dangling, or a way around the split
			}
			out = append(out, grant{path: p})
			continue
		}
		if relation(p, hidden) == free {
			k := file
			if e.IsDir() {
				k = directory
			}
			out = append(out, grant{path: p, kind: k})
			continue
		}
		sub, subSplit, err := cover(p, hidden)
		if err != nil {
			return nil, nil, err
		}
		out, split = append(out, sub...), append(split, subSplit...)
	}
	return out, split, nil
}

// How a path stands to the hidden ones.
const (
	free          = iota // neither leads to nor lies beneath one
	leadsToHidden        // an ancestor of one
	beneathHidden        // one, or beneath one
)

func relation(p string, hidden []string) int {
	rel := free
	for _, h := range hidden {
		switch {
		case within(p, h):
			return beneathHidden
		case within(h, p):
			rel = leadsToHidden
		}
	}
	return rel
}

// within reports whether p is dir or lies beneath it.
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}
