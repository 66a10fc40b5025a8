package cli

// KeyEnvs is keyEnvs, for the tests outside the package.
func KeyEnvs() map[string]string { return keyEnvs }
