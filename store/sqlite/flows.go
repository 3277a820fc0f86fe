package sqlite

// flowMigrations holds the schema of Control Programs and their instances.
var flowMigrations = []migration{}
