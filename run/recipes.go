package run

import (
	"errors"

	"github.com/assent-run/assent/run/recipe"
)

// Recipe, Artifact and Arg are package recipe's types: a Run is started
// from a Recipe, declares Artifacts and takes values for Args.
type (
	Recipe   = recipe.Recipe
	Artifact = recipe.Artifact
	Arg      = recipe.Arg
)

// MaxScriptBytes bounds a Recipe's compiled script.
const MaxScriptBytes = recipe.MaxScriptBytes

// DecodeRecipe parses and validates a Recipe (see recipe.Parse). A refusal
// is an *Error with code invalid_recipe.
func DecodeRecipe(b []byte) (*Recipe, error) {
	r, err := recipe.Parse(b)
	return r, fromRecipe(err)
}

// ParseArg parses one Recipe argument declaration (see recipe.ParseArg).
func ParseArg(decl string) (Arg, error) { return recipe.ParseArg(decl) }

// NormalizeDeclaredControl validates a Recipe's declared Control actions
// (see recipe.NormalizeControl). A refusal is an *Error with code
// invalid_recipe.
func NormalizeDeclaredControl(actions []string) ([]string, error) {
	out, err := recipe.NormalizeControl(actions)
	return out, fromRecipe(err)
}

// ShellQuote quotes s for a POSIX shell as one word.
func ShellQuote(s string) string { return recipe.ShellQuote(s) }

// ConfinePath resolves p against dir and refuses, invalid_request, a path
// outside dir (see recipe.ConfinePath).
func ConfinePath(dir, p string) (string, error) {
	out, err := recipe.ConfinePath(dir, p)
	return out, fromRecipe(err)
}

// RuntimeOwned reports whether name is a runtime-owned value, which no
// Recipe or caller may supply.
func RuntimeOwned(name string) bool { return recipe.RuntimeOwned(name) }

// fromRecipe gives a recipe refusal this package's error type, keeping its
// code and message; other errors pass unchanged.
func fromRecipe(err error) error {
	if e, ok := errors.AsType[*recipe.Error](err); ok {
		return &Error{Code: e.Code, Message: e.Message}
	}
	return err
}
