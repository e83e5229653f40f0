"""Front-end worker processes (``tritonpy serve --frontend-workers N``).

``pool`` (the core process's side: starts the workers and answers them), ``worker``
(a worker process), ``remote`` (the server facade as a worker sees it), ``wire``
(inference messages on the link of ``ipc.link``) and ``control`` (every other
call, and the core's broadcasts). docs/scaling.md says when to use them.
"""
