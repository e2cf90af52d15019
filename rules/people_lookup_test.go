package rules

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDisplayNameAndFind(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{
		"people.csv": "userid,name\nlina,李娜\nLiNa2,李娜\nzhangwei,张伟\n",
		"a.lua":      simpleRule("a", `return {}`),
	}))
	require.Equal(t, "李娜", s.DisplayName("lina"))
	require.Empty(t, s.DisplayName("nobody"))
	require.Equal(t, []string{"lina", "LiNa2"}, s.Find(" 李娜 ", 10), "a name several people share finds them all")
	require.Equal(t, []string{"lina"}, s.Find("李娜", 1), "at most limit")
	require.Equal(t, []string{"zhangwei"}, s.Find("ZHANGWEI", 10), "userids ignore case")
	require.Empty(t, s.Find("", 10))
	require.Empty(t, s.Find("li", 10), "no partial matches: a search names a person")

	empty := load(t, newDir(t, map[string]string{"a.lua": simpleRule("a", `return {}`)}))
	require.Empty(t, empty.DisplayName("lina"), "no people file")
	require.Empty(t, empty.Find("lina", 10))
}
