package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPersonGroupAddListRemove(t *testing.T) {
	t.Setenv("ASSENT_STORE", "")
	dir := t.TempDir()
	for _, name := range []string{"ada", "ben"} {
		if code, _, errs := runCLI(t, "token", "create", "--data", dir, "--kind", "human", "--name", name); code != 0 {
			t.Fatalf("create %s: %d %q", name, code, errs)
		}
	}
	if code, out, errs := runCLI(t, "person", "group", "add", "finance", "ada", "ben", "--data", dir); code != 0 || !strings.Contains(out, "added 2") {
		t.Fatalf("add: %d %q %q", code, out, errs)
	}
	code, out, _ := runCLI(t, "person", "group", "list", "--data", dir, "--json")
	var rows []struct{ Group, ID, Name string }
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 2 || rows[0].Group != "finance" || rows[0].Name+rows[1].Name != "adaben" && rows[0].Name+rows[1].Name != "benada" {
		t.Fatalf("list: %d %s", code, out)
	}
	for name, args := range map[string][]string{
		"bad group":      {"add", "Fin ance", "ada"},
		"unknown person": {"add", "finance", "zoe"},
		"no person":      {"add", "finance"},
		"not a member":   {"remove", "ops", "ada"},
	} {
		if code, _, errs := runCLI(t, append([]string{"person", "group"}, append(args, "--data", dir)...)...); code == 0 {
			t.Errorf("%s: accepted (%q)", name, errs)
		}
	}
	if code, _, errs := runCLI(t, "person", "group", "remove", "finance", "ada", "--data", dir); code != 0 {
		t.Fatalf("remove: %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, "person", "group", "remove", "finance", "ada", "--data", dir); code == 0 || !strings.Contains(errs, "not_found") {
		t.Errorf("second remove: %d %q", code, errs)
	}
	if _, out, _ := runCLI(t, "person", "group", "list", "--data", dir); strings.Contains(out, "ada") || !strings.Contains(out, "ben") {
		t.Errorf("list after remove:\n%s", out)
	}
}
