"""Contract suites a plugin's tests subclass: `engine.EngineScenarios` for an engine against its
real CLI and the fake model server, `launcher.LauncherContract` for a launcher,
`review_stage.ReviewStageContract` for a review stage, `notifier.NotifierContract` for a
notifier and `secret_provider.SecretProviderContract` for a secret provider."""
