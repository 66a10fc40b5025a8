package sessions

// EchoModels offers the offline model alone, to the package's external
// tests.
type EchoModels = echoModels
