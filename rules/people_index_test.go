package rules

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// cmpFold must compare as foldID's strings do, or the index misses people:
// runes whose lower case is ASCII (K, İ), ASCII and not, prefixes.
func TestCmpFoldOrdersAsFoldedStrings(t *testing.T) {
	t.Parallel()
	parts := []string{"a", "A", "z", "Z", "_", "0", "\u212a", "k", "K", "\u0130", "i", "I", "Σ", "σ", "ς", "张", "Ä", "ä", "\xff", ""}
	rnd := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		var b strings.Builder
		for range rnd.IntN(4) {
			b.WriteString(parts[rnd.IntN(len(parts))])
		}
		return b.String()
	}
	sign := func(n int) int { return min(max(n, -1), 1) }
	for range 20000 {
		a, b := word(), word()
		require.Equal(t, sign(strings.Compare(foldID(a), foldID(b))), sign(cmpFold(a, b)), "%q %q", a, b)
	}
}

func TestDirectoryFindsEveryUserIDWhateverItsCase(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("userid,name\n")
	ids := []string{"ZhangSan", "lisi", "\u212aelvin", "İpek", "wang_fang", "Ω", "u0001", "U0002"}
	for i := range 500 {
		ids = append(ids, fmt.Sprintf("P%04dx", i*7919%10007))
	}
	for _, id := range ids {
		fmt.Fprintf(&b, "%s,%s\n", id, id)
	}
	d, err := parsePeople("people.csv", []byte(b.String()))
	require.NoError(t, err)
	for _, id := range ids {
		for _, asked := range []string{id, strings.ToLower(id), strings.ToUpper(id)} {
			if foldID(asked) != foldID(id) {
				continue // ToUpper of İ's fold is not İ's
			}
			p, ok := d.Get(asked)
			require.True(t, ok, "%q asked as %q", id, asked)
			require.Equal(t, id, p.UserID)
		}
	}
	for _, absent := range []string{"", "zhangsa", "zhangsann", "p0000", "P10007x", "~"} {
		_, ok := d.Get(absent)
		require.False(t, ok, absent)
	}
}

// The repeat reported is the earliest in the file, as reading in order met
// it, whatever order the folded userids sort in: here "a" sorts first but
// repeats last.
// A directory of one person filled a table of one slot, and asking it for
// anyone else never returned.
func TestDirectoryOfOneFindsNobodyElse(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 4, 5} {
		var b strings.Builder
		b.WriteString("userid,name\n")
		for i := range n {
			fmt.Fprintf(&b, "u%d,x\n", i)
		}
		d, err := parsePeople("people.csv", []byte(b.String()))
		require.NoError(t, err)
		for i := range n + 3 {
			_, ok := d.Get(fmt.Sprintf("u%d", i))
			require.Equal(t, i < n, ok, "n=%d u%d", n, i)
		}
	}
}

func TestPeopleRepeatReportedIsTheEarliest(t *testing.T) {
	t.Parallel()
	_, err := parsePeople("people.csv", []byte("userid,name\na,1\nB,2\nc,3\nb,4\nA,5\nb,6\n"))
	require.ErrorContains(t, err, `line 5: userid "b" is already used on line 3 (as "B"`)
}

func BenchmarkDirectoryGet(b *testing.B) {
	var buf strings.Builder
	buf.WriteString("userid,name\n")
	const n = 1_000_000
	for i := range n {
		fmt.Fprintf(&buf, "User%06d,u\n", i)
	}
	d, err := parsePeople("people.csv", []byte(buf.String()))
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = fmt.Sprintf("user%06d", i*977%n)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, ok := d.Get(ids[i%len(ids)]); !ok {
			b.Fatal("missing")
		}
	}
}
