"""Sign-in with an identity provider (OpenID Connect): this server as a relying party."""
