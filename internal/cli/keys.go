package cli

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/agentd-dev/agentd/client"
)

// keyEnvs maps each provider that takes an API key to the environment
// variable it is read from: the providers' own names and variables, which
// a test holds to theirs (the client build links no provider).
var keyEnvs = map[string]string{
	"anthropic": "ANTHROPIC_API_KEY",
	"openai":    "OPENAI_API_KEY",
}

// hostLacksKey rewrites the refusal of a provider that is not configured
// when this process's environment has the provider's key: the running
// host was started without it, and the user has just set it. The message
// names both ways out; the error keeps its code.
func hostLacksKey(err error) error {
	if err == nil {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(keyEnvs)) {
		env := keyEnvs[name]
		if !strings.Contains(err.Error(), name+" is not configured") || os.Getenv(env) == "" {
			continue
		}
		msg := fmt.Sprintf("%s is set here, but the running host started without it and has no %s key. "+
			"Either store the key for the running host with `agentd auth set %s` (it reads the key from standard input), "+
			"or stop the host with `agentd shutdown` and run this again, so that a new host starts with this environment", env, name, name)
		var re *client.RemoteError
		if errors.As(err, &re) {
			re.Message = msg
			return err
		}
		return errors.New(msg)
	}
	return err
}
