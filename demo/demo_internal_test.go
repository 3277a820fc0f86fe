package demo

import (
	"slices"
	"strings"
	"testing"

	"github.com/assent-run/assent/run"
)

func TestFormatAmount(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1250.00 EUR", "1,250.00 EUR"},
		{"860.00 EUR", "860.00 EUR"},
		{"1234567 USD", "1,234,567 USD"},
		{"-1000.5 GBP", "-1,000.5 GBP"},
		{"12,50 EUR", "12,50 EUR"},
		{"1. EUR", "1. EUR"},
		{"lots", "lots"},
		{"100 eur", "100 eur"},
	} {
		if got := formatAmount(tc.in); got != tc.want {
			t.Errorf("formatAmount(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzFormatAmount(f *testing.F) {
	for _, s := range []string{"1250.00 EUR", "-1 USD", "1. EUR", " EUR", "", "9999999999999999999999999999999 EUR", "1\xff EUR"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := formatAmount(s)
		if got != strings.TrimSpace(s) && strings.ReplaceAll(got, ",", "") != strings.TrimSpace(s) {
			t.Fatalf("formatAmount(%q) = %q changes more than separators", s, got)
		}
	})
}

// TestRecipesAreValid: every Recipe the demo places is one the Runs part
// accepts, and the player takes the Controls the demo agent sends it.
func TestRecipesAreValid(t *testing.T) {
	recipes := map[string][]byte{"demo-player": playerRecipe("/opt/assent dir/assent")}
	for stem, r := range deployRecipes {
		recipes[stem] = recipeJSON(r)
	}
	if len(recipes) != 3 {
		t.Fatalf("%d Recipes, want demo-player, deploy and rollback", len(recipes))
	}
	for stem, b := range recipes {
		r, err := run.DecodeRecipe(b)
		if err != nil {
			t.Errorf("%s: %v", stem, err)
			continue
		}
		if stem == "demo-player" && !slices.Equal(r.Control, []string{"pause", "resume", "status"}) {
			t.Errorf("the player takes %v", r.Control)
		}
	}
}
