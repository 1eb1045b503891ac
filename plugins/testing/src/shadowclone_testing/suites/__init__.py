"""Contract suites a plugin's tests subclass: `engine.EngineScenarios` for an engine against its
real CLI and the fake model server, `launcher.LauncherContract` for a launcher."""
