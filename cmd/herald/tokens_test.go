package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/api"
)

func TestResolveTokens(t *testing.T) {
	t.Parallel()
	env := map[string]string{"T_OPS": "ops-secret-0123456789", "T_ADMIN": "admin-secret-0123456789", "T_SHORT": "abc"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	got, err := resolveTokens([]tokenConfig{
		{Name: "ops", Role: "operate", Token: "${T_OPS}"},
		{Name: "root", Role: "admin", Token: "${T_ADMIN}"},
	}, lookup)
	require.NoError(t, err)
	require.Equal(t, []api.Token{
		{Name: "ops", Role: api.RoleOperate, Secret: env["T_OPS"]},
		{Name: "root", Role: api.RoleAdmin, Secret: env["T_ADMIN"]},
	}, got)
	require.Equal(t, env["T_ADMIN"], nodeToken(got), "a node calls its peers with its strongest token")

	for _, c := range []struct {
		in   tokenConfig
		want string
	}{
		{tokenConfig{Name: "ops", Role: "operate", Token: "ops-secret-0123456789"}, "must be an ${ENV} reference"},
		{tokenConfig{Name: "ops", Role: "operate", Token: "x${T_OPS}"}, "must be an ${ENV} reference"},
		{tokenConfig{Name: "ops", Role: "operate", Token: "${T_MISSING}"}, "T_MISSING is not set"},
		{tokenConfig{Name: "ops", Role: "operate", Token: "${T_SHORT}"}, "shorter than 16"},
		{tokenConfig{Name: "ops", Role: "root", Token: "${T_OPS}"}, "want read, operate or admin"},
		{tokenConfig{Name: "", Role: "read", Token: "${T_OPS}"}, "name is required"},
		{tokenConfig{Name: "a b", Role: "read", Token: "${T_OPS}"}, "name is required"},
	} {
		_, err := resolveTokens([]tokenConfig{c.in}, lookup)
		require.ErrorContains(t, err, c.want, "%+v", c.in)
		for _, v := range env {
			if len(v) >= 16 {
				require.NotContains(t, err.Error(), v, "an error never shows a secret")
			}
		}
	}
	_, err = resolveTokens([]tokenConfig{{Name: "a", Role: "read", Token: "${T_OPS}"}, {Name: "a", Role: "admin", Token: "${T_ADMIN}"}}, lookup)
	require.ErrorContains(t, err, "used twice")
	_, err = resolveTokens([]tokenConfig{{Name: "a", Role: "read", Token: "${T_OPS}"}, {Name: "b", Role: "admin", Token: "${T_OPS}"}}, lookup)
	require.ErrorContains(t, err, "same secret as token \"a\"")
	require.NotContains(t, err.Error(), env["T_OPS"])
}
