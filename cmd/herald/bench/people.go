package bench

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/rules"
)

// wideColumns are the people file's columns the README documents (the
// directory's own fields and one extra column, region), in the order of
// rules/examples/people.csv.
var wideColumns = []string{"userid", "name", "department", "roles", "manager", "birthday", "lunar_birthday", "timezone", "region"}

// tagsColumn is the tenth column of --columns 10: everyone is tagged
// "staff" (people.in_tag "staff" plans the same people as people.all())
// and with their region's tag, "region-east" as the README's example.
const tagsColumn = "tags"

// writePeople writes a CSV people file of n people in columns 2, 9 or 10:
// two (userid, name), as the burst has always planned, nine, every
// documented column, or ten, those and tags. The wide files have the
// shapes a real directory has: four departments, one person in ten a
// manager (the others report to the manager of their ten), half in sales,
// three zones and four regions, a solar birthday for everyone and a lunar
// one for one in five.
func writePeople(path string, n, columns int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if columns == 2 {
		fmt.Fprintln(w, "userid,name")
		for i := range n {
			fmt.Fprintf(w, "u%06d,u%06d\n", i, i)
		}
	} else {
		depts := []string{"sales", "support", "engineering", "finance"}
		zones := []string{"Asia/Shanghai", "Asia/Shanghai", "Asia/Tokyo", "Europe/Berlin"}
		regions := []string{"north", "east", "south", "west"}
		header := strings.Join(wideColumns, ",")
		if columns == 10 {
			header += "," + tagsColumn
		}
		fmt.Fprintln(w, header)
		for i := range n {
			roles, manager := "sales", fmt.Sprintf("u%06d", i-i%10)
			if i%2 == 1 {
				roles = "support"
			}
			if i%10 == 0 {
				roles += ";manager"
				manager = ""
			}
			lunar := ""
			if i%5 == 0 {
				lunar = fmt.Sprintf("%02d-%02d", i%12+1, i%29+1)
			}
			fmt.Fprintf(w, "u%06d,Person %d,%s,%s,%s,19%02d-%02d-%02d,%s,%s,%s", i, i, depts[i%len(depts)], roles, manager,
				60+i%40, i%12+1, i%28+1, lunar, zones[i%len(zones)], regions[i%len(regions)])
			if columns == 10 {
				fmt.Fprintf(w, ",staff;region-%s", regions[i%len(regions)])
			}
			fmt.Fprintln(w)
		}
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// peopleFileName is the name a people file gets in the bench cluster's
// rules directory: the nodes read only people.csv, .json, .yaml or .yml.
func peopleFileName(src string) (string, error) {
	name := "people" + strings.ToLower(filepath.Ext(src))
	if !slices.Contains(rules.PeopleFiles, name) {
		return "", fmt.Errorf("bench: --people %s: want a .csv, .json, .yaml or .yml file", src)
	}
	return name, nil
}

func newBenchPeopleCmd() *cobra.Command {
	var n int
	var out string
	var columns int
	cmd := &cobra.Command{
		Use:   "people --n N --out FILE",
		Short: "Write a people file of N people (nine columns by default) for bench burst --people",
		Long: `Writes a CSV people file of N people, userids u000000…: with --columns 9
(the default) every column the README documents (userid, name,
department, roles, manager, birthday, lunar_birthday, timezone, region),
half of them with the role sales and one in ten a manager; with
--columns 10 those and tags (everyone "staff" and "region-<region>", for
people.in_tag); with --columns 2 the userid,name file bench burst
generates by itself. Starts no cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if n <= 0 || out == "" {
				return errors.New("--n must be positive and --out given")
			}
			if columns != 2 && columns != 9 && columns != 10 {
				return fmt.Errorf("--columns %d: want 2, 9 or 10", columns)
			}
			if err := writePeople(out, n, columns); err != nil {
				return err
			}
			st, err := os.Stat(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d people, %d columns, %s\n", out, n, columns, fmtBytes(float64(st.Size())))
			return nil
		},
	}
	cmd.Flags().IntVar(&n, "n", 100000, "people in the file")
	cmd.Flags().StringVar(&out, "out", "", "the file to write")
	cmd.Flags().IntVar(&columns, "columns", 9, "2 (userid,name), 9 (every documented column) or 10 (those and tags)")
	return cmd
}
