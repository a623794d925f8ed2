//! Authentication and authorisation: `auth.mode = none | jwt`. JWTs are
//! verified with `jsonwebtoken` (HS256 shared secret; RS256 / ES256 public
//! keys from PEM files or a JWKS file, chosen by `kid`), carry `sub`, `exp`,
//! `sessions` (exact ids or prefix patterns like `team-a/*`) and `scope`
//! (`publish`, `subscribe`, `control`, `admin`; an array or a space-separated
//! string). The token comes from `Authorization: Bearer`, `?access_token=`,
//! or a cookie (for EventSource and WebSocket, which cannot set headers).

use std::collections::HashMap;
use std::path::Path;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use super::error::Problem;
use super::AppState;
use crate::config::{AuthConfig, AuthMode};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// POST events.
    Publish,
    /// Read snapshots, logs and streams.
    Subscribe,
    /// Relay user decisions and run controls to the runtime.
    Control,
    /// List and delete sessions, read metrics; implies every other scope.
    Admin,
}

impl Scope {
    fn bit(self) -> u8 {
        match self {
            Scope::Publish => 1,
            Scope::Subscribe => 2,
            Scope::Control => 4,
            Scope::Admin => 8,
        }
    }

    fn parse(s: &str) -> Option<Scope> {
        Some(match s {
            "publish" => Scope::Publish,
            "subscribe" => Scope::Subscribe,
            "control" => Scope::Control,
            "admin" => Scope::Admin,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Scope::Publish => "publish",
            Scope::Subscribe => "subscribe",
            Scope::Control => "control",
            Scope::Admin => "admin",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ScopeClaim {
    List(Vec<String>),
    Text(String),
}

#[derive(Debug, Deserialize)]
struct Claims {
    sub: String,
    exp: u64,
    #[serde(default)]
    sessions: Vec<String>,
    #[serde(default)]
    scope: Option<ScopeClaim>,
}

/// The verified caller of a request.
#[derive(Debug, Clone)]
pub struct Caller {
    /// `None` when auth is off.
    pub sub: Option<String>,
    /// Expiry (seconds since the Unix epoch); streams end then.
    pub exp: Option<u64>,
    sessions: Vec<String>,
    scopes: u8,
    open: bool,
}

impl Caller {
    /// The caller with auth off: allowed everything.
    pub fn open() -> Caller {
        Caller {
            sub: None,
            exp: None,
            sessions: Vec::new(),
            scopes: 0,
            open: true,
        }
    }

    /// A key for per-token limits (`None` when auth is off).
    pub fn token_key(&self) -> Option<&str> {
        self.sub.as_deref()
    }

    fn has(&self, scope: Scope) -> bool {
        self.open || self.scopes & (scope.bit() | Scope::Admin.bit()) != 0
    }

    /// Whether the token may read `session` (its `sessions` claim).
    pub fn may_see(&self, session: &str) -> bool {
        self.open
            || self.sessions.iter().any(|p| {
                p == "*"
                    || p == session
                    || p.strip_suffix('*')
                        .is_some_and(|prefix| session.starts_with(prefix))
            })
    }

    /// Require a scope, and access to a session when one is named.
    pub fn require(&self, scope: Scope, session: Option<&str>) -> Result<(), Problem> {
        if !self.has(scope) {
            return Err(forbidden(
                "insufficient_scope",
                format!("this endpoint needs the `{}` scope", scope.name()),
            ));
        }
        if let Some(s) = session {
            if !self.may_see(s) {
                return Err(forbidden(
                    "session_not_allowed",
                    "the token's `sessions` claim does not include this session".to_string(),
                ));
            }
        }
        Ok(())
    }
}

fn forbidden(code: &'static str, detail: String) -> Problem {
    Problem::new(StatusCode::FORBIDDEN, code, "Forbidden", detail)
}

fn unauthorized(code: &'static str, detail: impl Into<String>) -> Problem {
    let mut p = Problem::new(StatusCode::UNAUTHORIZED, code, "Unauthorized", detail);
    p.www_authenticate = true;
    p
}

/// A key that verifies tokens of one algorithm.
struct Key {
    alg: Algorithm,
    key: DecodingKey,
}

/// Verifies tokens; built once at start from `[auth]`.
pub struct Authenticator {
    mode: AuthMode,
    /// Keys by `kid`; the HS256 secret is under `""` too when set.
    keys: HashMap<String, Key>,
    cookie: String,
    leeway: u64,
    audience: Option<String>,
    issuer: Option<String>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("mode", &self.mode)
            .field("kids", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A configuration that cannot verify anything.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    #[error("auth.mode = \"jwt\" needs auth.hs256_secret, auth.public_keys or auth.jwks_file")]
    NoKeys,
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid key in {path}: {detail}")]
    BadKey { path: String, detail: String },
}

/// Shortest HS256 secret that is not warned about (RFC 7518 §3.2: a key of
/// at least the hash's size, 256 bits).
pub const MIN_HS256_SECRET: usize = 32;

/// What a minted token allows (`agent-projector token`).
#[derive(Debug, Clone)]
pub struct Grant {
    pub sub: String,
    /// Exact session ids or patterns (`team-a/*`, `*`).
    pub sessions: Vec<String>,
    /// Scope names: publish, subscribe, control, admin.
    pub scopes: Vec<String>,
    pub ttl: std::time::Duration,
}

/// Mint an HS256 token with the configured secret, as the server verifies
/// it (`aud` and `iss` included when configured). RS256/ES256 tokens are
/// minted by whoever holds the private key; the server has public keys only.
pub fn mint(cfg: &AuthConfig, grant: &Grant) -> Result<String, String> {
    if cfg.hs256_secret.is_empty() {
        return Err("auth.hs256_secret is empty: set PROJECTOR_AUTH__HS256_SECRET (RS256/ES256 tokens are minted by whoever holds the private key)".into());
    }
    if let Some(bad) = grant.scopes.iter().find(|s| Scope::parse(s).is_none()) {
        return Err(format!(
            "unknown scope `{bad}`: use publish, subscribe, control or admin"
        ));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs();
    let mut claims = serde_json::json!({
        "sub": grant.sub,
        "iat": now,
        "exp": now.saturating_add(grant.ttl.as_secs()),
        "sessions": grant.sessions,
        "scope": grant.scopes.join(" "),
    });
    if !cfg.audience.is_empty() {
        claims["aud"] = cfg.audience.clone().into();
    }
    if !cfg.issuer.is_empty() {
        claims["iss"] = cfg.issuer.clone().into();
    }
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(cfg.hs256_secret.as_bytes()),
    )
    .map_err(|e| e.to_string())
}

impl Authenticator {
    /// Build from config, reading PEM and JWKS files.
    pub fn from_config(cfg: &AuthConfig) -> Result<Authenticator, AuthSetupError> {
        let mut keys = HashMap::new();
        if cfg.mode == AuthMode::Jwt {
            if !cfg.hs256_secret.is_empty() {
                if cfg.hs256_secret.len() < MIN_HS256_SECRET {
                    tracing::warn!(
                        bytes = cfg.hs256_secret.len(),
                        "auth.hs256_secret is shorter than {MIN_HS256_SECRET} bytes: tokens signed with it can be brute-forced; use a random secret of at least {MIN_HS256_SECRET} bytes (e.g. `openssl rand -hex 32`)"
                    );
                }
                let k = || Key {
                    alg: Algorithm::HS256,
                    key: DecodingKey::from_secret(cfg.hs256_secret.as_bytes()),
                };
                keys.insert(String::new(), k());
                keys.insert("hs256".to_string(), k());
            }
            for pk in &cfg.public_keys {
                let pem = read(&pk.path)?;
                let bad = |e: jsonwebtoken::errors::Error| AuthSetupError::BadKey {
                    path: pk.path.clone(),
                    detail: e.to_string(),
                };
                let (alg, key) = match pk.alg.as_str() {
                    "RS256" => (
                        Algorithm::RS256,
                        DecodingKey::from_rsa_pem(&pem).map_err(bad)?,
                    ),
                    "ES256" => (
                        Algorithm::ES256,
                        DecodingKey::from_ec_pem(&pem).map_err(bad)?,
                    ),
                    other => {
                        return Err(AuthSetupError::BadKey {
                            path: pk.path.clone(),
                            detail: format!("alg must be RS256 or ES256, not {other}"),
                        })
                    }
                };
                keys.insert(pk.kid.clone(), Key { alg, key });
            }
            if !cfg.jwks_file.is_empty() {
                let raw = read(&cfg.jwks_file)?;
                let bad = |detail: String| AuthSetupError::BadKey {
                    path: cfg.jwks_file.clone(),
                    detail,
                };
                let set: JwkSet = serde_json::from_slice(&raw).map_err(|e| bad(e.to_string()))?;
                for jwk in &set.keys {
                    let kid = jwk
                        .common
                        .key_id
                        .clone()
                        .ok_or_else(|| bad("every JWKS key needs a kid".into()))?;
                    let alg = match &jwk.algorithm {
                        AlgorithmParameters::RSA(_) => Algorithm::RS256,
                        AlgorithmParameters::EllipticCurve(_) => Algorithm::ES256,
                        _ => return Err(bad(format!("key {kid}: only RSA and EC keys"))),
                    };
                    let key = DecodingKey::from_jwk(jwk).map_err(|e| bad(e.to_string()))?;
                    keys.insert(kid, Key { alg, key });
                }
            }
            if keys.is_empty() {
                return Err(AuthSetupError::NoKeys);
            }
        }
        let nonempty = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Ok(Authenticator {
            mode: cfg.mode,
            keys,
            cookie: cfg.cookie_name.clone(),
            leeway: cfg.leeway_secs,
            audience: nonempty(&cfg.audience),
            issuer: nonempty(&cfg.issuer),
        })
    }

    /// Verify a token into a caller.
    pub fn verify(&self, token: &str) -> Result<Caller, Problem> {
        let header = decode_header(token)
            .map_err(|_| unauthorized("invalid_token", "the token is not a JWT"))?;
        let kid = header.kid.clone().unwrap_or_default();
        let key = self.keys.get(&kid).ok_or_else(|| {
            unauthorized(
                "invalid_token",
                format!("no key for kid `{kid}` (rotated out?)"),
            )
        })?;
        if header.alg != key.alg {
            return Err(unauthorized(
                "invalid_token",
                "the token's alg does not match its key",
            ));
        }
        let mut v = Validation::new(key.alg);
        v.leeway = self.leeway;
        // A token valid from a later time (`nbf`) is refused until then.
        v.validate_nbf = true;
        v.set_required_spec_claims(&["exp", "sub"]);
        match &self.audience {
            Some(aud) => v.set_audience(&[aud]),
            None => v.validate_aud = false,
        }
        if let Some(iss) = &self.issuer {
            v.set_issuer(&[iss]);
        }
        let data = decode::<Claims>(token, &key.key, &v).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind;
            match e.kind() {
                ErrorKind::ExpiredSignature => {
                    unauthorized("token_expired", "the token has expired")
                }
                ErrorKind::ImmatureSignature => unauthorized(
                    "token_not_yet_valid",
                    "the token is not valid yet (its nbf is in the future)",
                ),
                ErrorKind::InvalidSignature => {
                    unauthorized("invalid_token", "the token's signature is invalid")
                }
                _ => unauthorized("invalid_token", format!("the token is not valid: {e}")),
            }
        })?;
        let c = data.claims;
        let names: Vec<String> = match c.scope {
            Some(ScopeClaim::List(l)) => l,
            Some(ScopeClaim::Text(t)) => t.split_whitespace().map(str::to_string).collect(),
            None => Vec::new(),
        };
        let scopes = names
            .iter()
            .filter_map(|n| Scope::parse(n))
            .fold(0, |acc, s| acc | s.bit());
        Ok(Caller {
            sub: Some(c.sub),
            exp: Some(c.exp),
            sessions: c.sessions,
            scopes,
            open: false,
        })
    }

    /// The token of a request: bearer header, `access_token` query, or cookie.
    fn token<'a>(&self, parts: &'a Parts) -> Option<std::borrow::Cow<'a, str>> {
        if let Some(h) = parts.headers.get(header::AUTHORIZATION) {
            if let Some(t) = h.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")) {
                return Some(t.trim().into());
            }
        }
        if let Some(q) = parts.uri.query() {
            for pair in q.split('&') {
                if let Some(v) = pair.strip_prefix("access_token=") {
                    return Some(percent_decode(v).into());
                }
            }
        }
        for h in parts.headers.get_all(header::COOKIE) {
            let Ok(s) = h.to_str() else { continue };
            for c in s.split(';') {
                if let Some((k, v)) = c.trim().split_once('=') {
                    if k == self.cookie {
                        return Some(v.into());
                    }
                }
            }
        }
        None
    }
}

