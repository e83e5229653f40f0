"""The model runtime: what a model is once loaded, and how a request runs on it.

One module per concept; this package imports none of them, so a front end that
needs one (``spec``) does not load the rest:

- ``backends``: backend discovery (entry points of ``tritonpy.backends``), loaded and
  validated when a model first needs one.
- ``loading``: a model folder → config, backend, auto-complete, instances, warm-up →
  a ``LoadedVersion``, built complete in one step on a loader thread.
- ``model``: ``LoadedVersion`` (``submit``, the hot path every front end shares, and
  ``run``, a batch on an instance), ``ModelState``, ``VersionRetired``.
- ``spec``: ``IOSpec``, the model config's tensors precomputed for validation.
- ``validation``: a request checked against its model's config, once, for every front end.
- ``responses``: what a backend returned shaped into what the client gets.
- ``senders``: answers through response senders (decoupled models, deferred answers).
- ``statistics``: per-version statistics, stamped by the core around every execution.
- ``cache``: the response cache (``local`` and ``tritonpy.caches`` plugins) and its keys.
- ``warmup``: Triton's ``model_warmup``, run on every instance before READY.
- ``ensemble_plan``: an ensemble's steps bound to its loaded members.

The scheduler that queues a version's requests is ``tritonpy.scheduler``; the records
of every model and version (states, lookup, model control) are
``tritonpy.repository.manager``.
"""
