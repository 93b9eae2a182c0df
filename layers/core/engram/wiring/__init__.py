"""The typed containers services and tools receive: `stores.Stores` (settings, clients, every
repository) and `model.ModelDeps` (plus the tool registry, prompt sections and model provider).
The per-function composition roots (`engram.roots`) build them; nothing here builds itself from
the environment, and nothing imports a global."""
