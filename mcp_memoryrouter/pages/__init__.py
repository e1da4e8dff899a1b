"""The one page system: what every page a person reads in a browser is made of, the explorer's
(``/ui``) and the authorization server's sign-in and consent pages (``/oauth``) alike.

- :mod:`.document`: the skeleton a page stands in, and escaping;
- :mod:`.headers`: the security headers every page is answered with, and each side's
  Content-Security-Policy;
- :mod:`.assets`: the one stylesheet.

It stands below both sides (the explorer imports ``auth``, never the other way round), and
imports nothing of the package but its foundation.
"""
