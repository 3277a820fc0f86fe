package runs

// Names the external tests reach inside the package.
var (
	ParseRunFilter   = parseRunFilter
	RunStatusFilters = runStatusFilters
)

// MaxRunQuery is maxRunQuery.
const MaxRunQuery = maxRunQuery
