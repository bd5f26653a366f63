// Command gosemver records how Go's module semver package (golang.org/x/mod/semver, what the
// official MCP registry decides isLatest with, after adding a missing "v") reads version strings.
// Input: one version per line on stdin. Output: one JSON object, {"valid": [[version, bool]...],
// "order": [[version, cmp]...]}, where "order" lists the valid versions sorted by semver.Compare
// and cmp is Compare(previous, this) (-1, or 0 for versions that compare equal).
// Run by scripts/record_go_semver.py, which writes tests/registry/data/go_semver.json.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"golang.org/x/mod/semver"
)

func withV(s string) string {
	if strings.HasPrefix(s, "v") {
		return s
	}
	return "v" + s
}

func main() {
	var versions, valid []string
	scanner := bufio.NewScanner(os.Stdin)
	for scanner.Scan() {
		versions = append(versions, scanner.Text())
	}
	rows := [][]any{}
	for _, v := range versions {
		ok := semver.IsValid(withV(v))
		rows = append(rows, []any{v, ok})
		if ok {
			valid = append(valid, v)
		}
	}
	sort.SliceStable(valid, func(i, j int) bool { return semver.Compare(withV(valid[i]), withV(valid[j])) < 0 })
	order := [][]any{}
	for i, v := range valid {
		cmp := 0
		if i > 0 {
			cmp = semver.Compare(withV(valid[i-1]), withV(v))
		}
		order = append(order, []any{v, cmp})
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string]any{"valid": rows, "order": order}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
