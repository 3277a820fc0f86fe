package recipe_test

import (
	"encoding/json"
	"fmt"

	"github.com/assent-run/assent/run/recipe"
)

func ExampleParse() {
	r, err := recipe.Parse([]byte(`{
		"description": "Transcode one file",
		"args": ["file:path", "format:enum(mp3,ogg)=ogg"],
		"template": "ffmpeg -i {file} out.{format}",
		"control": ["pause", "resume"]
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	vals, err := r.Resolve(map[string]json.RawMessage{"file": json.RawMessage(`"my song.wav"`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	script, err := r.Script(vals)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(script)
	fmt.Println(r.Control)
	// Output:
	// export __assent_v_file='my song.wav'
	// export __assent_v_format='ogg'
	// ffmpeg -i "${__assent_v_file}" out."${__assent_v_format}"
	// [pause resume]
}

func ExampleRecipe_ArtifactPaths() {
	r, err := recipe.Parse([]byte(`{
		"args": ["topic"],
		"template": "write-report {topic} > report.md",
		"artifacts": {"report": {"path": "{topic}.md", "media_type": "text/markdown"}}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	arts, err := r.ArtifactPaths(map[string]string{"topic": "disk"}, "/data/runs/r1")
	fmt.Println(arts["report"].Path, err)
	_, err = r.ArtifactPaths(map[string]string{"topic": "../../etc/passwd"}, "/data/runs/r1")
	fmt.Println(err.(*recipe.Error).Code)
	// Output:
	// /data/runs/r1/disk.md <nil>
	// invalid_request
}
