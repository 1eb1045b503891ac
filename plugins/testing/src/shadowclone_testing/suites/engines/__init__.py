"""The engine contract suite in parts, one concern a module; plugins' tests import it from
`shadowclone_testing.suites.engine`."""
