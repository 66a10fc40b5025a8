package supervisor

// For the package's external tests, which start real workers through the
// command-line package (and so cannot be in this package).
var SessionOf = sessionOf
