//! `[auth]`: whether requests need a token, and the keys that verify it.

use serde::{Deserialize, Serialize};

use super::Secret;

/// `[auth]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    pub mode: AuthMode,
    /// Allow `mode = "none"` on a non-loopback address (flag `--insecure-no-auth`).
    pub insecure_no_auth: bool,
    pub hs256_secret: Secret,
    pub public_keys: Vec<PublicKeyConfig>,
    pub jwks_file: String,
    pub cookie_name: String,
    pub leeway_secs: u64,
    pub audience: String,
    pub issuer: String,
}

/// Whether requests need a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    None,
    Jwt,
}

/// One public key of `[[auth.public_keys]]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicKeyConfig {
    /// The `kid` tokens name in their header.
    pub kid: String,
    /// `RS256` or `ES256`.
    pub alg: String,
    /// A PEM file with the public key.
    pub path: String,
}
