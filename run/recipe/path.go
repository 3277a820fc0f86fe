package recipe

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// ArtifactPaths expands placeholders in the declared artifacts (without
// shell quoting) and resolves them against dir, the Run's directory. A path
// that resolves outside dir is refused invalid_request.
func (r *Recipe) ArtifactPaths(values map[string]string, dir string) (map[string]Artifact, error) {
	out := make(map[string]Artifact, len(r.Artifacts))
	for _, name := range slices.Sorted(maps.Keys(r.Artifacts)) {
		a := r.Artifacts[name]
		p, err := ConfinePath(dir, Expand(a.Path, values))
		if err != nil {
			return nil, errorf(CodeInvalidRequest, "artifact %s: %v", name, err)
		}
		a.Path = p
		out[name] = a
	}
	return out, nil
}

// ConfinePath resolves p against dir (p may be relative or absolute) and
// returns the cleaned absolute path. A path that leaves dir, such as
// "../../etc/passwd" or "/etc/passwd", is refused invalid_request.
func ConfinePath(dir, p string) (string, error) {
	if strings.ContainsRune(p, 0) || strings.TrimSpace(p) == "" {
		return "", errorf(CodeInvalidRequest, "path %q is empty or contains NUL", p)
	}
	dir = filepath.Clean(dir)
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	p = filepath.Clean(p)
	if p == dir || !strings.HasPrefix(p, dir+string(filepath.Separator)) {
		return "", errorf(CodeInvalidRequest, "path %q is outside the Run's directory %s; artifacts must be inside it", p, dir)
	}
	return p, nil
}
