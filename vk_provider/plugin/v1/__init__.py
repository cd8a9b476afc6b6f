"""Version 1 of the plugin API: `provider.proto` and protoc's Python code for it (`make proto`)."""
