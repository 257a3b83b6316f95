"""Serving models on a cluster: a paged-attention engine and an OpenAI-style server.

Its code is reached as ``cl.serving.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``engine``: a continuous-batching engine with a paged KV cache, prefix caching
  and chunked prefill, for Llama-architecture ``transformers`` models.
- ``server``: an OpenAI-compatible completions server over the engine
  (``python -m clusterlab.serving.server --host 127.0.0.1 --port 8000``).
- ``tiny``: the book's tiny model: a seeded random Llama and a byte-level tokenizer.
- ``load``: an open-loop load generator, the ``openai`` client against the server.
- ``measure``: decoding speed against the batch, beside the roofline; the engine
  served at Poisson arrival rates under each batching policy.
- ``sim``: a SimPy twin of the scheduler, continuous against static batching.
- ``diagram``: block tables and the batch over the engine's steps, from real runs.
- ``chart``, ``widget``: the decode charts and the serving explorer.
- ``check``, ``answer``: the lab's checks and its exercise's solution.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role.
ROLES = {"engine": "ranks", "load": "measure", "server": "measure", "tiny": "ranks"}

__getattr__, __dir__ = submodules(__name__, __path__)
