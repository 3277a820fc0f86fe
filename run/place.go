package run

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// PlaceRecipe writes the Recipe def (its JSON file) as
// <data>/recipes/<stem>.json, where LoadRecipe, the actors_* tools and the
// run.spawn effect of Flow programs find it by stem. It is how an
// application installs the Recipes its programs name.
//
// def must be a valid Recipe of at most 1 MiB. With replace false, a file
// already there is kept, since a person may have edited it, and placed is
// false. The file appears whole or not at all, so a Run started meanwhile
// never reads half of it.
func (m *Manager) PlaceRecipe(stem string, def []byte, replace bool) (placed bool, err error) {
	if !recipeStemPattern.MatchString(stem) || strings.HasSuffix(stem, ".json") {
		return false, errorf(CodeInvalidRequest, "a Recipe's stem must be letters, digits, '.', '_' or '-', without .json: %q", stem)
	}
	if len(def) > 1<<20 {
		return false, errorf(CodeInvalidRecipe, "Recipe %s is over 1 MiB", stem)
	}
	if _, err := DecodeRecipe(def); err != nil {
		return false, err
	}
	dir := m.recipesDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("run: place recipe %s: %w", stem, err)
	}
	tmp, err := os.CreateTemp(dir, stem+".*.tmp")
	if err != nil {
		return false, fmt.Errorf("run: place recipe %s: %w", stem, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(def)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("run: place recipe %s: %w", stem, err)
	}
	p := filepath.Join(dir, stem+".json")
	if replace {
		err = os.Rename(tmp.Name(), p)
	} else if err = os.Link(tmp.Name(), p); errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("run: place recipe %s: %w", stem, err)
	}
	return true, nil
}