fn read(path: &str) -> Result<Vec<u8>, AuthSetupError> {
    std::fs::read(Path::new(path)).map_err(|source| AuthSetupError::Read {
        path: path.to_string(),
        source,
    })
}

fn percent_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Authenticator {
    /// The caller of a token that came inside a message rather than with
    /// the request (the `authorization` header of a WebSocket chat frame,
    /// `Bearer <token>`): open when auth is off, verified otherwise.
    pub fn caller_of(&self, authorization: &str) -> Result<Caller, Problem> {
        if self.mode == AuthMode::None {
            return Ok(Caller::open());
        }
        let Some(token) = authorization.strip_prefix("Bearer ") else {
            return Err(unauthorized(
                "invalid_token",
                "the authorization header is `Bearer <token>`",
            ));
        };
        self.counted(self.verify(token.trim()))
    }

    /// A caller verified earlier (a WebSocket's handshake), still within
    /// its token's lifetime.
    pub fn still_valid(&self, caller: &Caller) -> Result<(), Problem> {
        let now = crate::store::now_ms() / 1000;
        if caller.exp.is_some_and(|exp| exp + self.leeway < now) {
            return self.counted(Err(unauthorized("token_expired", "the token has expired")));
        }
        Ok(())
    }

    /// A verification's outcome, its failure counted by code.
    fn counted<T>(&self, r: Result<T, Problem>) -> Result<T, Problem> {
        if let Err(p) = &r {
            metrics::counter!("projector_auth_failures_total", "code" => p.code.to_string())
                .increment(1);
        }
        r
    }

    /// No token where one is needed.
    pub fn missing() -> Problem {
        unauthorized(
            "missing_token",
            "send a token as `Authorization: Bearer`, `?access_token=` or a cookie",
        )
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, Self::Rejection> {
        let auth = &st.auth;
        if auth.mode == AuthMode::None {
            return Ok(Caller::open());
        }
        let token = auth.token(parts).ok_or_else(Authenticator::missing)?;
        auth.counted(auth.verify(&token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_patterns() {
        let c = Caller {
            sub: Some("u".into()),
            exp: None,
            sessions: vec!["exact".into(), "team-a/*".into()],
            scopes: Scope::Subscribe.bit(),
            open: false,
        };
        assert!(c.require(Scope::Subscribe, Some("exact")).is_ok());
        assert!(c.require(Scope::Subscribe, Some("team-a/run-1")).is_ok());
        assert_eq!(
            c.require(Scope::Subscribe, Some("team-b/run-1"))
                .unwrap_err()
                .code,
            "session_not_allowed"
        );
        assert_eq!(
            c.require(Scope::Subscribe, Some("exactly"))
                .unwrap_err()
                .code,
            "session_not_allowed"
        );
        assert_eq!(
            c.require(Scope::Publish, Some("exact")).unwrap_err().code,
            "insufficient_scope"
        );
    }

    #[test]
    fn admin_implies_every_scope_and_percent_decoding() {
        let c = Caller {
            sub: Some("u".into()),
            exp: None,
            sessions: vec!["*".into()],
            scopes: Scope::Admin.bit(),
            open: false,
        };
        for s in [
            Scope::Publish,
            Scope::Subscribe,
            Scope::Control,
            Scope::Admin,
        ] {
            assert!(c.require(s, Some("any")).is_ok());
        }
        assert_eq!(percent_decode("a%2Eb%2"), "a.b%2");
    }
}
