"""The fake model server in parts, one concern a module; tests import it from
`shadowclone_testing.fakes.models`."""
