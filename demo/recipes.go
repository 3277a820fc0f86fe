package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/assent-run/assent/run"
)

// placePlayerRecipe installs the player Recipe: a service, run by this
// binary ("assent run demo-service"), that accepts pause, resume and status
// Controls and emits Trace. It is replaced at every start, so it always
// names the binary that is running now (a "go run" build lives in a
// temporary directory that is gone after a restart). When Runs may not
// execute that binary where it is (they run as an unprivileged user), it
// is copied to <data>/bin/assent first.
func (a *App) placePlayerRecipe() error {
	m := a.srv.Runs().Manager()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return err
	}
	if !m.RunUserCanExecute(exe) {
		if exe, err = shareBinary(exe, filepath.Join(m.DataDir(), "bin")); err != nil {
			return err
		}
	}
	_, err = m.PlaceRecipe("demo-player", playerRecipe(exe), true)
	return err
}

// playerRecipe is the player Recipe for the assent binary exe.
func playerRecipe(exe string) []byte {
	return recipeJSON(map[string]any{
		"description": "Demo player: ticks once per interval; steer it with pause, resume and status.",
		"args":        []string{"interval:number=2", "ticks:int=0"},
		"template":    "exec " + run.ShellQuote(exe) + " run demo-service --interval {interval} --ticks {ticks}",
		"control":     []string{"pause", "resume", "status"},
		"async":       true,
		"singleton":   true,
	})
}

// deployRecipes are the Recipes the deployment program's run.spawn
// transitions name ("deploy" and "rollback"): short scripts that only
// print what a real deployment would do.
var deployRecipes = map[string]map[string]any{
	"deploy": {
		"description": "Demo deployment for the deployment Flow: prints what it would deploy, then succeeds.",
		"args":        []string{"environment", "version"},
		"template":    "echo deploying {version} to {environment}; sleep 2; echo deployed",
	},
	"rollback": {
		"description": "Demo rollback for the deployment Flow: prints what it would restore, then succeeds.",
		"args":        []string{"environment"},
		"template":    "echo restoring the previous release on {environment}; sleep 1; echo restored",
	},
}

// placeDeployRecipes installs deployRecipes, keeping the files already
// there, which a person may have edited.
func (a *App) placeDeployRecipes() error {
	m := a.srv.Runs().Manager()
	for _, stem := range slices.Sorted(maps.Keys(deployRecipes)) {
		if _, err := m.PlaceRecipe(stem, recipeJSON(deployRecipes[stem]), false); err != nil {
			return fmt.Errorf("%s: %w", stem, err)
		}
	}
	return nil
}

// recipeJSON writes a Recipe file's JSON.
func recipeJSON(r map[string]any) []byte {
	b, _ := json.MarshalIndent(r, "", "  ") // strings and bools always marshal
	return append(b, '\n')
}

// shareBinary copies the executable exe to dir/assent (dir 0711, file
// 0755, both the server's) and returns the copy's path. The copy replaces
// an older one by rename, so a Run still executing it is not disturbed.
func shareBinary(exe, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "assent")
	in, err := os.Open(exe)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.CreateTemp(dir, "assent-*.tmp")
	if err != nil {
		return "", err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(out.Name(), 0o755)
	}
	if err == nil {
		err = os.Rename(out.Name(), dst)
	}
	if err != nil {
		os.Remove(out.Name())
		return "", err
	}
	return dst, nil
}
