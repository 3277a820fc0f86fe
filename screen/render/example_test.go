package render_test

import (
	"fmt"
	"os"

	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/render"
)

func ExampleBuild() {
	p := screen.NewParser(screen.Options{})
	p.WriteString("root = Card([h, t])\nh = Heading(\"Order 1042\")\nt = Text(\"Shipped <today>\")\n")
	v := render.Build(p.End(), render.Options{})
	fmt.Println(v.Title)
	render.WriteHTML(os.Stdout, v.Root.Children[1])
	// Output:
	// Order 1042
	// <p class="o-text o-tone-default" id="n-t">Shipped &lt;today&gt;</p>
}
