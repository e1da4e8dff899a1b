"""The HTTP edge: what every request meets before a route reads it, written once.

- ``connections``: the connections ``serve`` accepts (deadlines for a request's head and
  body, a cap on open connections, the proxies trusted to name the client);
- ``forwarding``: what gives a relayed request away, and the gate of a server without keys;
- ``addresses``: the one rule of what is loopback (an address, a name, a ``Host``);
- ``requests``: a request's ``Host`` and ``Origin``, and a credential header sent once;
- ``body``: a request body read whole under a size and a deadline, and handed on again;
- ``responses``: a whole answer from middleware, the error envelope with its headers;
- ``ratelimit``: the token buckets every per-caller limit takes from;
- ``cors``: which paths answer any origin, and the configured policy for the rest.

Imports nothing of the package but its foundation (errors, limits).
"""
