package provider

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/agentd-dev/agentd/internal/llm"
)

// ModelSpec is one row of a provider's table of the models it knows
// without asking its service: the name, the context window and the price
// the provider publishes. Each provider package keeps one table; its
// Models, its Describe and the prices of its replies all read it.
type ModelSpec struct {
	ID string
	// ContextWindow is the most tokens one request may hold.
	ContextWindow int
	// Price is nil when the model's price is not published.
	Price *llm.Price
}

// Table is a provider's built-in models, best known first.
type Table []ModelSpec

// IDs returns the table's model names, in order.
func (t Table) IDs() []string {
	ids := make([]string, len(t))
	for i, m := range t {
		ids[i] = m.ID
	}
	return ids
}

// Find returns the row of model: the row named exactly so, else the row
// whose name model extends with a dated or versioned suffix
// ("claude-sonnet-4-5-20250929" is "claude-sonnet-4-5"), the longest such
// name winning.
func (t Table) Find(model string) (ModelSpec, bool) {
	var best ModelSpec
	found := false
	for _, m := range t {
		if m.ID == model {
			return m, true
		}
		if strings.HasPrefix(model, m.ID+"-") && len(m.ID) > len(best.ID) {
			best, found = m, true
		}
	}
	return best, found
}

// Describe returns what the table knows of model.
func (t Table) Describe(model string) llm.ModelInfo {
	m, ok := t.Find(model)
	if !ok {
		return llm.ModelInfo{}
	}
	return llm.ModelInfo{ContextWindow: m.ContextWindow, Known: m.ContextWindow > 0, Price: m.Price}
}

// ListedModel is a model as its provider's service lists it.
type ListedModel struct {
	ID string `json:"id"`
	// DisplayName is the service's name for people, when it gives one.
	DisplayName string `json:"displayName,omitempty"`
	// ContextWindow is the service's own figure, 0 when it gives none.
	ContextWindow int `json:"contextWindow,omitempty"`
}

// Lister is implemented by a provider that can ask its service which
// models it serves (its documented GET /v1/models).
type Lister interface {
	// ListingScope names whom a listing is for, so that a listing kept
	// for one service and key is not taken for another's: the service's
	// address and a digest of the key. It is "" when the provider cannot
	// list now (it has neither key nor base URL).
	ListingScope() string
	// ListModels asks the service for its models, following its pages.
	ListModels(ctx context.Context) ([]ListedModel, error)
}

func listingScope(p llm.Provider) string {
	if l, ok := p.(Lister); ok {
		return l.ListingScope()
	}
	return ""
}

func listModels(ctx context.Context, p llm.Provider) ([]ListedModel, error) {
	if l, ok := p.(Lister); ok {
		return l.ListModels(ctx)
	}
	return nil, errors.New(p.Name() + " cannot list its models")
}

// Suggest returns up to n of names nearest to name, nearest first: those
// name is a prefix of, or that are a prefix of name, then those within a
// few edits of it. Case is ignored. It returns none when nothing is near.
func Suggest(name string, names []string, n int) []string {
	target := strings.ToLower(name)
	type scored struct {
		name  string
		score int
	}
	var near []scored
	limit := max(2, len(target)/3)
	for _, cand := range names {
		if cand == name {
			continue
		}
		c := strings.ToLower(cand)
		d := editDistance(target, c)
		switch {
		case target != "" && (strings.HasPrefix(c, target) || strings.HasPrefix(target, c)):
			d = min(d, 1)
		case d > limit:
			continue
		}
		near = append(near, scored{cand, d})
	}
	slices.SortStableFunc(near, func(a, b scored) int { return cmp.Compare(a.score, b.score) })
	var out []string
	for _, s := range near {
		if len(out) == n {
			break
		}
		out = append(out, s.name)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
