package runs

// Names the external tests reach inside the package.
var (
	ParseRunFilter   = parseRunFilter
	RunStatusFilters = runStatusFilters
	WriteDemoRecipe  = writeDemoRecipe
)

// MaxRunQuery is maxRunQuery.
const MaxRunQuery = maxRunQuery
