"""The embedded authorization server: the SDK's OAuth endpoints over our provider, its
clients, tokens and signing keys, its limits, and the cookies of its sign-in pages."""
