package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/heraldhq/herald/engine/api"
)

// tokenConfig is one entry of the config's `tokens:` list.
type tokenConfig struct {
	Name string `yaml:"name"`
	Role string `yaml:"role"`
	// Token is a ${ENV} reference to the secret, never the secret itself:
	// config files get copied, committed and pasted into tickets.
	Token string `yaml:"token"`
	// TokenFile, instead of Token, is a file holding the secret (a
	// Kubernetes Secret volume, systemd's LoadCredential): read at start
	// and at every reload, so a token added on SIGHUP needs no new
	// environment, which a running process cannot get.
	TokenFile string `yaml:"token_file"`
}

// envOnly matches a value that is exactly one ${NAME} reference.
var envOnly = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// tokenName is what a token's name may be: it shows in audit records,
// answers and logs.
var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// minTokenLen is the shortest secret accepted: a bearer token is guessed
// over the network, so it must be long and random (openssl rand -hex 32).
const minTokenLen = 16

// resolveTokens checks the `tokens:` list and resolves each token's secret
// from its environment variable. Errors name the entry and the variable,
// never the value.
func resolveTokens(in []tokenConfig, lookup func(string) (string, bool)) ([]api.Token, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	out := make([]api.Token, 0, len(in))
	names := map[string]bool{}
	secrets := map[string]string{}
	for i, t := range in {
		where := fmt.Sprintf("config: tokens[%d]", i)
		if t.Name != "" {
			where = fmt.Sprintf("config: token %q", t.Name)
		}
		if !tokenName.MatchString(t.Name) {
			return nil, fmt.Errorf("%s: name is required: letters, digits, _ . - (at most 64)", where)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("%s: the name is used twice", where)
		}
		names[t.Name] = true
		role, err := api.ParseRole(t.Role)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		secret, from, err := tokenSecret(t, lookup)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if len(secret) < minTokenLen {
			return nil, fmt.Errorf("%s: the value of %s is shorter than %d characters; use a long random value (openssl rand -hex 32)", where, from, minTokenLen)
		}
		if other, dup := secrets[secret]; dup {
			return nil, fmt.Errorf("%s: has the same secret as token %q; give each token its own", where, other)
		}
		secrets[secret] = t.Name
		out = append(out, api.Token{Name: t.Name, Role: role, Secret: secret})
	}
	return out, nil
}

// tokenSecret reads one token's secret from its ${ENV} reference or its
// token_file, and says where it came from (for errors: never the value).
func tokenSecret(t tokenConfig, lookup func(string) (string, bool)) (secret, from string, err error) {
	if t.TokenFile != "" {
		if t.Token != "" {
			return "", "", errors.New("give token or token_file, not both")
		}
		data, err := os.ReadFile(t.TokenFile)
		if err != nil {
			return "", "", fmt.Errorf("token_file: %w", err)
		}
		return strings.TrimSpace(string(data)), "token_file " + t.TokenFile, nil
	}
	m := envOnly.FindStringSubmatch(t.Token)
	if m == nil {
		return "", "", fmt.Errorf("token must be an ${ENV} reference such as ${HERALD_TOKEN_%s} (or token_file: PATH), not the secret itself", upperName(t.Name))
	}
	secret, ok := lookup(m[1])
	if !ok || secret == "" {
		return "", "", fmt.Errorf("environment variable %s is not set", m[1])
	}
	return secret, m[1], nil
}

func upperName(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c == '-' || c == '.':
			b[i] = '_'
		}
	}
	return string(b)
}

// nodeToken is the token a node presents on its own writes to the other
// members (join, refreshing its member record): the strongest one
// configured, since joining needs admin. All members share one `tokens`
// list. Its reads carry nodeReadToken instead.
func nodeToken(tokens []api.Token) string {
	best, role := "", api.RolePublic
	for _, t := range tokens {
		if t.Role > role {
			best, role = t.Secret, t.Role
		}
	}
	return best
}

// nodeReadToken is the token a node's reads of the other members carry
// (status, reports, rule hashes): a read token, the first by name. Without
// one, and with a cluster secret, none (the node read credential stands
// for it); with neither, the weakest token there is, which the agent warns
// of at start (warnNodeReads): nothing else would be let in.
func nodeReadToken(tokens []api.Token, secret bool) string {
	best, role, name := "", api.RoleAdmin+1, ""
	for _, t := range tokens {
		if t.Role < api.RoleRead || (secret && t.Role > api.RoleRead) {
			continue
		}
		if t.Role < role || (t.Role == role && t.Name < name) {
			best, role, name = t.Secret, t.Role, t.Name
		}
	}
	return best
}

// nodeReadsTooStrong names the token a node's reads carry when it is
// stronger than read (no read token, no cluster secret), or "".
func nodeReadsTooStrong(tokens []api.Token, secret bool) string {
	tok := nodeReadToken(tokens, secret)
	for _, t := range tokens {
		if t.Secret == tok && tok != "" && t.Role > api.RoleRead {
			return t.Name + " (" + t.Role.String() + ")"
		}
	}
	return ""
}
