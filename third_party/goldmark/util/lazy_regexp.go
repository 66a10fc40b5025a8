package util

import (
	"regexp"
	"sync"
)

// lazyRegexp returns a function that compiles pattern the first time it is
// called and returns the same expression after that. Not part of goldmark
// v1.8.7: a package-level regexp.MustCompile compiles when the package is
// initialised, in every program that links it, whether or not it parses any
// Markdown.
func lazyRegexp(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}
